"""Reductions: ReduceSum/Mean/Max/Min/Prod (+ L1, L2, SumSquare, LogSum, LogSumExp), ArgMax/Min.

ONNX moved ``axes`` from an attribute to an input (ReduceSum at opset 13, the
others at 18); both forms are converted, and an empty or absent ``axes``
reduces every axis unless ``noop_with_empty_axes`` is set.

A reduction over an axis of extent 0 gives ONNX's identity: ``sum`` 0 and ``prod``
1 (the graph ops' own result), ReduceMax the lowest value of the dtype (``-inf``,
the int minimum, False) and ReduceMin the highest. The graph's ``max``/``min``
reject empty axes, so those two become a constant of the result shape here (the
shapes are static, so whether an axis is empty is known at import).
Imports the converter machinery only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import (
    Context,
    OnnxOpConverter,
    Value,
    ints_attr,
    norm_axes,
    norm_axis,
    register,
)

Args = list["Value | None"]


class _Reduce(OnnxOpConverter):
    op = ""
    axes_input_since = 18

    @classmethod
    def _axes(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> tuple[int, ...] | None:
        x = args[0]
        assert x is not None
        if ctx.opset >= cls.axes_input_since:
            v = args[1] if len(args) > 1 else None
            axes = None if v is None else [int(a) for a in
                                           np.ravel(ctx.const_value(v, "input 'axes'"))]
        else:
            axes = ints_attr(attrs, "axes")
        if not axes:
            return () if int(attrs.get("noop_with_empty_axes", 0)) else None
        return norm_axes(ctx, axes, x.rank)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        axes = cls._axes(ctx, args, attrs)
        if axes == ():
            return cls._noop(ctx, x)
        keep = bool(int(attrs.get("keepdims", 1)))
        return cls._reduce(ctx, x, tuple(range(x.rank)) if axes is None else axes, keep)

    @classmethod
    def _noop(cls, ctx: Context, x: Value) -> Value:
        return x

    @classmethod
    def _reduce(cls, ctx: Context, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
        if cls.op in ("max", "min"):
            return reduce_extreme(ctx, cls.op, x, axes, keep)
        return ctx.emit(cls.op, x, axis=axes, keepdims=keep)


def _empty_identity(dtype: str, op: str) -> object:
    """What ONNX's ReduceMax (``op`` "max") / ReduceMin give over no values."""
    if dtype == "bool":
        return op == "min"
    if np.dtype(dtype).kind == "f":
        return -np.inf if op == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if op == "max" else info.max


def reduce_extreme(ctx: Context, op: str, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
    """``max``/``min`` of ``x`` over ``axes``; over an empty axis, ONNX's identity (a
    constant of the result shape); bools (ReduceMax/Min at opset 20: any/all) through int32."""
    if any(x.shape[a] == 0 for a in axes):
        shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape)
                      if keep or k not in axes)
        return ctx.const(ctx.full(shape, np.array(_empty_identity(x.dtype_name, op),
                                                  x.dtype_name)))
    if x.dtype_name == "bool":  # ReduceMax/Min of bools (opset 20): any/all through int32
        out = ctx.emit(op, ctx.astype(x, "int32"), axis=axes, keepdims=keep)
        return ctx.astype(out, "bool")
    return ctx.emit(op, x, axis=axes, keepdims=keep)


@register("ReduceSum")
class ReduceSum(_Reduce):
    graph_ops = ("astype", "sum")
    op = "sum"
    axes_input_since = 13


@register("ReduceMean")
class ReduceMean(_Reduce):
    graph_ops = ("astype", "mean")
    op = "mean"


@register("ReduceMax")
class ReduceMax(_Reduce):
    graph_ops = ("astype", "max")
    op = "max"


@register("ReduceMin")
class ReduceMin(_Reduce):
    graph_ops = ("astype", "min")
    op = "min"


@register("ReduceProd")
class ReduceProd(_Reduce):
    graph_ops = ("astype", "prod")
    op = "prod"


@register("ReduceSumSquare")
class ReduceSumSquare(_Reduce):
    graph_ops = ("multiply", "sum")

    @classmethod
    def _reduce(cls, ctx: Context, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
        return ctx.emit("sum", ctx.emit("multiply", x, x), axis=axes, keepdims=keep)

    @classmethod
    def _noop(cls, ctx: Context, x: Value) -> Value:
        return ctx.emit("multiply", x, x)


@register("ReduceL1")
class ReduceL1(_Reduce):
    graph_ops = ("abs", "sum")

    @classmethod
    def _reduce(cls, ctx: Context, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
        return ctx.emit("sum", ctx.emit("abs", x), axis=axes, keepdims=keep)

    @classmethod
    def _noop(cls, ctx: Context, x: Value) -> Value:
        return ctx.emit("abs", x)


@register("ReduceL2")
class ReduceL2(_Reduce):
    graph_ops = ("abs", "astype", "multiply", "sqrt", "sum")

    @classmethod
    def _reduce(cls, ctx: Context, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
        s = ctx.emit("sum", ctx.emit("multiply", x, x), axis=axes, keepdims=keep)
        if x.dtype_name in ("float32", "float64"):
            return ctx.emit("sqrt", s)
        return ctx.astype(ctx.emit("sqrt", ctx.astype(s, "float64")), x.dtype_name)

    @classmethod
    def _noop(cls, ctx: Context, x: Value) -> Value:
        return ctx.emit("abs", x)


@register("ReduceLogSum")
class ReduceLogSum(_Reduce):
    graph_ops = ("log", "sum")

    @classmethod
    def _reduce(cls, ctx: Context, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
        return ctx.emit("log", ctx.emit("sum", x, axis=axes, keepdims=keep))

    @classmethod
    def _noop(cls, ctx: Context, x: Value) -> Value:
        return ctx.emit("log", x)


@register("ReduceLogSumExp")
class ReduceLogSumExp(_Reduce):
    graph_ops = ("add", "exp", "log", "max", "reshape", "subtract", "sum")

    @classmethod
    def _reduce(cls, ctx: Context, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
        # m + log(sum(exp(x - m))): no overflow for large x
        m = reduce_extreme(ctx, "max", x, axes, True)
        s = ctx.emit("sum", ctx.emit("exp", ctx.emit("subtract", x, m)), axis=axes,
                     keepdims=True)
        out = ctx.emit("add", ctx.emit("log", s), m)
        if not keep:
            out = ctx.reshape(out, tuple(d for k, d in enumerate(x.shape) if k not in axes))
        return out

    @classmethod
    def _noop(cls, ctx: Context, x: Value) -> Value:
        return x


class _Arg(OnnxOpConverter):
    op = ""

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        axis = norm_axis(ctx, int(attrs.get("axis", 0)), x.rank)
        return ctx.emit(cls.op, x, axis=axis, keepdims=bool(int(attrs.get("keepdims", 1))),
                        select_last_index=bool(int(attrs.get("select_last_index", 0))))


@register("ArgMax")
class ArgMax(_Arg):
    graph_ops = ("argmax",)
    op = "argmax"


@register("ArgMin")
class ArgMin(_Arg):
    graph_ops = ("argmin",)
    op = "argmin"
