"""Narrow floats (float16, bfloat16): conversions between their storage and float32.

The semantics every layer shares: a float16 or bfloat16 op computes in float32 on
its operands' exact values and rounds its result to its own dtype once, to nearest
even (conversions from float64 and ints go through float32 first). The interpreter
(``ir.interp``), the TIR interpreter, FoldConstant and the generated code (which
loads narrow, computes in float32 registers and stores narrow) all follow it, so
they agree bit for bit.

NumPy has no bfloat16 and irkernel may not depend on ``ml_dtypes``: a bfloat16 array
is a uint16 array of bit patterns (the upper half of the float32 of the same value).
:func:`to_storage` also accepts ``ml_dtypes.bfloat16`` arrays (by the dtype's name,
without importing it) and float arrays (rounded). Imports numpy and ``ids`` only.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir.ids import BFLOAT16, FLOAT16, NARROW_FLOAT_DTYPES, NUMPY_DTYPES


def bfloat16_to_float32(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (exact: bfloat16 is float32's upper half)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def float32_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """uint16 bit patterns of float32 values rounded to bfloat16, to nearest even.

    NaNs stay NaN (quieted, sign kept); infinities stay infinite; values that round
    past the largest bfloat16 become infinities, as IEEE rounding says.
    """
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    lsb = (u >> np.uint32(16)) & np.uint32(1)
    rounded = ((u + np.uint32(0x7FFF) + lsb) >> np.uint32(16)).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = ((u >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return np.where(nan, quiet, rounded)


def is_narrow(code: int) -> bool:
    return code in NARROW_FLOAT_DTYPES


def widen(arr: np.ndarray, code: int) -> np.ndarray:
    """float32 values of a float16/bfloat16 array of dtype ``code``; other arrays as given."""
    if code == FLOAT16:
        return np.asarray(arr).astype(np.float32)
    if code == BFLOAT16:
        return bfloat16_to_float32(arr)
    return arr


def narrow(values: np.ndarray, code: int) -> np.ndarray:
    """Storage of ``values`` rounded to float16/bfloat16 (through float32: see the module)."""
    with np.errstate(over="ignore", invalid="ignore"):  # out of range is inf, as IEEE says
        f32 = np.asarray(values).astype(np.float32)
        if code == FLOAT16:
            return f32.astype(np.float16)
    if code == BFLOAT16:
        return float32_to_bfloat16(f32).reshape(f32.shape)
    raise ValueError(f"narrow: dtype code {code} is not float16 or bfloat16")


def to_storage(value: object, code: int) -> np.ndarray:
    """``value`` as an array of the storage dtype of ``code`` (``ids.NUMPY_DTYPES``).

    For bfloat16: uint16 arrays are bit patterns (kept), ``ml_dtypes.bfloat16`` arrays
    are viewed as their bits, other numbers are rounded to nearest even. For float16:
    NumPy's conversion through float32. Other dtypes: ``np.asarray(value, dtype)``.
    """
    arr = np.asarray(value)
    if code == BFLOAT16:
        if arr.dtype == np.uint16:
            return arr
        if arr.dtype.name == "bfloat16" and arr.dtype.itemsize == 2:
            return arr.view(np.uint16)
        return narrow(arr, BFLOAT16)
    if code == FLOAT16 and arr.dtype != np.float16:
        return narrow(arr, FLOAT16)
    return np.asarray(arr, NUMPY_DTYPES[code])


__all__ = ["bfloat16_to_float32", "float32_to_bfloat16", "is_narrow", "narrow", "to_storage",
           "widen"]
