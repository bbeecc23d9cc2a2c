"""Convs on small maps (at most ``DOT_MAX_PIXELS`` output pixels): dot products over
(input channel, tap), vectorized over channels, any groups.

Why: the implicit GEMM (``conv.py``) vectorizes over output pixels on the wide grid of
the padded image. A 3x3 conv on a 2x2 map (RegNet-X's last stage, groups of 16 channels)
has a wide grid of 6 columns, so its 16-lane tile computes 16 columns for 4 real pixels
(10 GFLOP/s); a 1x1 conv on a 4x4 map fills one vector at best. These maps have few
pixels but 16-1,000 channels, so the channels are the dimension to vectorize.

A conv is ``out[o, p] = sum_k W[o, k] * col[p, k]`` per group, ``k = (c, taps)`` in the
weight's own row-major order (``C/g * KH * KW`` contiguous floats per output channel):
both operands are contiguous along ``k``, so the weights are read in their stored order
(no packing: each weight is used only ``P`` times, so a per-call repack would cost more
than the conv) and the reduction is vectorized ``L`` lanes at a time. Per image:

1. ``col[p, c * taps + t]`` (the im2col matrix, pixel-major) is gathered from the image,
   parallel over channels. Pixels and taps are unrolled at trace time, so a padding tap
   is a stored zero (no select) and strides and dilations are constants in the indices;
   a one-pixel 1x1 conv without padding reads the image itself (``col`` is ``x[n]``).
2. Tasks over (group, block of ``R`` output channels of the group) run in parallel: a
   task holds ``R x PT`` vector accumulators (``PT`` pixels at a time, ``conv_dot_tile``),
   runs the ``k`` loop with exact fma (a shorter vector piece for a ``K % L`` tail: odd
   group widths stay correct and in bounds; with fewer than 4 pixels, partial sums over
   alternate vectors keep 4 fma chains in flight), sums each accumulator's lanes by halving
   (log2 L adds), and stores each output once. That store is the only store to ``out``,
   so FuseTIR folds the epilogue (bias, relu, residual add) into it.

Each output is summed by one task in a fixed order, so results are bitwise the same at
every thread count. The order differs from the canonical template's (lanes, then a
tree), as the implicit GEMM's does. Imports irkernel.tir, FuseTIR's parallel work
threshold and ``passes.topi.conv_layout`` / ``vector``.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from functools import lru_cache
from itertools import product

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.tir.parallelize import PARALLEL_MIN_WORK
from passes.topi.conv_layout import Phases
from passes.topi.vector import registers, vector_bits, vector_pieces

#: Most output pixels a conv may have to run as dot products. Above it the implicit GEMM's
#: pixel tiles fill their lanes well enough.
DOT_MAX_PIXELS = 16
#: Most ``col`` elements (pixels x channels x taps) per image (1 MiB of float32).
COL_MAX = 1 << 18
#: Most pixel x tap gathers per channel unrolled into the col copy.
MAX_GATHER = 512


def dot_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int, dtype: str,
           out_size: tuple[int, ...], strides: tuple[int, ...] = (),
           pad_begin: tuple[int, ...] = (), pad_end: tuple[int, ...] = (),
           bits: int = 0) -> bool:
    """Whether the dot-product schedule takes a conv: float32, 1 to 3 spatial axes, at most
    ``DOT_MAX_PIXELS`` output pixels and at most half of the implicit GEMM's columns (its
    wide grid in whole vectors: a 1x1 conv on a 4x4 map fills its one vector and stays a
    GEMM, a 3x3 conv with padding there computes 32 columns for 16 pixels), at least two
    input channels per group (one channel per group is a depthwise conv, which has
    schedules of its own: ``depthwise_flat``) and a ``col`` of at most ``COL_MAX``
    elements. No least work: the schedule has no fixed cost beyond its small ``col`` copy
    (a squeeze-excite conv of 370 multiply-adds runs on it). Empty ``strides`` and pads:
    1 and 0."""
    if dtype != "float32" or len(x_shape) != len(w_shape) or not 3 <= len(x_shape) <= 5:
        return False
    rank = len(x_shape) - 2
    pixels, taps = math.prod(out_size), math.prod(w_shape[2:])
    ph = Phases(tuple(x_shape[2:]), tuple(strides) or (1,) * rank,
                tuple(pad_begin) or (0,) * rank, tuple(pad_end) or (0,) * rank)
    lanes = (bits or vector_bits()) // 32
    columns = -(-(ph.grid(tuple(o - 1 for o in out_size)) + 1) // lanes) * lanes
    return (pixels <= DOT_MAX_PIXELS and 2 * pixels <= columns and w_shape[1] >= 2
            and pixels * x_shape[1] * taps <= COL_MAX and pixels * taps <= MAX_GATHER)


def conv_dot_tile(rows: int, pixels: int, bits: int) -> tuple[int, int]:
    """(R, PT): output channels x pixels per register tile, ``PT`` up to 4 pixels.

    With at most 4 pixels each weight is used at most 4 times, so the conv streams its
    weights from memory (RegNet-X's 400 x 400 1x1 convs on 2x2 maps: 640 KiB each, the
    model's 22 MB never stay in cache): ``R = 1``, so consecutive tasks read the weight
    matrix as one sequential stream, which the hardware prefetcher follows. Six rows at
    a time (six streams 1.6 KiB apart, restarting on every page) ran at half the
    bandwidth, 10 GB/s against onnxruntime's 18. With more pixels the weights are reused
    from L1 and the register file bounds the tile: ``R`` the even share of a group's
    ``rows`` in blocks of at most 24 accumulators (16 with 16 registers) over ``PT``."""
    pt = min(pixels, 4)
    if pixels <= 4:
        return 1, pt
    most = max(1, min(8, (24 if registers(bits) >= 32 else 12) // pt))
    blocks = -(-rows // most)
    return -(-rows // blocks), pt


def scheduled_conv_dot(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
                       strides: tuple[int, ...], pad_begin: tuple[int, ...],
                       dilation: tuple[int, ...], out_size: tuple[int, ...],
                       bits: int = 0) -> PrimFunc:
    """The PrimFunc ``(x0: x_shape, x1: w_shape, out: (N, O, *out_size))`` of a float32
    conv of ``groups`` groups on a small map (see the module docstring and ``dot_ok``).
    ``bits``: the vector width to tile for (0: the target's)."""
    return _conv_dot(tuple(x_shape), tuple(w_shape), groups, tuple(strides),
                     tuple(pad_begin), tuple(dilation), tuple(out_size),
                     bits or vector_bits())


@lru_cache(maxsize=256)
def _conv_dot(  # noqa: C901 (trace-time specialization)
        x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
        strides: tuple[int, ...], pad_begin: tuple[int, ...], dilation: tuple[int, ...],
        out_size: tuple[int, ...], bits: int) -> PrimFunc:
    n_, c_, size = x_shape[0], x_shape[1], x_shape[2:]
    o_, cg, kernel = w_shape[0], w_shape[1], w_shape[2:]
    og, taps = o_ // groups, math.prod(kernel)
    k_ = cg * taps  # the reduction of one output: a weight row
    kt = c_ * taps  # a col row: every group's k
    pixels = math.prod(out_size)
    lanes = bits // 32
    rmost, pt = conv_dot_tile(og, pixels, bits)
    rblocks, rtail = -(-og // rmost), og % rmost
    full_k, k_tail = divmod(k_, lanes)
    dtype = "float32"
    points = list(product(*(range(e) for e in out_size)))  # output pixels, row-major
    kpos = list(product(*(range(e) for e in kernel)))  # taps, row-major
    # the image itself is col when one pixel reads each channel once, unpadded
    direct = pixels == 1 and taps == 1 and not any(pad_begin)

    def source(p, t):
        """The input position of tap ``t`` of pixel ``p``, or None in the padding."""
        pos = tuple(o * s + k * d - b for o, s, k, d, b in zip(
            points[p], strides, kpos[t], dilation, pad_begin, strict=True))
        return pos if all(0 <= i < e for i, e in zip(pos, size, strict=True)) else None

    def weight(x1, o, k):
        """``W[o, k]`` with ``k`` over (channel, taps): the weight row's ``k``-th float.
        Written as the chain ``(k // taps, (k % taps) // ..., ...)`` of split pairs that
        FlattenBuffer merges back into ``k``, so a vector of ``k`` is one contiguous load."""
        if taps == 1:
            return x1[(o, k, *([0] * len(kernel)))]
        idx, rest, span = [T.floordiv(k, taps)], T.floormod(k, taps), taps
        for e in kernel[:-1]:
            span //= e
            idx.append(T.floordiv(rest, span))
            rest = T.floormod(rest, span)
        return x1[(o, *idx, rest)]

    def work_if(work):
        return T.parallel if work >= PARALLEL_MIN_WORK else T.serial

    @T.prim_func(private=True)
    def conv_dot(x0: T.Buffer(x_shape, dtype), x1: T.Buffer(w_shape, dtype),
                 out: T.Buffer((n_, o_, *out_size), dtype)):
        if not direct:
            col = T.alloc_buffer((pixels * kt,), dtype)
        for n in T.serial(n_):
            if not direct:
                for c in work_if(c_ * pixels * taps)(c_):
                    for p in range(pixels):
                        for t in range(taps):
                            pos = source(p, t)
                            col[p * kt + c * taps + t] = 0.0 if pos is None \
                                else x0[(n, c, *pos)]

            def col_at(p, k):
                if direct:
                    return x0[(n, k, *([0] * len(size)))]  # noqa: B023
                return col[p * kt + k]  # noqa: B023

            for task in work_if(o_ * k_ * pixels)(groups * rblocks):
                grp = task // rblocks
                row0 = grp * og + task % rblocks * rmost

                def tile(rows, p0, pts, tag):
                    # fewer than 4 pixels: 4 // pts partial sums per output over alternate
                    # k vectors, so at least 4 fma chains overlap (one chain of a one-pixel
                    # conv waits out each fma's latency)
                    ways = max(1, 4 // pts) if full_k >= 2 else 1
                    acc = T.alloc_buffer((rows, ways * pts, lanes), dtype, name=f"lanes{tag}")
                    for r in T.unroll(rows, name=f"r{tag}"):
                        for p in T.unroll(ways * pts, name=f"p{tag}"):
                            for ji in T.vectorized(lanes, name=f"j{tag}"):
                                acc[r, p, ji] = 0.0

                    def fma(k0, width, way=0):
                        for r in T.unroll(rows, name=f"r{tag}"):
                            for p in T.unroll(pts, name=f"p{tag}"):
                                for ji in T.vectorized(width, name=f"j{tag}"):
                                    acc[r, way * pts + p, ji] = T.fma(
                                        weight(x1, row0 + r, k0 + ji),  # noqa: B023
                                        col_at(p0 + p, grp * k_ + k0 + ji),  # noqa: B023
                                        acc[r, way * pts + p, ji])

                    rounds, extra = divmod(full_k, ways)
                    if rounds:
                        for kc in T.serial(rounds, name=f"k{tag}"):
                            for way in range(ways):
                                fma((kc * ways + way) * lanes, lanes, way)
                    for way in range(extra):
                        fma((rounds * ways + way) * lanes, lanes, way)
                    for k0, width in vector_pieces(k_tail, lanes):
                        fma(full_k * lanes + k0, width)
                    for way in range(1, ways):
                        for r in T.unroll(rows, name=f"r{tag}"):
                            for p in T.unroll(pts, name=f"p{tag}"):
                                for ji in T.vectorized(lanes, name=f"j{tag}"):
                                    acc[r, p, ji] = acc[r, p, ji] + acc[r, way * pts + p, ji]
                    half = lanes // 2
                    while half:  # the lanes of each accumulator summed by halving
                        for r in T.unroll(rows, name=f"r{tag}"):
                            for p in T.unroll(pts, name=f"p{tag}"):
                                for ji in T.vectorized(half, name=f"j{tag}"):
                                    acc[r, p, ji] = acc[r, p, ji] + acc[r, p, ji + half]
                        half //= 2
                    for r in T.unroll(rows, name=f"r{tag}"):
                        for p in range(pts):
                            q = p0 + p
                            if isinstance(q, int):
                                where = points[q]
                            else:
                                where, rest = [], q
                                for e in reversed(out_size):
                                    where.append(T.floormod(rest, e))
                                    rest = T.floordiv(rest, e)
                                where = tuple(reversed(where))
                            out[(n, row0 + r, *where)] = acc[r, p, 0]  # noqa: B023

                def pixel_tiles(rows, tag):
                    whole, ptail = divmod(pixels, pt)
                    if whole == 1:
                        tile(rows, 0, pt, tag)
                    elif whole:
                        for pc in T.serial(whole, name=f"q{tag}"):
                            tile(rows, pc * pt, pt, tag)
                    if ptail:
                        tile(rows, whole * pt, ptail, f"{tag}t")

                if not rtail:
                    pixel_tiles(rmost, "")
                elif rblocks == 1:
                    pixel_tiles(rtail, "r")
                else:
                    with T.If(task % rblocks < rblocks - 1):
                        pixel_tiles(rmost, "")
                    with T.Else():
                        pixel_tiles(rtail, "r")

    return conv_dot.with_attr("schedule", "conv_dot").with_attr("tile", f"{rmost}x{pt}")


__all__ = ["COL_MAX", "DOT_MAX_PIXELS", "MAX_GATHER", "conv_dot_tile", "dot_ok",
           "scheduled_conv_dot"]
