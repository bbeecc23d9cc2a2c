"""The float32/float64 literal kernel against NumPy: the same bytes, or the element
left to NumPy.

The reference is the printer's NumPy path (``_wide_strs``: ``astype(str)``, the
double-rounding fix, NaN payload spellings). Every element the kernel proves must
equal it byte for byte; ``float_table`` (kernel plus NumPy for the rest) must
equal the NumPy path's table exactly, whatever the kernel leaves undone.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from irkernel.ir.ids import FLOAT32, FLOAT64
from irkernel.text import float_text
from irkernel.text.emit import readonly
from irkernel.text.float_text import (
    float_table,
    float_texts_kernel,
    pack_texts_kernel,
    positional_form,
)
from irkernel.text.printer import _CANONICAL_NAN_BITS, _ascii_table, _wide_strs

_DTYPES = {FLOAT32: np.float32, FLOAT64: np.float64}
_UINTS = {FLOAT32: np.uint32, FLOAT64: np.uint64}
_MANT_BITS = {FLOAT32: 23, FLOAT64: 52}
both = pytest.mark.parametrize("code", [FLOAT32, FLOAT64], ids=["float32", "float64"])


def _kernel_texts(values: np.ndarray, code: int) -> tuple[list[str], np.ndarray]:
    """(text of every element, '' where undone; mask of the proved elements)."""
    start, below = positional_form(code)
    rows, sizes = float_texts_kernel(float_text._bits(values, code), _MANT_BITS[code],
                                     np.uint64(start), np.uint64(below),
                                     np.uint64(_CANONICAL_NAN_BITS[code]))
    texts = [bytes(r[:s]).decode("ascii") for r, s in zip(rows, sizes.tolist(), strict=True)]
    return texts, sizes > 0


def _fallback(code: int):
    return lambda values: _ascii_table(_wide_strs(values, code))


def _check(values: np.ndarray, code: int = FLOAT32, min_proved: float = 1.0) -> None:
    """Proved texts equal NumPy's; the assembled table equals the NumPy path's table."""
    values = np.asarray(values, _DTYPES[code]).ravel()
    texts, proved = _kernel_texts(values, code)
    want = _wide_strs(values, code).tolist()
    wrong = [(float(v), bits, t, w) for v, bits, t, w, ok in
             zip(values.tolist(), values.view(_UINTS[code]).tolist(), texts, want,
                 proved.tolist(), strict=True) if ok and t != w]
    assert not wrong, wrong[:10]
    assert proved.mean() >= min_proved, values[~proved][:10]
    data, ptr = float_table(values, code, _CANONICAL_NAN_BITS[code], _fallback(code))
    ref_data, ref_ptr = _fallback(code)(values)
    assert np.array_equal(ptr, ref_ptr)
    assert np.array_equal(data, ref_data)


def _from_bits(bits, code: int = FLOAT32) -> np.ndarray:
    return np.asarray(bits, np.uint64).astype(_UINTS[code]).view(_DTYPES[code])


def _with_neighbours(values: np.ndarray, code: int = FLOAT32, steps: int = 3) -> np.ndarray:
    """``values`` and the ``steps`` floats on each side, both signs (finite only)."""
    dtype = _DTYPES[code]
    bits = np.asarray(values, dtype).view(_UINTS[code]).astype(np.int64)
    near = (bits[:, None] + np.arange(-steps, steps + 1)).ravel()
    inf_bits = int(np.array(np.inf, dtype).view(_UINTS[code]))
    out = _from_bits(near[(near >= 0) & (near < inf_bits)], code)
    return np.concatenate([out, -out])


def test_the_positional_switches_are_numpys():
    """NumPy >= 2.3 (the version this project pins): float32 turns scientific at 1e6,
    float64 at 1e16; both below 1e-4."""
    for code, below in ((FLOAT32, 1e6), (FLOAT64, 1e16)):
        dtype, uint = _DTYPES[code], _UINTS[code]
        start, end = positional_form(code)
        assert np.array(end, uint).view(dtype) == below
        first = np.array(start, uint).view(dtype)
        assert float(first) >= 1e-4 > float(np.nextafter(first, dtype(0)))


def test_specials():
    nan_payloads = _from_bits([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0xFF800001,
                               0x7FC00001, 0xFFFFFFFF])
    values = np.concatenate([
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.1, 1e-5, 1.5e16],
                 np.float32),
        _from_bits([0x7F7FFFFF, 0x00800000, 0x00000001, 0x007FFFFF, 0x80000001]),
        nan_payloads])
    texts, proved = _kernel_texts(values, FLOAT32)
    assert proved.all()
    assert texts[:10] == ["0.0", "-0.0", "inf", "-inf", "nan", "1.0", "-1.0", "0.1",
                          "1e-05", "1.5e+16"]
    assert texts[-7:] == ["nan", "nan:0xffc00000", "nan:0x7f800001", "nan:0x7fffffff",
                          "nan:0xff800001", "nan:0x7fc00001", "nan:0xffffffff"]
    _check(values)


def test_float64_specials():
    values = np.concatenate([
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 0.1, 1e-5, 1e16, 1e22, 1e23,
                  5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1 / 3]),
        _from_bits([0xFFF8000000000000, 0x7FF0000000000001, 0x7FF8000000000001], FLOAT64)])
    texts, proved = _kernel_texts(values, FLOAT64)
    assert proved.all()
    assert texts == ["0.0", "-0.0", "inf", "-inf", "nan", "1.0", "0.1", "1e-05", "1e+16",
                     "1e+22", "1e+23", "5e-324", "2.2250738585072014e-308",
                     "1.7976931348623157e+308", "0.3333333333333333", "nan:0xfff8000000000000",
                     "nan:0x7ff0000000000001", "nan:0x7ff8000000000001"]
    _check(values, FLOAT64)


@both
def test_powers_of_two_and_neighbours(code):
    dtype = _DTYPES[code]
    info = np.finfo(dtype)
    exponents = np.arange(info.minexp - info.nmant, info.maxexp)
    _check(_with_neighbours(np.ldexp(dtype(1), exponents), code), code)


@both
def test_powers_of_ten_and_neighbours(code):
    with np.errstate(over="ignore", under="ignore"):
        tens = np.array([float(f"1e{k}") for k in range(-324, 309)]).astype(_DTYPES[code])
    _check(_with_neighbours(tens[(tens > 0) & np.isfinite(tens)], code), code)


@both
def test_switches_between_positional_and_scientific(code):
    edges = np.array([1e-4, 1e6, 1e16, 999999.94, 9.9999e-5, 1.0000001e-4], _DTYPES[code])
    _check(_with_neighbours(edges, code, steps=40), code)


@both
def test_subnormals(code):
    rng = np.random.default_rng(3)
    top = 1 << _MANT_BITS[code]
    bits = np.concatenate([np.arange(1, 4096), np.arange(top - 4096, top),
                           rng.integers(1, top, 100_000)])
    subnormals = _from_bits(bits, code)
    _check(np.concatenate([subnormals, -subnormals]), code)


@both
def test_short_decimals_and_ties(code):
    """Values with short binary expansions: exact decimals and exact ties between two
    shortest candidates (Dragon4 takes the even digit)."""
    rng = np.random.default_rng(4)
    values = np.concatenate([rng.integers(-10**6, 10**6, 50_000) / 2.0**rng.integers(0, 12, 50_000),
                             rng.integers(0, 2**24, 50_000) * 2.0**rng.integers(0, 60, 50_000),
                             [58962.3125, 1.91015625, 16777217.0, 0.5, 0.25, 100.0]])
    _check(values.astype(_DTYPES[code]), code)


def test_two_million_random_float32_bit_patterns():
    bits = np.random.default_rng(5).integers(0, 2**32, 2_000_000, dtype=np.uint64)
    _check(_from_bits(bits), min_proved=0.999)


def test_one_million_random_float64_bit_patterns():
    bits = np.random.default_rng(5).integers(0, 2**64, 1_000_000, dtype=np.uint64)
    _check(_from_bits(bits, FLOAT64), FLOAT64)


@both
def test_random_normals(code):
    rng = np.random.default_rng(6)
    values = rng.standard_normal(200_000) * 10.0 ** rng.integers(-8, 9, 200_000)
    _check(values.astype(_DTYPES[code]), code, min_proved=0.999)


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_arbitrary_float32_bit_patterns(bits):
    _check(_from_bits(bits), min_proved=0.0)


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=64))
def test_arbitrary_float64_bit_patterns(bits):
    _check(_from_bits(bits, FLOAT64), FLOAT64)


def test_undone_elements_come_from_the_fallback_in_order():
    values = np.random.default_rng(7).standard_normal(1000).astype(np.float32)
    start, below = positional_form(FLOAT32)
    rows, sizes = float_texts_kernel(float_text._bits(values, FLOAT32), 23, np.uint64(start),
                                     np.uint64(below), np.uint64(_CANONICAL_NAN_BITS[FLOAT32]))
    undone = np.zeros(len(values), bool)
    undone[::7] = True
    sizes = sizes.copy()
    sizes[undone] = 0
    other_bytes, other_ptr = _fallback(FLOAT32)(values[undone])
    data, ptr = pack_texts_kernel(readonly(rows), readonly(sizes), other_bytes, other_ptr)
    ref_data, ref_ptr = _fallback(FLOAT32)(values)
    assert np.array_equal(ptr, ref_ptr) and np.array_equal(data, ref_data)


@both
@pytest.mark.parametrize("legacy, float32_below", [("2.2", 1e16), ("1.21", 1e16),
                                                   ("1.13", None)])
def test_legacy_print_modes(legacy, float32_below, code):
    """The form follows NumPy's print options: float32 switches at 1e16 in the 2.2
    modes; the 1.13 mode spells differently, so everything goes to NumPy."""
    values = _with_neighbours(np.array([1e-4, 1e6, 1e15, 1e16, 0.1, 3.0], _DTYPES[code]),
                              code)
    below = float32_below if code == FLOAT32 or float32_below is None else 1e16
    with np.printoptions(legacy=legacy):
        form = positional_form(code)
        assert (form is None) == (below is None)
        if form is not None:
            assert np.array(form[1], _UINTS[code]).view(_DTYPES[code]) == below
            texts, proved = _kernel_texts(values, code)
            assert proved.all() and texts == _wide_strs(values, code).tolist()
        data, ptr = float_table(values, code, _CANONICAL_NAN_BITS[code], _fallback(code))
        ref_data, ref_ptr = _fallback(code)(values)
    assert np.array_equal(ptr, ref_ptr) and np.array_equal(data, ref_data)


def test_power_of_ten_table_decides_floor_log10():
    """floor(log10 x) compares x with the float64 table: no float32 lies between 10^E
    and its float64 rounding (nor within 1e-10 relative of a 10^E it does not equal)."""
    table = float_text._P10
    for e in range(-46, 40):
        exact = Fraction(10) ** e
        assert Fraction(float(table[e + float_text._P10_OFF])) == Fraction(float(f"1e{e}"))
        with np.errstate(over="ignore", under="ignore"):
            x = np.float32(float(f"1e{e}"))
        if not np.isfinite(x) or x == 0:
            continue
        for y in (np.nextafter(x, np.float32(0)), x, np.nextafter(x, np.float32(np.inf))):
            if Fraction(float(y)) != exact:
                assert abs(Fraction(float(y)) - exact) / exact > Fraction(1, 10**10)
