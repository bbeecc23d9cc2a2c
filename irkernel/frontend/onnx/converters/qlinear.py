"""Integer and QLinear ONNX ops: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv,
and onnxruntime's QGemm, QLinearAdd, QLinearMul, QLinearGlobalAveragePool and
QLinearConcat (domain ``com.microsoft``, what its quantizer emits).

**Exact integer accumulation in float.** The graph IR's ``conv`` takes floats only, so
the products are summed in a float type in which they are exact: each operand minus its
zero point is an integer (``|a| <= A``, ``|w| <= W``), every partial sum of a dot
product is an integer of at most ``A * sum_k |w_k|``, and an integer is exact in
float32 below 2**24 (float64: 2**53). :func:`accumulate_dtype` takes the bound at
import (from the constant weights, per output channel, or from the types and K when
they are not constant) and chooses float32 when it holds, else float64; either way the
sum is the exact int32 accumulator onnxruntime computes (whatever the summation
order), and a bias (int32) is added to it under the same bound. ``matmul`` uses the
same choice, so both ops share one path and its float kernels.

**Requantization** is onnxruntime's (``MlasRequantizeOutput``): the exact accumulator
converted to float32, times the float32 multiplier ``(a_scale * b_scale) / y_scale``
(per output channel when the weight's scale is), rounded half to even, plus the
output zero point, saturated. The multiplier is computed in the scales' dtype (the
float16 scales of QLinearMatMul-21 included), as the reference does.

The com.microsoft ops follow onnxruntime's kernels (there is no ONNX text):
QLinearAdd ``a * (sa / sc) + b * (sb / sc) + (zc - (sa / sc) * za - (sb / sc) * zb)``,
QLinearMul ``(a - za) * (b - zb) * (sa * sb / sc) + zc``, QLinearGlobalAveragePool
``(sum x - zx * n) * (sx / (sy * n)) + zy``, QLinearConcat each input requantized as
``QuantizeLinear(DequantizeLinear(x))`` to the output's scale (a copy when they are
the same), QGemm ``(C + (A - za)(B - zb)) * (alpha * sa * sb [/ sy]) [+ zy]`` with a
float32 result when it has no output zero point. Each rounds half to even and
saturates. Imports the converter machinery and the shared quantization helpers.
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
)
from irkernel.frontend.onnx.converters.nn import window_attrs
from irkernel.frontend.onnx.converters.quant import (
    QRANGES,
    broadcast_param,
    dequantize,
    qtype,
    quantize,
    saturate,
)

Args = list["Value | None"]
_MS = "com.microsoft"
#: Largest integer bound below which every partial sum is exact, per float dtype.
_EXACT = {"float32": 2**24, "float64": 2**53}


def _arg(ctx: Context, args: Args, k: int, what: str) -> Value:
    v = args[k] if len(args) > k else None
    if v is None:
        raise ctx.error(f"input {k} ({what}) is required")
    return v


def _opt(args: Args, k: int) -> Value | None:
    return args[k] if len(args) > k else None


def _int_type(ctx: Context, v: Value, what: str) -> str:
    name = qtype(v)
    if name not in QRANGES:
        raise ctx.error(f"{what} has type {name}; expected one of {', '.join(QRANGES)}")
    return name


def _magnitude(ctx: Context, v: Value, zp: Value | None) -> float:
    """The largest ``|v - zp|`` possible: exact for a constant, else from v's type."""
    if v.is_const:
        c = v.const.astype(np.float64)
        if zp is not None:
            c = c - ctx.const_value(zp, "zero point").astype(np.float64)
        return float(np.abs(c).max(initial=0.0))
    lo, hi = QRANGES[_int_type(ctx, v, "operand")]
    if zp is None or not zp.is_const:
        return float(hi - lo)
    z = zp.const.astype(np.float64)
    return float(max(np.max(hi - z, initial=0.0), np.max(z - lo, initial=0.0)))


def accumulate_dtype(bound: float) -> str:
    """float32 when every partial sum (an integer of magnitude <= ``bound``) is exact
    in it, else float64 (module docstring)."""
    return "float32" if bound < _EXACT["float32"] else "float64"


def _centered(ctx: Context, v: Value, zp: Value | None, dtype: str) -> Value:
    """``v - zp`` in ``dtype`` (exact: both are small integers); folds for a constant."""
    out = ctx.astype(v, dtype)
    return out if zp is None else ctx.emit("subtract", out, ctx.astype(zp, dtype))


