"""The phase-split zero-padded image layout the conv and window schedules read taps from.

Why: a conv's tap ``k`` of output pixel ``o`` reads padded position ``o*s + k*d`` on each
spatial axis. Stored plainly, a stride ``s > 1`` makes the taps of neighbouring pixels a
gather. Stored as ``prod(s)`` *phase planes*, ``xpad[c, r % s, r // s]`` per axis (each
plane ``P_0 x ... x P_{R-1}`` with ``P = ceil(padded / s)``), tap ``k`` of pixel ``o`` sits
in phase ``k*d % s`` at ``o + k*d // s``: numbering the pixels on the planes' *wide grid*
``q = sum_a o_a * stride_a`` (row-major over ``P``), every tap is a constant offset plus
``q``, so a tile of consecutive ``q`` is one unit-stride vector load whatever the stride,
and the padding is written once, at copy time (never a select in an inner loop).

Rank-generic (1-D ``NCW``, 2-D ``NCHW``, 3-D ``NCDHW`` images): depth is one more axis of
the same arithmetic. The copy is emitted at trace time; the image occupies a box of each
phase plane known then, so the loops are fills around the box and a row copy inside it.
Imports irkernel.tir only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from dataclasses import dataclass
from itertools import product

from irkernel.tir import script as T


@dataclass(frozen=True)
class Phases:
    """The phase-split padded layout of one image channel over ``len(size)`` spatial axes."""

    size: tuple[int, ...]
    strides: tuple[int, ...]
    pad_begin: tuple[int, ...]
    pad_end: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.size)

    @property
    def dims(self) -> tuple[int, ...]:
        """``P`` per axis: the extent of a phase plane."""
        return tuple(-(-(self.size[a] + self.pad_begin[a] + self.pad_end[a])
                       // self.strides[a]) for a in range(self.rank))

    @property
    def grid_strides(self) -> tuple[int, ...]:
        """Row-major strides of a phase plane (the wide grid's ``q`` per axis step)."""
        dims = self.dims
        return tuple(math.prod(dims[a + 1:]) for a in range(self.rank))

    @property
    def plane_size(self) -> int:
        """Elements of one phase plane."""
        return math.prod(self.dims)

    @property
    def plane(self) -> int:
        """Elements of one channel: all its phase planes."""
        return math.prod(self.strides) * self.plane_size

    def _phase_index(self, residues: tuple[int, ...]) -> int:
        k = 0
        for a in range(self.rank):
            k = k * self.strides[a] + residues[a]
        return k

    def offset(self, pos):
        """Where padded position ``pos`` (one int or TIR expression per axis) sits in a
        channel's phase planes."""
        inner, phase = 0, 0
        for p, s, g in zip(pos, self.strides, self.grid_strides, strict=True):
            if s == 1:
                inner, phase = inner + p * g, phase * s
            elif isinstance(p, int):
                inner, phase = inner + (p // s) * g, phase * s + p % s
            else:
                inner, phase = inner + T.floordiv(p, s) * g, phase * s + T.floormod(p, s)
        return phase * self.plane_size + inner

    def grid(self, pixel: tuple[int, ...]) -> int:
        """``q`` of output pixel ``pixel`` on the wide grid."""
        return sum(o * g for o, g in zip(pixel, self.grid_strides, strict=True))

    def phases(self, kernel: tuple[int, ...], dilation: tuple[int, ...]
               ) -> list[tuple[int, ...]]:
        """The phase planes the taps read (a 1x1 kernel of stride 2 reads one of four)."""
        return sorted({tuple((k * d) % s for k, d, s in zip(ks, dilation, self.strides,
                                                              strict=True))
                       for ks in product(*(range(k) for k in kernel))})

    def taps(self, kernel: tuple[int, ...], dilation: tuple[int, ...]) -> list[int]:
        """The offset of every tap, row-major over the kernel."""
        return [self.offset(tuple(k * d for k, d in zip(ks, dilation, strict=True)))
                for ks in product(*(range(k) for k in kernel))]

    def copy(self, xpad, x0, n, c, base, phases, fill=0.0) -> None:
        """Emit: write phase planes ``phases`` of image ``(n, c)`` at ``xpad[base...]``,
        ``fill`` where the position is padding: per axis a fill before the image's box,
        the box, a fill after it (the fills of outer axes are one contiguous loop each),
        so no select and contiguous stores. Planes no tap reads stay unwritten: only
        discarded wide-grid columns read them."""
        dims, gs = self.dims, self.grid_strides
        for res in phases:
            at = base + self._phase_index(res) * self.plane_size
            # phase index i of axis a is image position i*s + res - pad: inside on [lo, hi)
            box = []
            for a in range(self.rank):
                s, r, pb = self.strides[a], res[a], self.pad_begin[a]
                lo = min(max(-(-(pb - r) // s), 0), dims[a])
                hi = min(max(-(-(self.size[a] + pb - r) // s), lo), dims[a])
                box.append((lo, hi))
            self._copy_axis(xpad, x0, (n, c), at, 0, res, box, fill)

    def _copy_axis(self, xpad, x0, prefix, at, a, res, box, fill) -> None:
        """Axis ``a`` of one phase plane at flat position ``at`` (outer indices done)."""
        dims, g = self.dims, self.grid_strides[a]
        lo, hi = box[a]
        for f0, f1 in ((0, lo), (hi, dims[a])):
            if f1 > f0:
                for q in T.serial((f1 - f0) * g, name=f"f{a}"):
                    xpad[at + f0 * g + q] = fill
        if hi <= lo:
            return
        shift = res[a] - self.pad_begin[a]
        for i in T.serial(lo, hi, name=f"i{a}"):
            src = i * self.strides[a] + shift
            if a == self.rank - 1:
                xpad[at + i] = x0[(*prefix, src)]
            else:
                self._copy_axis(xpad, x0, (*prefix, src), at + i * g, a + 1, res, box, fill)


__all__ = ["Phases"]
