"""Winograd F(2x2, 3x3) for float32 stride-1 3x3 convs: 16 multiply-adds per 2x2 output
tile and input channel instead of the direct conv's 36.

Why: the implicit GEMM (``conv.py``) already runs resnet18's 3x3 convs near the core's
fma peak, so a faster 3x3 conv has to do fewer multiply-adds. Lavin and Gray's minimal
filtering algorithm computes a 2x2 output tile ``Y`` from a 4x4 input tile ``d`` and the
3x3 filter ``g`` as ``Y = A^T [(G g G^T) . (B^T d B)] A`` (``.``: elementwise), so summed
over input channels the 16 positions ``xi`` of the 4x4 transformed domain are 16
independent GEMMs ``M[xi] = U[xi] @ V[xi]``, ``U[xi]: K x C``, ``V[xi]: C x tiles``: 2.25x
fewer multiply-adds than the direct conv, paid for with transforms that are
O(weights + input + output). The transforms only add and subtract (``B`` and ``A`` are
0/+-1 matrices; ``G`` has halves), so the result stays within a few float32 ulps of the
direct conv (figures in ``docs/lowering.md``).

The kernel (one batch-independent step, then per image):

0. the weight transform ``U[xi, k, c] = (G g[k, c] G^T)[xi]``, parallel over output
   channels, once per call (hoisted out of the batch loop);
1. per input channel (parallel): copy the image into a zero-padded, phase-split scratch
   (``conv_layout.Phases`` with stride 2: tile ``(ty, tx)`` starts at padded position
   ``(2ty, 2tx)``, so its element ``(i, j)`` sits in phase ``(i % 2, j % 2)`` at
   ``(ty + i // 2, tx + j // 2)`` and consecutive tile columns read consecutive memory),
   then ``V[xi, c, column of (ty, tx)] = (B^T d B)[xi]`` vectorized over a row's tiles
   (columns band by band, each band's tiles padded to whole register tiles);
2. per (band of tile rows, output-channel group) task (parallel): for each register-tile
   row block of its channels, the 16 GEMMs ``M[xi] = U[xi] @ V[xi]`` over the band's
   tiles with ``conv.py``'s register tile (``register_tile``; ``conv_tile``'s ``MR x NR``
   from the target's vector registers) into a task-local ``M`` (at most 64 KiB: no
   ``M`` ever goes to memory), then ``Y = A^T M A`` of those channels stored into
   ``out``. Each element is summed by one task over all channels in order: the split
   never changes an accumulation order, so results are bitwise the same at every thread
   count. The store to ``out`` is its only store and nothing reads ``out``, so FuseTIR
   folds an elementwise epilogue (bias, relu, a residual add) into it
   (``_fuse_epilogue.fold_into_stores``); the stores are scalar (a tile's two columns
   interleave) and LLVM's loop vectorizer vectorizes the tile loop. An odd output size
   stores only the real row / column of the last tiles (the padded copy is one zero row
   / column longer so the tile reads exist). A band is whole tile rows (``bands``), so
   the output loops run along rows; its tiles are padded to whole register tiles.

The scratch (padded image, ``U``, ``V``) is one allocation: several large ones freed
together let the allocator return the memory to the system on every call, and the next
call page-faults it in again (a first version with separate buffers took 1,568 page
faults a call at 64 channels on 56x56).

``winograd_ok`` says which convs it covers; ``nn.conv`` takes it when ``winograd_worth``
(the cost rule) and the PassContext config ``topi.winograd`` say so.
Imports irkernel.transform, irkernel.tir and ``passes.topi.conv`` / ``conv_layout`` /
``vector``.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

from functools import lru_cache

from irkernel import transform
from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.topi.conv import channel_split, conv_tile, parallel_if_worth, register_tile, row_blocks
from passes.topi.conv_layout import Phases
from passes.topi.vector import vector_bits, vector_pieces

#: Config: whether ``nn.conv`` runs the stride-1 3x3 convs the cost rule picks as Winograd.
WINOGRAD = "topi.winograd"
transform.register_pass_config(
    WINOGRAD, bool, True,
    description="run float32 stride-1 3x3 convs with enough channels and pixels as "
                "Winograd F(2x2,3x3) (2.25x fewer multiply-adds; results within float32 "
                "rounding of the direct conv, not bitwise equal)")

#: The transforms of F(2x2, 3x3): filter ``G`` (4x3), input ``B^T`` (4x4), output ``A^T``
#: (2x4), with Lavin and Gray's interpolation points 0, 1, -1.
G = ((1.0, 0.0, 0.0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0.0, 0.0, 1.0))
BT = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))
AT = ((1, 1, 1, 0), (0, 1, -1, -1))

#: Cost rule: the fewest input and output channels, output pixels per side and 2x2 output
#: tiles that make the transforms worth the GEMM's saving. The weight transform runs on
#: every call (``16 K C`` values, scalar work), so it needs enough tiles to pay for it:
#: on a busy Zen 4, one thread, resnet18's 56x56 (784 tiles) and 28x28 (196) layers ran
#: 1.15-1.4x faster than the direct conv, its 14x14 layer (49 tiles, 256 channels)
#: 0.87-1.10x; on the quiet machine 1.47x, 1.39x and 1.29x (14x14 taken), 7x7 (16 tiles)
#: 0.64x (bench/README.md).
MIN_CHANNELS = 32
MIN_SIDE = 8
MIN_TILES = 36


def winograd_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int, dtype: str,
                strides: tuple[int, ...], dilation: tuple[int, ...],
                pads: tuple[int, ...]) -> bool:
    """Whether the template covers this conv: float32 2-D, a 3x3 kernel, stride 1,
    dilation 1, groups 1, any non-negative padding, any batch."""
    return (dtype == "float32" and len(x_shape) == 4 and len(w_shape) == 4 and groups == 1
            and tuple(w_shape[2:]) == (3, 3) and tuple(strides) == (1, 1)
            and tuple(dilation) == (1, 1) and min(pads) >= 0)


def winograd_enabled() -> bool:
    """The current PassContext's ``topi.winograd``."""
    return bool(transform.PassContext.current().get_config(WINOGRAD))


