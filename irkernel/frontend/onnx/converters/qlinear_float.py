"""onnxruntime's quantized ops that compute in float between a dequantize and a quantize:
QLinearSigmoid, QLinearLeakyRelu, QLinearAveragePool and QLinearSoftmax (domain
``com.microsoft``; its quantizer emits them for sigmoids and SiLUs, leaky ReLUs, average
pools and attention softmaxes).

Each is ``QuantizeLinear(f(DequantizeLinear(x)))``: the input dequantized to float32 with
its scale and zero point, the float op of the same name (sigmoid, LeakyRelu's
composition, avg_pool, softmax), and the result quantized with the output's scale and
zero point (round half to even, saturate). onnxruntime evaluates the first two through
a 256-entry table of the same float function and the softmax through a fixed-point
table of exponentials, so a result can differ from its by one step where the float value
lies within rounding of a half; the tests allow one step on 1% of the elements, as for
the other com.microsoft ops. Imports the converter machinery and the QLinear helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from irkernel.frontend.onnx.common import Context, OnnxOpConverter, Value, register
from irkernel.frontend.onnx.converters.elementwise import LeakyRelu
from irkernel.frontend.onnx.converters.nn import AveragePool, Softmax
from irkernel.frontend.onnx.converters.qlinear import _arg, _f32, _opt, _scalar_param, _triple
from irkernel.frontend.onnx.converters.quant import dequantize, qtype, quantize

Args = list["Value | None"]
_MS = "com.microsoft"
_DEQUANT_QUANT = ("add", "astype", "divide", "maximum", "minimum", "multiply", "reshape",
                  "round", "subtract")


def _through_float(ctx: Context, args: Args, op: Callable[[Value], Value]) -> Value:
    """``QuantizeLinear(op(DequantizeLinear(X)))`` for inputs (X, X_scale, X_zero_point,
    Y_scale, Y_zero_point); the result has Y_zero_point's type, else X's."""
    x, sx, zx = _triple(ctx, args, 0, "X")
    sy = _scalar_param(ctx, _arg(ctx, args, 3, "Y_scale"), "Y_scale")
    zy = _scalar_param(ctx, _opt(args, 4), "Y_zero_point")
    assert sy is not None
    real = op(dequantize(ctx, x, sx, zx, "float32"))
    return quantize(ctx, real, _f32(ctx, sy), zy, qtype(x) if zy is None else qtype(zy))


@register("QLinearSigmoid", domain=_MS)
class QLinearSigmoid(OnnxOpConverter):
    graph_ops = tuple(sorted({*_DEQUANT_QUANT, "sigmoid"}))

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        return _through_float(ctx, args, lambda r: ctx.emit("sigmoid", r))


@register("QLinearLeakyRelu", domain=_MS)
class QLinearLeakyRelu(OnnxOpConverter):
    graph_ops = tuple(sorted({*_DEQUANT_QUANT, *LeakyRelu.graph_ops}))

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        return _through_float(ctx, args, lambda r: LeakyRelu._apply(ctx, r, attrs))


@register("QLinearAveragePool", domain=_MS)
class QLinearAveragePool(OnnxOpConverter):
    """AveragePool's attributes, and ``channels_last`` (an NHWC input and output)."""
    graph_ops = tuple(sorted({*_DEQUANT_QUANT, "avg_pool", "permute_dims"}))

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        pool_attrs = {k: v for k, v in attrs.items() if k != "channels_last"}
        last = bool(int(attrs.get("channels_last", 0)))

        def pool(r: Value) -> Value:
            if not last:
                return AveragePool._impl_v1(ctx, [r], pool_attrs)
            if r.rank < 3:
                raise ctx.error(f"X of shape {list(r.shape)} has no spatial axes")
            to_first = (0, r.rank - 1, *range(1, r.rank - 1))
            to_last = (0, *range(2, r.rank), 1)
            y = AveragePool._impl_v1(ctx, [ctx.emit("permute_dims", r, axes=to_first)],
                                     pool_attrs)
            return ctx.emit("permute_dims", y, axes=to_last)

        return _through_float(ctx, args, pool)


@register("QLinearSoftmax", domain=_MS)
class QLinearSoftmax(OnnxOpConverter):
    """Softmax over ``axis`` (default -1) with the semantics of the ONNX opset named by
    the ``opset`` attribute: before 13 over the 2-D coercion at ``axis``."""
    graph_ops = tuple(sorted({*_DEQUANT_QUANT, *Softmax.graph_ops}))

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        if "opset" not in attrs:
            raise ctx.error("the opset attribute is required (the Softmax semantics to use)")
        axis = {"axis": int(attrs.get("axis", -1))}
        impl = Softmax._impl_v13 if int(attrs["opset"]) >= 13 else Softmax._impl_v1
        return _through_float(ctx, args, lambda r: impl(ctx, [r], axis))


__all__ = ["QLinearAveragePool", "QLinearLeakyRelu", "QLinearSigmoid", "QLinearSoftmax"]
