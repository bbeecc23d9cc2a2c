"""ONNX ops converted only when a data input is a constant at import.

The graph IR has static shapes, so an op whose output shape depends on the *values*
of a tensor (NonZero, Unique, Compress's condition) or whose graph depends on one
(If's condition) can only be imported when that tensor is known: an initializer, a
``const_inputs`` binding, or computed from those (``Context.emit`` folds). Then:

- NonZero and Unique are computed with NumPy at import (results past
  ``FOLD_MAX_ELEMENTS`` are an error naming the node); Unique follows
  ``onnx.reference``: ``sorted=0`` orders by first occurrence, ``axis`` compares slices.
- Compress with a constant condition is a ``take`` at the selected indices, so its
  data may be a run-time tensor.
- If with a constant condition is inlined: the taken branch's nodes are converted in
  the enclosing scope (``Context.inline_graph``, set by the importer); the other branch
  is never read.

Otherwise each raises :class:`NeedsConstant` naming the node and the input, which the
ONNX backend answers by binding the graph inputs it was given (as onnx's node tests
do). The importer's up-front check counts the op types of If's branches too.
Imports the converter machinery only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import (
    Context,
    OnnxOpConverter,
    Value,
    norm_axis,
    register,
)
from irkernel.ir import narrow

Args = list["Value | None"]


def _data(ctx: Context, args: Args, op: str) -> tuple[np.ndarray, int]:
    """The constant input X and its dtype code; bfloat16 bits widened to float32 (their
    bit patterns would not order as the values do)."""
    x = args[0]
    assert x is not None
    what = f"input 'X' ({op}'s output shape depends on its values, so it is computed at import)"
    return narrow.widen(ctx.const_value(x, what), x.dtype), x.dtype


@register("NonZero")
class NonZero(OnnxOpConverter):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, _ = _data(ctx, args, "NonZero")
        idx = np.nonzero(np.atleast_1d(x))  # ONNX: a scalar is a 1-element vector
        rows = max(x.ndim, 1)
        ctx.const_shape((rows, idx[0].size), "NonZero's result")
        return ctx.const(np.stack(idx).astype(np.int64).reshape(rows, -1))


@register("Unique")
class Unique(OnnxOpConverter):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        x, code = _data(ctx, args, "Unique")
        axis = attrs.get("axis")
        if axis is None:
            y, first, inverse, counts = np.unique(x.reshape(-1), True, True, True)
            take = lambda order: y[order]  # noqa: E731
        else:
            axis = norm_axis(ctx, int(axis), x.ndim)
            y, first, inverse, counts = np.unique(x, True, True, True, axis=axis)
            take = lambda order: np.take(y, order, axis=axis)  # noqa: E731
        inverse = inverse.reshape(-1)
        if not int(attrs.get("sorted", 1)):  # in order of first occurrence
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            y, first, inverse, counts = take(order), first[order], rank[inverse], counts[order]
        return [ctx.const(narrow.to_storage(y, code), code=code), *(ctx.const(a.astype(np.int64))
                                                      for a in (first, inverse, counts))]


@register("Compress")
class Compress(OnnxOpConverter):
    graph_ops = ("reshape", "take")

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, cond = args[0], args[1]
        assert x is not None and cond is not None
        keep = ctx.const_value(cond, "input 'condition' (it decides Compress's output "
                                     "shape)")
        if keep.ndim != 1:
            raise ctx.error(f"condition must be 1-D, got shape {list(keep.shape)}")
        axis = attrs.get("axis")
        if axis is None:
            x, axis = ctx.reshape(x, (int(np.prod(x.shape, dtype=np.int64)),)), 0
        else:
            axis = norm_axis(ctx, int(axis), x.rank)
        if keep.size > x.shape[axis]:
            raise ctx.error(f"condition has {keep.size} values for an axis of "
                            f"{x.shape[axis]}")
        return ctx.emit("take", x, ctx.const(np.flatnonzero(keep).astype(np.int64)), axis=axis)


@register("If")
class If(OnnxOpConverter):
    graph_ops = ()  # the taken branch's nodes are converted by their own converters

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        cond = ctx.const_value(args[0] if args else None,
                               "input 'cond' (If is inlined at import: only the taken "
                               "branch is converted)")
        if cond.size != 1:
            raise ctx.error(f"cond must have one element, got shape {list(cond.shape)}")
        name = "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"
        if name not in attrs:
            raise ctx.error(f"attribute {name!r} is missing")
        if ctx.inline_graph is None:
            raise ctx.error("subgraphs can only be converted by from_onnx")
        return ctx.inline_graph(attrs[name])
