"""Depthwise convs on small maps (7x7, 14x14): vectorized over channels, not pixels.

Why: the per-plane schedule (``conv.plane_window``) vectorizes along an output row, which
on a 7-wide map is one 4-, one 2- and one 1-lane piece, and copies each plane into its
own padded scratch; a 5x5 depthwise conv over 1152 channels of a 7x7 map ran at 5
GFLOP/s (efficientnet_b0's last stage). Here a task takes ``L`` channels (one vector of
the target) of one image: it copies their planes into padded scratch laid out channel
last, ``xs[row, col, c]``, so every tap of every output pixel is one vector load and one
fma over the ``L`` channels, with the ``KH x KW`` weights as ``L``-lane vectors. Each
pixel's ``L`` sums are stored to the NCHW output at once (a store of stride ``OH * OW``:
one per channel), and that store is where FuseTIR puts the epilogue (bias, relu6, SiLU),
so it too runs on ``L``-lane vectors: stored along a 7-wide row, SiLU's ``exp`` ran on
vectors of 4, 2 and 1 lanes and cost more than the conv. Channels past ``C`` in the last block are computed on zeros and never
stored. Imports irkernel.tir, irkernel.target and passes.topi.vector only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.topi.vector import vector_bits

#: Largest output map (pixels) this schedule takes; larger maps keep the per-plane one.
MAX_PIXELS = 256
#: Widest output row whose pixels are unrolled.
MAX_UNROLL = 16


def small_depthwise_ok(x_shape: tuple[int, ...], out_hw: tuple[int, ...],
                       bits: int = 0) -> bool:
    """Whether a depthwise conv (already accepted by ``conv.depthwise_ok``) has a map small
    enough, and channels enough, to vectorize over channels."""
    lanes = (bits or vector_bits()) // 32
    return out_hw[0] * out_hw[1] <= MAX_PIXELS and x_shape[1] >= lanes


def depthwise_small(x_shape: tuple[int, int, int, int], w_shape: tuple[int, int, int, int],
                    strides: tuple[int, int], pad_begin: tuple[int, int],
                    dilation: tuple[int, int], out_hw: tuple[int, int],
                    bits: int = 0) -> PrimFunc:
    """The channel-vectorized depthwise conv ``(x0, x1: (C, 1, KH, KW), out)``."""
    return _depthwise_small(tuple(x_shape), tuple(w_shape), tuple(strides),
                            tuple(pad_begin), tuple(dilation), tuple(out_hw),
                            (bits or vector_bits()) // 32)


@lru_cache(maxsize=256)
def _depthwise_small(x_shape: tuple[int, int, int, int], w_shape: tuple[int, int, int, int],
                     strides: tuple[int, int], pad_begin: tuple[int, int],
                     dilation: tuple[int, int], out_hw: tuple[int, int],
                     lanes: int) -> PrimFunc:
    n_, c_, h_, w_ = x_shape
    kh_, kw_ = w_shape[2:]
    sh, sw = strides
    dh, dw = dilation
    oh_, ow_ = out_hw
    pt, pl = pad_begin
    # the padded rows and columns the taps reach (end padding included)
    hp = max(h_ + pt, (oh_ - 1) * sh + (kh_ - 1) * dh + 1)
    wp = max(w_ + pl, (ow_ - 1) * sw + (kw_ - 1) * dw + 1)
    blocks = -(-c_ // lanes)
    dtype = "float32"

    @T.prim_func(private=True)
    def depthwise(x0: T.Buffer(x_shape, dtype), x1: T.Buffer(w_shape, dtype),
                  out: T.Buffer((n_, c_, oh_, ow_), dtype)):
        for t in T.parallel(n_ * blocks):
            n = t // blocks
            c0 = t % blocks * lanes
            xs = T.alloc_buffer((hp, wp, lanes), dtype)
            ws = T.alloc_buffer((kh_ * kw_, lanes), dtype)
            for r in T.serial(hp):
                for q in T.serial(wp):
                    for ci in T.vectorized(lanes):
                        xs[r, q, ci] = 0.0
            for ci in T.serial(lanes):
                with T.If(c0 + ci < c_):
                    for r in T.serial(h_):
                        for q in T.serial(w_):
                            xs[r + pt, q + pl, ci] = x0[n, c0 + ci, r, q]
                    for tap in T.serial(kh_ * kw_):
                        ws[tap, ci] = x1[c0 + ci, 0, tap // kw_, tap % kw_]
                with T.Else():
                    for tap in T.serial(kh_ * kw_):
                        ws[tap, ci] = 0.0
            def taps(oh, ow, ci):
                acc = None
                for kh in range(kh_):
                    for kw in range(kw_):
                        xv = xs[oh * sh + kh * dh, ow * sw + kw * dw, ci]
                        wv = ws[kh * kw_ + kw, ci]
                        acc = wv * xv if acc is None else T.fma(wv, xv, acc)
                return acc

            # a row's pixels unrolled: their fma chains are independent, so the core
            # overlaps them (one chain of KH * KW dependent fmas per pixel otherwise)
            for oh in T.serial(oh_):
                for ow in T.unroll(ow_) if ow_ <= MAX_UNROLL else T.serial(ow_):
                    if c_ % lanes == 0:
                        for ci in T.vectorized(lanes):
                            out[n, c0 + ci, oh, ow] = taps(oh, ow, ci)
                    else:  # the last block's channels past C are never stored
                        with T.If(c0 + lanes <= c_):
                            for ci in T.vectorized(lanes):
                                out[n, c0 + ci, oh, ow] = taps(oh, ow, ci)
                        with T.Else():
                            for ci in T.serial(c_ % lanes):
                                out[n, c0 + ci, oh, ow] = taps(oh, ow, ci)

    return depthwise.with_attr("schedule", "depthwise_channels")


__all__ = ["MAX_PIXELS", "MAX_UNROLL", "depthwise_small", "small_depthwise_ok"]
