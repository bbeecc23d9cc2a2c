"""Quantization ONNX ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.

Each is lowered at import to graph ops (``astype``, ``subtract``, ``multiply``,
``divide``, ``round``, ``add``, ``maximum``/``minimum``), so a dequantized constant
weight folds into a float constant right here (``Context.emit`` evaluates ops of
constants) and FuseOps fuses the rest into the neighbouring kernels. The helpers
:func:`dequantize`, :func:`saturate` and :func:`broadcast_param` are shared with the
QLinear ops (``qlinear.py``).

Semantics (onnx's reference, ``onnx/reference/ops/op_quantize_linear.py``, and
onnxruntime, which agree):

- **QuantizeLinear**: ``saturate(round(x / scale) + zero_point)``. The division is
  made in x's dtype (or in ``precision``, opset 23), a true division: onnxruntime
  divides, and ``x * (1 / scale)`` differs from it near ties. ``round`` is half to
  even; the zero point is added in float32 (float64 for a float64 or int32 ``x``:
  exact either way inside the target range) and ``astype`` saturates to the target
  range (NaN becomes 0). int4/uint4 results (held as int8/uint8, see
  ``Value.int4_type``) are clamped to [-8, 7] / [0, 15] first.
- **DequantizeLinear**: ``(float32(x) - float32(zero_point)) * scale`` computed in
  float32 and converted once to the scale's dtype (or ``output_dtype``).
- **Granularity** from the scale's shape: one element is per-tensor; a 1-D scale of
  ``x.shape[axis]`` elements is per-axis; a scale of x's rank (opset 21+) is blocked
  along ``axis`` by ``block_size`` (each scale repeated ``block_size`` times, the last
  block cut short: a ``take`` with the constant indices ``i // block_size``).
- **DynamicQuantizeLinear** (uint8): ``scale = (max(0, max x) - min(0, min x)) / 255``
  (1 when that range is 0, as onnxruntime; the ONNX text divides by zero there and
  onnx's reference gives 1 / 255; y is 0 either way),
  ``zero_point = round(clip(-min(0, min x) / scale, 0, 255))``, then QuantizeLinear.

Float8, float4 and int2 types are not irkernel dtypes: a model using them is an
error naming the tensor. Imports the converter machinery only.
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

Args = list["Value | None"]

#: The integer range of each quantized type irkernel holds (int4/uint4 widened).
QRANGES: dict[str, tuple[int, int]] = {
    "int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
    "int4": (-8, 7), "uint4": (0, 15),
}
#: The irkernel dtype holding each quantized type.
STORAGE = {"int4": "int8", "uint4": "uint8"}
#: ONNX TensorProto element types (``output_dtype``) of the quantized types.
_ONNX_QTYPES = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 21: "uint4", 22: "int4"}
#: ONNX TensorProto element types of the float results of DequantizeLinear.
_ONNX_FLOATS = {1: "float32", 10: "float16", 16: "bfloat16"}
_FLOATS = ("float32", "float64", "float16", "bfloat16")


def qtype(v: Value) -> str:
    """The quantized type of ``v``: its dtype, or ``int4``/``uint4`` for a widened one."""
    return v.int4_type or v.dtype_name


def _check_qtype(ctx: Context, v: Value, what: str) -> str:
    name = qtype(v)
    if name not in QRANGES and name != "int32":
        raise ctx.error(f"{what} has type {name}; quantized types are "
                        f"{', '.join(QRANGES)} (and int32 for DequantizeLinear's input)")
    return name


def _is_scalar(v: Value) -> bool:
    return v.rank == 0 or (v.rank == 1 and v.shape[0] == 1)


def broadcast_param(ctx: Context, p: Value, shape: tuple[int, ...], axis: int,
                    block_size: int, what: str) -> Value:
    """A scale or zero point ``p`` reshaped (or repeated, when blocked) to broadcast
    against a tensor of ``shape`` (per-tensor, per-axis or blocked; module docstring)."""
    if _is_scalar(p):
        return ctx.reshape(p, ())
    rank = len(shape)
    ax = norm_axis(ctx, axis, rank)
    if block_size <= 0:
        if p.rank != 1 or p.shape[0] != shape[ax]:
            raise ctx.error(f"{what} of shape {list(p.shape)} is neither one value nor one "
                            f"per element of axis {ax} ({shape[ax]}) of {list(shape)}")
        return ctx.reshape(p, (shape[ax],) + (1,) * (rank - ax - 1))
    blocks = -(-shape[ax] // block_size)
    want = shape[:ax] + (blocks,) + shape[ax + 1:]
    if p.shape != want:
        raise ctx.error(f"{what} of shape {list(p.shape)} does not block {list(shape)} along "
                        f"axis {ax} by block_size {block_size} (expected {list(want)})")
    index = ctx.const(np.arange(shape[ax], dtype=np.int64) // block_size)
    return ctx.emit("take", p, index, axis=ax)


def saturate(ctx: Context, q: Value, zero_point: Value | None, target: str) -> Value:
    """``q`` (rounded, float) plus the zero point, saturated into ``target``'s range and
    converted to its storage dtype (``astype`` from a float saturates; NaN is 0)."""
    if zero_point is not None:
        q = ctx.emit("add", q, ctx.astype(zero_point, q.dtype_name))
    store = STORAGE.get(target, target)
    lo, hi = QRANGES[target]
    if (lo, hi) != QRANGES[store]:  # a 4-bit type inside a byte: clamp to its range
        q = ctx.emit("minimum", ctx.emit("maximum", q, ctx.scalar(lo, q)), ctx.scalar(hi, q))
    out = ctx.astype(q, store)
    if target in STORAGE:
        out = Value(out.dtype, out.shape, node=out.node, const=out.const, int4_type=target)
    return out


def quantize(ctx: Context, x: Value, scale: Value, zero_point: Value | None,
             target: str, precision: str | None = None) -> Value:
    """QuantizeLinear of ``x`` with ``scale`` and ``zero_point`` already broadcastable;
    the division in ``precision`` (QuantizeLinear-23's attribute) when given."""
    if precision is not None:
        work = precision
    elif x.dtype_name in _FLOATS and scale.dtype_name == x.dtype_name:
        work = x.dtype_name
    else:  # NumPy's promotion in the reference: int32 / float32 is float64
        work = "float64" if "float64" in (x.dtype_name, scale.dtype_name) or \
            x.dtype_name not in _FLOATS else "float32"
    q = ctx.emit("round", ctx.emit("divide", ctx.astype(x, work), ctx.astype(scale, work)))
    if work in ("float16", "bfloat16"):
        q = ctx.astype(q, "float32")  # rounded values are exact in float32; + zp must be too
    return saturate(ctx, q, zero_point, target)


def dequantize(ctx: Context, x: Value, scale: Value, zero_point: Value | None,
               result: str) -> Value:
    """DequantizeLinear of ``x`` (``scale``, ``zero_point`` broadcastable), computed in
    float32 and converted to ``result``."""
    xf = ctx.astype(x, "float32")
    if zero_point is not None:
        xf = ctx.emit("subtract", xf, ctx.astype(zero_point, "float32"))
    return ctx.astype(ctx.emit("multiply", xf, ctx.astype(scale, "float32")), result)


def _broadcast_params(ctx: Context, x: Value, scale: Value, zp: Value | None,
                      attrs: dict[str, Any], prefix: str) -> tuple[Value, Value | None]:
    """The scale and zero point of a Q/DQ node, broadcastable to ``x`` (``axis``,
    ``block_size``); ``prefix`` is ``x`` or ``y`` for messages."""
    axis, block = int(attrs.get("axis", 1)), int(attrs.get("block_size", 0))
    if block < 0:
        raise ctx.error(f"block_size {block} is negative")
    scale_b = broadcast_param(ctx, scale, x.shape, axis, block, f"{prefix}_scale")
    zp_b = None if zp is None else broadcast_param(ctx, zp, x.shape, axis, block,
                                                   f"{prefix}_zero_point")
    return scale_b, zp_b


def _check_scale(ctx: Context, scale: Value, what: str) -> None:
    if scale.dtype_name not in _FLOATS:
        raise ctx.error(f"{what} has dtype {scale.dtype_name}; it must be a float")


@register("QuantizeLinear")
class QuantizeLinear(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "maximum", "minimum", "reshape", "round", "take")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, scale = args[0], args[1]
        zp = args[2] if len(args) > 2 else None
        assert x is not None and scale is not None
        _check_scale(ctx, scale, "y_scale")
        target = "uint8"
        if "output_dtype" in attrs and int(attrs["output_dtype"]):
            code = int(attrs["output_dtype"])
            if code not in _ONNX_QTYPES:
                raise ctx.error(f"output_dtype {code} is not a quantized type irkernel has "
                                f"({', '.join(QRANGES)})")
            target = _ONNX_QTYPES[code]
        if zp is not None:
            zp_type = _check_qtype(ctx, zp, "y_zero_point")
            if "output_dtype" in attrs and int(attrs["output_dtype"]) and zp_type != target:
                raise ctx.error(f"output_dtype {target} differs from y_zero_point's {zp_type}")
            target = zp_type
        if target not in QRANGES:
            raise ctx.error(f"QuantizeLinear cannot produce {target}")
        precision = None
        if int(attrs.get("precision", 0)):
            code = int(attrs["precision"])
            if code not in _ONNX_FLOATS and code != 11:
                raise ctx.error(f"precision {code} is not float, double, float16 or bfloat16")
            precision = _ONNX_FLOATS.get(code, "float64")
        scale_b, zp_b = _broadcast_params(ctx, x, scale, zp, attrs, "y")
        return quantize(ctx, x, scale_b, zp_b, target, precision)


@register("DequantizeLinear")
class DequantizeLinear(OnnxOpConverter):
    graph_ops = ("astype", "multiply", "reshape", "subtract", "take")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, scale = args[0], args[1]
        zp = args[2] if len(args) > 2 else None
        assert x is not None and scale is not None
        _check_scale(ctx, scale, "x_scale")
        x_type = _check_qtype(ctx, x, "x")
        if zp is not None and qtype(zp) != x_type:
            raise ctx.error(f"x_zero_point has type {qtype(zp)}, x has {x_type}")
        result = scale.dtype_name
        if "output_dtype" in attrs and int(attrs["output_dtype"]):
            code = int(attrs["output_dtype"])
            if code not in _ONNX_FLOATS:
                raise ctx.error(f"output_dtype {code} is not float, float16 or bfloat16")
            result = _ONNX_FLOATS[code]
        scale_b, zp_b = _broadcast_params(ctx, x, scale, zp, attrs, "x")
        return dequantize(ctx, x, scale_b, zp_b, result)


@register("DynamicQuantizeLinear")
class DynamicQuantizeLinear(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "equal", "max", "maximum", "min", "minimum",
                 "round", "subtract", "where")

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        x = args[0]
        assert x is not None
        if x.dtype_name != "float32":
            raise ctx.error(f"x has dtype {x.dtype_name}; DynamicQuantizeLinear takes float32")
        if 0 in x.shape:
            raise ctx.error(f"x of shape {list(x.shape)} is empty: it has no range to quantize")
        zero = ctx.const(np.float32(0))
        hi = ctx.emit("maximum", ctx.emit("max", x), zero)
        lo = ctx.emit("minimum", ctx.emit("min", x), zero)
        span = ctx.emit("subtract", hi, lo)
        scale = ctx.emit("where", ctx.emit("equal", span, zero), ctx.const(np.float32(1)),
                         ctx.emit("divide", span, ctx.const(np.float32(255))))
        initial = ctx.emit("subtract", zero, ctx.emit("divide", lo, scale))
        clipped = ctx.emit("minimum", ctx.emit("maximum", initial, zero),
                           ctx.const(np.float32(255)))
        zp_f = ctx.emit("round", clipped)
        q = ctx.emit("round", ctx.emit("divide", x, scale))
        y = ctx.astype(ctx.emit("add", q, zp_f), "uint8")
        return [y, scale, ctx.astype(zp_f, "uint8")]
