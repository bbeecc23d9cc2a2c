"""Dim values: integer tensors whose elements are symbolic dims, computed at import.

A symbolic import (``from_onnx(..., symbolic=True)``) gives ``Shape`` of a tensor of
shape ``(batch, seq, 64)`` the value ``[batch, seq, 64]``. The frontend keeps such a
value as a constant like any other shape arithmetic, held in a NumPy array of dtype
``object`` whose elements are ints or :class:`~irkernel.ir.symdim.SymDim`; the ops of
``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` chains run on it at import
(:func:`evaluate`), so a Reshape target, an Expand shape or a ConstantOfShape extent
becomes a symbolic dim of the graph. An array whose elements are all ints is a plain
int64 array again (:func:`normalize`): a static model never sees an object array.

What can not be computed exactly is an error naming the op and the dim, never a wrong
static value: comparisons are decided from the variables' bounds
(``SymDim.__eq__``/``__lt__`` give a provable answer or raise), division is by positive
constants only, and a dim value used as run-time data (``Cast`` to float feeding a
graph op) is refused by ``Context.node``. Imports NumPy and ``irkernel.ir`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.ids import DTYPE_NAMES, FLOAT_DTYPES
from irkernel.ir.symdim import SymDim, UndecidableDim


class DimValueError(ValueError):
    """An op that can not compute a value holding symbolic dims at import."""


def is_dims(arr: object) -> bool:
    """Whether ``arr`` is a dim value (an object array holding a symbolic dim)."""
    return isinstance(arr, np.ndarray) and arr.dtype == object


def normalize(arr: np.ndarray) -> np.ndarray:
    """An object array with no symbolic element as int64; any other array unchanged."""
    if arr.dtype != object:
        return arr
    if not any(isinstance(d, SymDim) for d in arr.flat):
        return np.asarray([int(d) for d in arr.flat], np.int64).reshape(arr.shape)
    return arr


def from_dims(dims: Sequence[Any]) -> np.ndarray:
    """The 1-D value of a shape (``Shape``): int64, or an object array of dims."""
    out = np.empty(len(dims), object)
    out[:] = list(dims)
    return normalize(out)


def first_symbolic(arr: np.ndarray) -> SymDim | None:
    return next((d for d in arr.flat if isinstance(d, SymDim)), None)


def _decided(test: Callable[[Any, Any], bool]) -> Callable[..., np.ndarray]:
    """An elementwise comparison whose answer holds for every binding (else it raises)."""
    fn = np.frompyfunc(lambda a, b: bool(test(a, b)), 2, 1)
    return lambda a, b: fn(a, b).astype(bool)


def _equal(a: Any, b: Any) -> bool:
    diff = a - b  # an int when provably constant; else decided from the bounds
    return diff == 0 if isinstance(diff, int) else not bool(diff)


_COMPARE: dict[str, Callable[..., np.ndarray]] = {
    "equal": _decided(_equal),
    "not_equal": _decided(lambda a, b: not _equal(a, b)),
    "less": _decided(lambda a, b: a < b),
    "less_equal": _decided(lambda a, b: a <= b),
    "greater": _decided(lambda a, b: a > b),
    "greater_equal": _decided(lambda a, b: a >= b),
    "maximum": np.frompyfunc(lambda a, b: a if a >= b else b, 2, 1),
    "minimum": np.frompyfunc(lambda a, b: a if a <= b else b, 2, 1),
}
#: Ops whose NumPy reference computes on object arrays with the dims' own operators.
_BY_REFERENCE = frozenset({"add", "subtract", "multiply", "negative", "take", "concat",
                           "reshape", "permute_dims", "strided_slice", "broadcast_to",
                           "where", "abs"})


def evaluate(op: str, arrays: Sequence[np.ndarray], codes: Sequence[int],
             attrs: Mapping[str, Any], result_code: int) -> np.ndarray:
    """The value of graph op ``op`` on constant operands of which one holds symbolic dims
    (module doc); :class:`DimValueError` naming the op and the dim when it can not."""
    sym = next((first_symbolic(a) for a in arrays if is_dims(a)), None)
    try:
        if op in _COMPARE:
            out = _COMPARE[op](*arrays)
        elif op == "divide":
            out = _divide(*arrays)
        elif op == "astype":
            out = _astype(arrays[0], result_code)
        elif op in _BY_REFERENCE:
            if op == "abs":
                out = np.frompyfunc(lambda d: d if d >= 0 else -d, 1, 1)(arrays[0])
            else:
                out = ops.get_op(op).reference([np.asarray(a) for a in arrays], dict(attrs))
        else:
            raise DimValueError("the op can not compute dims at import")
    except (UndecidableDim, DimValueError) as exc:
        raise DimValueError(f"symbolic dim {sym}: {exc}") from None
    out = np.asarray(out)
    if out.dtype != object and out.dtype.kind in "iu":
        return out.astype(np.int64, copy=False)
    return normalize(out) if out.dtype == object else out


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division of dims (ONNX truncates, the graph op floors): exact when the
    divisors are positive constants and the dividends provably non-negative."""
    if is_dims(b) or np.any(np.asarray(b) <= 0):
        raise DimValueError("a dim divides only by positive constants")
    check = np.frompyfunc(lambda d: d >= 0, 1, 1)
    if not all(np.asarray(check(a)).flat):  # UndecidableDim when the bounds do not say
        raise DimValueError("a negative dim value is divided")
    return np.floor_divide(a, b)


def _astype(arr: np.ndarray, code: int) -> np.ndarray:
    if code in FLOAT_DTYPES or DTYPE_NAMES[code] == "bool":
        raise DimValueError(f"it becomes a {DTYPE_NAMES[code]} value (dims are integers; a "
                            "run-time value of a dim is not supported)")
    return arr  # a dim fits any integer type the model casts it to (int32, int64)


__all__ = ["DimValueError", "evaluate", "first_symbolic", "from_dims", "is_dims",
           "normalize"]
