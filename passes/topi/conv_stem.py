"""Stem convs (an image of a few channels, 3x3 or 7x7, stride 2): the implicit GEMM's
register tiles, stored straight into the output row by row.

Why: the implicit GEMM (``conv.py``) numbers pixels on the *wide grid* of the phase
planes; when a plane row is longer than the output row (224x224 with pad 1 and stride 2:
113 against 112; squeezenet's unpadded 3x3 stride 2: 112 against 111) its tiles cannot
store into ``out`` and it writes a wide scratch ``wide[O, tiles * NR]`` that a second
loop copies out, the epilogue in that copy. With ``C * KH * KW`` only 27 (3x3 over RGB)
the GEMM is short and those two extra passes over an output of 32-64 channels at
112x112 (1.6-3.2 MB, more than L2) cost as much as the multiply-adds: the stems ran at
41-55 GFLOP/s against 100 for the network's other convs.

Here a task is one output row ``oh``: for each block of ``MR`` output channels, the
row's pixels in ``NR``-wide register tiles (``conv.register_tile``: exact fma over the
channels and taps, weights broadcast, taps unit-stride loads of the phase planes at
``plane_row(oh) + ow``), each tile stored into ``out[n, o, oh, ow0 : ow0 + NR]``, where
FuseTIR folds the epilogue (bias, relu6, SiLU on full vectors). A row that is no
multiple of ``NR`` ends with a tile that *overlaps* the one before it (``ow0 = OW - NR``,
or a one-vector tile when fewer than a vector remain): the overlapped pixels are
computed twice, identically, and stored twice by the same task, so the tail needs no
narrow pieces. The image is copied into the phase-split padded layout first
(``conv_layout.Phases``; O(C * H * W), three channels). Imports irkernel.tir and
``passes.topi`` (``conv``, ``conv_layout``, ``vector``).
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.topi.conv import MAX_UNROLL, conv_tile, parallel_if_worth, register_tile
from passes.topi.conv_layout import Phases
from passes.topi.vector import vector_bits

#: Most input channels of a stem conv (RGB, RGBA).
MAX_CHANNELS = 4
#: Fewest vectors in an output row of a stem conv (112 columns are 7 AVX-512 vectors).
MIN_ROW_VECTORS = 4


def stem_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int, dtype: str,
            out_size: tuple[int, ...], bits: int = 0) -> bool:
    """Whether a conv is a stem this schedule takes: 2-D, groups 1, float32 or float64, at
    most ``MAX_CHANNELS`` input channels, output rows of at least ``MIN_ROW_VECTORS``
    vectors (on short rows the wide scratch is small and the overlapping last tile a
    large share of the row: the implicit GEMM keeps those)."""
    lanes = (bits or vector_bits()) // (32 if dtype == "float32" else 64)
    return (dtype in ("float32", "float64") and groups == 1 and len(x_shape) == 4
            and len(w_shape) == 4 and x_shape[1] <= MAX_CHANNELS
            and out_size[1] >= MIN_ROW_VECTORS * lanes and w_shape[0] >= 4)


def row_tiles(width: int, nr: int, lanes: int) -> list[tuple[int, int]]:
    """``(first pixel, tile width)`` of the tiles covering an output row of ``width``:
    ``nr``-wide tiles, then one ending at the row's end (``nr`` wide, or one vector when
    at most a vector remains), overlapping the tile before it."""
    tiles = [(j, nr) for j in range(0, width - nr + 1, nr)]
    rest = width - len(tiles) * nr
    if rest:
        size = lanes if rest <= lanes and width >= lanes else nr
        tiles.append((width - size, size))
    return tiles


def scheduled_stem(x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                   strides: tuple[int, ...], pad_begin: tuple[int, ...],
                   pad_end: tuple[int, ...], dilation: tuple[int, ...],
                   out_size: tuple[int, ...], dtype: str = "float32",
                   bits: int = 0) -> PrimFunc:
    """The PrimFunc ``(x0: x_shape, x1: w_shape, out: (N, O, OH, OW))`` of a stem conv (see
    the module docstring) for the target's vector width (``bits``: 0 for the current)."""
    return _stem(tuple(x_shape), tuple(w_shape), tuple(strides), tuple(pad_begin),
                 tuple(pad_end), tuple(dilation), tuple(out_size), dtype,
                 bits or vector_bits())