def _weight_bound(ctx: Context, w: Value, zp: Value | None, axes: tuple[int, ...],
                  k: int) -> float:
    """Largest ``sum_k |w - zp|`` over one output: exact for a constant weight."""
    if not w.is_const or (zp is not None and not zp.is_const):
        return k * _magnitude(ctx, w, zp)
    c = _centered(ctx, w, zp, "float64").const
    assert c is not None
    return float(np.abs(c).sum(axis=axes).max(initial=0.0))


def _multiplier(ctx: Context, a_scale: Value, b_scale: Value, y_scale: Value | None,
                alpha: float = 1.0) -> Value:
    """``(alpha * a_scale * b_scale) / y_scale`` in the scales' dtype, then float32."""
    m = a_scale if alpha == 1.0 else ctx.emit("multiply", ctx.scalar(alpha, a_scale), a_scale)
    m = ctx.emit("multiply", m, ctx.astype(b_scale, a_scale.dtype_name))
    if y_scale is not None:
        m = ctx.emit("divide", m, ctx.astype(y_scale, m.dtype_name))
    return ctx.astype(m, "float32")


def requantize(ctx: Context, acc: Value, multiplier: Value, zp: Value | None,
               target: str) -> Value:
    """onnxruntime's requantization of an exact accumulator (module docstring)."""
    scaled = ctx.emit("multiply", ctx.astype(acc, "float32"), multiplier)
    return saturate(ctx, ctx.emit("round", scaled), zp, target)


def _scalar_param(ctx: Context, v: Value | None, what: str) -> Value | None:
    if v is not None and v.rank > 1 or (v is not None and v.rank == 1 and v.shape[0] != 1):
        raise ctx.error(f"{what} of shape {list(v.shape)} must be a single value")
    return None if v is None else ctx.reshape(v, ())


def _per_output_channel(ctx: Context, p: Value, w: Value, what: str) -> Value:
    """A scalar or per-output-channel parameter of a conv's weight ``w``, shaped to
    broadcast against the conv's NCHW result (``[O, 1, ...]``)."""
    if _is_single(p):
        return ctx.reshape(p, ())
    if p.shape != (w.shape[0],):
        raise ctx.error(f"{what} of shape {list(p.shape)} is neither one value nor one per "
                        f"output channel ({w.shape[0]})")
    return ctx.reshape(p, (w.shape[0],) + (1,) * (w.rank - 2))


def _is_single(v: Value) -> bool:
    return v.rank == 0 or v.shape == (1,)


def _conv_int(ctx: Context, x: Value, x_zp: Value | None, w: Value, w_zp: Value | None,
              bias: Value | None, attrs: dict[str, Any]) -> Value:
    """The exact accumulator of an integer convolution (+ int32 bias), as a float."""
    if x.rank < 3 or w.rank != x.rank:
        raise ctx.error(f"x {list(x.shape)} and w {list(w.shape)} must be NCHW tensors of one "
                        "rank >= 3")
    x_zp = _scalar_param(ctx, x_zp, "x_zero_point")
    out_ch = w.shape[0]
    w_zp_b = None if w_zp is None else broadcast_param(ctx, w_zp, w.shape, 0, 0, "w_zero_point")
    axes = tuple(range(1, w.rank))
    k = int(np.prod(w.shape[1:]))
    bound = _magnitude(ctx, x, x_zp) * _weight_bound(ctx, w, w_zp_b, axes, k)
    bias_b = None
    if bias is not None:
        if bias.shape != (out_ch,):
            raise ctx.error(f"bias of shape {list(bias.shape)} must be [{out_ch}]")
        bias_b = ctx.reshape(bias, (out_ch,) + (1,) * (x.rank - 2))
    dtype = accumulate_dtype(bound + _bias_bound(ctx, bias))
    kernel = ints_attr(attrs, "kernel_shape", list(w.shape[2:]))
    assert kernel is not None
    strides, pads, dilations = window_attrs(ctx, x, attrs, kernel)
    acc = ctx.emit("conv", _centered(ctx, x, x_zp, dtype), _centered(ctx, w, w_zp_b, dtype),
                   strides=strides, padding=pads, dilation=dilations,
                   groups=int(attrs.get("group", 1)))
    return acc if bias_b is None else ctx.emit("add", acc, ctx.astype(bias_b, dtype))


