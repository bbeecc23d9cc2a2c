"""Kernels of the printer's float32 and float64 literals: NumPy's spelling, as bytes.

The printer spells a float as NumPy's ``str`` does (Dragon4 in its shortest
"unique" mode, then the positional or scientific form) and keeps that text only
when it reads back through the parser's path (float64, then the dtype) to the
same bits. NumPy formats about a microsecond per element; :func:`float_texts_kernel`
writes the same bytes, one fixed-width row per element, and marks every element
it cannot *prove* for the NumPy path, so the text never depends on the kernel
being complete; :func:`pack_texts_kernel` then packs the rows and NumPy's texts
of the rest into one byte table.

float64 digits come from Ryu (:mod:`irkernel.text.ryu`): exact integer arithmetic,
the same choice as Dragon4, no element left undone; a float64's shortest text
always reads back (no double rounding).

float32 digits are proved in float64 arithmetic. Dragon4 picks the shortest digit
count ``p`` at which ``d = floor(x * 10^k)`` or ``d + 1`` (``k = p - 1 -
floor(log10 x)``) lies inside the rounding interval of ``x`` (half an ulp each
side; a quarter below a power of two; the boundary itself for an even mantissa),
and of the two the one closer to ``x`` (a tie: the even digit). The kernel makes
the same decisions with ``t = x * 10^k`` and the half-interval ``h = 2^(q-1) *
10^k`` (or, for ``k < 0`` and ``x < 2^52``, unscaled: ``x - d * 10^-k`` against
``2^(q-1)``, all integers or multiples of 2^q, exact). They are exact where the
powers are (``0 <= k <= 22`` and ``m * 5^k`` below 2^53, checked with integers)
and otherwise within ``2^-50`` relative; each decision ("inside", "outside",
"closer") is taken only when it holds with those errors included, and anything
closer than that is left to NumPy. A candidate counts as inside only with room
for the float64 rounding of its decimal on top, so its text reads back through
float64 to the same float32 and NumPy's text is the printer's text (the printer's
double-rounding fix never applies); exactly on a boundary it needs an even
mantissa, which reading back ties to. ``floor(log10 x)`` is exact: no float32
lies within 1e-10 relative of a power of ten it does not equal, far more than
the table's rounding (a test checks it). Measured: 1 element left to NumPy in 2e7
random bit patterns, none in 2e7 random normals, 2 in seven whole binades (5.9e7
values, each equal to NumPy's text).

The forms: positional for ``1e-4 <= |x| < 1e16`` (float32 since NumPy 2.3:
``< 1e6``) as ``1.0``, ``0.00012``, ``999999.0``, else scientific with at least
two exponent digits (``1e-05``, ``1.5e+16``); ``0.0``, ``-0.0``, ``inf``,
``-inf``; NaN as the printer spells it (``nan`` for the canonical NaN, else
``nan:0x<bits in hex>``). :func:`positional_form` asks NumPy where the switches
are under the current print options and checks the kernel against NumPy on a
probe set (the legacy ``1.13`` mode spells differently: every element then goes
to NumPy). float16/bfloat16 stay on the NumPy path (few of them, and their
read-back runs through another dtype). Imports numpy and ``irkernel.ir`` only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from irkernel.ir.ids import FLOAT32, FLOAT64
from irkernel.ir.jit import helper, inline, kernel
from irkernel.text.emit import n_digits, readonly
from irkernel.text.ryu import shortest64

#: Bytes per element of the scratch rows (the longest texts: float32
#: ``-1.2345679e-38``, 14, positional up to ``1e16`` ``-1234567900000000.0``, 19;
#: float64 ``-2.2250738585072014e-308``, 24).
WIDTH = 24
#: Powers of ten 10^k, k in [-_P10_OFF, _P10_OFF), each correctly rounded
#: (exact for 0 <= k <= 22). A float32's digits need k in [-38, 53].
_P10_OFF = 64
_P10 = np.array([float(f"1e{k}") for k in range(-_P10_OFF, _P10_OFF)], np.float64)
#: 5^j for j <= 22 (exact in int64), and the largest odd m with m * 5^j < 2^53.
#: Powers of two 2^j, j in [-_P2_OFF, _P2_OFF) (a float32 is m * 2^q, q in [-149, 104]).
_P2_OFF = 160
_P2 = np.array([2.0**j for j in range(-_P2_OFF, _P2_OFF)], np.float64)
_LOG10_2 = math.log10(2.0)
_POW5 = np.array([5**j for j in range(23)], np.int64)
_LIM5 = np.array([(2**53 - 1) // 5**j for j in range(23)], np.int64)
_TWO52 = 2.0**52
_REL = 2.0**-50  # relative error bound of an inexact t or h (two roundings: < 2^-51.9)
_READBACK = 2.0**-51  # room for float64 rounding of a candidate's decimal (needs 2^-53)
_IN, _OUT, _UNSURE = 0, 1, 2
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8).copy()


@helper
def _bit_length(m):
    n = 0
    while m > 0:
        m >>= 1
        n += 1
    return n


@helper
def _status(dist, h, err, c, even):
    """Whether the candidate ``c`` at distance ``dist`` from ``x`` lies inside the
    half-interval ``h`` (all three in the same units), given the error ``err`` on
    ``dist`` and ``h`` together. Exactly on the boundary it is inside for an ``even``
    mantissa (NumPy's Dragon4; reading it back ties to that even float32)."""
    if dist + err + c * _READBACK < h:
        return _IN
    if dist - err > h:
        return _OUT
    if err == 0.0 and dist == h:
        return _IN if even else _OUT
    return _UNSURE


@helper
def _shortest(m, q, unequal):
    """(digits, k) of Dragon4's shortest text of ``x = m * 2^q`` (``digits * 10^-k``),
    or (0, 0) where a decision is too close to call.

    At each digit count the candidates are ``d * u`` and ``(d + 1) * u`` around ``x``,
    in one of three unit systems: scaled by 10^k (``u = 1``; exact for ``0 <= k <= 22``
    when ``m * 5^k`` fits 53 bits), unscaled (``u = 10^-k``; exact for ``k < 0`` when
    ``x < 2^52``: integers and multiples of 2^q), or scaled with rounding errors."""
    x = m * _P2[q + _P2_OFF]
    top = q + 23 if m >= 0x800000 else q + _bit_length(m) - 1  # floor(log2 x)
    e = int(math.floor(top * _LOG10_2))  # floor(log10 x) or one below
    while x < _P10[e + _P10_OFF]:
        e -= 1
    while x >= _P10[e + 1 + _P10_OFF]:
        e += 1
    even = m & 1 == 0
    m_odd = m // (m & -m)  # m without its trailing zero bits
    half_gap = _P2[q - 1 + _P2_OFF]
    for p in range(1, 10):
        k = p - 1 - e
        u = 1.0
        err_t = 0.0
        err_h = 0.0
        if 0 <= k <= 22:
            t = x * _P10[k + _P10_OFF]
            if m_odd > _LIM5[k]:
                err_t = t * _REL
            h = half_gap * _P10[k + _P10_OFF]
            d = math.floor(t)
            below = t - d
        elif k < 0 and x < _TWO52:
            u = _P10[-k + _P10_OFF]
            d = math.floor(x / u)
            below = x - d * u
            if below < 0.0:  # the quotient rounded up to the next integer
                d -= 1
                below += u
            elif below >= u:
                d += 1
                below -= u
            h = half_gap
        else:
            t = x * _P10[k + _P10_OFF]
            err_t = t * _REL
            h = half_gap * _P10[k + _P10_OFF]
            err_h = h * _REL
            d = math.floor(t)
            below = t - d
        err = err_t + err_h
        above = u - below
        h_low = h * 0.5 if unequal else h
        if below > h_low + err and above > h + err:
            continue  # both candidates plainly outside: one more digit
        if err_t > 0.0 and (below <= err_t or above <= err_t):
            return 0, 0  # t within its error of an integer: floor(t) uncertain
        low_in = _status(below, h_low, err, d * u, even)
        high_in = _status(above, h, err, (d + 1) * u, even)
        if low_in == _UNSURE or high_in == _UNSURE:
            return 0, 0
        if low_in == _IN and high_in == _IN:
            if err == 0.0 and below == above:  # a tie: the even digit, as Dragon4
                return np.int64(d) + np.int64(d) % 2, k
            if below < above - 2 * err_t:
                return np.int64(d), k
            if above < below - 2 * err_t:
                return np.int64(d) + 1, k
            return 0, 0  # too close to a tie
        if low_in == _IN:
            return np.int64(d), k
        if high_in == _IN:
            return np.int64(d) + 1, k
    return 0, 0


@inline
def _put_word(out, i, pos, word):
    for j in range(len(word)):
        out[i, pos + j] = word[j]
    return pos + len(word)


@inline
def _put_digits(out, i, pos, digits, first, last, zeros):
    """Digits ``first:last`` of ``digits`` (uint8 digit values), then ``zeros`` zeros."""
    for j in range(first, last):
        out[i, pos] = 48 + digits[j]
        pos += 1
    for _ in range(zeros):
        out[i, pos] = 48
        pos += 1
    return pos


@inline
def _put_decimal(out, i, pos, digits, n, point, positional):
    """The ``n`` ``digits`` (no trailing zero) with the first at 10^``point``, in
    NumPy's positional (``123.45``, ``1200.0``, ``0.00012``) or scientific form."""
    if positional and point >= 0:
        whole = min(n, point + 1)
        pos = _put_digits(out, i, pos, digits, 0, whole, point + 1 - whole)
        out[i, pos] = 46
        if n > whole:
            return _put_digits(out, i, pos + 1, digits, whole, n, 0)
        out[i, pos + 1] = 48
        return pos + 2
    if positional:
        out[i, pos] = 48
        out[i, pos + 1] = 46
        pos = _put_digits(out, i, pos + 2, digits, 0, 0, -point - 1)
        return _put_digits(out, i, pos, digits, 0, n, 0)
    pos = _put_digits(out, i, pos, digits, 0, 1, 0)  # "1.5e+16", "1e-05"
    if n > 1:
        out[i, pos] = 46
        pos = _put_digits(out, i, pos + 1, digits, 1, n, 0)
    out[i, pos] = 101
    out[i, pos + 1] = 45 if point < 0 else 43
    a = abs(point)
    if a < 10:
        out[i, pos + 2] = 48
        pos += 1
    for j in range(n_digits(a) - 1, -1, -1):
        out[i, pos + 2 + j] = 48 + a % 10
        a //= 10
    return pos + 2 + n_digits(abs(point))


@kernel
def float_texts_kernel(bits, mant_bits, positional_from, positional_below, canonical_nan):
    """The printer's text of every float32 or float64 (``mant_bits`` 23 or 52) given as
    its bits (uint64, float32 bits zero-extended), one row of ``WIDTH`` bytes each:
    (rows uint8[n, WIDTH], sizes int8[n]); size 0 marks an element the kernel could
    not prove (the caller formats it with NumPy). Positional form for magnitudes whose
    bits are in [``positional_from``, ``positional_below``) (uint64: float bits order
    as their magnitudes); ``canonical_nan`` (uint64): the bits spelled plain ``nan``."""
    n = bits.shape[0]
    wide = mant_bits == 52
    sign_shift = np.uint64(63 if wide else 31)
    field_max = np.uint64(0x7FF if wide else 0xFF)
    bias = 1023 if wide else 127
    magnitude_mask = (np.uint64(1) << sign_shift) - np.uint64(1)
    mant_mask = (np.uint64(1) << np.uint64(mant_bits)) - np.uint64(1)
    n_hex = 16 if wide else 8
    out = np.empty((n, WIDTH), np.uint8)  # row i is read up to sizes[i] only
    sizes = np.zeros(n, np.int8)
    inf_word = np.array([105, 110, 102], np.uint8)
    nan_word = np.array([110, 97, 110, 58, 48, 120], np.uint8)  # "nan:0x"
    zero_word = np.array([48, 46, 48], np.uint8)
    digits = np.zeros(24, np.uint8)
    for i in range(n):
        b = bits[i]
        pos = 0
        if b >> sign_shift:
            out[i, 0] = 45  # "-"
            pos = 1
        field = np.int64((b >> np.uint64(mant_bits)) & field_max)
        mant = np.int64(b & mant_mask)
        if field == field_max and mant != 0:  # NaN: "nan" or "nan:0x7fc00001"
            pos = _put_word(out, i, 0, nan_word)
            if b == canonical_nan:
                pos = 3
            else:
                for j in range(n_hex):
                    out[i, pos + j] = _HEX[(b >> np.uint64(4 * (n_hex - 1 - j))) & np.uint64(15)]
                pos += n_hex
        elif field == field_max:
            pos = _put_word(out, i, pos, inf_word)
        elif field == 0 and mant == 0:
            pos = _put_word(out, i, pos, zero_word)
        else:
            if wide:
                value, exponent = shortest64(mant, field)
                k = -exponent
            elif field == 0:
                value, k = _shortest(mant, 1 - bias - mant_bits, False)
            else:
                value, k = _shortest(mant | (1 << mant_bits), field - bias - mant_bits,
                                     mant == 0 and field > 1)
            if value == 0:
                continue
            n = n_digits(value)
            for j in range(n - 1, -1, -1):
                digits[j] = value % 10
                value //= 10
            point = n - 1 - k
            while digits[n - 1] == 0:  # only after a carry: 9.99 -> 10
                n -= 1
            magnitude = b & magnitude_mask
            pos = _put_decimal(out, i, pos, digits, n, point,
                               positional_from <= magnitude < positional_below)
        sizes[i] = pos
    return out, sizes


@kernel
def pack_texts_kernel(rows, sizes, other_bytes, other_ptr):
    """A byte table of ``rows[i, :sizes[i]]``, taking the entries of size 0, in order,
    from the table ``other_bytes``/``other_ptr``. Returns (bytes uint8[B], ptr int64[n + 1])."""
    n = sizes.shape[0]
    ptr = np.empty(n + 1, np.int64)
    ptr[0] = 0
    j = 0
    for i in range(n):
        size = np.int64(sizes[i])
        if size == 0:
            size = other_ptr[j + 1] - other_ptr[j]
            j += 1
        ptr[i + 1] = ptr[i] + size
    out = np.empty(ptr[n], np.uint8)
    j = 0
    for i in range(n):
        pos = ptr[i]
        if sizes[i] == 0:
            start = other_ptr[j]
            for s in range(other_ptr[j + 1] - start):
                out[pos + s] = other_bytes[start + s]
            j += 1
        else:
            for s in range(sizes[i]):
                out[pos + s] = rows[i, s]
    return out, ptr


#: Values whose NumPy text pins down the form: both switches (1e-4; 1e6 or 1e16) and
#: their neighbours, carries, powers of two and ten, extremes, specials.
_PROBE = [1.0, -0.0, 0.1, 0.5, 1 / 3, 1e-5, 1e-4, 1.0000001e-4, 9.9999e-5, 999999.0,
          999999.94, 1e6, 1e7, 1e15, 1e16, 1.5e16, 9999999999999998.0, 123456.79,
          16777216.0, 1e22, 1e23, 3.4028235e38, 1e-45, 1.1754944e-38, 5e-324,
          2.2250738585072014e-308, 1.7976931348623157e308, math.inf, -math.inf]
_KINDS = {FLOAT32: (np.float32, np.uint32, 23), FLOAT64: (np.float64, np.uint64, 52)}
_FORMS: dict[tuple[object, int], tuple[int, int] | None] = {}


def _bits_of_first_at_least(bound: Fraction, code: int) -> int:
    """Bits of the smallest positive float of dtype ``code`` that is >= ``bound`` (an
    exact comparison, as NumPy's against a long double constant)."""
    dtype, uint, _ = _KINDS[code]
    x = dtype(float(bound))
    while Fraction(float(x)) < bound:
        x = np.nextafter(x, dtype(np.inf))
    while Fraction(float(np.nextafter(x, dtype(0)))) >= bound:
        x = np.nextafter(x, dtype(0))
    return int(np.array(x, dtype).view(uint))


def _bits(values: np.ndarray, code: int) -> np.ndarray:
    dtype, uint, _ = _KINDS[code]
    return readonly(np.ascontiguousarray(values, dtype).view(uint).astype(np.uint64))


def positional_form(code: int) -> tuple[int, int] | None:
    """The magnitudes (as bits: [from, below)) that NumPy's ``str`` of a float of dtype
    ``code`` spells positionally under the current print options (1e-4 up to 1e16;
    1e6 for float32 since NumPy 2.3 outside the legacy modes), or None when the kernel
    does not spell the probe values as NumPy does (legacy ``1.13``): then every
    element goes to NumPy. Probed once per ``legacy`` setting and dtype."""
    key = (np.get_printoptions()["legacy"], code)
    if key not in _FORMS:
        dtype, _, mant_bits = _KINDS[code]
        below = 1e6 if code == FLOAT32 and str(np.float32(1e6)) == "1e+06" else 1e16
        form = (_bits_of_first_at_least(Fraction(1, 10**4), code),
                _bits_of_first_at_least(Fraction(int(below)), code))
        with np.errstate(over="ignore", under="ignore"):
            probe = np.array(_PROBE, np.float64).astype(dtype)
        rows, sizes = float_texts_kernel(_bits(probe, code), mant_bits, np.uint64(form[0]),
                                         np.uint64(form[1]), np.uint64(0))
        texts = [bytes(r[:s]).decode() for r, s in zip(rows, sizes.tolist(), strict=True)]
        _FORMS[key] = form if texts == probe.astype(str).tolist() else None
    return _FORMS[key]


def float_table(values: np.ndarray, code: int, canonical_nan: int,
                fallback: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
                ) -> tuple[np.ndarray, np.ndarray]:
    """The printer's literal of every float32 or float64 (dtype ``code``) in ``values``
    as a byte table (bytes uint8, ptr int64[n + 1]): the kernel's text where it proved
    it, ``fallback``'s (a byte table of the given elements, in order) for the rest.
    ``canonical_nan``: the bits spelled plain ``nan``."""
    form = positional_form(code)
    if form is None:
        return fallback(values)
    rows, sizes = float_texts_kernel(_bits(values, code), _KINDS[code][2], np.uint64(form[0]),
                                     np.uint64(form[1]), np.uint64(canonical_nan))
    undone = np.flatnonzero(sizes == 0)
    if len(undone):
        other_bytes, other_ptr = fallback(values[undone])
    else:
        other_bytes, other_ptr = np.zeros(0, np.uint8), np.zeros(1, np.int64)
    data, ptr = pack_texts_kernel(readonly(rows), readonly(sizes), readonly(other_bytes),
                                  readonly(other_ptr))
    return readonly(data), readonly(ptr)
