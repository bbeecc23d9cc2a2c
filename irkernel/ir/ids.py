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


def _numpy_max_rank() -> int:
    """NumPy's limit on ``ndim`` (64 since NumPy 2, 32 before): probed once at import."""
    try:
        np.empty((1,) * 64, np.int8)
    except ValueError:
        return 32
    return 64


#: Largest rank of a value: NumPy's own limit, so every value can be an ndarray.
MAX_RANK = _numpy_max_rank()
#: Largest element count of a shape: 2**59, so a value's byte size (count x 8, the widest
#: dtype) is at most 2**62 and stays in int64 after rounding up to an alignment, and every
#: index the generated code computes (LLVM i64) fits too. Nothing downstream can wrap.
MAX_ELEMENTS = 2**59


def shape_problem(shape: tuple[int, ...]) -> str | None:
    """What is wrong with ``shape`` (a tuple of Python ints), or None when it is usable.

    Checks the rank against :data:`MAX_RANK`, that every dimension is non-negative, and
    that every dimension and the element count are at most :data:`MAX_ELEMENTS` (exact
    Python integers: the check itself can not wrap).
    """
    if len(shape) > MAX_RANK:
        return f"rank {len(shape)} exceeds the limit of {MAX_RANK}"
    count = 1
    for d in shape:
        if d < 0:
            return f"dimension {d} is negative"
        if d > MAX_ELEMENTS:
            return f"dimension {d} exceeds the limit of {MAX_ELEMENTS} elements"
        count *= d
    if count > MAX_ELEMENTS:
        return (f"element count {count} exceeds the limit of {MAX_ELEMENTS} = 2**59 "
                f"(byte sizes must fit in int64)")
    return None

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

# Element dtypes of graph values. The code is the index in DTYPE_NAMES; the dtype column
# stores it as int8, so new dtypes are appended (saved files keep their meaning).
DTYPE_NAMES = ("float32", "float64", "int32", "int64", "bool",
               "float16", "bfloat16", "int8", "uint8", "int16", "uint16")
FLOAT32, FLOAT64, INT32, INT64, BOOL, FLOAT16, BFLOAT16, INT8, UINT8, INT16, UINT16 = range(11)
#: The NumPy dtype that *stores* each dtype. NumPy has no bfloat16: its values are held as
#: their uint16 bit patterns (the upper half of a float32), in arrays of dtype uint16, at
#: every API boundary (constants, inputs, outputs); ``irkernel.ir.narrow`` converts them.
NUMPY_DTYPES = tuple(np.dtype("uint16" if name == "bfloat16" else name) for name in DTYPE_NAMES)
_CODE_BY_NAME = {name: code for code, name in enumerate(DTYPE_NAMES)}
# uint16 arrays name uint16, never bfloat16 (whose storage they share)
_CODE_BY_NUMPY = {dt: code for code, dt in enumerate(NUMPY_DTYPES) if code != BFLOAT16}

#: Floats computed in float32 and rounded to their own dtype once per op (stored narrow).
NARROW_FLOAT_DTYPES = frozenset({FLOAT16, BFLOAT16})
FLOAT_DTYPES = frozenset({FLOAT32, FLOAT64}) | NARROW_FLOAT_DTYPES
UNSIGNED_DTYPES = frozenset({UINT8, UINT16})
INT_DTYPES = frozenset({INT32, INT64, INT8, INT16}) | UNSIGNED_DTYPES
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
            npdt = np.dtype(dtype)  # type: ignore[arg-type]
        except TypeError:
            npdt = None
        # ml_dtypes' bfloat16 (what onnx hands out) is named by its dtype's name, so that
        # irkernel never imports ml_dtypes; its arrays are viewed as uint16 bits on entry.
        code = None if npdt is None else (BFLOAT16 if npdt.name == "bfloat16"
                                          else _CODE_BY_NUMPY.get(npdt))
        if code is not None:
            return code
    raise ValueError(f"unsupported dtype {dtype!r}; expected one of {', '.join(DTYPE_NAMES)}")


def dtype_name(code: int) -> str:
    return DTYPE_NAMES[code]


def numpy_dtype(code: int) -> np.dtype:
    return NUMPY_DTYPES[code]
