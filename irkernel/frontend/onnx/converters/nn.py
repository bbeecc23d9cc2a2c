"""Neural-network ONNX ops: convolution, pooling, normalization, dense layers, softmax.

Conv, ConvTranspose, MaxPool, AveragePool and LRN map to the graph ops of the
same name (``auto_pad`` is resolved into explicit pads here, a bias becomes a
broadcast ``add``; MaxPool's Indices output is a composition, see
:func:`_max_pool_indices`); BatchNormalization (inference) folds its statistics into
one scale and one shift at import; Gemm, Softmax, LogSoftmax, Hardmax, LpPool,
GlobalLpPool and LayerNormalization are compositions of existing graph ops.
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
    norm_axis,
    register,
    same_dtype,
)

Args = list["Value | None"]
#: Integer dtypes whose every value is exact in float32.
_SMALL_INTS = ("int8", "uint8", "int16", "uint16")


def _spatial_pads(ctx: Context, attrs: dict[str, Any], in_spatial: tuple[int, ...],
                  kernel: list[int], strides: list[int], dilations: list[int]) -> list[int]:
    """Explicit pads (begins, then ends) from ``pads`` or ``auto_pad``."""
    r = len(in_spatial)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", ""):
        pads = ints_attr(attrs, "pads", [0] * (2 * r))
        assert pads is not None
        if len(pads) != 2 * r:
            raise ctx.error(f"pads {pads} must have {2 * r} values (begins then ends)")
        if any(p < 0 for p in pads):
            raise ctx.error(f"negative pads {pads} are not supported")
        return pads
    if auto_pad == "VALID":
        return [0] * (2 * r)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"auto_pad={auto_pad!r} is not one of NOTSET, VALID, SAME_UPPER, "
                        "SAME_LOWER")
    begins, ends = [], []
    for s, k, st, d in zip(in_spatial, kernel, strides, dilations, strict=True):
        out = -(-s // st)
        total = max((out - 1) * st + (k - 1) * d + 1 - s, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else big)
        ends.append(big if auto_pad == "SAME_UPPER" else small)
    return begins + ends


def window_attrs(ctx: Context, x: Value, attrs: dict[str, Any],
                  kernel: list[int]) -> tuple[list[int], list[int], list[int]]:
    r = x.rank - 2
    if r < 1:
        raise ctx.error(f"input of shape {list(x.shape)} has no spatial axes (layout NCHW)")
    if len(kernel) != r:
        raise ctx.error(f"kernel_shape {kernel} does not match {r} spatial axes")
    strides = ints_attr(attrs, "strides", [1] * r)
    dilations = ints_attr(attrs, "dilations", [1] * r)
    assert strides is not None and dilations is not None
    if len(strides) != r or len(dilations) != r:
        raise ctx.error(f"strides {strides} / dilations {dilations} need {r} values")
    pads = _spatial_pads(ctx, attrs, x.shape[2:], kernel, strides, dilations)
    return strides, pads, dilations


def _pool_window(ctx: Context, args: Args, attrs: dict[str, Any]
                 ) -> tuple[Value, list[int], list[int], list[int], list[int]]:
    """A pooling node's input, kernel_shape, strides, explicit pads and dilations."""
    x = args[0]
    assert x is not None
    kernel = ints_attr(attrs, "kernel_shape")
    if kernel is None:
        raise ctx.error("kernel_shape is required")
    strides, pads, dilations = window_attrs(ctx, x, attrs, kernel)
    return x, kernel, strides, pads, dilations


def _add_bias(ctx: Context, y: Value, bias: Value | None) -> Value:
    if bias is None:
        return y
    return ctx.emit("add", y, ctx.reshape(bias, (bias.shape[0],) + (1,) * (y.rank - 2)))


@register("Conv")
class Conv(OnnxOpConverter):
    graph_ops = ("add", "conv", "reshape")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, w = args[0], args[1]
        bias = args[2] if len(args) > 2 else None
        assert x is not None and w is not None
        same_dtype(ctx, [x, w], "Conv")
        kernel = ints_attr(attrs, "kernel_shape", list(w.shape[2:]))
        assert kernel is not None
        strides, pads, dilations = window_attrs(ctx, x, attrs, kernel)
        y = ctx.emit("conv", x, w, strides=strides, padding=pads, dilation=dilations,
                     groups=int(attrs.get("group", 1)))
        return _add_bias(ctx, y, bias)


