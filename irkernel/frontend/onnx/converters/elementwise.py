"""Elementwise ONNX ops: arithmetic, comparisons, logic, math functions, activations.

Compositions of graph ops where ONNX has no graph op of its own (LeakyRelu,
Elu, Selu, HardSigmoid, HardSwish, Softplus, Gelu, PRelu, Clip, Reciprocal,
integer Div); opset < 7 legacy broadcasting (``broadcast``/``axis``) is
rewritten into a reshape. Imports the converter machinery only.
"""

from __future__ import annotations

import math
from typing import Any

from irkernel.frontend.onnx.dimvalues import is_dims
from irkernel.frontend.onnx.common import (
    Context,
    OnnxOpConverter,
    Value,
    register,
    same_dtype,
)

Args = list["Value | None"]


def _legacy_broadcast(ctx: Context, a: Value, b: Value, attrs: dict[str, Any]) -> Value:
    """Opset < 7: with ``broadcast=1`` and ``axis``, b's dims line up with a's from axis."""
    if not attrs.get("broadcast", 0) or "axis" not in attrs or b.rank >= a.rank:
        return b
    axis = int(attrs["axis"]) % max(a.rank, 1)
    return ctx.reshape(b, b.shape + (1,) * (a.rank - axis - b.rank))


class _Binary(OnnxOpConverter):
    op = ""

    @classmethod
    def _apply(cls, ctx: Context, a: Value, b: Value) -> Value:
        same_dtype(ctx, [a, b], cls.__name__)
        return ctx.emit(cls.op, a, b)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        a, b = args[0], args[1]
        assert a is not None and b is not None
        return cls._apply(ctx, a, _legacy_broadcast(ctx, a, b, attrs))

    @classmethod
    def _impl_v7(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        a, b = args[0], args[1]
        assert a is not None and b is not None
        return cls._apply(ctx, a, b)


@register("Add")
class Add(_Binary):
    graph_ops = ("add", "reshape")
    op = "add"


@register("Sub")
class Sub(_Binary):
    graph_ops = ("reshape", "subtract")
    op = "subtract"


@register("Mul")
class Mul(_Binary):
    graph_ops = ("multiply", "reshape")
    op = "multiply"


@register("Div")
class Div(_Binary):
    graph_ops = ("add", "astype", "divide", "equal", "less", "multiply", "reshape", "subtract")
    op = "divide"

    @classmethod
    def _apply(cls, ctx: Context, a: Value, b: Value) -> Value:
        same_dtype(ctx, [a, b], "Div")
        q = ctx.emit("divide", a, b)
        if a.dtype_name not in ("int32", "int64") or is_dims(a.const) or is_dims(b.const):
            return q  # (dims divide by positive constants only: floor is truncation)
        # ONNX integer division truncates toward zero; irkernel's divide floors:
        # add one where the remainder is non-zero and the operands' signs differ.
        zero, one = ctx.scalar(0, a), ctx.scalar(1, a)
        r = ctx.emit("subtract", a, ctx.emit("multiply", q, b))
        inexact = ctx.emit("subtract", one, ctx.astype(ctx.emit("equal", r, zero), a.dtype_name))
        same_sign = ctx.emit("equal", ctx.emit("less", a, zero), ctx.emit("less", b, zero))
        differ = ctx.emit("subtract", one, ctx.astype(same_sign, a.dtype_name))
        return ctx.emit("add", q, ctx.emit("multiply", inexact, differ))


@register("Pow")
class Pow(_Binary):
    graph_ops = ("astype", "power", "reshape")

    @classmethod
    def _apply(cls, ctx: Context, a: Value, b: Value) -> Value:
        if a.dtype_name in ("float32", "float64"):
            return ctx.emit("power", a, ctx.astype(b, a.dtype_name))
        # integer base: computed in float64 and converted back (exact for results < 2**53)
        out = ctx.emit("power", ctx.astype(a, "float64"), ctx.astype(b, "float64"))
        return ctx.astype(out, a.dtype_name)


@register("Equal")
class Equal(_Binary):
    graph_ops = ("equal", "reshape")
    op = "equal"


@register("Less")
class Less(_Binary):
    graph_ops = ("less", "reshape")
    op = "less"


@register("Greater")
class Greater(_Binary):
    graph_ops = ("greater", "reshape")
    op = "greater"


@register("LessOrEqual")
class LessOrEqual(_Binary):
    graph_ops = ("equal", "less", "reshape", "where")

    @classmethod
    def _apply(cls, ctx: Context, a: Value, b: Value) -> Value:
        same_dtype(ctx, [a, b], "LessOrEqual")  # NaN compares false, as in ONNX
        return ctx.emit("where", ctx.emit("less", a, b), ctx.const(True), ctx.emit("equal", a, b))


@register("GreaterOrEqual")
class GreaterOrEqual(_Binary):
    graph_ops = ("equal", "greater", "reshape", "where")

    @classmethod
    def _apply(cls, ctx: Context, a: Value, b: Value) -> Value:
        same_dtype(ctx, [a, b], "GreaterOrEqual")
        return ctx.emit("where", ctx.emit("greater", a, b), ctx.const(True),
                        ctx.emit("equal", a, b))


@register("And")
class And(_Binary):
    graph_ops = ("logical_and", "reshape")
    op = "logical_and"


@register("Or")
class Or(_Binary):
    graph_ops = ("logical_or", "reshape")
    op = "logical_or"


@register("Xor")
class Xor(_Binary):
    graph_ops = ("logical_xor", "reshape")
    op = "logical_xor"


@register("Mod")
class Mod(OnnxOpConverter):
    graph_ops = ("floor_mod", "fmod")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        a, b = args[0], args[1]
        assert a is not None and b is not None
        same_dtype(ctx, [a, b], "Mod")
        # fmod=1: C fmod (the dividend's sign); fmod=0: the divisor's sign (np.mod), also for
        # floats, which the ONNX text forbids but its tests and onnxruntime accept
        return ctx.emit("fmod" if int(attrs.get("fmod", 0)) else "floor_mod", a, b)


def _is_float(v: Value) -> bool:
    return v.dtype_name in ("float32", "float64")


# ---------------------------------------------------------------------------
# variadic: Sum, Mean, Max, Min
# ---------------------------------------------------------------------------

class _Variadic(OnnxOpConverter):
    op = ""

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        values = [v for v in args if v is not None]
        if not values:
            raise ctx.error(f"{cls.__name__} needs at least one input")
        same_dtype(ctx, values, cls.__name__)
        out = values[0]
        for v in values[1:]:
            out = ctx.emit(cls.op, out, v)
        if len(values) == 1 and cls.op:  # a single input still broadcasts to itself
            return out
        return cls._finish(ctx, out, len(values))

    @classmethod
    def _finish(cls, ctx: Context, out: Value, count: int) -> Value:
        return out


@register("Sum")
class Sum(_Variadic):
    graph_ops = ("add",)
    op = "add"


@register("Mean")
class Mean(_Variadic):
    graph_ops = ("add", "divide")
    op = "add"

    @classmethod
    def _finish(cls, ctx: Context, out: Value, count: int) -> Value:
        return ctx.emit("divide", out, ctx.scalar(count, out))


@register("Max")
class Max(_Variadic):
    graph_ops = ("maximum",)
    op = "maximum"


@register("Min")
class Min(_Variadic):
    graph_ops = ("minimum",)
    op = "minimum"


# ---------------------------------------------------------------------------
# unary
# ---------------------------------------------------------------------------

class _Unary(OnnxOpConverter):
    op = ""

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        return cls._apply(ctx, x, attrs)

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        return ctx.emit(cls.op, x)


def unary_converter(name: str, op: str) -> None:
    """The converter of an ONNX op that is one graph op of one operand."""
    cls = type(name, (_Unary,), {"op": op, "graph_ops": (op,)})
    register(name)(cls)


for _name, _op in (("Neg", "negative"), ("Abs", "abs"), ("Exp", "exp"), ("Log", "log"),
                   ("Sqrt", "sqrt"), ("Tanh", "tanh"), ("Sigmoid", "sigmoid"), ("Relu", "relu"),
                   ("Floor", "floor"), ("Ceil", "ceil"), ("Round", "round"), ("Erf", "erf"),
                   ("Not", "logical_not")):
    unary_converter(_name, _op)


@register("Reciprocal")
class Reciprocal(_Unary):
    graph_ops = ("divide",)

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        return ctx.emit("divide", ctx.scalar(1, x), x)


@register("Sign")
class Sign(_Unary):
    graph_ops = ("astype", "greater", "less", "subtract")

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        zero = ctx.scalar(0, x)
        pos = ctx.astype(ctx.emit("greater", x, zero), x.dtype_name)
        neg = ctx.astype(ctx.emit("less", x, zero), x.dtype_name)
        return ctx.emit("subtract", pos, neg)


@register("LeakyRelu")
class LeakyRelu(_Unary):
    graph_ops = ("less", "multiply", "where")

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        alpha = ctx.scalar(attrs.get("alpha", 0.01), x)
        return ctx.emit("where", ctx.emit("less", x, ctx.scalar(0, x)),
                        ctx.emit("multiply", x, alpha), x)


@register("Elu")
class Elu(_Unary):
    graph_ops = ("exp", "less", "multiply", "subtract", "where")

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        alpha = ctx.scalar(attrs.get("alpha", 1.0), x)
        one = ctx.scalar(1, x)
        neg = ctx.emit("multiply", alpha, ctx.emit("subtract", ctx.emit("exp", x), one))
        return ctx.emit("where", ctx.emit("less", x, ctx.scalar(0, x)), neg, x)


@register("Selu")
class Selu(_Unary):
    graph_ops = ("exp", "greater", "multiply", "subtract", "where")

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        alpha = ctx.scalar(attrs.get("alpha", 1.67326319217681884765625), x)
        gamma = ctx.scalar(attrs.get("gamma", 1.05070102214813232421875), x)
        neg = ctx.emit("subtract", ctx.emit("multiply", alpha, ctx.emit("exp", x)), alpha)
        inner = ctx.emit("where", ctx.emit("greater", x, ctx.scalar(0, x)), x, neg)
        return ctx.emit("multiply", gamma, inner)


def _clamp01(ctx: Context, v: Value) -> Value:
    return ctx.emit("minimum", ctx.emit("maximum", v, ctx.scalar(0, v)), ctx.scalar(1, v))


@register("HardSigmoid")
class HardSigmoid(_Unary):
    graph_ops = ("add", "maximum", "minimum", "multiply")

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        alpha = ctx.scalar(attrs.get("alpha", 0.2), x)
        beta = ctx.scalar(attrs.get("beta", 0.5), x)
        return _clamp01(ctx, ctx.emit("add", ctx.emit("multiply", x, alpha), beta))


@register("HardSwish")
class HardSwish(_Unary):
    graph_ops = ("add", "maximum", "minimum", "multiply")

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        gate = ctx.emit("add", ctx.emit("multiply", x, ctx.scalar(1 / 6, x)), ctx.scalar(0.5, x))
        return ctx.emit("multiply", x, _clamp01(ctx, gate))


def softplus(ctx: Context, x: Value) -> Value:
    """log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): no overflow for large x."""
    tail = ctx.emit("log", ctx.emit("add", ctx.scalar(1, x),
                                    ctx.emit("exp", ctx.emit("negative", ctx.emit("abs", x)))))
    return ctx.emit("add", ctx.emit("maximum", x, ctx.scalar(0, x)), tail)


@register("Softplus")
class Softplus(_Unary):
    graph_ops = ("abs", "add", "exp", "log", "maximum", "negative")

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        return softplus(ctx, x)


@register("Softsign")
class Softsign(_Unary):
    graph_ops = ("abs", "add", "divide")

    @classmethod
    def _apply(cls, ctx: Context, x: Value, attrs: dict[str, Any]) -> Value:
        return ctx.emit("divide", x, ctx.emit("add", ctx.scalar(1, x), ctx.emit("abs", x)))


@register("Gelu")
class Gelu(OnnxOpConverter):
    graph_ops = ("add", "erf", "multiply", "tanh")

    @classmethod
    def _impl_v20(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        return gelu(ctx, x, attrs.get("approximate", "none"))


def gelu(ctx: Context, x: Value, approximate: str = "none") -> Value:
    half = ctx.emit("multiply", x, ctx.scalar(0.5, x))
    if approximate == "tanh":
        cube = ctx.emit("multiply", ctx.emit("multiply", x, x), x)
        inner = ctx.emit("add", x, ctx.emit("multiply", cube, ctx.scalar(0.044715, x)))
        t = ctx.emit("tanh", ctx.emit("multiply", inner, ctx.scalar(math.sqrt(2 / math.pi), x)))
    elif approximate == "none":
        t = ctx.emit("erf", ctx.emit("multiply", x, ctx.scalar(1 / math.sqrt(2), x)))
    else:
        raise ctx.error(f"Gelu: approximate={approximate!r} (expected 'none' or 'tanh')")
    return ctx.emit("multiply", half, ctx.emit("add", t, ctx.scalar(1, x)))


@register("PRelu")
class PRelu(OnnxOpConverter):
    graph_ops = ("less", "multiply", "reshape", "where")

    @classmethod
    def _apply(cls, ctx: Context, x: Value, slope: Value) -> Value:
        same_dtype(ctx, [x, slope], "PRelu")
        return ctx.emit("where", ctx.emit("less", x, ctx.scalar(0, x)),
                        ctx.emit("multiply", x, slope), x)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        """Opset < 7: a 1-D slope of C values applies along axis 1 (channels)."""
        x, slope = args[0], args[1]
        assert x is not None and slope is not None
        if slope.rank == 1 and slope.shape[0] != 1 and x.rank >= 2:
            slope = ctx.expand_rank(slope, x.rank, 1)
        return cls._apply(ctx, x, slope)

    @classmethod
    def _impl_v7(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, slope = args[0], args[1]
        assert x is not None and slope is not None
        return cls._apply(ctx, x, slope)


@register("Clip")
class Clip(OnnxOpConverter):
    graph_ops = ("astype", "maximum", "minimum")

    @classmethod
    def _clip(cls, ctx: Context, x: Value, lo: Value | None, hi: Value | None) -> Value:
        if lo is not None:
            x = ctx.emit("maximum", x, ctx.astype(lo, x.dtype_name))
        if hi is not None:
            x = ctx.emit("minimum", x, ctx.astype(hi, x.dtype_name))
        return x

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        lo = ctx.scalar(attrs["min"], x) if "min" in attrs else None
        hi = ctx.scalar(attrs["max"], x) if "max" in attrs else None
        return cls._clip(ctx, x, lo, hi)

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        lo = args[1] if len(args) > 1 else None
        hi = args[2] if len(args) > 2 else None
        return cls._clip(ctx, x, lo, hi)


@register("Where")
class Where(OnnxOpConverter):
    graph_ops = ("astype", "where")

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        c, x, y = args[0], args[1], args[2]
        assert c is not None and x is not None and y is not None
        same_dtype(ctx, [x, y], "Where")
        return ctx.emit("where", ctx.astype(c, "bool"), x, y)

