"""A scheduled 2-D float32 conv (groups 1, stride 1): implicit GEMM over the padded image.

Why a schedule: the canonical te reduction (``nn.conv``) pads with a select in the
innermost loop and reduces channels outermost; it runs 15-80x slower than onnxruntime.
A conv is a matmul ``out[o, p] = sum_k W[o, k] * col[k, p]`` with ``k = (c, kh, kw)``
and ``p`` the output pixel, so the matmul schedule's ideas apply (``matmul.py``): an
``MR x NR`` register tile of exact ``fma`` over output channels x pixels, stored once,
parallel over pixel panels.

The im2col matrix is never built. With stride 1, output pixel ``(oh, ow)`` reads tap
``(kh, kw)`` of channel ``c`` at ``xpad[c, (oh + kh*dh) * Wp + ow + kw*dw]`` of the
zero-padded image (row length ``Wp``). Number the pixels on the *wide grid* of the
padded rows, ``q = oh * Wp + ow`` (``ow < Wp``; only ``ow < OW`` are real outputs):
then the tap is ``xpad[c, q + kh*dh*Wp + kw*dw]``, so every row of ``col`` is a
contiguous slice of the padded image at a constant offset, and an ``NR``-wide column
tile of ``col`` is one unit-stride vector load, with no packing and no index math in
the inner loop. The price is ``Wp - OW`` wasted columns per output row (2 of 58 at
56x56 with pad 1; 2 of 9 at 7x7).

Per batch image the kernel

1. copies the image into ``xpad`` (zeros around it, and slack after it so that the
   last tile's loads stay inside the allocation): padding is paid once, at copy time,
   never by a select in the inner loop;
2. runs the GEMM, parallel over (pixel tile, output-channel group) tasks, into the
   wide scratch ``wide[O, tiles * NR]`` (one store of each register tile);
3. copies the real pixels out, ``out[n, o, oh, ow] = wide[o, oh * Wp + ow]``, parallel
   over output channels. This is the only store to ``out`` (the GEMM never reads it
   back), so FuseTIR folds an elementwise epilogue (bias, relu, a residual add) into
   it (``_fuse_epilogue.fold_into_stores``): the epilogue costs no extra pass.

The extra traffic of steps 1 and 3 is O(input + output), small against the
``O * C * KH * KW`` multiply-adds per pixel. Strided, grouped/depthwise, non-2-D,
float64 and tiny convs use the canonical template (LegalizeOps decides, ``conv_ok``).
Imports irkernel.tir only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc

#: Below this many multiply-adds the canonical template is used (the copies of this
#: schedule would dominate). As for matmul: 16 x 16 x 16.
MIN_WORK = 16 * 16 * 16

#: The register tile: ``MR`` output channels x ``NR`` wide-grid pixels (float32 lanes).
NR = 16
#: Parallel tasks to aim for (tiles x channel groups), enough to balance two-to-eight
#: threads when a small image has few pixel tiles.
MIN_TASKS = 16


def _mr(o: int) -> int:
    return next(c for c in (6, 4, 3, 2, 1) if o % c == 0)


def conv_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
            dtype: str) -> bool:
    """Whether the scheduled conv covers this signature (any stride, padding, dilation)."""
    if dtype != "float32" or groups != 1 or len(x_shape) != 4 or len(w_shape) != 4:
        return False
    n, c, h, w = x_shape
    o, _, kh, kw = w_shape
    return n * o * c * kh * kw * h * w >= MIN_WORK


@lru_cache(maxsize=256)
def scheduled_conv2d(x_shape: tuple[int, int, int, int], w_shape: tuple[int, int, int, int],
                     strides: tuple[int, int], pad_begin: tuple[int, int],
                     pad_end: tuple[int, int], dilation: tuple[int, int],
                     out_hw: tuple[int, int]) -> PrimFunc:
    """The PrimFunc ``(x0: x_shape, x1: w_shape, out: (N, O, OH, OW))`` of a float32 conv
    of groups 1 (see the module docstring)."""
    n_, c_, h_, w_ = x_shape
    o_, _, kh_, kw_ = w_shape
    sh, sw = strides
    (pt, pl), (pb, pr) = pad_begin, pad_end
    dh, dw = dilation
    oh_, ow_ = out_hw
    hp, wp = h_ + pt + pb, w_ + pl + pr
    plane = hp * wp
    packed = (sh, sw) != (1, 1)
    # the pixel grid: dense (oh * OW + ow) when packed, else the wide grid (oh * Wp + ow)
    pitch = ow_ if packed else wp
    last = (oh_ - 1) * pitch + ow_  # grid columns up to the last real pixel
    tiles = -(-last // NR)
    width = tiles * NR  # row length of the wide scratch
    reach = (kh_ - 1) * dh * wp + (kw_ - 1) * dw  # largest tap offset
    xlen = c_ * plane if packed else max((c_ - 1) * plane + width + reach, c_ * plane)
    k_ = c_ * kh_ * kw_
    mr = _mr(o_)
    rows = o_ // mr
    groups = 1
    while tiles * groups < MIN_TASKS and rows % (2 * groups) == 0:
        groups *= 2
    rows_per = rows // groups
    tasks = tiles * groups
    dtype = "float32"

    @T.prim_func(private=True)
    def conv(x0: T.Buffer((n_, c_, h_, w_), dtype),  # noqa: C901
             x1: T.Buffer((o_, c_, kh_, kw_), dtype),
             out: T.Buffer((n_, o_, oh_, ow_), dtype)):
        xpad = T.alloc_buffer((xlen,), dtype)
        wide = T.alloc_buffer((o_ * width,), dtype)
        for n in T.serial(n_):
            for c in T.parallel(c_):
                for q in T.serial(plane):
                    xpad[c * plane + q] = 0.0
                for hh in T.serial(h_):
                    for ww in T.serial(w_):
                        xpad[c * plane + (hh + pt) * wp + ww + pl] = x0[n, c, hh, ww]
            for q in T.serial(xlen - c_ * plane):
                xpad[c_ * plane + q] = 0.0
            for t in T.parallel(tasks):
                if packed:
                    # the tile's columns of im2col: gathered once, read by every row block
                    base = T.alloc_buffer((NR,), "int64")
                    panel = T.alloc_buffer((k_ * NR,), dtype)
                    for ji in T.vectorized(NR):
                        base[ji] = (T.floordiv(T.min(t // groups * NR + ji, last - 1), ow_)
                                    * (sh * wp)
                                    + T.floormod(T.min(t // groups * NR + ji, last - 1), ow_)
                                    * sw)
                    for c in T.serial(c_):
                        for kh in T.serial(kh_):
                            for kw in T.serial(kw_):
                                for ji in T.vectorized(NR):
                                    panel[((c * kh_ + kh) * kw_ + kw) * NR + ji] = xpad[
                                        c * plane + kh * (dh * wp) + kw * dw + base[ji]]
                for io in T.serial(rows_per):
                    acc = T.alloc_buffer((mr, NR), dtype)
                    for ii in T.unroll(mr):
                        for ji in T.vectorized(NR):
                            acc[ii, ji] = 0.0
                    for c in T.serial(c_):
                        for kh in T.serial(kh_):
                            for kw in T.unroll(kw_):
                                for ii in T.unroll(mr):
                                    for ji in T.vectorized(NR):
                                        col = (panel[((c * kh_ + kh) * kw_ + kw) * NR + ji]
                                               if packed else
                                               xpad[c * plane + t // groups * NR + ji
                                                    + kh * (dh * wp) + kw * dw])
                                        acc[ii, ji] = T.fma(
                                            x1[(t % groups * rows_per + io) * mr + ii, c, kh, kw],
                                            col, acc[ii, ji])
                    for ii in T.unroll(mr):
                        for ji in T.vectorized(NR):
                            wide[((t % groups * rows_per + io) * mr + ii) * width
                                 + t // groups * NR + ji] = acc[ii, ji]
            for o in T.parallel(o_):
                for oh in T.serial(oh_):
                    for ow in T.serial(ow_):
                        out[n, o, oh, ow] = wide[o * width + oh * pitch + ow]

    return conv


__all__ = ["MIN_WORK", "conv_ok", "scheduled_conv2d"]