@register("ConvTranspose")
class ConvTranspose(OnnxOpConverter):
    graph_ops = ("add", "conv_transpose", "reshape")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, w = args[0], args[1]
        bias = args[2] if len(args) > 2 else None
        assert x is not None and w is not None
        same_dtype(ctx, [x, w], "ConvTranspose")
        r = x.rank - 2
        kernel = ints_attr(attrs, "kernel_shape", list(w.shape[2:]))
        strides = ints_attr(attrs, "strides", [1] * r)
        dilations = ints_attr(attrs, "dilations", [1] * r)
        out_pad = ints_attr(attrs, "output_padding", [0] * r)
        assert kernel is not None and strides is not None and dilations is not None
        assert out_pad is not None
        group = int(attrs.get("group", 1))
        auto_pad = attrs.get("auto_pad", "NOTSET")
        output_shape = ints_attr(attrs, "output_shape")
        if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            # ONNX: total_padding = stride*(in-1) + output_padding + ((K-1)*d+1) - out
            if output_shape is None:
                output_shape = [s * st for s, st in zip(x.shape[2:], strides, strict=True)]
            output_shape = output_shape[-r:]
            begins, ends = [], []
            out_pad = list(out_pad)
            for k_, (s, k, st, d, op, o) in enumerate(zip(x.shape[2:], kernel, strides,
                                                          dilations, out_pad, output_shape,
                                                          strict=True)):
                total = st * (s - 1) + op + (k - 1) * d + 1 - o
                if total < 0:  # a larger output than the kernel reaches: extra end rows
                    out_pad[k_] -= total
                    total = 0
                half = total // 2
                if auto_pad == "SAME_UPPER":
                    begins.append(half)
                    ends.append(total - half)
                else:
                    begins.append(total - half)
                    ends.append(half)
            pads = begins + ends
        elif auto_pad == "VALID":
            pads = [0] * (2 * r)
        else:
            pads = ints_attr(attrs, "pads", [0] * (2 * r))
            assert pads is not None
        y = ctx.emit("conv_transpose", x, w, strides=strides, padding=pads,
                     output_padding=out_pad, dilation=dilations, groups=group)
        return _add_bias(ctx, y, bias)


def _max_pool_indices(ctx: Context, x: Value, out: tuple[int, ...], kernel: list[int],
                      strides: list[int], pads: list[int], dilations: list[int],
                      column_major: bool) -> Value:
    """MaxPool's Indices: per window, the flat NCHW position (spatial axes column-major
    with ``storage_order`` 1) of its first largest element, taps in row-major order.

    The window's taps are gathered from the flattened input (a constant index table,
    NumPy at import; padding taps read -inf through a ``where``), ``argmax`` picks the
    first largest tap, and a second table maps (window, tap) to the input position. A
    padding tap wins only when every tap of its window is -inf: its table entry is then
    the window's first real tap, which is what the strict scan of onnx's reference
    and onnxruntime keeps. NaN: ``argmax`` picks the first NaN of a window."""
    size = x.shape[2:]
    r = len(size)
    grids = np.meshgrid(*[np.arange(o) for o in out], *[np.arange(k) for k in kernel],
                        indexing="ij")
    coords = [grids[a] * strides[a] - pads[a] + grids[r + a] * dilations[a] for a in range(r)]
    windows, taps = int(np.prod(out, dtype=np.int64)), int(np.prod(kernel, dtype=np.int64))
    inside = np.ones(coords[0].shape, bool)
    row_major = np.zeros(coords[0].shape, np.int64)
    col_major = np.zeros(coords[0].shape, np.int64)
    for a in range(r):
        inside &= (coords[a] >= 0) & (coords[a] < size[a])
        clamped = np.clip(coords[a], 0, size[a] - 1)
        row_major = row_major * size[a] + clamped
        col_major += clamped * int(np.prod(size[:a], dtype=np.int64))
    inside, row_major = inside.reshape(windows, taps), row_major.reshape(windows, taps)
    position = (col_major if column_major else row_major).reshape(windows, taps)
    first_real = np.argmax(inside, axis=1)            # a window of padding only: -1
    fallback = np.where(inside.any(axis=1), position[np.arange(windows), first_real], -1)
    position = np.where(inside, position, fallback[:, None])
    nc, spatial = x.shape[0] * x.shape[1], int(np.prod(size, dtype=np.int64))
    flat = ctx.reshape(x, (nc, spatial))
    window_values = ctx.emit("where", ctx.const(inside),
                             ctx.emit("take", flat, ctx.const(row_major), axis=1),
                             ctx.scalar(-np.inf, x))
    best = ctx.emit("argmax", window_values, axis=-1)                    # [nc, windows]
    best = ctx.emit("add", best, ctx.const(np.arange(windows, dtype=np.int64) * taps))
    index = ctx.emit("take", ctx.const(position.reshape(-1)), best, axis=0)
    index = ctx.emit("add", index, ctx.const(np.arange(nc, dtype=np.int64)[:, None] * spatial))
    return ctx.reshape(index, (*x.shape[:2], *out))