@lru_cache(maxsize=64)
def _stem(x_shape: tuple[int, ...], w_shape: tuple[int, ...], strides: tuple[int, ...],
          pad_begin: tuple[int, ...], pad_end: tuple[int, ...], dilation: tuple[int, ...],
          out_size: tuple[int, ...], dtype: str, bits: int) -> PrimFunc:
    n_, c_, size = x_shape[0], x_shape[1], x_shape[2:]
    o_, kernel = w_shape[0], w_shape[2:]
    oh_, ow_ = out_size
    lanes = bits // (32 if dtype == "float32" else 64)
    # the planes must hold every tap of the last row's last tile: pad the end to reach it
    reach = [(out_size[a] - 1) * strides[a] + (kernel[a] - 1) * dilation[a] + 1
             for a in range(2)]
    pad_end = tuple(max(pad_end[a], reach[a] - size[a] - pad_begin[a]) for a in range(2))
    ph = Phases(size, strides, pad_begin, pad_end)
    plane, used = ph.plane, ph.phases(kernel, dilation)
    mr, nr = conv_tile(o_, dtype, bits)
    full, tail = divmod(o_, mr)
    tiles = row_tiles(ow_, nr, lanes)
    whole = ow_ // nr
    ends = tiles[whole:]  # the overlapping last tile, if any

    @T.prim_func(private=True)
    def stem(x0: T.Buffer(x_shape, dtype), x1: T.Buffer(w_shape, dtype),
             out: T.Buffer((n_, o_, oh_, ow_), dtype)):
        xpad = T.alloc_buffer((c_ * plane,), dtype)

        def over_taps(emit, ks=()):
            a = len(ks)
            if a == 2:
                emit(ks, ph.offset(tuple(k * d for k, d in zip(ks, dilation, strict=True))))
                return
            loop = T.unroll if a == 1 and kernel[a] <= MAX_UNROLL else T.serial
            for k in loop(kernel[a], name=f"k{a}"):
                over_taps(emit, (*ks, k))

        for n in T.serial(n_):
            for c in parallel_if_worth(c_ * plane)(c_):
                ph.copy(xpad, x0, n, c, c * plane, used)
            for oh in parallel_if_worth(o_ * math.prod(w_shape[1:]) * oh_ * ow_)(oh_):
                row = ph.grid((oh, 0))

                def tile(row0, rows, ow0, width, tag, oh=oh, row=row):
                    def operands(ii, c, ks, offset, ji):
                        return (x1[row0 + ii, c, ks[0], ks[1]],
                                xpad[c * plane + offset + row + ow0 + ji])

                    def store(ii, ji, value):
                        out[n, row0 + ii, oh, ow0 + ji] = value  # noqa: B023

                    register_tile(rows, width, dtype, tag, c_, over_taps, operands, store)

                def block(row0, rows, tag):
                    if whole:
                        for j in T.serial(whole, name=f"j{tag}"):
                            tile(row0, rows, j * nr, nr, f"{tag}w")
                    for ow0, width in ends:
                        tile(row0, rows, ow0, width, f"{tag}e")

                if full:
                    for b in T.serial(full, name="blk"):
                        block(b * mr, mr, "b")
                if tail:
                    block(full * mr, tail, "t")

    return stem.with_attr("schedule", "conv_stem").with_attr("tile", f"{mr}x{nr}")


__all__ = ["MAX_CHANNELS", "MIN_ROW_VECTORS", "row_tiles", "scheduled_stem", "stem_ok"]
