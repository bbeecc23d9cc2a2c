"""Shortest digits of a float64 (Ryu), for the printer's float64 literals.

A float64's shortest round-trip text needs up to 17 significant digits, beyond
what the float32 kernel's float64 arithmetic can decide, so float64 takes Ulf
Adams' Ryu (PLDI 2018, "Ryu: fast float-to-string conversion"): integer-only,
exact for every float64 by construction, with 128-bit products of a 64-bit
mantissa and tables of 5^i and 2^j / 5^i (computed here from Python integers,
as the paper's generator does). Its choice is the one NumPy's Dragon4 and
Python's ``repr`` make: the shortest decimal inside the rounding interval
(boundaries included for an even mantissa), the closest of those, ties to the
even digit. Numba has no 128-bit integer, so products are built from 32-bit
halves. Imports numpy and ``irkernel.ir`` only.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir.jit import helper

_POW5_INV_BITCOUNT = 125
_POW5_BITCOUNT = 125
_M32 = np.uint64(0xFFFFFFFF)


def _split(values: list[int]) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([v & (2**64 - 1) for v in values], np.uint64)
    hi = np.array([v >> 64 for v in values], np.uint64)
    return lo, hi


# 2^(bits(5^i) - 1 + 125) / 5^i + 1 and 5^i scaled to 125 bits: the paper's tables.
_INV_LO, _INV_HI = _split([(1 << ((5**i).bit_length() - 1 + _POW5_INV_BITCOUNT)) // 5**i + 1
                           for i in range(342)])
_POW5_LO, _POW5_HI = _split([5**i >> ((5**i).bit_length() - _POW5_BITCOUNT)
                             if (5**i).bit_length() >= _POW5_BITCOUNT
                             else 5**i << (_POW5_BITCOUNT - (5**i).bit_length())
                             for i in range(326)])


@helper
def _pow5bits(e):
    """Bits of 5^e (``(5**e).bit_length()``), for 0 <= e <= 3528."""
    return ((e * 1217359) >> 19) + 1


@helper
def _umul128_hi_lo(a, b):
    """(high, low) 64-bit halves of the 128-bit product of uint64 ``a`` and ``b``."""
    a_lo = a & _M32
    a_hi = a >> np.uint64(32)
    b_lo = b & _M32
    b_hi = b >> np.uint64(32)
    b00 = a_lo * b_lo
    b01 = a_lo * b_hi
    b10 = a_hi * b_lo
    b11 = a_hi * b_hi
    mid1 = b10 + (b00 >> np.uint64(32))
    mid2 = b01 + (mid1 & _M32)
    hi = b11 + (mid1 >> np.uint64(32)) + (mid2 >> np.uint64(32))
    lo = (mid2 << np.uint64(32)) | (b00 & _M32)
    return hi, lo


@helper
def _mul_shift(m, mul_lo, mul_hi, j):
    """``(m * mul) >> j`` for uint64 ``m``, a 128-bit ``mul`` and 64 < j < 128."""
    high1, low1 = _umul128_hi_lo(m, mul_hi)
    high0, _ = _umul128_hi_lo(m, mul_lo)
    total = high0 + low1
    if total < high0:
        high1 += np.uint64(1)
    dist = np.uint64(j - 64)
    return np.int64((high1 << (np.uint64(64) - dist)) | (total >> dist))


@helper
def _pow5_factor(value):
    count = 0
    while value % 5 == 0:
        value //= 5
        count += 1
    return count


@helper
def shortest64(mantissa, field):
    """(digits, exponent) with ``digits * 10^exponent`` the shortest text of the finite,
    nonzero float64 with mantissa field ``mantissa`` and exponent field ``field``."""
    if field == 0:
        e2 = 1 - 1023 - 52 - 2
        m2 = mantissa
    else:
        e2 = field - 1023 - 52 - 2
        m2 = (1 << 52) | mantissa
    accept_bounds = m2 & 1 == 0
    mv = 4 * m2
    mm_shift = 1 if mantissa != 0 or field <= 1 else 0
    um = np.uint64(m2)
    vm_zeros = False
    vr_zeros = False
    if e2 >= 0:
        q = ((e2 * 78913) >> 18) - (1 if e2 > 3 else 0)
        e10 = q
        j = -e2 + q + _POW5_INV_BITCOUNT + _pow5bits(q) - 1
        mul_lo, mul_hi = _INV_LO[q], _INV_HI[q]
        vr = _mul_shift(np.uint64(4) * um, mul_lo, mul_hi, j)
        vp = _mul_shift(np.uint64(4) * um + np.uint64(2), mul_lo, mul_hi, j)
        vm = _mul_shift(np.uint64(4) * um - np.uint64(1 + mm_shift), mul_lo, mul_hi, j)
        if q <= 21:
            if mv % 5 == 0:
                vr_zeros = _pow5_factor(mv) >= q
            elif accept_bounds:
                vm_zeros = _pow5_factor(mv - 1 - mm_shift) >= q
            else:
                vp -= 1 if _pow5_factor(mv + 2) >= q else 0
    else:
        q = ((-e2 * 732923) >> 20) - (1 if -e2 > 1 else 0)
        e10 = q + e2
        i = -e2 - q
        j = q - (_pow5bits(i) - _POW5_BITCOUNT)
        mul_lo, mul_hi = _POW5_LO[i], _POW5_HI[i]
        vr = _mul_shift(np.uint64(4) * um, mul_lo, mul_hi, j)
        vp = _mul_shift(np.uint64(4) * um + np.uint64(2), mul_lo, mul_hi, j)
        vm = _mul_shift(np.uint64(4) * um - np.uint64(1 + mm_shift), mul_lo, mul_hi, j)
        if q <= 1:
            vr_zeros = True
            if accept_bounds:
                vm_zeros = mm_shift == 1
            else:
                vp -= 1
        elif q < 63:
            vr_zeros = (mv & ((1 << q) - 1)) == 0
    removed = 0
    last = 0
    if vm_zeros or vr_zeros:
        while True:  # shorten while the interval allows, then past vm's trailing zeros
            if vp // 10 > vm // 10:
                vm_zeros = vm_zeros and vm % 10 == 0
            elif not (vm_zeros and vm % 10 == 0):
                break
            vr_zeros = vr_zeros and last == 0
            last = vr % 10
            vr //= 10
            vp //= 10
            vm //= 10
            removed += 1
        if vr_zeros and last == 5 and vr % 2 == 0:
            last = 4  # exactly halfway: round to even
        up = (vr == vm and (not accept_bounds or not vm_zeros)) or last >= 5
    else:
        up = False
        while vp // 10 > vm // 10:
            up = vr % 10 >= 5
            vr //= 10
            vp //= 10
            vm //= 10
            removed += 1
        up = vr == vm or up
    return vr + (1 if up else 0), e10 + removed