@register("MaxPool")
class MaxPool(OnnxOpConverter):
    graph_ops = ("add", "argmax", "astype", "max_pool", "reshape", "take", "where")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value | list[Value]:
        x, kernel, strides, pads, dilations = _pool_window(ctx, args, attrs)
        # 8- and 16-bit ints (quantized models) pool in float32, exactly: the max is an input
        xf = ctx.astype(x, "float32") if x.dtype_name in _SMALL_INTS else x
        y = ctx.emit("max_pool", xf, kernel=kernel, strides=strides, padding=pads,
                     dilation=dilations, ceil_mode=bool(attrs.get("ceil_mode", 0)))
        y = ctx.astype(y, x.dtype_name)
        if ctx.n_outputs < 2:
            return y
        return [y, _max_pool_indices(ctx, xf, y.shape[2:], kernel, strides, pads, dilations,
                                     bool(int(attrs.get("storage_order", 0))))]


@register("AveragePool")
class AveragePool(OnnxOpConverter):
    graph_ops = ("avg_pool",)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, kernel, strides, pads, dilations = _pool_window(ctx, args, attrs)
        return ctx.emit("avg_pool", x, kernel=kernel, strides=strides, padding=pads,
                        dilation=dilations,
                        ceil_mode=bool(attrs.get("ceil_mode", 0)),
                        count_include_pad=bool(attrs.get("count_include_pad", 0)))


