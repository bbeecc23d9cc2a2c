"""Convs on small maps as a GEMM with the pixels as rows, vectorized over output channels.

Why: the implicit GEMM (``conv.py``) vectorizes along output pixels. A 7x7 map has 49
pixels: its 32-lane tiles compute 64 columns (15 of every 64 lanes wasted), a 14x14
map (196) pays a tail tile too, and padding widens its grid. These maps have 64-1,280
channels, almost always whole multiples of the vector, so the channels are the dimension
to vectorize. The conv is ``out[o, p] = sum_k W[o, k] * col[k, p]`` with ``k = (c, kh,
kw)``, the weight's own order (``K = C * taps``): a register tile of ``PT`` pixels x
``RV`` channel vectors broadcasts ``col[k, p]`` (``PT`` scalars) against ``RV`` vectors
of the weight's column ``k`` and accumulates with exact fma in ``k`` order.

**The weight is packed at build time** (``passes/topi/packing.py``, the matmul's protocol):
the graph's ``W[o, k]`` has the output channels ``K`` floats apart, the tile wants a block
of ``RV * L`` output channels contiguous per ``k``. :func:`pack_channels` stores ``W`` as
``O // NB`` blocks of ``K x NB`` (``NB = RV * L``), then the ``O % NB`` tail channels as
``K x NT`` zero-padded to whole vectors, all in one 1-d constant. So this schedule exists
only as the packed variant of the implicit GEMM: ``nn.conv`` marks the implicit GEMM's
PrimFunc ``packable`` when :func:`channels_worth` says so, and ``PackConstantWeights``
swaps this form in when the weight is a constant (a weight computed at run time keeps the
implicit GEMM). Both accumulate each output from zero with exact fmas in ``k`` order
(padding taps as zeros), so the two are bitwise the same.

Per image: ``col`` (``K x P``) is gathered per channel, in parallel, from the channel's
zero-padded phase planes (``conv_layout.Phases``, as the implicit GEMM copies them: no
select), taps unrolled (O(input x taps)); a 1x1 stride-1 conv without padding reads ``x``
itself. Tasks over (channel block, pixel tile)
run in parallel, consecutive tasks sharing a channel block (its ``K x NB`` panel stays in
L2 across the pixel tiles). Each accumulator, a vector of ``L`` channels of one pixel, is
stored across ``L`` output planes (a scatter, one lane at a time: ``P`` floats apart in
NCHW). That store is the only store to ``out``, so FuseTIR folds the epilogue (bias, relu6,
a residual add) into it. The store is a serial loop over the lanes, not a vectorized
one: vectorized, each lane became an extract and its own epilogue, 2,300 extracts and
870 stores in one kernel's LLVM IR, and LLVM took ~1 s per kernel (mobilenet_v2's cold
build 11.4 s); serial, 5.2 s, and the kernels ran as fast (2.68 against 2.74 ms a run
on mobilenet_v2's nine, one Zen 4 thread). (Storing through a
transposed scratch tile, each channel's pixels one contiguous store, measured no faster:
1.03x the scatter's time over mobilenet_v2's ten small-map 1x1 layers.) Each output is
summed by one task, so results are bitwise the same at every thread count. Imports numpy,
irkernel.target, irkernel.tir, FuseTIR's parallel work threshold and ``passes.topi`` (``conv``,
``conv_layout``, ``packing``, ``vector``).
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from irkernel.target import CPUTarget
from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.tir.parallelize import PARALLEL_MIN_WORK
from passes.topi.conv import conv_tile
from passes.topi.conv_layout import Phases
from passes.topi.packing import PACKABLE, Packer, register_packer
from passes.topi.vector import current_target, registers

#: Packer name of the channel-vector conv (``packable`` attributes).
CONV_CHANNELS = "conv_channels"
#: Most output pixels of a map this schedule takes (16x16): above it the implicit GEMM's
#: pixel tiles waste at most one tail tile in many.
SMALL_MAP_PIXELS = 256
#: Cycles of one scattered output element (a lane extract and a scalar store: x86-64
#: cores retire one or two stores a cycle), the cost rule's price of the NCHW store.
SCATTER_CYCLES = 1.0
#: Cycles per element of the ``K x P`` matrix a padded, strided or KxK conv gathers per
#: call (a scalar copy from the padded image).
COPY_CYCLES = 1.0
#: Most pixels per register tile (each broadcast is one load; more pixels than this
#: leave too few registers for channel vectors).
MAX_TILE_PIXELS = 8


def _lanes(dtype: str, bits: int) -> int:
    return bits // (32 if dtype == "float32" else 64)


def channels_tile(o_: int, pixels: int, dtype: str, bits: int) -> tuple[int, int]:
    """(RV, PT): channel vectors x pixels per register tile. The most accumulators
    ``RV * PT`` for which the accumulators, ``RV`` weight vectors and one broadcast fit the
    register file, ``RV`` at most the output's vectors and 4, ``PT`` at most
    ``MAX_TILE_PIXELS`` and the map's pixels; ties to more pixels (each weight vector,
    read from L2 when the ``K x NB`` panel outgrows L1, serves more fmas). AVX-512 (32
    registers): 3 x 8; AVX2 (16): 2 x 6, which ran 0.84-0.95x the time of 3 x 4 on
    mobilenet_v2's layers (on AVX-512, 3 x 8 and 4 x 6 ran alike)."""
    lanes = _lanes(dtype, bits)
    regs = registers(bits)
    best = (0, 0, 0)
    for rv in range(1, min(4, -(-o_ // lanes)) + 1):
        pt = min(MAX_TILE_PIXELS, pixels, (regs - rv - 1) // rv)
        if pt >= 1:
            best = max(best, (rv * pt, pt, rv))
    return best[2], best[1]


def channels_worth(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
                   dtype: str, strides: tuple[int, ...], pad_begin: tuple[int, ...],
                   pad_end: tuple[int, ...], out_size: tuple[int, ...], gemm_columns: int,
                   target: CPUTarget) -> bool:
    """Whether a conv the implicit GEMM takes (computing ``gemm_columns`` wide-grid
    columns) should read its weight packed by channel vectors: a 2-D conv of one group,
    float32 or float64, on a map of at most ``SMALL_MAP_PIXELS`` pixels, when it costs
    fewer cycles per output on ``target``. Per output, both forms issue
    ``K / (L * fma_units)`` vector-fma cycles (``K = C * taps``) times their lane waste:
    the GEMM's ``columns / pixels`` (a 7x7 map: 64 / 49; with padding its wide grid has
    more columns: 9 a row for a 3x3 conv there), this form's ``whole vectors / O`` (960
    channels: 1); this form also scatters each output with a scalar store
    (``SCATTER_CYCLES``) and, unless the conv is 1x1 of stride 1 without padding (``x`` is
    its matrix), gathers its ``K x P`` matrix first (``COPY_CYCLES`` an element, ``K / O``
    elements per output). So a short reduction keeps the GEMM: 64 -> 384 channels on
    14x14 (4.6 against 5.0 cycles with AVX-512 on Zen 4) does, 384 -> 64 (27 against 25)
    and every 7x7 1x1 conv of mobilenet_v2 do not."""
    if dtype not in ("float32", "float64") or groups != 1 or len(x_shape) != 4:
        return False
    pixels, o_, k_ = math.prod(out_size), w_shape[0], math.prod(w_shape[1:])
    if pixels > SMALL_MAP_PIXELS or gemm_columns <= 0:
        return False
    lanes = target.lanes(dtype)
    per_fma = k_ / (lanes * target.fma_units)  # cycles per output without lane waste
    vectors = -(-o_ // lanes) * lanes
    copy = 0.0 if _direct(w_shape, strides, pad_begin, pad_end) else COPY_CYCLES * k_ / o_
    return per_fma * vectors / o_ + SCATTER_CYCLES + copy < per_fma * gemm_columns / pixels


def _direct(w_shape: tuple[int, ...], strides: tuple[int, ...], pad_begin: tuple[int, ...],
            pad_end: tuple[int, ...]) -> bool:
    """Whether ``x[n]`` is the conv's ``K x P`` matrix itself (1x1, stride 1, no padding)."""
    return (tuple(w_shape[2:]) == (1, 1) and all(s == 1 for s in strides)
            and not any(pad_begin) and not any(pad_end))


def packable_if_worth(prim: PrimFunc, x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                      groups: int, strides: tuple[int, ...], pad_begin: tuple[int, ...],
                      pad_end: tuple[int, ...], dilation: tuple[int, ...],
                      out_size: tuple[int, ...], dtype: str) -> PrimFunc:
    """``prim``, the implicit GEMM of this conv (``conv.scheduled_conv``'s arguments),
    marked ``packable`` by this schedule when :func:`channels_worth` says so for the
    current target (the GEMM's columns: the wide grid up to the last pixel in whole
    tiles of ``conv_tile``'s width)."""
    target = current_target()
    bits = target.vector_bits
    last = Phases(tuple(x_shape[2:]), tuple(strides), tuple(pad_begin), tuple(pad_end)) \
        .grid(tuple(o - 1 for o in out_size)) + 1
    nr = conv_tile(w_shape[0] // groups, dtype, bits, None, last)[1]
    if not channels_worth(x_shape, w_shape, groups, dtype, strides, pad_begin, pad_end,
                          out_size, -(-last // nr) * nr, target):
        return prim
    return prim.with_attr(PACKABLE, (CONV_CHANNELS, 1, tuple(x_shape), tuple(w_shape),
                                     tuple(strides), tuple(pad_begin), tuple(pad_end),
                                     tuple(dilation), tuple(out_size), dtype, bits))


def _blocks(o_: int, c_: int, rv: int, lanes: int) -> tuple[int, int, int, int]:
    """(NB, full blocks, NT tail block width padded to whole vectors, packed length)."""
    nb = rv * lanes
    full, tail = divmod(o_, nb)
    nt = -(-tail // lanes) * lanes
    return nb, full, nt, c_ * (full * nb + nt)


def pack_channels(value: np.ndarray, key: tuple[Any, ...]) -> np.ndarray:
    """``W (O, C, KH, KW)`` in the order the tile reads it (the module docstring), as
    ``(O, K)`` with ``K = (c, kh, kw)`` row-major."""
    x_shape, w_shape, *_, out_size, dtype, bits = key
    if tuple(value.shape) != tuple(w_shape):
        raise ValueError(f"pack_channels: the weight has shape {value.shape}, the conv "
                         f"reads {tuple(w_shape)}")
    o_, c_ = w_shape[0], math.prod(w_shape[1:])
    lanes = _lanes(dtype, bits)
    rv, _ = channels_tile(o_, math.prod(out_size), dtype, bits)
    nb, full, nt, length = _blocks(o_, c_, rv, lanes)
    w = value.reshape(o_, c_)
    out = np.zeros(length, value.dtype)
    out[:full * c_ * nb].reshape(full, c_, nb)[...] = \
        w[:full * nb].reshape(full, nb, c_).transpose(0, 2, 1)
    if nt:
        out[full * c_ * nb:].reshape(c_, nt)[:, :o_ - full * nb] = w[full * nb:].T
    return out


def _variant(key: tuple[Any, ...]) -> PrimFunc:
    return conv_channels(*(tuple(k) for k in key[:-2]), *key[-2:])


@lru_cache(maxsize=256)
def conv_channels(  # noqa: C901 (trace-time specialization)
        x_shape: tuple[int, ...], w_shape: tuple[int, ...], strides: tuple[int, ...],
        pad_begin: tuple[int, ...], pad_end: tuple[int, ...], dilation: tuple[int, ...],
        out_size: tuple[int, ...], dtype: str, bits: int) -> PrimFunc:
    """The PrimFunc ``(x0: x_shape, x1: packed weight (1-d), out: (N, O, *out_size))`` of a
    2-D conv of one group, vectorized over output channels (see the module docstring;
    ``x1`` in :func:`pack_channels`'s order)."""
    n_, c_ = x_shape[0], math.prod(w_shape[1:])  # c_: the reduction K = C * taps
    o_ = w_shape[0]
    oh_, ow_ = out_size
    pixels = oh_ * ow_
    lanes = _lanes(dtype, bits)
    rv, pt = channels_tile(o_, pixels, dtype, bits)
    nb, full, nt, length = _blocks(o_, c_, rv, lanes)
    whole, ptail = divmod(pixels, pt)
    tiles = whole + (1 if ptail else 0)
    cblocks = full + (1 if nt else 0)
    direct = _direct(w_shape, strides, pad_begin, pad_end)  # x[n] is the (K, P) matrix
    ph = Phases(tuple(x_shape[2:]), strides, pad_begin, pad_end)
    kernel, taps = tuple(w_shape[2:]), math.prod(w_shape[2:])
    offsets = ph.taps(kernel, dilation)
    used = ph.phases(kernel, dilation)

    def work_if(work):
        return T.parallel if work >= PARALLEL_MIN_WORK else T.serial

    @T.prim_func(private=True)
    def conv_channels(x0: T.Buffer(x_shape, dtype), x1: T.Buffer((length,), dtype),
                      out: T.Buffer((n_, o_, oh_, ow_), dtype)):
        if not direct:
            xs = T.alloc_buffer((c_ * pixels,), dtype)
        for n in T.serial(n_):
            if not direct:  # (K, P): each channel's taps from its padded phase planes
                for ch in work_if(c_ * pixels)(x_shape[1]):
                    xpad = T.alloc_buffer((ph.plane,), dtype)
                    ph.copy(xpad, x0, n, ch, 0, used)
                    for t, off in enumerate(offsets):
                        for oh in T.serial(oh_, name=f"h{t}"):
                            for ow in T.serial(ow_, name=f"w{t}"):
                                xs[(ch * taps + t) * pixels + oh * ow_ + ow] = \
                                    xpad[off + ph.grid((oh, ow))]

            def pixel_at(c, p):
                if direct:
                    return x0[n, c, T.floordiv(p, ow_), T.floormod(p, ow_)]  # noqa: B023
                return xs[c * pixels + p]  # noqa: B023

            for task in work_if(o_ * c_ * pixels)(cblocks * tiles):
                block, tile = task // tiles, task % tiles

                def register_tile(vectors, width, base, o0, p0, pts, real, tag):
                    """``pts`` pixels from ``p0`` x ``vectors`` channel vectors of the
                    panel at ``base`` (``width`` floats a row), ``real`` channels real."""
                    acc = T.alloc_buffer((pts, vectors * lanes), dtype, name=f"acc{tag}")
                    for i in T.unroll(pts, name=f"i{tag}"):
                        for v in T.unroll(vectors, name=f"v{tag}"):
                            for ji in T.vectorized(lanes, name=f"j{tag}"):
                                acc[i, v * lanes + ji] = 0.0
                    for c in T.serial(c_, name=f"c{tag}"):
                        for i in T.unroll(pts, name=f"i{tag}"):
                            for v in T.unroll(vectors, name=f"v{tag}"):
                                for ji in T.vectorized(lanes, name=f"j{tag}"):
                                    acc[i, v * lanes + ji] = T.fma(
                                        x1[base + c * width + v * lanes + ji],
                                        pixel_at(c, p0 + i), acc[i, v * lanes + ji])
                    for i in T.unroll(pts, name=f"i{tag}"):
                        p = p0 + i
                        for v in range(vectors):
                            size = min(lanes, real - v * lanes)
                            for ji in T.serial(size, name=f"s{tag}{v}"):
                                out[n, o0 + v * lanes + ji,  # noqa: B023
                                    T.floordiv(p, ow_), T.floormod(p, ow_)] = \
                                    acc[i, v * lanes + ji]

                def pixel_tiles(vectors, width, base, o0, real, tag):
                    if not ptail:
                        register_tile(vectors, width, base, o0, tile * pt, pt, real, tag)
                    elif not whole:
                        register_tile(vectors, width, base, o0, 0, ptail, real, f"{tag}t")
                    else:
                        with T.If(tile < whole):
                            register_tile(vectors, width, base, o0, tile * pt, pt, real, tag)
                        with T.Else():
                            register_tile(vectors, width, base, o0, whole * pt, ptail, real,
                                          f"{tag}t")

                def full_block():
                    pixel_tiles(rv, nb, block * c_ * nb, block * nb, nb, "")

                def tail_block():
                    pixel_tiles(nt // lanes, nt, full * c_ * nb, full * nb, o_ - full * nb,
                                "r")

                if not nt:
                    full_block()
                elif not full:
                    tail_block()
                else:
                    with T.If(block < full):
                        full_block()
                    with T.Else():
                        tail_block()

    return conv_channels.with_attr("schedule", "conv_channels") \
        .with_attr("tile", f"{pt}x{rv * lanes}")


register_packer(CONV_CHANNELS, Packer(pack_channels, _variant))

__all__ = ["CONV_CHANNELS", "COPY_CYCLES", "MAX_TILE_PIXELS", "SMALL_MAP_PIXELS", "channels_tile",
           "SCATTER_CYCLES", "channels_worth", "conv_channels", "pack_channels", "packable_if_worth"]
