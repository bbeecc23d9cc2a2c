"""NumPy reference implementations of the built-in ops (the semantics; the interpreter and
FoldConstant call them), except the NN ops (:mod:`irkernel.ir.ops.nn_references`).

A reference maps ``(operand arrays, normalized attrs)`` to the result array.
Operands have already been checked by the op's type rule, so references do no
validation of their own. Transcendental float math (exp, log, tanh, sigmoid,
power, erf) goes through the compiled scalar code of
:mod:`irkernel.ir.ops.scalar`, so folded constants equal interpreted values bit
for bit. Imports numpy and lower ``irkernel.ir`` modules only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import irkernel.ir.ops.scalar as scalar
from irkernel.ir.ids import NARROW_FLOAT_DTYPES, dtype_code, numpy_dtype
from irkernel.ir.ops.type_rules import normalize_axes, permutation

Reference = Callable[[Sequence[np.ndarray], Mapping[str, Any]], np.ndarray]


def ufunc(fn: Callable[..., Any]) -> Reference:
    def ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(*xs))
    return ref


def divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.true_divide(x, y) if x.dtype.kind == "f" else np.floor_divide(x, y)


def fmod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C fmod (sign of x); ints: truncated remainder with ``x % 0 == 0`` (np.fmod)."""
    if x.dtype.kind == "f":
        return np.fmod(x, y)
    # np.fmod gives 0 for a zero divisor; spell it out (and INT_MIN % -1) so no platform
    # trap or warning decides the result
    safe = np.where((y == 0) | (y == -1), np.ones((), y.dtype), y)
    return np.where((y == 0) | (y == -1), np.zeros((), x.dtype), np.fmod(x, safe))


def floor_mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """np.mod (sign of y); ints: ``x % 0 == 0``."""
    if x.dtype.kind == "f":
        return np.mod(x, y)
    safe = np.where((y == 0) | (y == -1), np.ones((), y.dtype), y)
    return np.where((y == 0) | (y == -1), np.zeros((), x.dtype), np.mod(x, safe))


def float_math(opcode: int) -> Reference:
    """exp/log/tanh/sigmoid/power/erf through the compiled scalar semantics (see ops.scalar)."""
    def ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        arrays = np.broadcast_arrays(*xs)
        dt = arrays[0].dtype
        # np.array copies: a broadcast view handed to Numba as is warns (FutureWarning)
        flat = [np.array(a, np.float64, order="C").ravel() for a in arrays]
        out = scalar.float_math_kernel(opcode, flat[0], flat[-1], dt == np.float32)
        return out.astype(dt).reshape(arrays[0].shape)
    return ref


