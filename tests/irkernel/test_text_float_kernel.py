"""The float32 literal kernel against NumPy: the same bytes, or the element left to NumPy.

The reference is the printer's NumPy path (``_wide_strs``: ``astype(str)``, the
double-rounding fix, NaN payload spellings). Every element the kernel proves must
equal it byte for byte; ``float32_table`` (kernel plus NumPy for the rest) must
equal the NumPy path's table exactly, whatever the kernel leaves undone.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from irkernel.ir.ids import FLOAT32
from irkernel.text import float_text
from irkernel.text.emit import readonly
from irkernel.text.float_text import (
    float32_table,
    float32_texts_kernel,
    pack_texts_kernel,
    positional_limit,
)
from irkernel.text.printer import _CANONICAL_NAN_BITS, _ascii_table, _wide_strs

_CANONICAL = _CANONICAL_NAN_BITS[FLOAT32]


def _reference(values: np.ndarray) -> list[str]:
    return _wide_strs(values, FLOAT32).tolist()


def _kernel_texts(values: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(text of every element, '' where undone; mask of the proved elements)."""
    bits = readonly(np.ascontiguousarray(values, np.float32).view(np.uint32))
    rows, sizes = float32_texts_kernel(bits, positional_limit(), _CANONICAL)
    texts = [bytes(r[:s]).decode("ascii") for r, s in zip(rows, sizes.tolist(), strict=True)]
    return texts, sizes > 0


def _fallback(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _ascii_table(_wide_strs(values, FLOAT32))


def _check(values: np.ndarray, min_proved: float = 1.0) -> None:
    """Proved texts equal NumPy's; the assembled table equals the NumPy path's table."""
    values = np.asarray(values, np.float32).ravel()
    texts, proved = _kernel_texts(values)
    want = _reference(values)
    wrong = [(float(v), bits, t, w) for v, bits, t, w, ok in
             zip(values.tolist(), values.view(np.uint32).tolist(), texts, want,
                 proved.tolist(), strict=True) if ok and t != w]
    assert not wrong, wrong[:10]
    assert proved.mean() >= min_proved, values[~proved][:10]
    data, ptr = float32_table(values, _CANONICAL, _fallback)
    ref_data, ref_ptr = _fallback(values)
    assert np.array_equal(ptr, ref_ptr)
    assert np.array_equal(data, ref_data)


def _from_bits(bits) -> np.ndarray:
    return np.asarray(bits, np.uint64).astype(np.uint32).view(np.float32)


def _with_neighbours(values: np.ndarray, steps: int = 3) -> np.ndarray:
    """``values`` and the ``steps`` float32 on each side, both signs (finite only)."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.int64)
    near = (bits[:, None] + np.arange(-steps, steps + 1)).ravel()
    near = near[(near >= 0) & (near < 0x7F800000)]
    out = _from_bits(near)
    return np.concatenate([out, -out])


def test_the_positional_switch_is_numpys():
    assert positional_limit() == 1e6  # NumPy >= 2.3 (the version this project pins)


def test_specials():
    nan_payloads = _from_bits([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0xFF800001,
                               0x7FC00001, 0xFFFFFFFF])
    values = np.concatenate([
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.1, 1e-5, 1.5e16],
                 np.float32),
        _from_bits([0x7F7FFFFF, 0x00800000, 0x00000001, 0x007FFFFF, 0x80000001]),
        nan_payloads])
    texts, proved = _kernel_texts(values)
    assert proved.all()
    assert texts[:10] == ["0.0", "-0.0", "inf", "-inf", "nan", "1.0", "-1.0", "0.1",
                          "1e-05", "1.5e+16"]
    assert texts[-7:] == ["nan", "nan:0xffc00000", "nan:0x7f800001", "nan:0x7fffffff",
                          "nan:0xff800001", "nan:0x7fc00001", "nan:0xffffffff"]
    _check(values)


def test_powers_of_two_and_neighbours():
    _check(_with_neighbours(np.ldexp(np.float32(1), np.arange(-149, 128))))


def test_powers_of_ten_and_neighbours():
    with np.errstate(over="ignore"):
        tens = np.array([float(f"1e{k}") for k in range(-45, 39)]).astype(np.float32)
    _check(_with_neighbours(tens[(tens > 0) & np.isfinite(tens)]))


def test_switches_between_positional_and_scientific():
    edges = np.array([1e-4, 1e6, 1e16, 999999.94, 9.9999e-5, 1.0000001e-4], np.float32)
    _check(_with_neighbours(edges, steps=40))


def test_subnormals():
    rng = np.random.default_rng(3)
    bits = np.concatenate([np.arange(1, 4096), np.arange(0x7FF000, 0x800000),
                           rng.integers(1, 0x800000, 100_000)])
    _check(np.concatenate([_from_bits(bits), -_from_bits(bits)]))


def test_short_decimals_and_ties():
    """Values with short binary expansions: exact decimals and exact ties between two
    shortest candidates (Dragon4 takes the even digit)."""
    rng = np.random.default_rng(4)
    values = np.concatenate([rng.integers(-10**6, 10**6, 50_000) / 2.0**rng.integers(0, 12, 50_000),
                             rng.integers(0, 2**24, 50_000) * 2.0**rng.integers(0, 60, 50_000),
                             [58962.3125, 1.91015625, 16777217.0, 0.5, 0.25, 100.0]])
    _check(values.astype(np.float32))


def test_two_million_random_bit_patterns():
    bits = np.random.default_rng(5).integers(0, 2**32, 2_000_000, dtype=np.uint64)
    _check(_from_bits(bits), min_proved=0.999)


def test_random_normals():
    rng = np.random.default_rng(6)
    values = rng.standard_normal(200_000) * 10.0 ** rng.integers(-8, 9, 200_000)
    _check(values.astype(np.float32), min_proved=0.999)


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64))
def test_arbitrary_bit_patterns(bits):
    _check(_from_bits(bits), min_proved=0.0)


def test_undone_elements_come_from_the_fallback_in_order():
    values = np.random.default_rng(7).standard_normal(1000).astype(np.float32)
    rows, sizes = float32_texts_kernel(readonly(values.view(np.uint32)), 1e6, _CANONICAL)
    undone = np.zeros(len(values), bool)
    undone[::7] = True
    sizes = sizes.copy()
    sizes[undone] = 0
    other_bytes, other_ptr = _fallback(values[undone])
    data, ptr = pack_texts_kernel(readonly(rows), readonly(sizes), other_bytes, other_ptr)
    ref_data, ref_ptr = _fallback(values)
    assert np.array_equal(ptr, ref_ptr) and np.array_equal(data, ref_data)


@pytest.mark.parametrize("legacy, limit", [("2.2", 1e16), ("1.21", 1e16), ("1.13", None)])
def test_legacy_print_modes(legacy, limit):
    """The form follows NumPy's print options: 1e16 switch in the 2.2 modes; the 1.13
    mode spells differently, so everything goes to NumPy."""
    values = _with_neighbours(np.array([1e-4, 1e6, 1e15, 1e16, 0.1, 3.0], np.float32))
    with np.printoptions(legacy=legacy):
        assert positional_limit() == limit
        data, ptr = float32_table(values, _CANONICAL, _fallback)
        ref_data, ref_ptr = _fallback(values)
        if limit is not None:
            texts, proved = _kernel_texts(values)
            assert proved.all() and texts == _reference(values)
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
