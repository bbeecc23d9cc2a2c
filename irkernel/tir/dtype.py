"""TIR data types: the element dtypes of irkernel, optionally with vector lanes.

A TIR dtype is a plain string: an element name (``"float32"``, ``"float64"``,
``"int32"``, ``"int64"``, ``"bool"``, ``"float16"``, ``"bfloat16"``, ``"int8"``,
``"uint8"``, ``"int16"``, ``"uint16"``) or an element name with a lane count,
``"float32x16"``, as in TVM. Strings keep nodes cheap to compare, hash and
print; the helpers below are the only place that parses them.
Imports numpy and ``irkernel.ir.ids`` only.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir.ids import DTYPE_NAMES, NUMPY_DTYPES

#: Element dtypes, in irkernel's code order.
ELEMENT_DTYPES = DTYPE_NAMES
#: Narrow floats: stored in 2 bytes, float32 in registers (``value`` of a load is the
#: float32 of the stored value; a Cast to them rounds to nearest even, through float32).
NARROW_FLOAT_ELEMENTS = frozenset({"float16", "bfloat16"})
FLOAT_ELEMENTS = frozenset({"float32", "float64"}) | NARROW_FLOAT_ELEMENTS
UNSIGNED_ELEMENTS = frozenset({"uint8", "uint16"})
INT_ELEMENTS = frozenset({"int32", "int64", "int8", "int16"}) | UNSIGNED_ELEMENTS
#: The dtype of loop variables, extents and shapes unless the user says otherwise.
INDEX = "int64"
#: Element size in bytes (bool is one byte in memory, as in NumPy).
ELEMENT_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "bool": 1, "float16": 2,
                 "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2}
#: Largest lane count accepted for a vector dtype (LLVM legalizes wider vectors by splitting).
MAX_LANES = 1024

_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "bool": (0, 1),
              "int8": (-128, 127), "uint8": (0, 255), "int16": (-(2**15), 2**15 - 1),
              "uint16": (0, 2**16 - 1)}


def normalize(dtype: object) -> str:
    """The canonical dtype string for a name, NumPy dtype or vector name.

    Raises
    ------
    ValueError
        For anything that is not one of the element dtypes, optionally
        with ``x<lanes>``.
    """
    if isinstance(dtype, str):
        elem, _, lanes = dtype.partition("x")
        if elem in ELEMENT_DTYPES and (not lanes or (lanes.isdigit() and
                                                    1 <= int(lanes) <= MAX_LANES)):
            return elem if not lanes or int(lanes) == 1 else f"{elem}x{int(lanes)}"
    else:
        try:
            name = np.dtype(dtype).name  # type: ignore[call-overload]
        except TypeError:
            name = None
        if name in ELEMENT_DTYPES:
            return name
    raise ValueError(f"unsupported TIR dtype {dtype!r}; expected one of "
                     f"{', '.join(ELEMENT_DTYPES)}, optionally with lanes (e.g. 'float32x16')")


def element(dtype: str) -> str:
    """The element part: ``element("float32x16") == "float32"``."""
    return dtype.partition("x")[0]


def lanes(dtype: str) -> int:
    """The lane count (1 for scalars)."""
    rest = dtype.partition("x")[2]
    return int(rest) if rest else 1


def with_lanes(dtype: str, n: int) -> str:
    """``dtype``'s element with ``n`` lanes (a scalar dtype when ``n == 1``)."""
    elem = element(dtype)
    return elem if n == 1 else f"{elem}x{n}"


def is_float(dtype: str) -> bool:
    return element(dtype) in FLOAT_ELEMENTS


def is_int(dtype: str) -> bool:
    return element(dtype) in INT_ELEMENTS


def is_narrow_float(dtype: str) -> bool:
    return element(dtype) in NARROW_FLOAT_ELEMENTS


def is_unsigned(dtype: str) -> bool:
    return element(dtype) in UNSIGNED_ELEMENTS


def is_bool(dtype: str) -> bool:
    return element(dtype) == "bool"


def int_range(dtype: str) -> tuple[int, int]:
    """The representable range of an int or bool dtype."""
    return _INT_RANGE[element(dtype)]


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype that stores the element (uint16 for bfloat16: its bit patterns)."""
    return NUMPY_DTYPES[DTYPE_NAMES.index(element(dtype))]


def register_numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of the element's values in registers (float32 for narrow floats)."""
    elem = element(dtype)
    return np.dtype(np.float32) if elem in NARROW_FLOAT_ELEMENTS else numpy_dtype(elem)


def wrap_int(value: int, dtype: str) -> int:
    """``value`` wrapped to ``dtype``'s two's-complement range (bool: nonzero is 1)."""
    elem = element(dtype)
    if elem == "bool":
        return int(value != 0)
    bits = ELEMENT_BYTES[elem] * 8
    value &= (1 << bits) - 1
    if elem in UNSIGNED_ELEMENTS:
        return value
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


__all__ = ["ELEMENT_BYTES", "ELEMENT_DTYPES", "FLOAT_ELEMENTS", "INDEX", "INT_ELEMENTS",
           "MAX_LANES", "NARROW_FLOAT_ELEMENTS", "UNSIGNED_ELEMENTS", "element", "int_range",
           "is_bool", "is_float", "is_int", "is_narrow_float", "is_unsigned", "lanes",
           "normalize", "numpy_dtype", "register_numpy_dtype", "with_lanes", "wrap_int"]
