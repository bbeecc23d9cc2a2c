"""Scheduled convs and max pools: implicit GEMM over the padded image for every conv form,
and a per-plane window schedule for depthwise convs and max pools.

Why a schedule: the canonical te reduction (``nn.conv``) pads with a select in the
innermost loop and reduces channels outermost; it runs 15-80x slower than onnxruntime.
A conv is a matmul ``out[o, p] = sum_k W[o, k] * col[k, p]`` with ``k = (c, kh, kw)``
and ``p`` the output pixel, so the matmul schedule's ideas apply (``matmul.py``): an
``MR x NR`` register tile of exact ``fma`` over output channels x pixels, stored once,
parallel over pixel tiles.

**The im2col matrix is never built.** With stride 1, output pixel ``(oh, ow)`` reads
tap ``(kh, kw)`` of channel ``c`` at ``xpad[c, (oh + kh*dh) * Wp + ow + kw*dw]`` of
the zero-padded image (row length ``Wp``). Number the pixels on the *wide grid* of the
padded rows, ``q = oh * Wp + ow`` (``ow < Wp``; only ``ow < OW`` are real outputs):
the tap is then ``xpad[c, q + kh*dh*Wp + kw*dw]``, so every row of ``col`` is a
contiguous slice of the padded image at a constant offset, an ``NR``-wide tile of it is
one unit-stride vector load, and the inner loop has no index math, no select and no
packing. The price is ``Wp - OW`` wasted columns per output row (2 of 58 at 56x56 with
pad 1; 2 of 9 at 7x7).

**Strides** keep that property through a phase split of the padded image
(``conv_layout.Phases``): each tap is again a constant offset plus ``q`` on the wide grid
of the phase planes. The stride costs a scatter at copy time (O(input)), never a gather
in the inner loop. (A first version packed a gathered im2col panel per tile: 17-25
GFLOP/s against 28-50 for stride 1 on this machine.)

**Every form is the same GEMM.** The layout is rank-generic, so a 1-D conv (``NCW``) is
the wide grid of one padded row and a 3-D conv (``NCDHW``) has depth as one more tap
axis. A grouped conv is one GEMM per group (``O/g x C/g * taps`` weights over the taps
of channels ``[j * C/g, (j+1) * C/g)`` for group ``j``), the group one more task
dimension: tasks over (group, run of pixel tiles, output-channel group). The register
tile follows the vector width (``conv_tile``: ``topi.vector_bits``); a group whose
channels are no multiple of ``MR`` (3, 17, 100) ends with a narrower tail block, so odd
channel counts keep the wide tile. float64 takes
half the lanes. conv_transpose is the same GEMM once per output phase
(``conv_transpose.py``).

Per batch image the conv kernel

1. copies the image into ``xpad`` (zeros around it, and slack after it so that the
   last tile's loads stay inside the allocation): padding is paid once, at copy time;
2. runs the GEMM, parallel over (group, run of pixel tiles, output-channel group) tasks,
   into the wide scratch ``wide[O, tiles * NR]`` (one store of each register tile; a
   short reduction takes runs of several tiles, row block by row block: ``tile_run``);
3. copies the real pixels out, ``out[n, o, oh, ow] = wide[o, oh * PW + ow]``, parallel
   over output channels. This is the only store to ``out`` (the GEMM never reads it
   back), so FuseTIR folds an elementwise epilogue (bias, relu, a residual add) into
   it (``_fuse_epilogue.fold_into_stores``): the epilogue costs no extra pass.

The extra traffic of steps 1 and 3 is O(input + output), small against the
``O * C/g * taps`` multiply-adds per pixel. Depthwise convs (groups = C = O, one filter
per channel, 2-D) have their own memory-bound schedules (``depthwise_flat``,
``depthwise_rows``, else ``plane_window``), max pools theirs (``pool.py``), small maps
are dot products over channels (``scheduled_gemv``: ``conv_dot.py``); only tiny
convs (below ``MIN_WORK``) use the canonical template (``nn`` decides with ``gemv_ok`` /
``depthwise_ok`` / ``conv_ok`` / ``max_pool_ok``). Imports irkernel.tir,
``passes.topi.vector``, ``passes.topi.conv_layout``, ``passes.topi.conv_dot``, the
depthwise modules and FuseTIR's
parallel work threshold.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.tir.parallelize import PARALLEL_MIN_WORK
from passes.topi.conv_dot import dot_ok, scheduled_conv_dot
from passes.topi.conv_layout import Phases
from passes.topi.depthwise_flat import by_group_worth, depthwise_flat, flat_ok, many_taps
from passes.topi.depthwise_rows import depthwise_rows, rows_ok
from passes.topi.tuned import conv_key, tuned_tiles
from passes.topi.vector import current_target, registers, vector_bits, vector_pieces

#: Below this many multiply-adds the canonical template is used (the copies of this
#: schedule would dominate). As for matmul: 16 x 16 x 16.
MIN_WORK = 16 * 16 * 16

#: Longest last kernel axis whose taps the GEMM unrolls (a longer one is a loop).
MAX_UNROLL = 8
#: Parallel tasks to aim for (tiles x channel groups), enough to balance two-to-eight
#: threads when a small image has few pixel tiles.
MIN_TASKS = 16


def row_chunk(bits: int = 0) -> int:
    """Elements per vector chunk of the depthwise, max-pool and dot-product schedules: two
    vectors of the target's width (16 float32 with AVX2, as measured on an AVX2 EPYC; 32
    with AVX-512; 8 with SSE), so each chunk is two independent fma chains."""
    return 2 * (bits or vector_bits()) // 32


def parallel_if_worth(work: int):
    """``T.parallel`` for a loop doing at least ``PARALLEL_MIN_WORK`` innermost iterations
    (FuseTIR's rule), else ``T.serial``: a thread-pool launch costs tens of microseconds,
    more than a small loop's whole run."""
    return T.parallel if work >= PARALLEL_MIN_WORK else T.serial


def conv_tile(rows: int, dtype: str, bits: int, tuned: tuple[int, ...] | None = None,
              pixels: int = 0) -> tuple[int, int]:
    """(MR, NR): the register tile of ``MR`` output channels (at most ``rows``, a group's
    channels) x ``NR`` wide-grid pixels, two vectors of ``bits``. Twelve accumulators
    with 16 registers (AVX2: 6 x 16 float32, OpenBLAS's Haswell shape), sixteen with 32
    (AVX-512: 8 x 32): the rest hold the two tap vectors and the broadcast weight.
    ``MR`` is the fewest blocks' even share (17 channels: 6 + 6 + a tail block of 5,
    not 8 + 8 + 1), so odd channel counts keep a wide tile. A map of ``pixels`` (its wide
    grid) that two-vector tiles would pad to a quarter more columns than one-vector tiles
    takes one vector (a 1x1 conv on a 3x3 map: 16 columns computed for 9, not 32; a
    narrower tile loads more broadcast weights per fma, so a few columns are not worth
    it). ``tuned``: ``(most rows, vectors)``
    measured by ``runtime.tune`` (``passes.topi.tuned``) instead of this choice."""
    lanes = bits // (8 * (4 if dtype == "float32" else 8))
    if tuned:
        most, vectors = tuned
    else:
        most, vectors = 8 if registers(bits) >= 32 else 6, 2
        one, two = -(-pixels // lanes) * lanes, -(-pixels // (2 * lanes)) * 2 * lanes
        if pixels and 4 * two >= 5 * one:  # a quarter more columns: worth a narrower tile
            vectors = 1
    blocks = -(-rows // most)
    return -(-rows // blocks), vectors * lanes


def conv_tile_candidates(rows: int, bits: int) -> list[tuple[int, int]]:
    """The ``(most rows, vectors)`` tiles ``runtime.tune`` times for a group of ``rows``
    output channels: those whose accumulators, tap vectors and the broadcast weight fit
    the register file (``rows x vectors + vectors + 1``), of 4 to 16 rows and 1, 2 or 4
    vectors."""
    regs = registers(bits)
    return [(most, vectors) for vectors in (1, 2, 4) for most in (4, 6, 8, 12, 16)
            if most * vectors + vectors + 1 <= regs and (most <= rows or most == 4)
            and (most != 6 or regs < 32) and (most != 12 or vectors == 1 or regs >= 32)]


def conv_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
            dtype: str) -> bool:
    """Whether the implicit GEMM covers this signature: float32 or float64, 1 to 3 spatial
    axes, any groups, stride, padding and dilation, at least ``MIN_WORK`` multiply-adds."""
    if dtype not in ("float32", "float64") or len(x_shape) != len(w_shape) \
            or not 3 <= len(x_shape) <= 5:
        return False
    return x_shape[0] * math.prod(w_shape) * math.prod(x_shape[2:]) >= MIN_WORK


def tile_run(panel: int, tiles: int, groups: int, l1d: int) -> int:
    """Pixel tiles per task (a *run*), computed row block by row block: every output row
    of a task is then ``run`` tiles long, one contiguous stretch, and the input panel of
    the run (``panel`` bytes a tile) is read again from L1 by each row block. Why: with a
    short reduction (a 1x1 conv of 16-32 channels) a task of one tile writes two cache
    lines into each of its ``O`` output planes and moves on, ``O`` store streams that
    the prefetchers cannot follow; the multiply-adds then wait on the stores. A run fills
    at most half of L1 (``l1d``) with its panel and keeps ``MIN_TASKS`` tasks
    (``groups``: the other task dimension); 1 for a long reduction."""
    fit = l1d // 2 // max(panel, 1)
    return max(min(fit, groups * tiles // MIN_TASKS, tiles), 1)


def channel_split(rows: int, mr: int, tasks: int) -> int:
    """Channel groups per (group, pixel tile): doubled while there are fewer than
    ``MIN_TASKS`` tasks and the full ``mr``-row blocks of ``rows`` still split evenly."""
    full, split = rows // mr, 1
    while tasks * split < MIN_TASKS and full % (2 * split) == 0:
        split *= 2
    return split


def row_blocks(rows: int, mr: int, split: int, part, block) -> None:
    """Emit the register tiles of channel group ``part`` of a task: its share of the full
    ``mr``-row blocks, then (in the last channel group) the narrower tail block of
    ``rows % mr`` channels. ``block(row0, rows, tag)`` emits one tile."""
    full, tail = divmod(rows, mr)
    rows_per = full // split
    for io in T.serial(rows_per):
        block((part * rows_per + io) * mr, mr, "i")
    if tail and split == 1:
        block(full * mr, tail, "t")
    elif tail:
        with T.If(T.eq(part, split - 1)):
            block(full * mr, tail, "t")


def register_tile(rows: int, nr: int, dtype: str, tag: str, channels: int, over_taps,
                  operands, store) -> None:
    """Emit one ``rows x nr`` register tile: zeroed accumulators, exact ``fma`` over the
    ``channels`` x taps loop, one store of each accumulator. ``over_taps(emit)`` calls
    ``emit(ks, offset)`` per tap (inside loops of its own, or unrolled);
    ``operands(ii, c, ks, offset, ji)`` gives the (weight, input) pair of row ``ii`` and
    lane ``ji``; ``store(ii, ji, value)`` stores a result. Loop vars and the accumulator
    are named by ``tag``: FuseTIR tells buffers apart by name."""
    acc = T.alloc_buffer((rows, nr), dtype, name=f"acc{tag}")
    for ii in T.unroll(rows, name=f"i{tag}"):
        for ji in T.vectorized(nr, name=f"j{tag}"):
            acc[ii, ji] = 0.0
    for c in T.serial(channels, name=f"c{tag}"):
        def fma(ks, offset):
            for ii in T.unroll(rows, name=f"i{tag}"):
                for ji in T.vectorized(nr, name=f"j{tag}"):
                    w, x = operands(ii, c, ks, offset, ji)  # noqa: B023 (traced now)
                    acc[ii, ji] = T.fma(w, x, acc[ii, ji])
        over_taps(fma)
    for ii in T.unroll(rows, name=f"i{tag}"):
        for ji in T.vectorized(nr, name=f"j{tag}"):
            store(ii, ji, acc[ii, ji])


def scheduled_conv(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
                   strides: tuple[int, ...], pad_begin: tuple[int, ...],
                   pad_end: tuple[int, ...], dilation: tuple[int, ...],
                   out_size: tuple[int, ...], dtype: str = "float32",
                   bits: int = 0, tile: tuple[int, int] | None = None) -> PrimFunc:
    """The PrimFunc ``(x0: x_shape, x1: w_shape, out: (N, O, *out_size))`` of a conv of
    ``groups`` groups over 1 to 3 spatial axes (see the module docstring). ``bits``: the
    vector width to tile for (0: ``vector_bits()``); ``tile``: ``conv_tile``'s ``(most
    rows, vectors)`` (None: the tuned tile of this signature, else the analytic one;
    ``()``: the analytic one)."""
    bits = bits or vector_bits()
    key = tuple(x_shape), tuple(w_shape), groups, tuple(strides), tuple(pad_begin), \
        tuple(pad_end), tuple(dilation)
    if tile is None:
        tile = tuned_tiles().get(conv_key(*key, dtype, bits))
    return _conv(*key, tuple(out_size), dtype, bits, tuple(tile) if tile else None,
                 current_target().l1d)


@lru_cache(maxsize=256)
def _conv(  # noqa: C901 (trace-time specialization)
        x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
        strides: tuple[int, ...], pad_begin: tuple[int, ...], pad_end: tuple[int, ...],
        dilation: tuple[int, ...], out_size: tuple[int, ...], dtype: str,
        bits: int, tuned: tuple[int, ...] | None, l1d: int) -> PrimFunc:
    n_, c_, size = x_shape[0], x_shape[1], x_shape[2:]
    o_, cg, kernel = w_shape[0], w_shape[1], w_shape[2:]
    rank, og = len(size), o_ // groups
    ph = Phases(size, strides, pad_begin, pad_end)
    plane, gs = ph.plane, ph.grid_strides
    used = ph.phases(kernel, dilation)
    last = ph.grid(tuple(o - 1 for o in out_size)) + 1  # wide grid up to the last pixel
    mr, nr = conv_tile(og, dtype, bits, tuned, last)
    tiles = -(-last // nr)
    width = tiles * nr  # row length of the wide scratch
    xlen = max((c_ - 1) * plane + max(ph.taps(kernel, dilation)) + width, c_ * plane)
    run = tile_run(cg * math.prod(kernel) * nr * (4 if dtype == "float32" else 8), tiles,
                   groups, l1d)
    runs = -(-tiles // run)
    split = channel_split(og, mr, groups * runs)
    tasks = groups * runs * split

    # Direct: the wide grid is the output's own pixel order (inner plane extents equal
    # the output's; 1-D always) and has no tail tile, so the tiles store into ``out`` at
    # ``(q // OW, q % OW)`` (FlattenBuffer merges the pair back into ``q``: a vector
    # store) with no wide scratch and no copy-out.
    direct = rank <= 2 and ph.dims[1:] == out_size[1:] and last % nr == 0
    # ... and with no padding and stride 1 the padded copy is the image itself.
    in_place = direct and all(s == 1 for s in strides) and not any(pad_begin) \
        and not any(pad_end)

    def pixel(q, extents):
        """The spatial index of flat position ``q`` in a row-major ``extents`` (rank <= 2)."""
        return (q,) if rank == 1 else (T.floordiv(q, extents[1]), T.floormod(q, extents[1]))

    @T.prim_func(private=True)
    def conv(x0: T.Buffer(x_shape, dtype),  # noqa: C901
             x1: T.Buffer(w_shape, dtype),
             out: T.Buffer((n_, o_, *out_size), dtype)):
        if not in_place:
            xpad = T.alloc_buffer((xlen,), dtype)
        if not direct:
            wide = T.alloc_buffer((o_ * width,), dtype)

        def tap(n, c, offset, q):
            if in_place:
                return x0[(n, c, *pixel(offset + q, size))]
            return xpad[c * plane + offset + q]

        def over_taps(emit, ks=()):
            """Loops over the kernel axes (the last one unrolled when short)."""
            a = len(ks)
            if a == rank:
                emit(ks, ph.offset(tuple(k * d for k, d in zip(ks, dilation, strict=True))))
                return
            loop = T.unroll if a == rank - 1 and kernel[a] <= MAX_UNROLL else T.serial
            for k in loop(kernel[a], name=f"k{a}"):
                over_taps(emit, (*ks, k))

        for n in T.serial(n_):
            if not in_place:
                for c in parallel_if_worth(c_ * plane)(c_):
                    ph.copy(xpad, x0, n, c, c * plane, used)
                for q in T.serial(xlen - c_ * plane):
                    xpad[c_ * plane + q] = 0.0
            for t in parallel_if_worth(o_ * math.prod(w_shape[1:]) * width)(tasks):
                grp = 0 if groups == 1 else t // (runs * split)
                first_tile = (t // split % runs if groups > 1 else t // split) * run
                first = grp * og  # the group's first output channel

                def operands(ii, c, ks, offset, ji, row0, tile):
                    return (x1[(first + row0 + ii, c, *ks)],
                            tap(n, c if groups == 1 else grp * cg + c, offset,  # noqa: B023
                                tile * nr + ji))  # noqa: B023

                def store(ii, ji, value, row0, tile):
                    if direct:
                        out[(n, first + row0 + ii,  # noqa: B023
                             *pixel(tile * nr + ji, out_size))] = value  # noqa: B023
                    else:
                        wide[(first + row0 + ii) * width + tile * nr + ji] = value  # noqa: B023

                def tile_block(row0, rows, tag, tile):
                    register_tile(rows, nr, dtype, tag, cg, over_taps,
                                  lambda *a: operands(*a, row0, tile),  # noqa: B023
                                  lambda *a: store(*a, row0, tile))  # noqa: B023

                def block(row0, rows, tag):
                    if run == 1:
                        tile_block(row0, rows, tag, first_tile)  # noqa: B023
                        return
                    for r in T.serial(run, name=f"r{tag}"):
                        tile = first_tile + r  # noqa: B023
                        if tiles % run:
                            with T.If(tile < tiles):
                                tile_block(row0, rows, tag, tile)
                        else:
                            tile_block(row0, rows, tag, tile)

                row_blocks(og, mr, split, t % split, block)
            if not direct:
                # parallel whenever the GEMM is: serial, the copy-out (25K elements for a
                # strided grouped conv's 128 channels of 14x14) is a serial tail of a
                # two-thread run
                for o in parallel_if_worth(o_ * math.prod(w_shape[1:]) * width)(o_):
                    for idx in T.grid(*out_size):
                        idx = idx if rank > 1 else (idx,)
                        out[(n, o, *idx)] = wide[o * width + ph.grid(idx)]

    return conv.with_attr("schedule", "conv_implicit_gemm").with_attr("tile", f"{mr}x{nr}")


def gemv_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int, dtype: str,
            out_size: tuple[int, ...], strides: tuple[int, ...] = (),
            pad_begin: tuple[int, ...] = (), pad_end: tuple[int, ...] = ()) -> bool:
    """Whether a conv runs as dot products over (channel, tap) (``conv_dot.dot_ok``): a
    small map whose pixels would fill at most half of the implicit GEMM's lanes, any
    groups of at least two channels, kernel, stride, padding and dilation."""
    return dot_ok(x_shape, w_shape, groups, dtype, out_size, strides, pad_begin, pad_end)


def scheduled_gemv(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int = 1,
                   strides: tuple[int, ...] = (), pad_begin: tuple[int, ...] = (),
                   dilation: tuple[int, ...] = (), out_size: tuple[int, ...] = (),
                   bits: int = 0) -> PrimFunc:
    """The dot-product schedule of a small-map conv (``conv_dot``); the defaults describe a
    1x1 conv of stride 1 without padding."""
    rank = len(x_shape) - 2
    return scheduled_conv_dot(x_shape, w_shape, groups, strides or (1,) * rank,
                              pad_begin or (0,) * rank, dilation or (1,) * rank,
                              out_size or tuple(x_shape[2:]), bits)


def depthwise_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
                 dtype: str) -> bool:
    """Whether the depthwise schedules cover this signature: one filter per channel,
    float32 or float64, 2-D."""
    return (dtype in ("float32", "float64") and len(x_shape) == 4 and len(w_shape) == 4
            and groups == x_shape[1] == w_shape[0] and w_shape[1] == 1
            and w_shape[2] * w_shape[3] <= MAX_TAPS
            and math.prod(x_shape) * w_shape[2] * w_shape[3] >= MIN_WORK)


#: Most taps the per-plane schedule unrolls into one expression (a deeper chain exceeds the
#: TIR depth limit; such windows keep the canonical loop).
MAX_TAPS = 64


def max_pool_ok(x_shape: tuple[int, ...], kernel: tuple[int, ...], dtype: str) -> bool:
    """Whether the plane schedule covers a max_pool: float32, 2-D, at most ``MAX_TAPS``
    taps (at any size: the canonical template's selects make it slower even on small
    planes)."""
    return dtype == "float32" and len(x_shape) == 4 and math.prod(kernel) <= MAX_TAPS


def scheduled_depthwise2d(x_shape: tuple[int, int, int, int],
                          w_shape: tuple[int, int, int, int], strides: tuple[int, int],
                          pad_begin: tuple[int, int], pad_end: tuple[int, int],
                          dilation: tuple[int, int], out_hw: tuple[int, int],
                          dtype: str = "float32") -> PrimFunc:
    """A depthwise conv (``depthwise_ok``): when the output covers every input column,
    row blocks for kernels of many taps on rows a vector wide (``depthwise_rows``), else
    vectorized along the flattened output plane (``depthwise_flat``); otherwise
    ``plane_window`` with the taps weighted and summed."""
    if flat_ok(x_shape, w_shape[2:], strides, pad_begin, out_hw, dtype):
        bits = vector_bits()
        lanes = bits // (32 if dtype == "float32" else 64)
        if many_taps(w_shape[2:]) and not rows_ok(out_hw, lanes) \
                and by_group_worth(w_shape[2:], bits) and rows_ok(out_hw, lanes // 2):
            lanes //= 2  # a 7x7 map's rows in half vectors (7x7 kernels: 0.12 -> 0.09 ms)
        if many_taps(w_shape[2:]) and rows_ok(out_hw, lanes):
            return depthwise_rows(tuple(x_shape), tuple(w_shape), tuple(strides),
                                  tuple(pad_begin), tuple(dilation), tuple(out_hw), dtype,
                                  lanes)
        return depthwise_flat(x_shape, w_shape, strides, pad_begin, dilation, out_hw, dtype)
    return plane_window("conv", x_shape, w_shape[2:], strides, pad_begin, pad_end, dilation,
                        out_hw, row_chunk() // (1 if dtype == "float32" else 2), dtype)


@lru_cache(maxsize=256)
def plane_window(  # noqa: C901 (trace-time specialization)
        kind: str, x_shape: tuple[int, int, int, int], kernel: tuple[int, int],
        strides: tuple[int, int], pad_begin: tuple[int, int], pad_end: tuple[int, int],
        dilation: tuple[int, int], out_hw: tuple[int, int],
        DW_LANES: int, dtype: str = "float32") -> PrimFunc:  # noqa: N803 (a constant)
    """A per-channel window op, ``kind`` "conv" (depthwise: params ``x0, x1: (C, 1, KH,
    KW), out``) or "max" (max_pool: ``x0, out``), parallel over (image, channel) planes.

    Each task copies its plane into phase-split padded scratch (zeros for conv, -inf for
    max: padding never wins), so every tap of an output row is a contiguous load whatever
    the stride, and computes its output rows in ``DW_LANES``-wide vector chunks (a
    narrower chunk for the row's tail), the ``KH x KW`` taps unrolled into one expression
    (an fma chain, or a max chain in the canonical template's order) in the one store of
    each output element, where FuseTIR puts the epilogue. Memory-bound: each input plane
    is read once from memory and the taps hit L1. (ceil_mode windows that run past the
    end padding read more padding: the scratch is extended to cover them.)
    """
    n_, c_, h_, w_ = x_shape
    kh_, kw_ = kernel
    dh, dw = dilation
    oh_, ow_ = out_hw
    reach = [(out_hw[a] - 1) * strides[a] + (kernel[a] - 1) * dilation[a] + 1
             for a in range(2)]
    pad_end = tuple(max(pad_end[a], reach[a] - x_shape[2 + a] - pad_begin[a])
                    for a in range(2))
    ph = Phases((h_, w_), strides, pad_begin, pad_end)  # type: ignore[arg-type]
    used = ph.phases(kernel, dilation)
    full, tail = divmod(ow_, DW_LANES)
    fill = 0.0 if kind == "conv" else float("-inf")
    w_buf = T.Buffer((c_, 1, kh_, kw_), dtype)

    def body(x0, x1, out):
        for t in parallel_if_worth(n_ * c_ * oh_ * ow_ * kh_ * kw_)(n_ * c_):
            xpad = T.alloc_buffer((ph.plane,), dtype)
            ph.copy(xpad, x0, t // c_, t % c_, 0, used, fill)

            def taps(oh, ow):
                acc = T.float32(fill) if kind == "max" else None
                for kh in range(kh_):
                    for kw in range(kw_):
                        xv = xpad[ph.offset((kh * dh, kw * dw)) + ph.grid((oh, ow))]  # noqa: B023
                        if kind == "max":
                            acc = T.max(acc, xv)
                        else:
                            wv = x1[t % c_, 0, kh, kw]  # noqa: B023 (traced now)
                            acc = wv * xv if acc is None else T.fma(wv, xv, acc)
                return acc

            for oh in T.serial(oh_):
                if full:
                    for owo in T.serial(full):
                        for ji in T.vectorized(DW_LANES):
                            out[t // c_, t % c_, oh, owo * DW_LANES + ji] = taps(
                                oh, owo * DW_LANES + ji)
                for j0, size in vector_pieces(tail, DW_LANES):
                    for ji in T.vectorized(size):
                        out[t // c_, t % c_, oh, full * DW_LANES + j0 + ji] = taps(
                            oh, full * DW_LANES + j0 + ji)

    if kind == "max":
        @T.prim_func(private=True)
        def max_pool(x0: T.Buffer((n_, c_, h_, w_), dtype),
                     out: T.Buffer((n_, c_, oh_, ow_), dtype)):
            body(x0, None, out)

        return max_pool.with_attr("schedule", "pool_window")

    @T.prim_func(private=True)
    def depthwise(x0: T.Buffer((n_, c_, h_, w_), dtype), x1: w_buf,
                  out: T.Buffer((n_, c_, oh_, ow_), dtype)):
        body(x0, x1, out)

    return depthwise.with_attr("schedule", "depthwise")


__all__ = [
    "MAX_TAPS",
    "MAX_UNROLL",
    "MIN_TASKS",
    "MIN_WORK",
    "channel_split",
    "conv_ok",
    "conv_tile",
    "depthwise_ok",
    "gemv_ok",
    "max_pool_ok",
    "parallel_if_worth",
    "plane_window",
    "register_tile",
    "row_chunk",
    "row_blocks",
    "scheduled_conv",
    "scheduled_depthwise2d",
    "scheduled_gemv",
    "tile_run",
]
