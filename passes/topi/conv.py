"""Scheduled 2-D float32 convs and max pools: implicit GEMM over the padded image, and a
per-plane window schedule for depthwise convs and max pools.

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

**Strides** keep that property through a phase split: the padded image is stored as
``sh * sw`` phase planes, ``xpad[c, r % sh, col % sw, r // sh, col // sw]`` (each
``PH x PW``). Tap ``(kh, kw)`` of pixel ``(oh, ow)`` is row ``oh*sh + kh*dh``, column
``ow*sw + kw*dw``: phase ``(kh*dh % sh, kw*dw % sw)``, at ``(oh + kh*dh // sh,
ow + kw*dw // sw)`` inside it, so on the wide grid ``q = oh * PW + ow`` of the phase
planes it is again a constant offset plus ``q``. The stride costs a scatter at copy
time (O(input)), never a gather in the inner loop. (A first version packed a gathered
im2col panel per tile: 17-25 GFLOP/s against 28-50 for stride 1 on this machine.)

Per batch image the conv kernel

1. copies the image into ``xpad`` (zeros around it, and slack after it so that the
   last tile's loads stay inside the allocation): padding is paid once, at copy time;
2. runs the GEMM, parallel over (pixel tile, output-channel group) tasks, into the
   wide scratch ``wide[O, tiles * NR]`` (one store of each register tile);
3. copies the real pixels out, ``out[n, o, oh, ow] = wide[o, oh * PW + ow]``, parallel
   over output channels. This is the only store to ``out`` (the GEMM never reads it
   back), so FuseTIR folds an elementwise epilogue (bias, relu, a residual add) into
   it (``_fuse_epilogue.fold_into_stores``): the epilogue costs no extra pass.

The extra traffic of steps 1 and 3 is O(input + output), small against the
``O * C * KH * KW`` multiply-adds per pixel. Depthwise convs (groups = C = O, one
filter per channel) and max pools have their own memory-bound schedule
(``plane_window``), one-pixel 1x1 convs are dot products (``scheduled_gemv``); other
grouped convs, non-2-D convs, float64 and tiny convs use the canonical template (``nn``
decides with ``gemv_ok`` / ``conv_ok`` / ``depthwise_ok`` / ``max_pool_ok``). Imports
irkernel.tir and FuseTIR's parallel work threshold.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.tir.parallelize import PARALLEL_MIN_WORK

#: Below this many multiply-adds the canonical template is used (the copies of this
#: schedule would dominate). As for matmul: 16 x 16 x 16.
MIN_WORK = 16 * 16 * 16

#: The register tile: ``MR`` output channels x ``NR`` wide-grid pixels (float32 lanes).
#: Measured on this AVX2 machine (3x3, 64 -> 64, 56x56, one thread): 4 x 16 and 2 x 32
#: alike (~50 GFLOP/s), 8 x 8 ~10% slower, 4 x 24 6x slower (odd vector width).
NR = 16
#: Parallel tasks to aim for (tiles x channel groups), enough to balance two-to-eight
#: threads when a small image has few pixel tiles.
MIN_TASKS = 16
#: Vector width of the depthwise schedule's output-row chunks (two AVX2 vectors).
DW_LANES = 16


def _over(work: int):
    """``T.parallel`` for a loop doing at least ``PARALLEL_MIN_WORK`` innermost iterations
    (FuseTIR's rule), else ``T.serial``: a thread-pool launch costs tens of microseconds,
    more than a small loop's whole run."""
    return T.parallel if work >= PARALLEL_MIN_WORK else T.serial


def _mr(o: int) -> int:
    return next(c for c in (6, 4, 3, 2, 1) if o % c == 0)


@dataclass(frozen=True)
class _Phases:
    """The phase-split padded layout of one image channel (see the module docstring)."""

    h: int
    w: int
    strides: tuple[int, int]
    pad_begin: tuple[int, int]
    pad_end: tuple[int, int]

    @property
    def ph(self) -> int:
        return -(-(self.h + self.pad_begin[0] + self.pad_end[0]) // self.strides[0])

    @property
    def pw(self) -> int:
        return -(-(self.w + self.pad_begin[1] + self.pad_end[1]) // self.strides[1])

    @property
    def plane(self) -> int:
        return self.strides[0] * self.strides[1] * self.ph * self.pw

    def offset(self, r, col):
        """Where padded position ``(r, col)`` of a tap sits in a channel's phase planes."""
        sh, sw = self.strides
        if isinstance(r, int) and isinstance(col, int):
            return ((r % sh) * sw + col % sw) * self.ph * self.pw + (r // sh) * self.pw \
                + col // sw
        return ((T.floormod(r, sh) * sw + T.floormod(col, sw)) * (self.ph * self.pw)
                + T.floordiv(r, sh) * self.pw + T.floordiv(col, sw))

    def phases(self, kernel: tuple[int, int], dilation: tuple[int, int]) -> list[tuple[int, int]]:
        """The phase planes the taps read (a 1x1 kernel of stride 2 reads one of four)."""
        sh, sw = self.strides
        return sorted({((kh * dilation[0]) % sh, (kw * dilation[1]) % sw)
                       for kh in range(kernel[0]) for kw in range(kernel[1])})

    def copy(self, xpad, x0, n, c, base, phases, fill=0.0) -> None:
        """Emit: write phase planes ``phases`` of image ``(n, c)`` at ``xpad[base...]``,
        row by row, ``fill`` where the position is padding. The image occupies a
        rectangle of each phase plane known at trace time, so the loops are a fill
        above, below and beside it and a copy inside it: no select, contiguous stores.
        Planes no tap reads stay unwritten: only discarded wide-grid columns read them."""
        sh, sw = self.strides
        pt, pl = self.pad_begin
        for pr, pc in phases:
            at = base + (pr * sw + pc) * (self.ph * self.pw)
            # phase row i is image row i*sh + pr - pt: inside for i in [i0, i1)
            i0 = min(max(-(-(pt - pr) // sh), 0), self.ph)
            i1 = min(max(-(-(self.h + pt - pr) // sh), i0), self.ph)
            j0 = min(max(-(-(pl - pc) // sw), 0), self.pw)
            j1 = min(max(-(-(self.w + pl - pc) // sw), j0), self.pw)
            for lo, hi in ((0, i0), (i1, self.ph)):
                if hi > lo:
                    for q in T.serial((hi - lo) * self.pw):
                        xpad[at + lo * self.pw + q] = T.float32(fill)
            if i1 > i0:
                for i in T.serial(i0, i1):
                    for lo, hi in ((0, j0), (j1, self.pw)):
                        if hi > lo:
                            for j in T.serial(lo, hi):
                                xpad[at + i * self.pw + j] = T.float32(fill)
                    if j1 > j0:
                        for j in T.serial(j0, j1):
                            xpad[at + i * self.pw + j] = x0[n, c, i * sh + (pr - pt),
                                                            j * sw + (pc - pl)]


def conv_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
            dtype: str) -> bool:
    """Whether the scheduled conv covers this signature (any stride, padding, dilation)."""
    if dtype != "float32" or groups != 1 or len(x_shape) != 4 or len(w_shape) != 4:
        return False
    n, c, h, w = x_shape
    o, _, kh, kw = w_shape
    return n * o * c * kh * kw * h * w >= MIN_WORK


@lru_cache(maxsize=256)
def scheduled_conv2d(  # noqa: C901 (trace-time specialization)
        x_shape: tuple[int, int, int, int], w_shape: tuple[int, int, int, int],
        strides: tuple[int, int], pad_begin: tuple[int, int], pad_end: tuple[int, int],
        dilation: tuple[int, int], out_hw: tuple[int, int]) -> PrimFunc:
    """The PrimFunc ``(x0: x_shape, x1: w_shape, out: (N, O, OH, OW))`` of a float32 conv
    of groups 1 (see the module docstring)."""
    n_, c_, h_, w_ = x_shape
    o_, _, kh_, kw_ = w_shape
    dh, dw = dilation
    oh_, ow_ = out_hw
    ph = _Phases(h_, w_, strides, pad_begin, pad_end)
    plane, pw = ph.plane, ph.pw
    used = ph.phases((kh_, kw_), dilation)
    last = (oh_ - 1) * pw + ow_  # wide-grid columns up to the last real pixel
    tiles = -(-last // NR)
    width = tiles * NR  # row length of the wide scratch
    reach = max(ph.offset(kh * dh, kw * dw) for kh in range(kh_) for kw in range(kw_))
    xlen = max((c_ - 1) * plane + reach + width, c_ * plane)
    mr = _mr(o_)
    rows = o_ // mr
    groups = 1
    while tiles * groups < MIN_TASKS and rows % (2 * groups) == 0:
        groups *= 2
    rows_per = rows // groups
    dtype = "float32"

    # Direct: the wide grid is the output's own pixel order (PW == OW) and has no tail
    # tile, so the tiles store into ``out`` at ``(q // OW, q % OW)`` (FlattenBuffer merges
    # the pair back into ``q``: a vector store) with no wide scratch and no copy-out.
    direct = pw == ow_ and last % NR == 0
    # ... and with no padding and stride 1 the padded copy is the image itself.
    in_place = direct and strides == (1, 1) and not any(pad_begin) and not any(pad_end)

    @T.prim_func(private=True)
    def conv(x0: T.Buffer((n_, c_, h_, w_), dtype),  # noqa: C901
             x1: T.Buffer((o_, c_, kh_, kw_), dtype),
             out: T.Buffer((n_, o_, oh_, ow_), dtype)):
        if not in_place:
            xpad = T.alloc_buffer((xlen,), dtype)
        if not direct:
            wide = T.alloc_buffer((o_ * width,), dtype)

        def tap(n, c, kh, kw, q):
            if in_place:
                flat = kh * (dh * w_) + kw * dw + q
                return x0[n, c, T.floordiv(flat, w_), T.floormod(flat, w_)]
            return xpad[c * plane + ph.offset(kh * dh, kw * dw) + q]

        for n in T.serial(n_):
            if not in_place:
                for c in _over(c_ * plane)(c_):
                    ph.copy(xpad, x0, n, c, c * plane, used)
                for q in T.serial(xlen - c_ * plane):
                    xpad[c_ * plane + q] = 0.0
            for t in _over(o_ * c_ * kh_ * kw_ * width)(tiles * groups):
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
                                        acc[ii, ji] = T.fma(
                                            x1[(t % groups * rows_per + io) * mr + ii, c, kh, kw],
                                            tap(n, c, kh, kw, t // groups * NR + ji),
                                            acc[ii, ji])
                    for ii in T.unroll(mr):
                        for ji in T.vectorized(NR):
                            if direct:
                                out[n, (t % groups * rows_per + io) * mr + ii,
                                    T.floordiv(t // groups * NR + ji, ow_),
                                    T.floormod(t // groups * NR + ji, ow_)] = acc[ii, ji]
                            else:
                                wide[((t % groups * rows_per + io) * mr + ii) * width
                                     + t // groups * NR + ji] = acc[ii, ji]
            if not direct:
                for o in _over(o_ * oh_ * ow_)(o_):
                    for oh in T.serial(oh_):
                        for ow in T.serial(ow_):
                            out[n, o, oh, ow] = wide[o * width + oh * pw + ow]

    return conv


#: Lanes of the channel-vectorized dot products of ``scheduled_gemv``.
GEMV_LANES = 16
#: Most pixels a 1x1 conv may have to run as dot products (the pixel-tiled schedule fills
#: ``P`` of its 16 lanes: at 2x2 it ran at 6 GFLOP/s).
GEMV_MAX_PIXELS = 8


def gemv_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int, dtype: str,
            out_hw: tuple[int, ...], pads: tuple[int, ...]) -> bool:
    """Whether a conv is a few matrix-vector products: float32, groups 1, a 1x1 kernel
    without padding mapping each of at most ``GEMV_MAX_PIXELS`` input pixels to the same
    output pixel (squeeze-excite convs on a pooled image; pointwise convs at the end of a
    network on a 2x2 image). The pixel-tiled schedule would waste most of its lanes."""
    return (dtype == "float32" and groups == 1 and len(x_shape) == 4 and len(w_shape) == 4
            and w_shape[2:] == (1, 1) and tuple(out_hw) == tuple(x_shape[2:])
            and math.prod(out_hw) <= GEMV_MAX_PIXELS and not any(pads))


@lru_cache(maxsize=256)
def scheduled_gemv(x_shape: tuple[int, int, int, int],  # noqa: C901 (trace-time)
                   w_shape: tuple[int, int, int, int]) -> PrimFunc:
    """``out[n, o, p] = sum_c W[o, c] * x[n, c, p]`` for the ``P`` pixels of a 1x1 conv
    (see ``gemv_ok``): per output channel, ``P`` dot products along the weights'
    contiguous row, ``GEMV_LANES`` channels at a time with exact fma into ``P`` vector
    accumulators (each weight vector loaded once for all pixels), then the lanes and the
    channel tail summed in scalar; one store per output (FuseTIR's epilogue goes there).
    With more than one pixel the image is first copied transposed (``xt[p, c]``, a few
    KiB) so the pixel's channels are contiguous too. Parallel over output channels when
    the work is large enough."""
    n_, c_, h_, w_ = x_shape
    o_ = w_shape[0]
    p_ = h_ * w_
    full, tail = divmod(c_, GEMV_LANES)
    dtype = "float32"

    @T.prim_func(private=True)
    def gemv(  # noqa: C901 (trace-time specialization)
            x0: T.Buffer((n_, c_, h_, w_), dtype), x1: T.Buffer((o_, c_, 1, 1), dtype),
            out: T.Buffer((n_, o_, h_, w_), dtype)):
        for n in T.serial(n_):
            if p_ > 1:
                xt = T.alloc_buffer((p_ * c_,), dtype)
                for c in T.serial(c_):
                    for p in T.unroll(p_):
                        xt[p * c_ + c] = x0[n, c, p // w_, p % w_]

            def pixel(p, c):
                return x0[n, c, 0, 0] if p_ == 1 else xt[p * c_ + c]  # noqa: B023

            for o in _over(o_ * c_ * p_)(o_):
                lanes = T.alloc_buffer((p_, GEMV_LANES), dtype)
                total = T.alloc_buffer((p_,), dtype)
                for p in T.unroll(p_):
                    for ji in T.vectorized(GEMV_LANES):
                        lanes[p, ji] = 0.0
                for cc in T.serial(full):
                    for p in T.unroll(p_):
                        for ji in T.vectorized(GEMV_LANES):
                            lanes[p, ji] = T.fma(x1[o, cc * GEMV_LANES + ji, 0, 0],
                                                 pixel(p, cc * GEMV_LANES + ji), lanes[p, ji])
                for p in T.unroll(p_):
                    total[p] = 0.0
                    for ji in T.serial(GEMV_LANES):
                        total[p] = total[p] + lanes[p, ji]
                    for ci in T.serial(tail):
                        total[p] = T.fma(x1[o, full * GEMV_LANES + ci, 0, 0],
                                         pixel(p, full * GEMV_LANES + ci), total[p])
                    out[n, o, p // w_, p % w_] = total[p]

    return gemv


def depthwise_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
                 dtype: str) -> bool:
    """Whether the depthwise schedule covers this signature: one filter per channel."""
    return (dtype == "float32" and len(x_shape) == 4 and len(w_shape) == 4
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
                          dilation: tuple[int, int], out_hw: tuple[int, int]) -> PrimFunc:
    """A depthwise conv: ``plane_window`` with the taps weighted and summed."""
    return plane_window("conv", x_shape, w_shape[2:], strides, pad_begin, pad_end, dilation,
                        out_hw)


@lru_cache(maxsize=256)
def plane_window(  # noqa: C901 (trace-time specialization)
        kind: str, x_shape: tuple[int, int, int, int], kernel: tuple[int, int],
        strides: tuple[int, int], pad_begin: tuple[int, int], pad_end: tuple[int, int],
        dilation: tuple[int, int], out_hw: tuple[int, int]) -> PrimFunc:
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
    ph = _Phases(h_, w_, strides, pad_begin, pad_end)  # type: ignore[arg-type]
    used = ph.phases(kernel, dilation)
    full, tail = divmod(ow_, DW_LANES)
    dtype = "float32"
    fill = 0.0 if kind == "conv" else float("-inf")
    w_buf = T.Buffer((c_, 1, kh_, kw_), dtype)

    def body(x0, x1, out):
        for t in _over(n_ * c_ * oh_ * ow_ * kh_ * kw_)(n_ * c_):
            xpad = T.alloc_buffer((ph.plane,), dtype)
            ph.copy(xpad, x0, t // c_, t % c_, 0, used, fill)

            def taps(oh, ow):
                acc = T.float32(fill) if kind == "max" else None
                for kh in range(kh_):
                    for kw in range(kw_):
                        xv = xpad[ph.offset(kh * dh, kw * dw) + oh * ph.pw + ow]  # noqa: B023
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
                if tail:
                    for ji in T.vectorized(tail):
                        out[t // c_, t % c_, oh, full * DW_LANES + ji] = taps(
                            oh, full * DW_LANES + ji)

    if kind == "max":
        @T.prim_func(private=True)
        def max_pool(x0: T.Buffer((n_, c_, h_, w_), dtype),
                     out: T.Buffer((n_, c_, oh_, ow_), dtype)):
            body(x0, None, out)

        return max_pool

    @T.prim_func(private=True)
    def depthwise(x0: T.Buffer((n_, c_, h_, w_), dtype), x1: w_buf,
                  out: T.Buffer((n_, c_, oh_, ow_), dtype)):
        body(x0, x1, out)

    return depthwise


__all__ = [
    "GEMV_LANES",
    "GEMV_MAX_PIXELS",
    "MAX_TAPS",
    "MIN_WORK",
    "conv_ok",
    "depthwise_ok",
    "gemv_ok",
    "max_pool_ok",
    "plane_window",
    "scheduled_conv2d",
    "scheduled_depthwise2d",
    "scheduled_gemv",
]
