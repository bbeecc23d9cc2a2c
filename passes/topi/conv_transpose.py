"""Scheduled conv_transpose: the conv's implicit GEMM once per output phase (sub-pixel form).

Why not the zero-inserted input: a transposed conv of stride ``s`` is a conv over the
input with ``s - 1`` zeros inserted between pixels, but then ``s^rank - 1`` of every
``s^rank`` multiply-adds multiply a zero (3 of 4 at stride 2). Instead, per spatial axis,
output ``y`` (``u = y + pad_begin`` in the uncropped output) receives ``x[i] * w[k]``
where ``u = i*s + k*d``: the outputs of one *phase* ``r = u % s`` read only the taps ``k``
with ``k*d % s == r``, and output ``u = m*s + r`` reads ``x[m - e_k]`` with ``e_k = (k*d -
r) / s``. So each phase is a stride-1 conv of the input with its own short list of taps
at constant offsets: exactly the implicit GEMM of ``conv.py`` (an ``MR x NR`` register
tile of exact fma over ``(c, tap)``, no im2col), over a zero-padded copy of the input
shared by all phases (``conv_layout.Phases`` with stride 1: the padding covers the
reach of every phase's taps). A 2x2 stride-2 kernel is four 1x1 GEMMs, one per phase.

Per batch image: the padded copy; one parallel loop over (phase, group, pixel tile,
channel group) tasks, the phase picked by a trace-time ``if`` chain (each phase's taps are
unrolled: at most ``MAX_TAPS`` taps); the tiles go to a wide scratch, one segment per
phase; then the copy-out, parallel over output channels, interleaves the phases into
``out`` with strided stores (``y = (m0 + m) * s + r - pad_begin``) -- the only store to
``out``, where FuseTIR folds an elementwise epilogue. Weights are ``[C, O/groups, *K]``.
Imports irkernel.tir and ``passes.topi.conv``.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import product

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.topi.conv import (
    MAX_TAPS,
    MIN_WORK,
    channel_split,
    conv_tile,
    parallel_if_worth,
    register_tile,
    row_blocks,
)
from passes.topi.conv_layout import Phases
from passes.topi.vector import vector_bits


@dataclass(frozen=True)
class _AxisPhase:
    """Output phase ``r`` of one axis: its outputs ``y = (m0 + m) * s + r - pad_begin`` for
    ``m < count``, and its taps ``(k, e_k)``: output ``m0 + m`` reads ``x[m0 + m - e_k]``."""

    r: int
    m0: int
    count: int
    taps: tuple[tuple[int, int], ...]


def _axis_phases(size: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                 out: int) -> list[_AxisPhase]:
    phases = []
    for r in range(stride):
        m0 = -((r - pad_begin) // stride)  # first m with m*s + r - pad_begin >= 0
        count = max((out - 1 + pad_begin - r) // stride - m0 + 1, 0)
        taps = tuple((k, (k * dilation - r) // stride) for k in range(kernel)
                     if (k * dilation) % stride == r)
        phases.append(_AxisPhase(r, m0, count, taps))
    return phases


def conv_transpose_ok(x_shape: tuple[int, ...], w_shape: tuple[int, ...], dtype: str) -> bool:
    """Whether the phase-split GEMM covers this signature: float32/float64, 1 to 3 spatial
    axes, at most ``MAX_TAPS`` kernel taps (each phase's taps are unrolled), at least
    ``MIN_WORK`` multiply-adds."""
    return (dtype in ("float32", "float64") and len(x_shape) == len(w_shape)
            and 3 <= len(x_shape) <= 5 and math.prod(w_shape[2:]) <= MAX_TAPS
            and x_shape[0] * math.prod(w_shape) * math.prod(x_shape[2:]) >= MIN_WORK)


def scheduled_conv_transpose(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
                             strides: tuple[int, ...], pad_begin: tuple[int, ...],
                             dilation: tuple[int, ...], out_size: tuple[int, ...],
                             dtype: str = "float32", bits: int = 0) -> PrimFunc:
    """The PrimFunc ``(x0: x_shape, x1: w_shape, out: (N, O, *out_size))`` of a
    conv_transpose (``out_size`` already includes the end padding and output_padding).
    ``bits``: the vector width to tile for (0: ``vector_bits()``)."""
    return _conv_transpose(tuple(x_shape), tuple(w_shape), groups, tuple(strides),
                           tuple(pad_begin), tuple(dilation), tuple(out_size), dtype,
                           bits or vector_bits())


@lru_cache(maxsize=128)
def _conv_transpose(  # noqa: C901 (trace-time specialization)
        x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
        strides: tuple[int, ...], pad_begin: tuple[int, ...], dilation: tuple[int, ...],
        out_size: tuple[int, ...], dtype: str, bits: int) -> PrimFunc:
    n_, c_, size = x_shape[0], x_shape[1], x_shape[2:]
    og, kernel = w_shape[1], w_shape[2:]
    o_, cg, rank = og * groups, c_ // groups, len(size)
    axes = [_axis_phases(size[a], kernel[a], strides[a], dilation[a], pad_begin[a],
                         out_size[a]) for a in range(rank)]
    live = [combo for combo in product(*axes) if all(p.count for p in combo)]
    # front padding: every live tap's first read m0 - e_k lands at or after 0
    front = tuple(max([0, *(e - p.m0 for p in axes[a] if p.count for _, e in p.taps)])
                  for a in range(rank))
    reach = tuple(max([size[a] + front[a],
                       *(p.count + p.m0 - e + front[a] for p in axes[a] if p.count
                         for _, e in p.taps)]) for a in range(rank))
    ph = Phases(size, (1,) * rank, front, tuple(reach[a] - size[a] - front[a]
                                                  for a in range(rank)))
    plane = ph.plane

    def taps_of(combo):
        """(weight kernel index, offset in a channel's padded copy) of each tap."""
        return [(tuple(k for k, _ in ks),
                 ph.offset(tuple(p.m0 - e + f for (_, e), p, f in zip(ks, combo, front,
                                                                       strict=True))))
                for ks in product(*(p.taps for p in combo))]

    mr, nr = conv_tile(og, dtype, bits)
    tiles = max(-(-(ph.grid(tuple(p.count - 1 for p in combo)) + 1) // nr) for combo in live)
    width = tiles * nr  # each phase's segment of the wide scratch
    far = max([0, *(at for combo in live for _, at in taps_of(combo))])
    xlen = max((c_ - 1) * plane + far + width, c_ * plane)
    split = channel_split(og, mr, len(live) * groups * tiles)
    per_phase = groups * tiles * split

    @T.prim_func(private=True)
    def conv_transpose(x0: T.Buffer(x_shape, dtype),  # noqa: C901
                       x1: T.Buffer(w_shape, dtype),
                       out: T.Buffer((n_, o_, *out_size), dtype)):
        xpad = T.alloc_buffer((xlen,), dtype)
        wide = T.alloc_buffer((o_ * len(live) * width,), dtype)
        for n in T.serial(n_):
            for c in parallel_if_worth(c_ * plane)(c_):
                ph.copy(xpad, x0, n, c, c * plane, [(0,) * rank])
            for q in T.serial(xlen - c_ * plane):
                xpad[c_ * plane + q] = 0.0
            work = o_ * cg * math.prod(kernel) * width * len(live)
            for t in parallel_if_worth(work)(len(live) * per_phase):
                rest = t % per_phase if len(live) > 1 else t
                grp = 0 if groups == 1 else rest // (tiles * split)
                tile = rest // split % tiles if groups > 1 else rest // split
                first = grp * og  # the group's first output channel

                def phase(index, combo):
                    taps = taps_of(combo)
                    base = index * width + tile * nr  # noqa: B023

                    def operands(ii, c, ks, offset, ji, row0):
                        cin = c if groups == 1 else grp * cg + c  # noqa: B023
                        return (x1[(cin, row0 + ii, *ks)],
                                xpad[cin * plane + offset + tile * nr + ji])  # noqa: B023

                    def block(row0, rows, tag):
                        def store(ii, ji, value):
                            wide[(first + row0 + ii) * (len(live) * width)  # noqa: B023
                                 + base + ji] = value

                        register_tile(rows, nr, dtype, tag, cg,
                                      lambda emit: [emit(ks, at) for ks, at in taps],
                                      lambda *a: operands(*a, row0), store)

                    row_blocks(og, mr, split, t % split, block)  # noqa: B023

                if len(live) == 1:
                    phase(0, live[0])
                for index, combo in enumerate(live if len(live) > 1 else []):
                    with T.If(T.eq(t // per_phase, index)):
                        phase(index, combo)
            for o in parallel_if_worth(o_ * math.prod(out_size))(o_):
                for index, combo in enumerate(live):
                    for m in T.grid(*(p.count for p in combo)):
                        m = m if rank > 1 else (m,)
                        y = tuple((p.m0 + mi) * s + p.r - pb for p, mi, s, pb in
                                  zip(combo, m, strides, pad_begin, strict=True))
                        out[(n, o, *y)] = wide[o * (len(live) * width) + index * width
                                               + ph.grid(m)]

    return conv_transpose.with_attr("schedule", "conv_transpose_gemm")


__all__ = ["conv_transpose_ok", "scheduled_conv_transpose"]
