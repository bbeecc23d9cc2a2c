"""The integer 2-D conv: 8-bit NCHW activations, constant int8 weights, int32 accumulators.

``out[n, o, p] = odt(sum_{c, kh, kw} (x[n, c, ih, iw] - zx) * W[o, c, kh, kw])`` (groups
1, any strides, padding and dilation; padding is ``zx``: the centred value 0), computed
as in ``passes/topi/int_matmul.py`` (its docstring has the algebra): uint8 bytes ``xu``
(an int8 ``x`` with its sign bit flipped, ``zu = zx + 128``) times int8 weights with the
TIR ``dot4_u8s8``, plus ``corr[o] = -zu * sum W[o]``. Every weight must fit int8 (the
usual signed weights; a column shift would need a window sum per output pixel).

**An implicit GEMM over a packed copy of the input.** The kernel first copies ``x`` into
a scratch ``xp[n, Hp, Wp, C4]`` of bytes: channels innermost, rounded up to a multiple
of four, the padding materialized as ``zu`` (so the inner loops have no bounds
checks, and padded taps contribute ``(zu - zu) * w = 0``). Then ``K`` is ordered
``(kh, kw, c)``: four consecutive ``k`` are four channels of one input pixel, one
4-byte load broadcast against the weights packed at build time as
``[O / L, KH * KW * C4 / 4, 4L]`` (:func:`pack_conv_weights`: the layout of
``int_matmul.pack_weights`` with ``K`` in that order and the channel padding zero). The
copy costs ``Hp * Wp * C4`` byte moves per image, against ``OH * OW * O * K``
multiply-adds.

**Tiles** of ``mr`` output pixels of one row (up to 4) by ``nr`` blocks of ``L`` output
channels (16 accumulators with 32 registers, 8 with 16); output rows run in parallel.
The accumulator vectors are stored whole to a scratch row, then stored to ``out``
channel by channel, each a vector over the tile's pixels (contiguous in NCHW) read
with a stride from that row, as plain ``out[n, o, oh, ow] = ...`` stores that FuseOps'
epilogues (bias, requantization) fold into. (Measured on three resnet18 convs:
unrolling the channel loop to read the registers directly ran 10-16% faster but,
with the epilogue copied into every store, took a QDQ resnet18's build from 16 s to
45 s; a lane-by-lane copy runs as fast as this one and compiles 3x slower.)
Imports irkernel.tir, irkernel.target and NumPy only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import itertools

import numpy as np

from irkernel.target import CPUTarget
from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.topi.vector import vector_pieces

#: Most output pixels per tile.
MAX_TILE_PIXELS = 4


def pack_conv_weights(w: np.ndarray, lanes: int) -> np.ndarray:
    """Integer weights ``[O, C, KH, KW]`` (each fitting int8) as int8
    ``[ceil(O / L), KH * KW * C4 / 4, 4L]`` (module docstring), zero padded."""
    o, c, kh, kw = w.shape
    c4 = -(-c // 4) * 4
    blocks = -(-o // lanes)
    s = np.zeros((blocks * lanes, kh, kw, c4), np.int8)
    s[:o, :, :, :c] = w.transpose(0, 2, 3, 1).astype(np.int8)
    k4 = kh * kw * c4 // 4
    # [b, L, k4, 4] -> [b, k4, L, 4]
    return np.ascontiguousarray(s.reshape(blocks, lanes, k4, 4).transpose(0, 2, 1, 3)
                                .reshape(blocks, k4, 4 * lanes))


def int_conv2d(x_shape: tuple[int, ...], x_dtype: str, w_shape: tuple[int, ...],
               out_shape: tuple[int, ...], strides: tuple[int, ...],
               padding: tuple[int, ...], dilation: tuple[int, ...], zu: int, odt: str,
               lanes: int, target: CPUTarget) -> PrimFunc:
    """The PrimFunc ``(x, packed, corr) -> out`` of the conv (module docstring):
    ``padding`` is ``(top, left, bottom, right)``, ``zu`` the uint8 padding byte."""
    if x_dtype not in ("uint8", "int8"):
        raise TypeError(f"int_conv2d: activations must be uint8 or int8, got {x_dtype}")
    if not 0 <= zu <= 255:
        raise ValueError(f"int_conv2d: the padding byte {zu} is not a uint8")
    n, c, h, w = x_shape
    o, _, kh, kw = w_shape
    _, _, oh, ow = out_shape
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    hp, wp = h + pt + pb, w + pl + pr
    c4 = -(-c // 4) * 4
    cg = c4 // 4
    blocks = -(-o // lanes)
    packed_shape = (blocks, kh * kw * cg, 4 * lanes)
    budget = 16 if target.vector_registers >= 32 else 8
    mr = min(MAX_TILE_PIXELS, ow)
    full_blocks, short = divmod(o, lanes)
    nr = max(1, min(full_blocks, budget // mr))
    col_steps, col_rest = divmod(full_blocks, nr)
    px_tiles, px_rest = divmod(ow, mr)
    flip = x_dtype == "int8"
    tags = itertools.count()

    def byte(v):
        return T.cast("uint8", v) + 128 if flip else v

    def pack(x0, xp):
        for row in T.parallel(n * hp):
            b, ih = row // hp, row % hp
            for iw in T.serial(wp):
                for ci in T.serial(c4):
                    xp[b, ih, iw, ci] = T.cast("uint8", T.int32(zu))
            with T.If((ih >= pt) & (ih < pt + h)):
                for ci in T.serial(c):
                    for iw in T.serial(w):
                        xp[b, ih, pl + iw, ci] = byte(x0[b, ci, ih - pt, iw])

    def tile(xp, x1, x2, out, b, y, x0_, m, ob0, count, last):
        """Pixels ``x0_ .. x0_ + m`` of output row ``y`` by channel blocks ``ob0 ..
        ob0 + count`` (``last``: the final block holds ``short`` channels)."""
        tag = next(tags)
        acc = T.alloc_buffer((m, count, lanes), "int32", name=f"cacc{tag}")
        for i in T.unroll(m):
            for q in T.unroll(count):
                acc[i, q, T.ramp(0, 1, lanes)] = T.broadcast(T.int32(0), lanes)
        for ky in T.serial(kh):
            for kx in T.serial(kw):
                for g in T.serial(cg):
                    kq = (ky * kw + kx) * cg + g
                    for i in T.unroll(m):
                        a = xp[b, y * sh + ky * dh, (x0_ + i) * sw + kx * dw,
                               T.ramp(g * 4, 1, 4)]
                        for q in T.unroll(count):
                            at = (i, q, T.ramp(0, 1, lanes))
                            acc[at] = T.dot4_u8s8(acc[at], a,
                                                  x1[ob0 + q, kq, T.ramp(0, 1, 4 * lanes)])
        row = T.alloc_buffer((m, count * lanes), "int32", name=f"crow{tag}")
        for i in T.unroll(m):
            for q in T.unroll(count):
                row[i, T.ramp(q * lanes, 1, lanes)] = acc[i, q, T.ramp(0, 1, lanes)]
        width = short if last else count * lanes
        for ol in T.serial(width):
            oc = ob0 * lanes + ol
            for p0, size in vector_pieces(m, MAX_TILE_PIXELS):
                for i in T.vectorized(size):
                    out[b, oc, y, x0_ + p0 + i] = T.cast(odt, row[p0 + i, ol] + x2[oc])

    def pixels(xp, x1, x2, out, b, y, x0_, m):
        if col_steps:
            for js in T.serial(col_steps) if col_steps > 1 else (0,):
                tile(xp, x1, x2, out, b, y, x0_, m, js * nr, nr, False)
        if col_rest:
            tile(xp, x1, x2, out, b, y, x0_, m, col_steps * nr, col_rest, False)
        if short:
            tile(xp, x1, x2, out, b, y, x0_, m, full_blocks, 1, True)

    @T.prim_func(private=True)
    def int_conv(x0: T.Buffer(x_shape, x_dtype), x1: T.Buffer(packed_shape, "int8"),
                 x2: T.Buffer((o,), "int32"), out: T.Buffer(out_shape, odt)):
        xp = T.alloc_buffer((n, hp, wp, c4), "uint8", name="xpack")
        pack(x0, xp)
        for r in T.parallel(n * oh):
            b, y = r // oh, r % oh
            if px_tiles:
                for t in T.serial(px_tiles) if px_tiles > 1 else (0,):
                    pixels(xp, x1, x2, out, b, y, t * mr, mr)
            if px_rest:
                pixels(xp, x1, x2, out, b, y, px_tiles * mr, px_rest)
    return int_conv.with_attr("schedule", "int_conv2d")


__all__ = ["MAX_TILE_PIXELS", "int_conv2d", "pack_conv_weights"]