def _row_param(ctx: Context, v: Value | None, a: Value, what: str) -> Value | None:
    """A scalar or per-row (``a.shape[-2]``) parameter of a matmul's left operand."""
    if v is None or v.rank == 0 or v.shape == (1,):
        return None if v is None else ctx.reshape(v, ())
    if v.rank == 1 and a.rank >= 2 and v.shape[0] == a.shape[-2]:
        return ctx.reshape(v, (v.shape[0], 1))
    raise ctx.error(f"{what} of shape {list(v.shape)} is neither one value nor one per row "
                    f"of {list(a.shape)}")


def _col_param(ctx: Context, v: Value | None, b: Value, what: str) -> Value | None:
    """A scalar or per-column (``b.shape[-1]``) parameter of a matmul's right operand."""
    if v is None or v.rank == 0 or v.shape == (1,):
        return None if v is None else ctx.reshape(v, ())
    if v.rank == 1 and v.shape[0] == b.shape[-1]:
        return v
    if v.rank == b.rank and v.shape[-2] == 1 and v.shape[-1] == b.shape[-1]:
        return v
    raise ctx.error(f"{what} of shape {list(v.shape)} is neither one value nor one per "
                    f"column of {list(b.shape)}")


def _matmul_int(ctx: Context, a: Value, a_zp: Value | None, b: Value, b_zp: Value | None,
                bias: Value | None = None) -> Value:
    """The exact accumulator of an integer matmul (+ an int32 bias), as a float (zero
    points broadcast)."""
    if a.rank < 1 or b.rank < 1:
        raise ctx.error("matmul operands must have rank >= 1")
    k = a.shape[-1]
    b_bound = _weight_bound(ctx, b, b_zp, (b.rank - 2,), k) if b.rank >= 2 else \
        k * _magnitude(ctx, b, b_zp)
    dtype = accumulate_dtype(_magnitude(ctx, a, a_zp) * b_bound + _bias_bound(ctx, bias))
    acc = ctx.emit("matmul", _centered(ctx, a, a_zp, dtype), _centered(ctx, b, b_zp, dtype))
    return acc if bias is None else ctx.emit("add", acc, ctx.astype(bias, dtype))


def _bias_bound(ctx: Context, bias: Value | None) -> float:
    if bias is None:
        return 0.0
    if bias.dtype_name != "int32":
        raise ctx.error(f"bias has dtype {bias.dtype_name}; it must be int32")
    return _magnitude(ctx, bias, None) if bias.is_const else 2.0**31


@register("MatMulInteger")
class MatMulInteger(OnnxOpConverter):
    graph_ops = ("astype", "matmul", "reshape", "subtract")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        a, b = _arg(ctx, args, 0, "A"), _arg(ctx, args, 1, "B")
        _int_type(ctx, a, "A"), _int_type(ctx, b, "B")
        a_zp = _row_param(ctx, _opt(args, 2), a, "a_zero_point")
        b_zp = _col_param(ctx, _opt(args, 3), b, "b_zero_point")
        return ctx.astype(_matmul_int(ctx, a, a_zp, b, b_zp), "int32")


@register("ConvInteger")
class ConvInteger(OnnxOpConverter):
    graph_ops = ("astype", "conv", "reshape", "subtract")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, w = _arg(ctx, args, 0, "x"), _arg(ctx, args, 1, "w")
        _int_type(ctx, x, "x"), _int_type(ctx, w, "w")
        acc = _conv_int(ctx, x, _opt(args, 2), w, _opt(args, 3), None, attrs)
        return ctx.astype(acc, "int32")


@register("QLinearMatMul")
class QLinearMatMul(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "matmul", "maximum", "minimum", "multiply",
                 "reshape", "round", "subtract")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        a, b = _arg(ctx, args, 0, "a"), _arg(ctx, args, 3, "b")
        _int_type(ctx, a, "a"), _int_type(ctx, b, "b")
        a_scale = _row_param(ctx, _arg(ctx, args, 1, "a_scale"), a, "a_scale")
        b_scale = _col_param(ctx, _arg(ctx, args, 4, "b_scale"), b, "b_scale")
        y_scale = _scalar_param(ctx, _arg(ctx, args, 6, "y_scale"), "y_scale")
        y_zp = _scalar_param(ctx, _arg(ctx, args, 7, "y_zero_point"), "y_zero_point")
        assert a_scale is not None and b_scale is not None and y_zp is not None
        acc = _matmul_int(ctx, a, _row_param(ctx, _opt(args, 2), a, "a_zero_point"), b,
                          _col_param(ctx, _opt(args, 5), b, "b_zero_point"))
        return requantize(ctx, acc, _multiplier(ctx, a_scale, b_scale, y_scale), y_zp,
                          _int_type(ctx, y_zp, "y_zero_point"))


