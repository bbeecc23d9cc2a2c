"""ONNX ops beyond the issue's list that are short compositions of existing graph ops.

IsNaN, IsInf, Celu, ThresholdedRelu, Shrink, Mish, Swish, SwiGLU, LpNormalization,
MeanVarianceNormalization, GroupNormalization, DepthToSpace, SpaceToDepth, Trilu
(constant k), EyeLike, OneHot (constant depth) and CenterCropPad (constant shape: a
``strided_slice`` and a ``pad``). Each is a few graph ops built at import, checked by
onnx's node tests.
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
from irkernel.frontend.onnx.converters.elementwise import softplus
from irkernel.frontend.onnx.converters.shape import ONNX_TO_NUMPY

Args = list["Value | None"]


def _x(args: Args) -> Value:
    x = args[0]
    assert x is not None
    return x


@register("IsNaN")
class IsNaN(OnnxOpConverter):
    graph_ops = ("equal", "logical_not")

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        return ctx.emit("logical_not", ctx.emit("equal", x, x))


@register("IsInf")
class IsInf(OnnxOpConverter):
    graph_ops = ("abs", "equal")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        pos, neg = int(attrs.get("detect_positive", 1)), int(attrs.get("detect_negative", 1))
        if pos and neg:
            return ctx.emit("equal", ctx.emit("abs", x), ctx.scalar(np.inf, x))
        if pos:
            return ctx.emit("equal", x, ctx.scalar(np.inf, x))
        if neg:
            return ctx.emit("equal", x, ctx.scalar(-np.inf, x))
        return ctx.const(ctx.full(x.shape, np.bool_(False)))


@register("Celu")
class Celu(OnnxOpConverter):
    graph_ops = ("add", "divide", "exp", "maximum", "minimum", "multiply", "subtract")

    @classmethod
    def _impl_v12(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        alpha = ctx.scalar(attrs.get("alpha", 1.0), x)
        neg = ctx.emit("multiply", alpha, ctx.emit("subtract", ctx.emit(
            "exp", ctx.emit("divide", x, alpha)), ctx.scalar(1, x)))
        return ctx.emit("add", ctx.emit("maximum", x, ctx.scalar(0, x)),
                        ctx.emit("minimum", neg, ctx.scalar(0, x)))


@register("ThresholdedRelu")
class ThresholdedRelu(OnnxOpConverter):
    graph_ops = ("greater", "where")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        alpha = ctx.scalar(attrs.get("alpha", 1.0), x)
        return ctx.emit("where", ctx.emit("greater", x, alpha), x, ctx.scalar(0, x))


@register("Shrink")
class Shrink(OnnxOpConverter):
    graph_ops = ("add", "greater", "less", "subtract", "where")

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
        low = ctx.emit("add", x, ctx.scalar(bias, x))
        high = ctx.emit("subtract", x, ctx.scalar(bias, x))
        inner = ctx.emit("where", ctx.emit("greater", x, ctx.scalar(lambd, x)), high,
                         ctx.scalar(0, x))
        return ctx.emit("where", ctx.emit("less", x, ctx.scalar(-lambd, x)), low, inner)


@register("SwiGLU")
class SwiGLU(OnnxOpConverter):
    """``a * sigmoid(alpha * a) * b`` (same shapes, no broadcasting)."""
    graph_ops = ("multiply", "sigmoid")

    @classmethod
    def _impl_v28(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        a, b = _x(args), args[1]
        assert b is not None
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ctx.error(f"A {a.dtype_name}{list(a.shape)} and B {b.dtype_name}"
                            f"{list(b.shape)} must have the same shape and dtype")
        alpha = float(attrs.get("alpha", 1.0))
        gate = ctx.emit("sigmoid", a if alpha == 1.0 else
                        ctx.emit("multiply", a, ctx.scalar(alpha, a)))
        return ctx.emit("multiply", ctx.emit("multiply", a, gate), b)


@register("CenterCropPad")
class CenterCropPad(OnnxOpConverter):
    """Each listed axis cropped or zero-padded to its size around the center (the extra
    element of an odd difference at the end)."""
    graph_ops = ("pad", "strided_slice")

    @classmethod
    def _impl_v18(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        sizes = [int(v) for v in np.asarray(ctx.const_value(args[1], "input 'shape'")).ravel()]
        axes = norm_axes(ctx, ints_attr(attrs, "axes", range(x.rank)) or [], x.rank)
        if len(axes) != len(sizes):
            raise ctx.error(f"shape {sizes} needs one value per axis of {list(axes)}")
        begin, end = [0] * x.rank, list(x.shape)
        before, after = [0] * x.rank, [0] * x.rank
        for axis, size in zip(axes, sizes, strict=True):
            extra = x.shape[axis] - size
            if extra > 0:
                begin[axis], end[axis] = extra // 2, extra // 2 + size
            elif extra < 0:
                before[axis], after[axis] = -extra // 2, -extra - (-extra // 2)
        if begin != [0] * x.rank or end != list(x.shape):
            x = ctx.emit("strided_slice", x, begin=begin, end=end, strides=[1] * x.rank)
        if any(before) or any(after):
            x = ctx.emit("pad", x, ctx.scalar(0, x), pad_width=before + after, mode="constant")
        return x


@register("Mish")
class Mish(OnnxOpConverter):
    graph_ops = ("abs", "add", "exp", "log", "maximum", "multiply", "negative", "tanh")

    @classmethod
    def _impl_v18(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        return ctx.emit("multiply", x, ctx.emit("tanh", softplus(ctx, x)))


@register("Swish")
class Swish(OnnxOpConverter):
    graph_ops = ("multiply", "sigmoid")

    @classmethod
    def _impl_v24(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        alpha = ctx.scalar(attrs.get("alpha", 1.0), x)
        return ctx.emit("multiply", x, ctx.emit("sigmoid", ctx.emit("multiply", x, alpha)))


@register("LpNormalization")
class LpNormalization(OnnxOpConverter):
    graph_ops = ("abs", "divide", "equal", "multiply", "sqrt", "sum", "where")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        axis = norm_axis(ctx, int(attrs.get("axis", -1)), x.rank)
        p = int(attrs.get("p", 2))
        if p == 1:
            norm = ctx.emit("sum", ctx.emit("abs", x), axis=axis, keepdims=True)
        elif p == 2:
            norm = ctx.emit("sqrt", ctx.emit("sum", ctx.emit("multiply", x, x), axis=axis,
                                             keepdims=True))
        else:
            raise ctx.error(f"p={p} is not supported (1 or 2)")
        safe = ctx.emit("where", ctx.emit("equal", norm, ctx.scalar(0, x)), ctx.scalar(1, x), norm)
        return ctx.emit("divide", x, safe)  # a zero vector stays zero (ONNX)


@register("MeanVarianceNormalization")
class MeanVarianceNormalization(OnnxOpConverter):
    graph_ops = ("add", "divide", "mean", "multiply", "sqrt", "subtract")

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        axes = norm_axes(ctx, ints_attr(attrs, "axes", [0, 2, 3]) or [], x.rank)
        mean = ctx.emit("mean", x, axis=axes, keepdims=True)
        d = ctx.emit("subtract", x, mean)
        var = ctx.emit("mean", ctx.emit("multiply", d, d), axis=axes, keepdims=True)
        std = ctx.emit("sqrt", var)
        return ctx.emit("divide", d, ctx.emit("add", std, ctx.scalar(1e-9, x)))


@register("DepthToSpace")
class DepthToSpace(OnnxOpConverter):
    graph_ops = ("permute_dims", "reshape")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        if x.rank != 4:
            raise ctx.error(f"input must be 4-D (NCHW), got {list(x.shape)}")
        b = int(attrs["blocksize"])
        n, c, h, w = x.shape
        if attrs.get("mode", "DCR") == "DCR":
            t = ctx.reshape(x, (n, b, b, c // (b * b), h, w))
            t = ctx.emit("permute_dims", t, axes=(0, 3, 4, 1, 5, 2))
        else:
            t = ctx.reshape(x, (n, c // (b * b), b, b, h, w))
            t = ctx.emit("permute_dims", t, axes=(0, 1, 4, 2, 5, 3))
        return ctx.reshape(t, (n, c // (b * b), h * b, w * b))


@register("SpaceToDepth")
class SpaceToDepth(OnnxOpConverter):
    graph_ops = ("permute_dims", "reshape")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        if x.rank != 4:
            raise ctx.error(f"input must be 4-D (NCHW), got {list(x.shape)}")
        b = int(attrs["blocksize"])
        n, c, h, w = x.shape
        t = ctx.reshape(x, (n, c, h // b, b, w // b, b))
        crd = attrs.get("mode", "DCR") == "CRD"  # channel-major blocks (a later opset)
        t = ctx.emit("permute_dims", t, axes=(0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4))
        return ctx.reshape(t, (n, c * b * b, h // b, w // b))


@register("Trilu")
class Trilu(OnnxOpConverter):
    graph_ops = ("where",)

    @classmethod
    def _impl_v14(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        k_v = args[1] if len(args) > 1 else None
        k = 0 if k_v is None else int(np.asarray(ctx.const_value(k_v, "input 'k'")).reshape(()))
        rows, cols = ctx.const_shape(x.shape[-2:], "the mask")
        ones = np.ones((rows, cols), bool)
        mask = np.triu(ones, k) if int(attrs.get("upper", 1)) else np.tril(ones, k)
        zero = ctx.const(np.zeros((), x.dtype_name))
        return ctx.emit("where", ctx.const(mask), x, zero)


@register("EyeLike")
class EyeLike(OnnxOpConverter):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _x(args)
        if x.rank != 2:
            raise ctx.error(f"input must be 2-D, got {list(x.shape)}")
        dtype = ONNX_TO_NUMPY.get(int(attrs["dtype"])) if "dtype" in attrs else x.dtype_name
        rows, cols = ctx.const_shape(x.shape, "the identity")
        return ctx.const(np.eye(rows, cols, k=int(attrs.get("k", 0)), dtype=dtype))


@register("OneHot")
class OneHot(OnnxOpConverter):
    graph_ops = ("add", "astype", "equal", "less", "reshape", "strided_slice", "where")

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        idx, depth_v, values = args[0], args[1], args[2]
        assert idx is not None and values is not None
        depth = int(np.asarray(ctx.const_value(depth_v, "input 'depth'")).reshape(-1)[0])
        rank = idx.rank + 1
        axis = norm_axis(ctx, int(attrs.get("axis", -1)), rank)
        idx = ctx.astype(idx, "int64")
        d = ctx.scalar(depth, idx)
        idx = ctx.emit("where", ctx.emit("less", idx, ctx.scalar(0, idx)),
                       ctx.emit("add", idx, d), idx)  # negative indices count from the end
        wide = ctx.reshape(idx, idx.shape[:axis] + (1,) + idx.shape[axis:])
        ctx.const_shape((depth,), "depth")
        pos = ctx.const(np.arange(depth, dtype=np.int64).reshape(
            (depth,) + (1,) * (rank - axis - 1)))
        off = ctx.emit("strided_slice", values, begin=[0], end=[1], strides=[1]) \
            if not values.is_const else ctx.const(values.const.reshape(-1)[0], code=values.dtype)
        on = ctx.const(values.const.reshape(-1)[1], code=values.dtype) if values.is_const else \
            ctx.emit("strided_slice", values, begin=[1], end=[2], strides=[1])
        return ctx.emit("where", ctx.emit("equal", wide, pos), on, off)


@register("GroupNormalization")
class GroupNormalization(OnnxOpConverter):
    graph_ops = ("add", "divide", "mean", "multiply", "reshape", "sqrt", "subtract")

    @classmethod
    def _norm(cls, ctx: Context, args: Args, attrs: dict[str, Any], per_group: bool) -> Value:
        x, scale, bias = args[0], args[1], args[2]
        assert x is not None and scale is not None and bias is not None
        groups = int(attrs["num_groups"])
        n, c = x.shape[:2]
        if c % groups:
            raise ctx.error(f"num_groups {groups} does not divide {c} channels")
        g = ctx.reshape(x, (n, groups, int(np.prod(x.shape[1:], dtype=np.int64)) // groups))
        mean = ctx.emit("mean", g, axis=2, keepdims=True)
        dev = ctx.emit("subtract", g, mean)
        var = ctx.emit("mean", ctx.emit("multiply", dev, dev), axis=2, keepdims=True)
        eps = ctx.scalar(float(attrs.get("epsilon", 1e-5)), x)
        y = ctx.reshape(ctx.emit("divide", dev, ctx.emit("sqrt", ctx.emit("add", var, eps))),
                        x.shape)
        if per_group:  # opset 18: one scale per group
            rep = np.repeat(np.arange(groups), c // groups)
            scale = ctx.const(ctx.const_value(scale, "input 'scale'")[rep])
            bias = ctx.const(ctx.const_value(bias, "input 'bias'")[rep])
        tail = (1,) * (x.rank - 2)
        y = ctx.emit("multiply", y, ctx.reshape(scale, (c, *tail)))
        return ctx.emit("add", y, ctx.reshape(bias, (c, *tail)))

    @classmethod
    def _impl_v18(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        scale = args[1]
        assert scale is not None and args[0] is not None
        return cls._norm(ctx, args, attrs, scale.shape[0] != args[0].shape[1])

    @classmethod
    def _impl_v21(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        return cls._norm(ctx, args, attrs, False)
