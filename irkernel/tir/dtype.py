"""TIR data types: the five element dtypes of irkernel, optionally with vector lanes.

A TIR dtype is a plain string: an element name (``"float32"``, ``"float64"``,
``"int32"``, ``"int64"``, ``"bool"``) or an element name with a lane count,
``"float32x16"``, as in TVM. Strings keep nodes cheap to compare, hash and
print; the helpers below are the only place that parses them.
Imports numpy and ``irkernel.ir.ids`` only.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir.ids import DTYPE_NAMES

#: Element dtypes, in irkernel's code order.
ELEMENT_DTYPES = DTYPE_NAMES
FLOAT_ELEMENTS = frozenset({"float32", "float64"})
INT_ELEMENTS = frozenset({"int32", "int64"})
#: The dtype of loop variables, extents and shapes unless the user says otherwise.
INDEX = "int64"
#: Element size in bytes (bool is one byte in memory, as in NumPy).
ELEMENT_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "bool": 1}
#: Largest lane count accepted for a vector dtype (LLVM legalizes wider vectors by splitting).
MAX_LANES = 1024

_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "bool": (0, 1)}


def normalize(dtype: object) -> str:
    """The canonical dtype string for a name, NumPy dtype or vector name.

    Raises
    ------
    ValueError
        For anything that is not one of the five element dtypes, optionally
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


def is_bool(dtype: str) -> bool:
    return element(dtype) == "bool"


def int_range(dtype: str) -> tuple[int, int]:
    """The representable range of an int or bool dtype."""
    return _INT_RANGE[element(dtype)]


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of the element."""
    return np.dtype(element(dtype))


def wrap_int(value: int, dtype: str) -> int:
    """``value`` wrapped to ``dtype``'s two's-complement range (bool: nonzero is 1)."""
    elem = element(dtype)
    if elem == "bool":
        return int(value != 0)
    bits = 32 if elem == "int32" else 64
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


__all__ = ["ELEMENT_BYTES", "ELEMENT_DTYPES", "FLOAT_ELEMENTS", "INDEX", "INT_ELEMENTS",
           "MAX_LANES", "element", "int_range", "is_bool", "is_float", "is_int", "lanes",
           "normalize", "numpy_dtype", "with_lanes", "wrap_int"]