@register("QLinearConv")
class QLinearConv(OnnxOpConverter):
    graph_ops = ("add", "astype", "conv", "divide", "maximum", "minimum", "multiply",
                 "reshape", "round", "subtract")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, w = _arg(ctx, args, 0, "x"), _arg(ctx, args, 3, "w")
        _int_type(ctx, x, "x"), _int_type(ctx, w, "w")
        x_scale = _scalar_param(ctx, _arg(ctx, args, 1, "x_scale"), "x_scale")
        w_scale = _per_output_channel(ctx, _arg(ctx, args, 4, "w_scale"), w, "w_scale")
        y_scale = _scalar_param(ctx, _arg(ctx, args, 6, "y_scale"), "y_scale")
        y_zp = _scalar_param(ctx, _arg(ctx, args, 7, "y_zero_point"), "y_zero_point")
        assert x_scale is not None and y_zp is not None
        acc = _conv_int(ctx, x, _arg(ctx, args, 2, "x_zero_point"), w,
                        _arg(ctx, args, 5, "w_zero_point"), _opt(args, 8), attrs)
        return requantize(ctx, acc, _multiplier(ctx, x_scale, w_scale, y_scale), y_zp,
                          _int_type(ctx, y_zp, "y_zero_point"))


# ---------------------------------------------------------------------------
# com.microsoft (onnxruntime's quantizer)
# ---------------------------------------------------------------------------

def _triple(ctx: Context, args: Args, k: int, name: str) -> tuple[Value, Value, Value | None]:
    """(x, scale as a scalar, zero point as a scalar or None) at inputs k, k+1, k+2."""
    x = _arg(ctx, args, k, name)
    _int_type(ctx, x, name)
    scale = _scalar_param(ctx, _arg(ctx, args, k + 1, f"{name}_scale"), f"{name}_scale")
    assert scale is not None
    return x, scale, _scalar_param(ctx, _opt(args, k + 2), f"{name}_zero_point")


def _binary_args(ctx: Context, args: Args) -> tuple[tuple[Value, Value, Value | None],
                                                    tuple[Value, Value, Value | None],
                                                    tuple[Value, Value | None]]:
    """QLinearAdd's and QLinearMul's inputs: (A, scale, zp), (B, scale, zp), (C scale, zp)."""
    sc = _scalar_param(ctx, _arg(ctx, args, 6, "C_scale"), "C_scale")
    assert sc is not None
    return (_triple(ctx, args, 0, "A"), _triple(ctx, args, 3, "B"),
            (sc, _scalar_param(ctx, _opt(args, 7), "C_zero_point")))


def _f32(ctx: Context, v: Value | None) -> Value:
    return ctx.const(np.float32(0)) if v is None else ctx.astype(v, "float32")


@register("QLinearAdd", domain=_MS)
class QLinearAdd(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "maximum", "minimum", "multiply", "reshape",
                 "round", "subtract")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        (a, sa, za), (b, sb, zb), (sc, zc) = _binary_args(ctx, args)
        ra = ctx.emit("divide", _f32(ctx, sa), _f32(ctx, sc))
        rb = ctx.emit("divide", _f32(ctx, sb), _f32(ctx, sc))
        fixed = ctx.emit("subtract", _f32(ctx, zc), ctx.emit(
            "add", ctx.emit("multiply", ra, _f32(ctx, za)), ctx.emit("multiply", rb, _f32(ctx, zb))))
        total = ctx.emit("add", ctx.emit("multiply", _f32(ctx, a), ra),
                         ctx.emit("multiply", _f32(ctx, b), rb))
        return saturate(ctx, ctx.emit("round", ctx.emit("add", total, fixed)), None, qtype(a))


@register("QLinearMul", domain=_MS)
class QLinearMul(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "maximum", "minimum", "multiply", "reshape",
                 "round", "subtract")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        (a, sa, za), (b, sb, zb), (sc, zc) = _binary_args(ctx, args)
        prod = ctx.emit("multiply", _centered(ctx, a, za, "float32"),
                        _centered(ctx, b, zb, "float32"))  # exact: |.| <= 65025
        return requantize(ctx, prod, _multiplier(ctx, _f32(ctx, sa), sb, sc), zc, qtype(a))


