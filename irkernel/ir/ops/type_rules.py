"""Dtype and shape rules (``OpDef.infer``) of the built-in ops, except the NN ops
(:mod:`irkernel.ir.ops.nn_rules`).

A rule maps ``(operand types, normalized attrs)`` to the result type or raises
:class:`~irkernel.ir.errors.TypeInferenceError` with a message naming the shapes
and attributes at fault. Rules are pure functions of types: they never see values.
Also owns the shared helpers ``broadcast_shapes``, ``normalize_axes``,
``permutation`` and ``slice_range`` (NumPy's slice arithmetic). Imports numpy and
lower ``irkernel.ir`` modules only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.ids import (
    BOOL,
    DTYPE_NAMES,
    INT32,
    INT64,
    MAX_ELEMENTS,
    NUMERIC_DTYPES,
    dtype_code,
)
from irkernel.ir.ops.opdef import Shape, TensorType
from irkernel.ir.symdim import UndecidableDim, is_symbolic

INDEX_DTYPES = frozenset({INT32, INT64})


def fmt(shape: Shape) -> str:
    """``(2, 3)``, ``(4,)``, ``()``: how error messages spell a shape."""
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting with an error naming the shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(ndim):
        dim = 1
        for s in shapes:
            d = s[k - ndim + len(s)] if k - ndim + len(s) >= 0 else 1
            if d != 1:
                if dim not in (1, d):
                    if is_symbolic(dim) or is_symbolic(d):
                        raise UndecidableDim(
                            f"cannot decide whether dims {dim} and {d} broadcast (a symbolic "
                            "dim broadcasts with itself and 1 only): shapes "
                            + ", ".join(fmt(s) for s in shapes))
                    raise TypeInferenceError(
                        "shapes " + ", ".join(fmt(s) for s in shapes) + " do not broadcast")
                dim = d
        out.append(dim)
    return tuple(out)


def dtypes_in(allowed: frozenset[int], types: Sequence[TensorType], what: str) -> None:
    for dt, _ in types:
        if dt not in allowed:
            names = ", ".join(DTYPE_NAMES[c] for c in sorted(allowed))
            raise TypeInferenceError(f"{what} dtype {DTYPE_NAMES[dt]} not supported ({names})")


def same_dtype(types: Sequence[TensorType]) -> int:
    first = types[0][0]
    if any(dt != first for dt, _ in types):
        names = ", ".join(DTYPE_NAMES[dt] for dt, _ in types)
        raise TypeInferenceError(f"operand dtypes differ ({names}); insert astype")
    return first


def elementwise_rule(allowed: frozenset[int], result_bool: bool = False):
    def infer(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
        dtypes_in(allowed, types, "operand")
        dt = same_dtype(types)
        return (BOOL if result_bool else dt), broadcast_shapes(*(s for _, s in types))
    return infer


def where_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    if types[0][0] != BOOL:
        raise TypeInferenceError(f"condition must be bool, got {DTYPE_NAMES[types[0][0]]}")
    dt = same_dtype(types[1:])
    return dt, broadcast_shapes(*(s for _, s in types))


def matmul_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dtypes_in(NUMERIC_DTYPES, types, "operand")
    dt = same_dtype(types)
    a, b = types[0][1], types[1][1]
    if not a or not b:
        raise TypeInferenceError(f"matmul operands must have rank >= 1, got {fmt(a)} and {fmt(b)}")
    a2 = a if len(a) >= 2 else (1,) + a
    b2 = b if len(b) >= 2 else b + (1,)
    if a2[-1] != b2[-2]:
        raise TypeInferenceError(f"matmul contraction mismatch: {fmt(a)} @ {fmt(b)}")
    out = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return dt, out


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------

def normalize_axes(axes: tuple[int, ...] | None, rank: int) -> tuple[int, ...]:
    """Sorted non-negative axes; None means all. TypeInferenceError when out of range."""
    if axes is None:
        return tuple(range(rank))
    out = []
    for ax in axes:
        if not -rank <= ax < rank:
            raise TypeInferenceError(f"axis {ax} out of range for rank {rank}")
        out.append(ax % rank)
    if len(set(out)) != len(out):
        raise TypeInferenceError(f"repeated axis in {axes}")
    return tuple(sorted(out))


def reduce_rule(allowed: frozenset[int], empty_ok: bool):
    def infer(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
        dtypes_in(allowed, types, "operand")
        dt, shape = types[0]
        axes = normalize_axes(attrs["axis"], len(shape))
        if not empty_ok and any(not shape[a] >= 1 for a in axes):  # symbolic: decided or raises
            raise TypeInferenceError(f"reduction over an empty axis of shape {fmt(shape)}")
        if attrs["keepdims"]:
            return dt, tuple(1 if k in axes else d for k, d in enumerate(shape))
        return dt, tuple(d for k, d in enumerate(shape) if k not in axes)
    return infer


def arg_reduce_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    """argmax/argmin: one axis of a numeric tensor of rank >= 1, int64 result."""
    dtypes_in(NUMERIC_DTYPES, types, "operand")
    _, shape = types[0]
    (axis,) = normalize_axes((attrs["axis"],), len(shape))
    if not shape[axis] >= 1:  # a symbolic dim: decided by its bounds, or raises
        raise TypeInferenceError(f"arg reduction over the empty axis {axis} of shape {fmt(shape)}")
    if attrs["keepdims"]:
        return INT64, shape[:axis] + (1,) + shape[axis + 1:]
    return INT64, shape[:axis] + shape[axis + 1:]


# ---------------------------------------------------------------------------
# layout and movement
# ---------------------------------------------------------------------------

def reshape_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt, shape = types[0]
    new = attrs["shape"]
    if sum(d == -1 for d in new) > 1 or any(not is_symbolic(d) and d < -1 for d in new):
        raise TypeInferenceError(f"bad reshape target {fmt(new)}")
    if any(is_symbolic(d) for d in (*shape, *new)):
        return dt, _symbolic_reshape(shape, new)
    size = math.prod(shape)  # exact Python ints: a huge target can not wrap to a match
    known = math.prod(d for d in new if d != -1)
    if -1 in new:
        if known == 0 or size % known:
            raise TypeInferenceError(f"cannot reshape {fmt(shape)} to {fmt(new)}")
        new = tuple(size // known if d == -1 else d for d in new)
    elif known != size:
        raise TypeInferenceError(f"cannot reshape {fmt(shape)} to {fmt(new)}")
    return dt, tuple(new)


def _factors(dims: Sequence[Any]) -> tuple[int, list[Any]]:
    """A product of dims as (constant, symbolic factors): ``2*b + 2`` is 2 x ``b + 1``,
    ``b*s`` is ``b`` x ``s`` (``SymDim.factors``)."""
    const, syms = 1, []
    for d in dims:
        if is_symbolic(d):
            g, parts = d.factors()
            const *= g
            syms.extend(parts)
        else:
            const *= d
    return const, syms


def _symbolic_reshape(shape: Shape, new: Sequence[Any]) -> Shape:
    """Reshape with symbolic dims: decidable when the target's symbolic factors are the
    input's (as a multiset) and the constant parts match; a ``-1`` takes what is left,
    a constant times the product of the input's remaining factors (``(b, s, 64) ->
    (-1, 64)`` gives ``b*s``)."""
    const, syms = _factors(shape)
    known_const, known_syms = _factors([d for d in new if d != -1])
    rest = list(syms)
    for f in known_syms:
        if f not in rest:
            raise UndecidableDim(f"cannot decide whether {fmt(shape)} reshapes to {fmt(new)}: "
                                 f"the target's symbolic factor {f} is not one of the input's")
        rest.remove(f)
    if -1 not in new:
        if rest or known_const != const:
            raise UndecidableDim(f"cannot decide whether {fmt(shape)} reshapes to {fmt(new)} "
                                 "(their sizes are not provably equal)")
        return tuple(new)
    if known_const == 0 or const % known_const:
        raise UndecidableDim(f"cannot decide the -1 of reshape {fmt(shape)} to {fmt(new)}: "
                             "the target's constant part does not divide the input's")
    fill = const // known_const
    for f in rest:
        try:
            fill = fill * f
        except UndecidableDim as exc:
            raise UndecidableDim(f"cannot decide the -1 of reshape {fmt(shape)} to "
                                 f"{fmt(new)}: {exc}") from None
    return tuple(fill if d == -1 else d for d in new)


def permutation(axes: tuple[int, ...] | None, rank: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(rank - 1, -1, -1))
    if sorted(a % rank if rank else a for a in axes) != list(range(rank)) or any(
            not -rank <= a < rank for a in axes):
        raise TypeInferenceError(f"axes {axes} are not a permutation of rank {rank}")
    return tuple(a % rank for a in axes)


def permute_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt, shape = types[0]
    return dt, tuple(shape[a] for a in permutation(attrs["axes"], len(shape)))


def broadcast_to_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt, shape = types[0]
    target = attrs["shape"]
    if any(d < 0 for d in target) or len(target) < len(shape) or (
            broadcast_shapes(shape, target) != target):
        raise TypeInferenceError(f"cannot broadcast {fmt(shape)} to {fmt(target)}")
    return dt, target


def astype_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    return dtype_code(attrs["dtype"]), types[0][1]


def concat_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    if not types:
        raise TypeInferenceError("concat needs at least one operand")
    dt = same_dtype(types)
    first = types[0][1]
    rank = len(first)
    if rank == 0 or any(len(s) != rank for _, s in types):
        raise TypeInferenceError("concat operands must share one rank >= 1, got "
                                 + ", ".join(fmt(s) for _, s in types))
    (axis,) = normalize_axes((attrs["axis"],), rank)
    for _, s in types:
        if any(s[k] != first[k] for k in range(rank) if k != axis):
            raise TypeInferenceError("concat shapes differ off the axis: "
                                     + ", ".join(fmt(s) for _, s in types))
    return dt, first[:axis] + (sum(s[axis] for _, s in types),) + first[axis + 1:]


def slice_range(begin: int, end: int, stride: int, dim: Any) -> tuple[Any, Any]:
    """(first index, length) of NumPy's ``x[begin:end:stride]`` on an axis of ``dim``."""
    if is_symbolic(dim):
        return _symbolic_slice_range(begin, end, stride, dim)
    start, stop, step = slice(begin, end, stride).indices(dim)
    return start, len(range(start, stop, step))