@register("LpPool")
class LpPool(OnnxOpConverter):
    """(sum over the window of |x|^p)^(1/p): an ``avg_pool`` counting the zero padding,
    times the window's size (p = 1 and 2 without ``power``)."""
    graph_ops = ("abs", "avg_pool", "multiply", "power", "sqrt")

    @classmethod
    def _impl_v2(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, kernel, strides, pads, dilations = _pool_window(ctx, args, attrs)
        p = float(attrs.get("p", 2))
        powered = _lp_power(ctx, x, p)
        s = ctx.emit("avg_pool", powered, kernel=kernel, strides=strides, padding=pads,
                     dilation=dilations, ceil_mode=bool(attrs.get("ceil_mode", 0)),
                     count_include_pad=True)
        s = ctx.emit("multiply", s, ctx.scalar(float(np.prod(kernel)), s))
        return _lp_root(ctx, s, p)


def _lp_power(ctx: Context, x: Value, p: float) -> Value:
    a = ctx.emit("abs", x)
    if p == 1:
        return a
    return ctx.emit("multiply", a, a) if p == 2 else ctx.emit("power", a, ctx.scalar(p, x))


def _lp_root(ctx: Context, s: Value, p: float) -> Value:
    if p == 1:
        return s
    return ctx.emit("sqrt", s) if p == 2 else ctx.emit("power", s, ctx.scalar(1.0 / p, s))


@register("GlobalLpPool")
class GlobalLpPool(OnnxOpConverter):
    graph_ops = ("abs", "multiply", "power", "sqrt", "sum")

    @classmethod
    def _impl_v2(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        if x.rank < 3:
            raise ctx.error(f"input of shape {list(x.shape)} has no spatial axes")
        p = float(attrs.get("p", 2))
        s = ctx.emit("sum", _lp_power(ctx, x, p), axis=tuple(range(2, x.rank)), keepdims=True)
        return _lp_root(ctx, s, p)


class _GlobalPool(OnnxOpConverter):
    op = ""

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        if x.rank < 3:
            raise ctx.error(f"input of shape {list(x.shape)} has no spatial axes")
        return ctx.emit(cls.op, x, axis=tuple(range(2, x.rank)), keepdims=True)


@register("GlobalAveragePool")
class GlobalAveragePool(_GlobalPool):
    graph_ops = ("mean",)
    op = "mean"


@register("GlobalMaxPool")
class GlobalMaxPool(_GlobalPool):
    graph_ops = ("max",)
    op = "max"


@register("LRN")
class LRN(OnnxOpConverter):
    graph_ops = ("lrn",)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        if "size" not in attrs:
            raise ctx.error("size is required")
        return ctx.emit("lrn", x, size=int(attrs["size"]), alpha=float(attrs.get("alpha", 1e-4)),
                        beta=float(attrs.get("beta", 0.75)), bias=float(attrs.get("bias", 1.0)))


@register("BatchNormalization")
class BatchNormalization(OnnxOpConverter):
    """Inference form: y = x * s + t with s = scale / sqrt(var + eps), t = B - mean * s
    (folded at import when the statistics are constants, as they are in exported models)."""
    graph_ops = ("add", "divide", "multiply", "reshape", "sqrt", "subtract")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        x, scale, bias, mean, var = args[:5]
        assert x is not None and scale is not None and bias is not None
        assert mean is not None and var is not None
        if int(attrs.get("training_mode", 0)):
            raise ctx.error("training_mode=1 is not supported (inference only)")
        same_dtype(ctx, [x, scale, bias, mean, var], "BatchNormalization")
        eps = ctx.scalar(attrs.get("epsilon", 1e-5), x)
        s = ctx.emit("divide", scale, ctx.emit("sqrt", ctx.emit("add", var, eps)))
        t = ctx.emit("subtract", bias, ctx.emit("multiply", mean, s))

        def per_channel(v: Value) -> Value:  # [C] -> [C, 1, ...]; opset<7 spatial=0: [C, H, W]
            return ctx.expand_rank(v, x.rank, 1) if v.rank == 1 else ctx.reshape(v, (1, *v.shape))

        y = ctx.emit("add", ctx.emit("multiply", x, per_channel(s)), per_channel(t))
        # the optional outputs of inference mode: the running statistics, unchanged
        return [y, mean, var, mean, var]


@register("InstanceNormalization")
class InstanceNormalization(OnnxOpConverter):
    graph_ops = ("add", "divide", "mean", "multiply", "reshape", "sqrt", "subtract")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, scale, bias = args[0], args[1], args[2]
        assert x is not None and scale is not None and bias is not None
        axes = tuple(range(2, x.rank))
        y = normalize(ctx, x, axes, float(attrs.get("epsilon", 1e-5)))[0]
        y = ctx.emit("multiply", y, ctx.expand_rank(scale, x.rank, 1))
        return ctx.emit("add", y, ctx.expand_rank(bias, x.rank, 1))


def normalize(ctx: Context, x: Value, axes: tuple[int, ...], eps: float
              ) -> tuple[Value, Value, Value]:
    """(x - mean) / sqrt(var + eps) over ``axes``, with mean and 1/sqrt(var + eps)."""
    mean = ctx.emit("mean", x, axis=axes, keepdims=True)
    d = ctx.emit("subtract", x, mean)
    var = ctx.emit("mean", ctx.emit("multiply", d, d), axis=axes, keepdims=True)
    inv = ctx.emit("divide", ctx.scalar(1, x),
                   ctx.emit("sqrt", ctx.emit("add", var, ctx.scalar(eps, x))))
    return ctx.emit("multiply", d, inv), mean, inv


@register("LayerNormalization")
class LayerNormalization(OnnxOpConverter):
    graph_ops = ("add", "divide", "mean", "multiply", "sqrt", "subtract")

    @classmethod
    def _impl_v17(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        x, scale = args[0], args[1]
        bias = args[2] if len(args) > 2 else None
        assert x is not None and scale is not None
        if int(attrs.get("stash_type", 1)) != 1:
            raise ctx.error("stash_type other than 1 (float32) is not supported")
        axis = norm_axis(ctx, int(attrs.get("axis", -1)), x.rank)
        y, mean, inv = normalize(ctx, x, tuple(range(axis, x.rank)),
                                 float(attrs.get("epsilon", 1e-5)))
        y = ctx.emit("multiply", y, scale)
        if bias is not None:
            y = ctx.emit("add", y, bias)
        return [y, mean, inv]


@register("Gemm")
class Gemm(OnnxOpConverter):
    graph_ops = ("add", "matmul", "multiply", "permute_dims")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        a, b = args[0], args[1]
        c = args[2] if len(args) > 2 else None
        assert a is not None and b is not None
        same_dtype(ctx, [a, b], "Gemm")
        if a.rank != 2 or b.rank != 2:
            raise ctx.error(f"Gemm needs 2-D inputs, got {list(a.shape)} and {list(b.shape)}")
        if int(attrs.get("transA", 0)):
            a = ctx.emit("permute_dims", a, axes=(1, 0))
        if int(attrs.get("transB", 0)):
            b = ctx.emit("permute_dims", b, axes=(1, 0))
        alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
        if alpha != 1.0:  # scale the smaller operand (a constant one folds at import)
            if b.is_const or (not a.is_const and np.prod(b.shape) < np.prod(a.shape)):
                b = ctx.emit("multiply", b, ctx.scalar(alpha, b))
            else:
                a = ctx.emit("multiply", a, ctx.scalar(alpha, a))
        y = ctx.emit("matmul", a, b)
        if c is None or beta == 0.0:
            return y
        if beta != 1.0:
            c = ctx.emit("multiply", c, ctx.scalar(beta, c))
        return ctx.emit("add", y, c)


@register("MatMul")
class MatMul(OnnxOpConverter):
    graph_ops = ("matmul",)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        a, b = args[0], args[1]
        assert a is not None and b is not None
        same_dtype(ctx, [a, b], "MatMul")
        return ctx.emit("matmul", a, b)


class _Softmax(OnnxOpConverter):
    log = False

    @classmethod
    def _compute(cls, ctx: Context, x: Value, axis: int) -> Value:
        m = ctx.emit("max", x, axis=axis, keepdims=True)
        d = ctx.emit("subtract", x, m)
        e = ctx.emit("exp", d)
        s = ctx.emit("sum", e, axis=axis, keepdims=True)
        return ctx.emit("subtract", d, ctx.emit("log", s)) if cls.log else \
            ctx.emit("divide", e, s)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        """Opset < 13: the input is coerced to 2-D at ``axis`` (default 1)."""
        x = args[0]
        assert x is not None
        axis = norm_axis(ctx, int(attrs.get("axis", 1)), max(x.rank, 1))
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        flat = ctx.reshape(x, (rows, int(np.prod(x.shape[axis:], dtype=np.int64))))
        return ctx.reshape(cls._compute(ctx, flat, 1), x.shape)

    @classmethod
    def _impl_v13(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        return cls._compute(ctx, x, norm_axis(ctx, int(attrs.get("axis", -1)), x.rank))


@register("Hardmax")
class Hardmax(_Softmax):
    """1 at the first maximum along the axis, 0 elsewhere (opset < 13: over the 2-D
    coercion at ``axis``, as Softmax)."""
    graph_ops = ("argmax", "astype", "equal", "reshape")

    @classmethod
    def _compute(cls, ctx: Context, x: Value, axis: int) -> Value:
        best = ctx.emit("argmax", x, axis=axis, keepdims=True)
        pos = ctx.const(np.arange(x.shape[axis], dtype=np.int64).reshape(
            (x.shape[axis],) + (1,) * (x.rank - axis - 1)))
        return ctx.astype(ctx.emit("equal", ctx.astype(best, "int64"), pos), x.dtype_name)


@register("Softmax")
class Softmax(_Softmax):
    graph_ops = ("divide", "exp", "max", "reshape", "subtract", "sum")
    pass


@register("LogSoftmax")
class LogSoftmax(_Softmax):
    graph_ops = ("exp", "log", "max", "reshape", "subtract", "sum")
    log = True
