"""Id types, dtype codes, encodings and sentinels shared by every layer.

Abbreviations used in public names (the decoder ring): ``attr`` attribute,
``const`` constant, ``dtype`` data type, ``enc`` encoding, ``idx`` index,
``n_`` count of, ``ptr`` CSR offset array, ``rep`` replacement map.
Imports numpy only.
"""

from __future__ import annotations

from typing import NewType

import numpy as np
import numpy.typing as npt

NodeId = NewType("NodeId", int)
ShapeId = NewType("ShapeId", int)
AttrId = NewType("AttrId", int)
ConstId = NewType("ConstId", int)
NodeIds = npt.NDArray[np.int32]

#: Sentinel for "no node / no id" in every int32 id column.
NONE = -1
#: Largest node count a Function may hold (ids are int32; -1 is NONE).
MAX_NODES = 2**31 - 2

# Column dtypes (fixed by the spec; never put the dtype in a column's name).
KIND = np.int16
ID = np.int32
DTYPE_CODE = np.int8

# Operand encodings: what the a0/a1 slots mean for an op.
ENC_NULLARY = 0  # a0 = a1 = NONE
ENC_UNARY = 1  # operand in a0
ENC_BINARY = 2  # operands in a0, a1
ENC_CONST = 3  # a0 = const_id
ENC_PARAM = 4  # a0 = parameter position
ENC_VARIADIC = 5  # a0 = start in extra, a1 = count
ENCODING_NAMES = ("nullary", "unary", "binary", "const", "param", "variadic")

# Element dtypes of graph values. The code is the index in DTYPE_NAMES.
DTYPE_NAMES = ("float32", "float64", "int32", "int64", "bool")
NUMPY_DTYPES = tuple(np.dtype(name) for name in DTYPE_NAMES)
FLOAT32, FLOAT64, INT32, INT64, BOOL = range(5)
_CODE_BY_NAME = {name: code for code, name in enumerate(DTYPE_NAMES)}
_CODE_BY_NUMPY = {dt: code for code, dt in enumerate(NUMPY_DTYPES)}

FLOAT_DTYPES = frozenset({FLOAT32, FLOAT64})
INT_DTYPES = frozenset({INT32, INT64})
NUMERIC_DTYPES = FLOAT_DTYPES | INT_DTYPES
ALL_DTYPES = NUMERIC_DTYPES | {BOOL}


def dtype_code(dtype: object) -> int:
    """Code of a dtype given by name, NumPy dtype or code; ValueError otherwise."""
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if 0 <= int(dtype) < len(DTYPE_NAMES):
            return int(dtype)
    elif isinstance(dtype, str):
        code = _CODE_BY_NAME.get(dtype)
        if code is not None:
            return code
    else:
        try:
            code = _CODE_BY_NUMPY.get(np.dtype(dtype))  # type: ignore[arg-type]
        except TypeError:
            code = None
        if code is not None:
            return code
    raise ValueError(f"unsupported dtype {dtype!r}; expected one of {', '.join(DTYPE_NAMES)}")


def dtype_name(code: int) -> str:
    return DTYPE_NAMES[code]


def numpy_dtype(code: int) -> np.dtype:
    return NUMPY_DTYPES[code]