def _symbolic_slice_range(begin: int, end: int, stride: int, dim: Any) -> tuple[Any, Any]:
    """:func:`slice_range` on a symbolic axis, for a positive stride: NumPy's clamping
    decided from the bounds (or UndecidableDim); an ``end >= MAX_ELEMENTS`` (ONNX's
    INT64_MAX) runs to the end of the axis, which no dim exceeds."""
    if stride < 0:
        raise UndecidableDim(f"a negative stride slices the symbolic dim {dim}")

    def clamp(i: int, default_end: bool) -> Any:
        if default_end and i >= MAX_ELEMENTS:
            return dim
        at = i if i >= 0 else dim + i
        # NumPy clamps into [0, dim]; each test decided from the bounds (or UndecidableDim)
        at = at if at >= 0 else 0
        return at if at <= dim else dim

    start, stop = clamp(begin, False), clamp(end, True)
    length = stop - start
    return start, ((length + stride - 1) // stride if length >= 0 else 0)


def strided_slice_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt, shape = types[0]
    begin, end, strides = attrs["begin"], attrs["end"], attrs["strides"]
    rank = len(shape)
    if not len(begin) == len(end) == len(strides) == rank:
        raise TypeInferenceError(
            f"input of shape {fmt(shape)} needs one begin, end and stride per axis, "
            f"got {len(begin)}, {len(end)} and {len(strides)}")
    if 0 in strides:
        raise TypeInferenceError(f"strides {fmt(strides)} contain 0")
    return dt, tuple(slice_range(b, e, s, d)[1]
                     for b, e, s, d in zip(begin, end, strides, shape, strict=True))


def take_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    (dt, shape), (idt, ishape) = types
    if idt not in INDEX_DTYPES:
        raise TypeInferenceError(f"indices must be int32 or int64, got {DTYPE_NAMES[idt]}")
    if not shape:
        raise TypeInferenceError("data must have rank >= 1, got shape ()")
    (axis,) = normalize_axes((attrs["axis"],), len(shape))
    if shape[axis] == 0 and 0 not in ishape:
        raise TypeInferenceError(f"axis {axis} of data shape {fmt(shape)} is empty, "
                                 f"so indices of shape {fmt(ishape)} select nothing")
    return dt, shape[:axis] + ishape + shape[axis + 1:]


PAD_MODES = ("constant", "reflect", "edge", "wrap")


def pad_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    (dt, shape), (vdt, vshape) = types
    if vdt != dt or vshape != ():
        raise TypeInferenceError(f"the value must be a 0-d {DTYPE_NAMES[dt]} tensor, "
                                 f"got {DTYPE_NAMES[vdt]}{list(vshape)}")
    widths, mode = attrs["pad_width"], attrs["mode"]
    rank = len(shape)
    if len(widths) != 2 * rank:
        raise TypeInferenceError(f"pad_width {fmt(widths)} must hold {2 * rank} values "
                                 f"(begins, then ends) for shape {fmt(shape)}")
    if any(w < 0 for w in widths):
        raise TypeInferenceError(f"pad_width {fmt(widths)} has a negative entry "
                                 "(crop with strided_slice)")
    if mode not in PAD_MODES:
        raise TypeInferenceError(f"unknown mode {mode!r} (valid: {', '.join(PAD_MODES)})")
    if mode != "constant":
        for k, d in enumerate(shape):
            if d == 0 and widths[k] + widths[rank + k]:
                raise TypeInferenceError(f"mode {mode!r} cannot pad the empty axis {k} "
                                         f"of shape {fmt(shape)}")
    return dt, tuple(d + widths[k] + widths[rank + k] for k, d in enumerate(shape))


def scatter_nd_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    if len(types) != 3:
        raise TypeInferenceError(f"scatter_nd takes 3 operands (data, indices, updates), "
                                 f"got {len(types)}")
    (dt, shape), (idt, ishape), (udt, ushape) = types
    if idt not in INDEX_DTYPES:
        raise TypeInferenceError(f"indices must be int64 (or int32), "
                                 f"got {DTYPE_NAMES[idt]}")
    if udt != dt:
        raise TypeInferenceError(f"updates dtype {DTYPE_NAMES[udt]} differs from "
                                 f"the data's {DTYPE_NAMES[dt]}")
    if not ishape or ishape[-1] > len(shape):
        raise TypeInferenceError(f"indices shape {fmt(ishape)} must be [..., k] "
                                 f"with k <= rank {len(shape)} of the data {fmt(shape)}")
    k = ishape[-1]
    want = ishape[:-1] + shape[k:]
    if ushape != want:
        raise TypeInferenceError(f"updates shape {fmt(ushape)} must be {fmt(want)} "
                                 f"(indices {fmt(ishape)}, data {fmt(shape)})")
    if any(shape[j] == 0 for j in range(k)) and int(np.prod(ishape[:-1], dtype=np.int64)):
        raise TypeInferenceError(f"data {fmt(shape)} has an empty indexed axis")
    reduction = attrs.get("reduction", "none")
    if reduction not in SCATTER_REDUCTIONS:
        raise TypeInferenceError(f"reduction {reduction!r} is not one of "
                                 f"{', '.join(SCATTER_REDUCTIONS)}")
    if reduction != "none" and dt not in NUMERIC_DTYPES:
        raise TypeInferenceError(f"reduction {reduction!r} needs numeric data, "
                                 f"got {DTYPE_NAMES[dt]}")
    return dt, shape


#: scatter_nd's ``reduction`` attribute: how an update combines with its target.
SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def cumulative_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    """cumsum/cumprod: a numeric tensor of rank >= 1 and one axis; the shape is kept."""
    dtypes_in(NUMERIC_DTYPES, types, "operand")
    dt, shape = types[0]
    if not shape:
        raise TypeInferenceError("a cumulative op needs rank >= 1, got a 0-d operand")
    normalize_axes((attrs["axis"],), len(shape))
    return dt, shape


def topk_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    """topk_indices: a numeric tensor of rank >= 1, one axis and ``0 <= k <= extent``;
    int64 indices of the operand's shape with ``k`` on the axis."""
    dtypes_in(NUMERIC_DTYPES, types, "operand")
    _, shape = types[0]
    if not shape:
        raise TypeInferenceError("topk_indices needs rank >= 1, got a 0-d operand")
    (axis,) = normalize_axes((attrs["axis"],), len(shape))
    k = attrs["k"]
    if not 0 <= k <= shape[axis]:
        raise TypeInferenceError(f"k = {k} must be in [0, {shape[axis]}] (axis {axis} of "
                                 f"shape {fmt(shape)})")
    return INT64, shape[:axis] + (k,) + shape[axis + 1:]


def call_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    if any(d < 0 for d in attrs["shape"]):
        raise TypeInferenceError(f"bad result shape {fmt(attrs['shape'])}")
    return dtype_code(attrs["dtype"]), attrs["shape"]


def leaf_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    raise TypeInferenceError("param and const nodes carry their own type")