@register("QLinearGlobalAveragePool", domain=_MS)
class QLinearGlobalAveragePool(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "maximum", "minimum", "multiply", "reshape",
                 "round", "subtract", "sum")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, sx, zx = _triple(ctx, args, 0, "X")
        sy = _scalar_param(ctx, _arg(ctx, args, 3, "y_scale"), "y_scale")
        zy = _scalar_param(ctx, _opt(args, 4), "y_zero_point")
        assert sy is not None
        if x.rank < 3:
            raise ctx.error(f"X of shape {list(x.shape)} has no spatial axes")
        last = bool(int(attrs.get("channels_last", 0)))
        axes = tuple(range(1, x.rank - 1)) if last else tuple(range(2, x.rank))
        n = int(np.prod([x.shape[a] for a in axes]))
        lo, hi = QRANGES[qtype(x)]
        dtype = accumulate_dtype(n * max(abs(lo), abs(hi)))
        total = ctx.emit("sum", ctx.astype(x, dtype), axis=axes, keepdims=True)
        if zx is not None:
            total = ctx.emit("subtract", total, ctx.emit(
                "multiply", ctx.astype(zx, dtype), ctx.const(np.asarray(n, dtype))))
        scale = ctx.emit("divide", _f32(ctx, sx), ctx.emit(
            "multiply", _f32(ctx, sy), ctx.const(np.float32(n))))
        return requantize(ctx, total, scale, zy, qtype(x))


@register("QLinearConcat", domain=_MS)
class QLinearConcat(OnnxOpConverter):
    graph_ops = ("add", "astype", "concat", "divide", "maximum", "minimum", "multiply",
                 "reshape", "round", "subtract")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        sy = _scalar_param(ctx, _arg(ctx, args, 0, "Y_scale"), "Y_scale")
        zy = _scalar_param(ctx, _opt(args, 1), "Y_zero_point")
        assert sy is not None
        if len(args) < 5 or (len(args) - 2) % 3:
            raise ctx.error(f"QLinearConcat takes Y_scale, Y_zero_point and (X, X_scale, "
                            f"X_zero_point) triples; got {len(args)} inputs")
        parts = []
        for k in range(2, len(args), 3):
            x, sx, zx = _triple(ctx, args, k, f"X{(k - 2) // 3}")
            target = qtype(x) if zy is None else qtype(zy)
            if _same_const(sx, sy) and _same_const(zx, zy) and qtype(x) == target:
                parts.append(x)
                continue
            real = dequantize(ctx, x, sx, zx, "float32")
            parts.append(quantize(ctx, real, _f32(ctx, sy), zy, target))
        axis = norm_axis(ctx, int(attrs.get("axis", 0)), parts[0].rank)
        return ctx.emit("concat", *parts, axis=axis)


def _same_const(a: Value | None, b: Value | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.is_const and b.is_const and bool(np.array_equal(a.const, b.const))


@register("QGemm", domain=_MS)
class QGemm(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "matmul", "maximum", "minimum", "multiply",
                 "permute_dims", "reshape", "round", "subtract")

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        a, sa, za = _triple(ctx, args, 0, "A")
        b = _arg(ctx, args, 3, "B")
        _int_type(ctx, b, "B")
        if a.rank != 2 or b.rank != 2:
            raise ctx.error(f"QGemm needs 2-D A and B, got {list(a.shape)} and {list(b.shape)}")
        if int(attrs.get("transA", 0)):
            a = ctx.emit("permute_dims", a, axes=(1, 0))
        if int(attrs.get("transB", 0)):
            b = ctx.emit("permute_dims", b, axes=(1, 0))
        sb = _col_param(ctx, _arg(ctx, args, 4, "b_scale"), b, "b_scale")
        zb = _col_param(ctx, _opt(args, 5), b, "b_zero_point")
        assert sb is not None
        bias, sy = _opt(args, 6), _scalar_param(ctx, _opt(args, 7), "y_scale")
        zy = _scalar_param(ctx, _opt(args, 8), "y_zero_point")
        acc = _matmul_int(ctx, a, za, b, zb, bias)
        m = _multiplier(ctx, _f32(ctx, sa), sb, sy if zy is not None else None,
                        float(attrs.get("alpha", 1.0)))
        if zy is None:  # a float32 result: the accumulator scaled back
            if sy is not None:
                raise ctx.error("y_scale without y_zero_point: QGemm's output is quantized "
                                "only with both")
            return ctx.emit("multiply", ctx.astype(acc, "float32"), m)
        return requantize(ctx, acc, m, zy, qtype(zy))