def nan_max(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """NaN if either is NaN, else ``x if x > y else y`` (pins the signed-zero result)."""
    out = np.where(x > y, x, y)
    return np.where(np.isnan(x), x, out) if x.dtype.kind == "f" else out


def nan_min(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.where(x < y, x, y)
    return np.where(np.isnan(x), x, out) if x.dtype.kind == "f" else out


def relu(x: np.ndarray) -> np.ndarray:
    return nan_max(x, np.zeros((), x.dtype))


def astype_reference(x: np.ndarray, code: int) -> np.ndarray:
    """Conversion with NaN -> 0 and saturation for float -> int (see ``irkernel.ir.ops``).

    A float16/bfloat16 target gives float32 values: the caller rounds them to the narrow
    dtype (``irkernel.ir.narrow``; ``x`` is float32 too when it was narrow)."""
    dt = np.dtype(np.float32) if code in NARROW_FLOAT_DTYPES else numpy_dtype(code)
    if x.dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        lo, top = float(info.min), float(info.max) + 1.0  # both exact powers of two (or 0)
        with np.errstate(invalid="ignore"):
            inside = (x >= lo) & (x < top)
            out = np.trunc(np.where(inside, x, 0)).astype(dt)
            out = np.where(x >= top, info.max, out)
            out = np.where(x < lo, info.min, out).astype(dt)
        return np.asarray(out)
    with np.errstate(all="ignore"):
        if x.dtype.kind == "f" and x.dtype.itemsize == 8 and code in NARROW_FLOAT_DTYPES:
            x = x.astype(np.float32)  # narrow floats convert through float32
        return np.asarray(x.astype(dt))


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------

def reduce_ref(fn: Callable[..., Any], pass_dtype: bool) -> Reference:
    def ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        x = xs[0]
        axes = normalize_axes(attrs["axis"], x.ndim)
        kw = {"dtype": x.dtype} if pass_dtype else {}
        with np.errstate(all="ignore"):
            return np.asarray(fn(x, axis=axes, keepdims=attrs["keepdims"], **kw), dtype=x.dtype)
    return ref


def mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool, dtype: np.dtype) -> np.ndarray:
    """np.mean's arithmetic (sum in ``dtype``, then divide) without its empty-slice warning."""
    count = int(np.prod([x.shape[a] for a in axis], dtype=np.int64))
    return np.true_divide(np.sum(x, axis=axis, keepdims=keepdims, dtype=dtype), count)


def arg_reduce_ref(is_max: bool) -> Reference:
    """argmax/argmin over one axis: NaN is the maximum (argmax) / minimum (argmin), as NumPy;
    ties go to the first index, or the last with ``select_last_index``."""
    def ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        x = xs[0]
        (axis,) = normalize_axes((attrs["axis"],), x.ndim)
        fn = np.argmax if is_max else np.argmin
        if attrs["select_last_index"]:
            n = x.shape[axis]
            out = n - 1 - fn(np.flip(x, axis), axis=axis, keepdims=attrs["keepdims"])
        else:
            out = fn(x, axis=axis, keepdims=attrs["keepdims"])
        return np.asarray(out, np.int64)
    return ref


# ---------------------------------------------------------------------------
# layout and movement
# ---------------------------------------------------------------------------

def reshape_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.reshape(xs[0], attrs["shape"])


def permute_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.transpose(xs[0], permutation(attrs["axes"], xs[0].ndim))


def broadcast_to_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.broadcast_to(xs[0], attrs["shape"]).copy()


def astype_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return astype_reference(xs[0], dtype_code(attrs["dtype"]))


def concat_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.concatenate(list(xs), axis=attrs["axis"])


def strided_slice_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """NumPy's ``x[b0:e0:s0, ...]``, materialized."""
    key = tuple(slice(b, e, s) for b, e, s in
                zip(attrs["begin"], attrs["end"], attrs["strides"], strict=True))
    return np.array(xs[0][key], copy=True)


def clamp_indices(indices: np.ndarray, dim: int) -> np.ndarray:
    """``i mod dim`` for i in [-dim, dim), else clamped into [0, dim - 1] (int64)."""
    i = indices.astype(np.int64)
    i = np.where(i < 0, i + dim, i)
    return np.clip(i, 0, max(dim - 1, 0))


def take_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    data, indices = xs
    (axis,) = normalize_axes((attrs["axis"],), data.ndim)
    return np.take(data, clamp_indices(indices, data.shape[axis]), axis=axis)


def pad_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, value = xs
    widths, mode = attrs["pad_width"], attrs["mode"]
    rank = x.ndim
    pairs = [(widths[k], widths[rank + k]) for k in range(rank)]
    if mode == "constant":
        return np.pad(x, pairs, mode="constant", constant_values=value.reshape(()))
    return np.pad(x, pairs, mode=mode)


def scatter_nd_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """ONNX ScatterND: index rows apply in row-major order, each replacing its target
    (reduction none: the last update wins) or combining with it (add, mul, max, min; max
    and min propagate NaN as ``nan_max``/``nan_min``); index components are wrapped and
    clamped like ``take``'s."""
    data, indices, updates = xs
    out = np.array(data, copy=True)
    k = indices.shape[-1]
    rows = indices.reshape(int(np.prod(indices.shape[:-1], dtype=np.int64)), k)
    if rows.shape[0] == 0 or out.size == 0:
        return out
    ups = updates.reshape((rows.shape[0], -1))
    flat = np.zeros(rows.shape[0], np.int64)
    for j in range(k):
        flat = flat * data.shape[j] + clamp_indices(rows[:, j], data.shape[j])
    target = out.reshape(int(np.prod(data.shape[:k], dtype=np.int64)), -1)
    combine = _SCATTER_COMBINE[attrs.get("reduction", "none")]
    # rounds: the r-th update of every target in round r, so repeated targets combine in
    # row order with one vectorized step per round (NumPy's fancy assignment does not
    # promise an order among repeated targets)
    order = np.argsort(flat, kind="stable")
    sorted_flat = flat[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_flat)) + 1]
    rank = np.arange(flat.size) - np.repeat(starts, np.diff(np.r_[starts, flat.size]))
    with np.errstate(all="ignore"):
        for r in range(int(rank.max()) + 1):
            sel = order[rank == r]
            t = flat[sel]
            target[t] = combine(target[t], ups[sel])
    return out


_SCATTER_COMBINE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "none": lambda old, new: new, "add": np.add, "mul": np.multiply,
    "max": lambda old, new: nan_max(old, new), "min": lambda old, new: nan_min(old, new)}


def topk_indices_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """The int64 positions along ``axis`` of the ``k`` largest (``largest``) or smallest
    elements, best first, equal values in index order; NaN ranks above every number
    (first when largest, last when smallest: onnxruntime's order). ``sorted`` False gives
    the same ``k`` positions in index order.

    A stable ascending argsort ranks NaN last and keeps ties in index order: that is the
    smallest order. The largest order is the stable ascending argsort of the reversed
    axis, read backwards (ties then come back in index order too)."""
    x, k = xs[0], attrs["k"]
    (axis,) = normalize_axes((attrs["axis"],), x.ndim)
    n = x.shape[axis]
    if attrs["largest"]:
        rev = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        order = (n - 1) - np.flip(rev, axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    out = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return out if attrs["sorted"] else np.sort(out, axis=axis)


def cumulative_ref(is_sum: bool) -> Reference:
    """cumsum/cumprod along ``axis`` in the input dtype, accumulated in order (ints wrap);
    ``exclusive`` leaves each element out of its own result (the first is 0 or 1),
    ``reverse`` runs from the end."""
    def ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        x = xs[0]
        (axis,) = normalize_axes((attrs["axis"],), x.ndim)
        if x.shape[axis] == 0:
            return np.array(x, copy=True)
        if attrs["reverse"]:
            x = np.flip(x, axis)
        if attrs["exclusive"]:
            first = np.full_like(np.take(x, [0], axis=axis), 0 if is_sum else 1)
            x = np.concatenate([first, np.take(x, np.arange(x.shape[axis] - 1), axis=axis)],
                               axis=axis)
        with np.errstate(all="ignore"):
            out = (np.cumsum if is_sum else np.cumprod)(x, axis=axis, dtype=x.dtype)
        return np.flip(out, axis) if attrs["reverse"] else out
    return ref