def winograd_worth(x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                   out_hw: tuple[int, ...]) -> bool:
    """The cost rule: at least ``MIN_CHANNELS`` input and output channels, ``MIN_SIDE``
    output pixels a side and ``MIN_TILES`` 2x2 output tiles, and ``topi.winograd`` on."""
    return (winograd_enabled()
            and min(x_shape[1], w_shape[0]) >= MIN_CHANNELS and min(out_hw) >= MIN_SIDE
            and -(-out_hw[0] // 2) * -(-out_hw[1] // 2) >= MIN_TILES)


def _combine(coeffs, values):
    """``sum(c * v)`` over the nonzero coefficients: a +-1 is an add or a subtract."""
    acc = None
    for c, v in zip(coeffs, values, strict=True):
        if c == 0:
            continue
        term = v if abs(c) == 1 else T.float32(abs(c)) * v
        if acc is None:
            acc = term if c > 0 else T.float32(0.0) - term
        else:
            acc = acc + term if c > 0 else acc - term
    return acc


def scheduled_winograd(x_shape: tuple[int, int, int, int], w_shape: tuple[int, int, int, int],
                       pad_begin: tuple[int, int], out_hw: tuple[int, int],
                       bits: int = 0) -> PrimFunc:
    """The PrimFunc ``(x0: x_shape, x1: w_shape, out: (N, K, *out_hw))`` of a conv that
    ``winograd_ok`` covers. ``bits``: the vector width to tile for (0: ``vector_bits()``)."""
    return _winograd(tuple(x_shape), tuple(w_shape), tuple(pad_begin), tuple(out_hw),
                     bits or vector_bits())


#: Most tiles of a band (``16 x MR x band`` float32 of local ``M`` per register-tile
#: row block: 64 KiB at 8 rows, the code generator's stack limit).
MAX_BAND = 128


def bands(th: int, tw: int, rows: int, bits: int) -> tuple[int, int, int]:
    """``(r, MR, NR)``: tile rows per band (a divisor of ``th``, so every band is whole) and
    the register tile. A band of ``r * tw`` tiles is padded to whole ``NR``-wide tiles: the
    choice wastes the fewest columns (ties: the wider tile, then the shorter band, more
    tasks), with at most ``MAX_BAND`` tiles unless one row has more."""
    best = None
    for r in range(1, th + 1):
        if th % r or (r > 1 and r * tw > MAX_BAND):
            continue
        mr, nr = conv_tile(rows, "float32", bits, None, r * tw)
        padded = -(-r * tw // nr) * nr
        key = (padded / (r * tw), -nr, r)
        if best is None or key < best[0]:
            best = (key, (r, mr, nr))
    assert best is not None
    return best[1]


@lru_cache(maxsize=64)
def _winograd(  # noqa: C901 (trace-time specialization)
        x_shape: tuple[int, int, int, int], w_shape: tuple[int, int, int, int],
        pad_begin: tuple[int, int], out_hw: tuple[int, int], bits: int) -> PrimFunc:
    n_, c_, h_, w_ = x_shape
    k_ = w_shape[0]
    oh_, ow_ = out_hw
    th, tw = -(-oh_ // 2), -(-ow_ // 2)  # 2x2 output tiles per column and row
    # the padded image covers every tile's 4x4 input: 2 * tiles + 2 rows and columns
    ph = Phases((h_, w_), (2, 2), pad_begin, (2 * th + 2 - h_ - pad_begin[0],
                                             2 * tw + 2 - w_ - pad_begin[1]))
    plane = ph.plane
    dtype = "float32"
    lanes = bits // 32
    r, mr, nr = bands(th, tw, k_, bits)
    nb, band = th // r, -(-r * tw // nr) * nr  # bands, and tiles of a band padded
    width = nb * band  # row length of V
    split = channel_split(k_, mr, nb)
    full, tail = divmod(tw, lanes)
    # one scratch allocation: the padded image, then U, then V
    at_u, at_v = c_ * plane, c_ * plane + 16 * k_ * c_
    size = at_v + 16 * c_ * width

    @T.prim_func(private=True)
    def winograd(x0: T.Buffer(x_shape, dtype),  # noqa: C901
                 x1: T.Buffer(w_shape, dtype),
                 out: T.Buffer((n_, k_, oh_, ow_), dtype)):
        work = T.alloc_buffer((size,), dtype)

        # 0. U = G g G^T, once for the whole batch
        for k in parallel_if_worth(16 * k_ * c_)(k_):
            for c in T.serial(c_):
                g = [[x1[k, c, i, j] for j in range(3)] for i in range(3)]
                rows = [[_combine(G[a], [g[i][j] for i in range(3)]) for j in range(3)]
                        for a in range(4)]
                for a in range(4):
                    for b in range(4):
                        work[at_u + ((a * 4 + b) * k_ + k) * c_ + c] = _combine(G[b], rows[a])
        # the columns past each band's tiles: finite values for discarded GEMM columns
        if band > r * tw:
            for q in T.serial(16 * c_ * nb):
                for j in T.serial(band - r * tw):
                    work[at_v + q * band + r * tw + j] = 0.0

        for n in T.serial(n_):
            # 1. padded phase-split copy and V = B^T d B, per input channel
            for c in parallel_if_worth(16 * c_ * width)(c_):
                ph.copy(work, x0, n, c, c * plane, ph.phases((3, 3), (1, 1)))

                def transform_row(ty, tx):
                    d = [[work[c * plane + ph.offset((i, j)) + ph.grid((ty, tx))]  # noqa: B023
                          for j in range(4)] for i in range(4)]
                    rows = [[_combine(BT[a], [d[i][j] for i in range(4)]) for j in range(4)]
                            for a in range(4)]
                    col = T.floordiv(ty, r) * band + T.floormod(ty, r) * tw + tx
                    for a in range(4):
                        for b in range(4):
                            work[at_v + ((a * 4 + b) * c_ + c) * width + col] = \
                                _combine(BT[b], rows[a])  # noqa: B023

                for ty in T.serial(th):
                    if full:
                        for txo in T.serial(full):
                            for ji in T.vectorized(lanes):
                                transform_row(ty, txo * lanes + ji)
                    for j0, piece in vector_pieces(tail, lanes):
                        for ji in T.vectorized(piece):
                            transform_row(ty, full * lanes + j0 + ji)

            # 2. and 3. per (band, output-channel group): the 16 GEMMs M[xi] = U[xi] @ V[xi]
            # of its register-tile row blocks into local M, then Y = A^T M A into out
            for t in parallel_if_worth(16 * k_ * c_ * width)(nb * split):
                bi = t // split if split > 1 else t

                def block(row0, rows, tag):
                    m = T.alloc_buffer((16 * rows * band,), dtype, name=f"m{tag}")
                    for xi in T.serial(16, name=f"xi{tag}"):
                        for jb in T.serial(band // nr, name=f"jb{tag}"):
                            def operands(ii, cc, ks, offset, ji):
                                return (work[at_u + (xi * k_ + row0 + ii) * c_ + cc],  # noqa: B023
                                        work[at_v + (xi * c_ + cc) * width  # noqa: B023
                                             + bi * band + jb * nr + ji])  # noqa: B023

                            def store(ii, ji, value):
                                m[(xi * rows + ii) * band + jb * nr + ji] = value  # noqa: B023

                            register_tile(rows, nr, dtype, tag, c_, lambda emit: emit((), 0),
                                          operands, store)
                    for ii in T.serial(rows, name=f"o{tag}"):
                        output_rows(m, rows, ii, row0 + ii, tag)

                def output_rows(m, rows, ii, k, tag):
                    """Y = A^T M A of output channel ``k`` over the band's tile rows."""
                    def store_tile(tyl, tx, dys, dxs):
                        mv = [[m[((i * 4 + j) * rows + ii) * band + tyl * tw + tx]
                               for j in range(4)] for i in range(4)]
                        cols = [[_combine(AT[b], mv[i]) for b in range(2)] for i in range(4)]
                        for dy in range(dys):
                            for dx in range(dxs):
                                out[n, k, 2 * (bi * r + tyl) + dy, 2 * tx + dx] = \
                                    _combine(AT[dy], [cols[i][dx] for i in range(4)])  # noqa: B023

                    def tile_row(tyl, dys):
                        for tx in T.serial(ow_ // 2, name=f"tx{tag}"):
                            store_tile(tyl, tx, dys, 2)
                        if ow_ % 2:
                            store_tile(tyl, tw - 1, dys, 1)

                    whole = r - 1 if oh_ % 2 else r  # tile rows with both output rows
                    if whole:
                        for tyl in T.serial(whole, name=f"ty{tag}"):
                            tile_row(tyl, 2)
                    if oh_ % 2:  # the last tile row of the last band has one output row
                        with T.If(T.eq(bi, nb - 1)):
                            tile_row(r - 1, 1)
                        if nb > 1:
                            with T.Else():
                                tile_row(r - 1, 2)

                row_blocks(k_, mr, split, t % split, block)

    return winograd.with_attr("schedule", "conv_winograd").with_attr("tile", f"{mr}x{nr}")


__all__ = ["AT", "BT", "G", "MAX_BAND", "MIN_CHANNELS", "MIN_SIDE", "MIN_TILES", "WINOGRAD", "bands", "scheduled_winograd",
           "winograd_enabled", "winograd_ok", "winograd_worth"]
