"""Depthwise convs with many taps (5x5, 7x7) on rows of about a vector or more: row blocks.

Why: the flattened schedule (``depthwise_flat``) loads one input vector per multiply-add
(its vectors start anywhere in a row, so no two of them share a load), and with 25 or 49
weights it also spills them; on this CPU a load per fma capped convnext's 7x7 layers at
about 60% of the fma peak, 1.5-2x onnxruntime's time. Here vectors start at fixed
columns of an output row (``0, L, 2L, ...``, the last one moved back to end with the row:
a few lanes computed twice; a row of three quarters of a vector is one vector whose last
lanes run into the next row, overwritten by that row's vector, stored after it) and
``R`` rows are computed together, so the input row a tap
reads for output row ``r`` is the one the next tap row reads for row ``r + 1``: LLVM
loads it once (``R + KH - 1`` loads for ``R * KH`` fmas).

Each plane is copied into its phase planes (``depthwise_flat.phase_copy``: padding
written once), then computed in bands of rows, one pass per column group (the taps of one
``ex``, ``KH`` weights in registers, masked as in ``depthwise_flat``) adding into a
band accumulator. The passes ping-pong between two accumulators, so a lane computed
twice writes the same value twice; the last pass's band is stored to the output in full
vectors along the flattened band (the band's rows times ``OW`` is a whole number of
vectors), where FuseTIR puts the epilogue. Parallel over (image, channel) planes.
Imports irkernel.tir and passes.topi.depthwise_flat only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.topi.depthwise_flat import Taps, deinterleave_ok, mask_table, phase_copy, tap_sum

#: Output rows computed together (their shared input rows loaded once).
ROW_BLOCK = 8
#: Narrowest output rows this schedule takes.
MIN_WIDTH = 16
#: Parallel work (multiply-adds) below which the planes run on one thread.
PARALLEL_MIN_TAPS = 1 << 16


def rows_ok(out_hw: tuple[int, ...], lanes: int) -> bool:
    """Whether output rows hold ``MIN_WIDTH`` elements and a vector of ``lanes``, or
    three quarters of one (a 14-wide row in one 16-lane vector: its last two lanes run
    into the next row, which the next row's vector, stored after it, overwrites; at 14
    wide, two 8-lane vectors per row ran slower than the flattened schedule)."""
    ow_ = out_hw[1]
    return ow_ >= max(lanes, MIN_WIDTH) or lanes > ow_ >= 3 * lanes / 4


@lru_cache(maxsize=256)
def depthwise_rows(  # noqa: C901 (trace-time specialization)
        x_shape: tuple[int, int, int, int], w_shape: tuple[int, int, int, int],
        strides: tuple[int, int], pad_begin: tuple[int, int], dilation: tuple[int, int],
        out_hw: tuple[int, int], dtype: str, lanes: int) -> PrimFunc:
    """The row-blocked depthwise conv ``(x0, x1: (C, 1, KH, KW), out)`` (``rows_ok``
    and ``depthwise_flat.flat_ok`` must hold)."""
    n_, c_, h_, w_ = x_shape
    oh_, ow_ = out_hw
    taps = Taps.of(w_shape[2:], strides, pad_begin, dilation, ow_)
    groups = taps.centre_first()
    masked = [ex for ex in taps.groups if ex != 0]
    spill = max(lanes - ow_, 0)  # lanes of a row's one vector past its end
    rows, front, plane = taps.layout(oh_, spill)
    origin = front - taps.rows[0] * ow_  # where output position 0 sits in a phase plane
    band = math.lcm(ROW_BLOCK, lanes // math.gcd(ow_, lanes))  # rows * OW: whole vectors
    bands, rest = divmod(oh_, band)
    # a row's vectors: a loop of whole ones (or one running into the next row), then the
    # last one moved back to end with the row, overlapping the one before (a loop, not
    # unrolled: 7 passes x 8 rows x 4 vectors unrolled took 6 s to compile)
    whole = max(ow_ // lanes, 1)
    last = [ow_ - lanes] if ow_ % lanes and ow_ > lanes else []
    zero = getattr(T, dtype)(0.0)
    final = (len(groups) - 1) % 2  # the accumulator the last pass writes

    @T.prim_func(private=True)
    def depthwise(x0: T.Buffer(x_shape, dtype), x1: T.Buffer(w_shape, dtype),  # noqa: C901
                  out: T.Buffer((n_, c_, oh_, ow_), dtype)):
        masks = mask_table(masked, ow_ * -(-lanes // ow_), ow_, dtype)

        def band_rows(xpad, acc, n, c, row0, count):
            """Output rows ``row0 .. row0 + count`` (``count`` known now) of plane
            ``(n, c)``: the passes, then the store."""
            blocks = [(0, count // ROW_BLOCK, ROW_BLOCK)]
            if count % ROW_BLOCK:
                blocks.append((count // ROW_BLOCK * ROW_BLOCK, 1, count % ROW_BLOCK))
            for e, (ex, group) in enumerate(groups):
                for first, repeat, height in blocks:
                    for rb in T.serial(repeat):
                        for jv in T.serial(whole):
                            row_block(xpad, acc, c, row0, e, ex, group, first + rb * height,
                                      height, jv * lanes)
                        for j0 in last:
                            row_block(xpad, acc, c, row0, e, ex, group, first + rb * height,
                                      height, j0)
            store_band(acc, n, c, row0, count)

        def row_block(xpad, acc, c, row0, e, ex, group, lr0, height, j0):
            """Pass ``e`` over rows ``lr0 .. lr0 + height`` of the band at column ``j0``."""
            for r in T.unroll(height):
                for ji in T.vectorized(lanes):
                    lr = lr0 + r  # the row in the band
                    q = lr * ow_ + j0 + ji
                    at = origin + (row0 + lr) * ow_ + j0 + ji
                    s = tap_sum(x1, c, group, lambda ph, off: xpad[  # noqa: B023
                        taps.phases.index(ph) * plane + at + off],  # noqa: B023
                        masks[masked.index(ex), j0 + ji] > 0.5 if ex else None, zero)
                    acc[e % 2, q] = s if e == 0 else acc[1 - e % 2, q] + s

        def store_band(acc, n, c, row0, count):
            """The last pass's band into ``out`` (FuseTIR's epilogue goes here)."""
            full, tail = divmod(count * ow_, lanes)
            for v in T.serial(full):
                for ji in T.vectorized(lanes):
                    p = row0 * ow_ + v * lanes + ji
                    out[n, c, T.floordiv(p, ow_), T.floormod(p, ow_)] = \
                        acc[final, v * lanes + ji]
            for j in T.serial(tail):
                p = row0 * ow_ + full * lanes + j
                out[n, c, T.floordiv(p, ow_), T.floormod(p, ow_)] = acc[final, full * lanes + j]

        work = n_ * c_ * oh_ * ow_ * len(taps.offsets)
        for t in (T.parallel if work >= PARALLEL_MIN_TAPS else T.serial)(n_ * c_):
            n, c = t // c_, t % c_
            xpad = T.alloc_buffer((len(taps.phases) * plane,), dtype)
            acc = T.alloc_buffer((2, band * ow_ + spill), dtype)
            split_cols = T.alloc_buffer((h_ * w_,), dtype) \
                if deinterleave_ok(x_shape, strides) else None
            phase_copy(xpad, x0, n, c, 0, taps, strides, (h_, w_), ow_, rows, front, plane,
                       split_cols)
            if bands:
                for b in T.serial(bands):
                    band_rows(xpad, acc, n, c, b * band, band)
            if rest:
                band_rows(xpad, acc, n, c, bands * band, rest)

    return depthwise.with_attr("schedule", "depthwise_rows")


__all__ = ["MIN_WIDTH", "ROW_BLOCK", "depthwise_rows", "rows_ok"]
