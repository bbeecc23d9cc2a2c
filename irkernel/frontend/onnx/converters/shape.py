"""Shape, movement and constant ONNX ops.

Reshape, Flatten, Squeeze and Unsqueeze are ``reshape``; Transpose is
``permute_dims``; Expand is ``broadcast_to``; Tile is reshape + broadcast_to +
reshape; Slice and Split are ``strided_slice``; Gather is ``take``; Pad is
``pad`` (negative pads become a ``strided_slice``). Shape, Size,
ConstantOfShape, Range and Constant produce constants at import, and so does
every op above when its inputs are constants (shape arithmetic is evaluated
with NumPy, also for the graph ops ``take`` and ``strided_slice``).
Imports the converter machinery only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.frontend.onnx import dimvalues
from irkernel.frontend.onnx.common import (
    Context,
    OnnxOpConverter,
    Value,
    ints_attr,
    norm_axes,
    norm_axis,
    register,
)
from irkernel.ir import narrow, ops
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.ops.type_rules import broadcast_shapes
from irkernel.ir.symdim import SymDim

Args = list["Value | None"]
ONNX_TO_NUMPY = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
                 7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32",
                 13: "uint64", 16: "bfloat16"}
_SUPPORTED = DTYPE_NAMES
_INT64_MAX = 2**63 - 1


def _symbolic(dims: Any) -> bool:
    return any(isinstance(d, SymDim) for d in dims)


def _prod(dims: Any) -> Any:
    """The product of dims (ints, or symbolic: ``batch*seq``)."""
    out: Any = 1
    for d in dims:
        out = out * d
    return out


def _first(args: Args) -> Value:
    x = args[0]
    assert x is not None
    return x


def _opt(args: Args, k: int) -> Value | None:
    return args[k] if len(args) > k else None


# ---------------------------------------------------------------------------
# reshape family
# ---------------------------------------------------------------------------

def reshape_target(ctx: Context, x: Value, shape: list[int], allowzero: bool) -> tuple[int, ...]:
    """ONNX Reshape's target: 0 copies the input dim (unless allowzero), -1 is inferred."""
    out = [x.shape[k] if isinstance(d, int) and d == 0 and not allowzero and k < x.rank
           else d for k, d in enumerate(shape)]
    if _symbolic(out) or _symbolic(x.shape):  # the reshape rule decides and fills the -1
        try:
            return ops.get_op("reshape").infer([(x.dtype, x.shape)], {"shape": tuple(out)})[1]
        except TypeInferenceError as exc:
            raise ctx.error(f"cannot reshape {list(x.shape)} to {shape}: {exc}") from None
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ctx.error(f"bad reshape target {shape}")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        size = int(np.prod(x.shape, dtype=np.int64))
        if known == 0 or size % known:
            raise ctx.error(f"cannot reshape {list(x.shape)} to {shape}")
        out[out.index(-1)] = size // known
    if int(np.prod(out, dtype=np.int64)) != int(np.prod(x.shape, dtype=np.int64)):
        raise ctx.error(f"cannot reshape {list(x.shape)} to {shape}")
    return tuple(out)


@register("Reshape")
class Reshape(OnnxOpConverter):
    graph_ops = ("reshape",)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        return ctx.reshape(x, reshape_target(ctx, x, list(attrs.get("shape", [])), False))

    @classmethod
    def _impl_v5(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        shape = ctx.dims_value(_opt(args, 1), "input 'shape'")
        return ctx.reshape(x, reshape_target(ctx, x, shape, bool(attrs.get("allowzero", 0))))


@register("Flatten")
class Flatten(OnnxOpConverter):
    graph_ops = ("reshape",)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        axis = int(attrs.get("axis", 1))
        if not -x.rank <= axis <= x.rank:
            raise ctx.error(f"axis {axis} is out of range for rank {x.rank}")
        axis = axis + x.rank if axis < 0 else axis
        return ctx.reshape(x, (_prod(x.shape[:axis]), _prod(x.shape[axis:])))


@register("Squeeze")
class Squeeze(OnnxOpConverter):
    graph_ops = ("reshape",)

    @classmethod
    def _squeeze(cls, ctx: Context, x: Value, axes: list[int] | None) -> Value:
        if axes is None:
            sym = next((d for d in x.shape if isinstance(d, SymDim)), None)
            if sym is not None:
                raise ctx.error(f"Squeeze without axes of shape {list(x.shape)}: whether the "
                                f"symbolic dim {sym} is 1 is known only at run time")
            drop = {k for k, d in enumerate(x.shape) if d == 1}
        else:
            drop = set(norm_axes(ctx, axes, x.rank))
            bad = [a for a in drop if x.shape[a] != 1]
            if bad:
                raise ctx.error(f"cannot squeeze axes {sorted(bad)} of shape {list(x.shape)}")
        return ctx.reshape(x, tuple(d for k, d in enumerate(x.shape) if k not in drop))

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        return cls._squeeze(ctx, _first(args), ints_attr(attrs, "axes"))

    @classmethod
    def _impl_v13(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        axes = _opt(args, 1)
        return cls._squeeze(ctx, _first(args), None if axes is None else
                            ctx.const_value(axes, "input 'axes'").tolist())


@register("Unsqueeze")
class Unsqueeze(OnnxOpConverter):
    graph_ops = ("reshape",)

    @classmethod
    def _unsqueeze(cls, ctx: Context, x: Value, axes: list[int]) -> Value:
        rank = x.rank + len(axes)
        where = set(norm_axes(ctx, axes, rank))
        dims = iter(x.shape)
        return ctx.reshape(x, tuple(1 if k in where else next(dims) for k in range(rank)))

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        axes = ints_attr(attrs, "axes")
        if axes is None:
            raise ctx.error("axes is required")
        return cls._unsqueeze(ctx, _first(args), axes)

    @classmethod
    def _impl_v13(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        axes = ctx.const_value(_opt(args, 1), "input 'axes'").tolist()
        return cls._unsqueeze(ctx, _first(args), [int(a) for a in np.ravel(axes)])


@register("Transpose")
class Transpose(OnnxOpConverter):
    graph_ops = ("permute_dims",)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        perm = ints_attr(attrs, "perm", list(range(x.rank - 1, -1, -1)))
        assert perm is not None
        if perm == list(range(x.rank)):
            return x
        return ctx.emit("permute_dims", x, axes=tuple(perm))


@register("Expand")
class Expand(OnnxOpConverter):
    graph_ops = ("broadcast_to",)

    @classmethod
    def _impl_v8(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        shape = tuple(ctx.dims_value(_opt(args, 1), "input 'shape'"))
        try:
            target = broadcast_shapes(x.shape, shape)  # ONNX Expand broadcasts both ways
        except TypeInferenceError as exc:
            raise ctx.error(f"cannot expand {list(x.shape)} to {list(shape)}: {exc}") from None
        return x if target == x.shape else ctx.emit("broadcast_to", x, shape=target)


@register("Tile")
class Tile(OnnxOpConverter):
    graph_ops = ("broadcast_to", "reshape")

    @classmethod
    def _impl_v6(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        reps = [int(r) for r in ctx.const_value(_opt(args, 1), "input 'repeats'").tolist()]
        if len(reps) != x.rank or any(r < 0 for r in reps):
            raise ctx.error(f"repeats {reps} must be {x.rank} non-negative ints")
        if all(r == 1 for r in reps):
            return x
        # x[d0, d1] -> [1, d0, 1, d1] -> broadcast [r0, d0, r1, d1] -> [r0*d0, r1*d1]
        inter = tuple(v for d in x.shape for v in (1, d))
        wide = tuple(v for r, d in zip(reps, x.shape, strict=True) for v in (r, d))
        out = ctx.emit("broadcast_to", ctx.reshape(x, inter), shape=wide)
        return ctx.reshape(out, tuple(r * d for r, d in zip(reps, x.shape, strict=True)))


@register("Concat")
class Concat(OnnxOpConverter):
    graph_ops = ("concat",)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        values = [v for v in args if v is not None]
        if not values:
            raise ctx.error("Concat needs at least one input")
        axis = norm_axis(ctx, int(attrs.get("axis", 1)), max(values[0].rank, 1))
        values = [v for v in values if v.shape[axis] != 0] or values[:1]
        if len(values) == 1:
            return values[0]
        return ctx.emit("concat", *values, axis=axis)


# ---------------------------------------------------------------------------
# slicing: Slice, Split, Gather
# ---------------------------------------------------------------------------

def strided_slice(ctx: Context, x: Value, begin: list[int], end: list[int],
                  strides: list[int]) -> Value:
    """``x[b0:e0:s0, ...]`` with NumPy semantics; bounds are normalized here (clamped into
    range, a stop before index 0 of a negative stride written as ``-dim - 1``)."""
    b2, e2 = [], []
    for d, b, e, s in zip(x.shape, begin, end, strides, strict=True):
        if s == 0:
            raise ctx.error("slice steps must not be 0")
        if isinstance(d, SymDim):  # kept as given: the graph op clamps (the rule decides)
            if s < 0:
                raise ctx.error(f"a negative slice step on the symbolic dim {d}")
            full = (b == 0 and isinstance(e, SymDim) and e == d) or (
                isinstance(e, int) and e >= _INT64_MAX)
            b2.append(int(b))
            e2.append(_INT64_MAX if full else int(e))
            continue
        start, stop, _ = slice(b, e, s).indices(d)
        b2.append(start)
        # an axis read whole writes "to the end" (ONNX's INT64_MAX), as a symbolic one does
        e2.append(_INT64_MAX if start == 0 and stop == d and s == 1 else
                  -d - 1 if stop < 0 else stop)
    if all(b == 0 and e == _INT64_MAX and s == 1 for b, e, s in zip(b2, e2, strides,
                                                                     strict=True)):
        return x
    if x.is_const:
        index = tuple(slice(b, None if e == -d - 1 or e == _INT64_MAX else e, s)
                      for b, e, s, d in zip(b2, e2, strides, x.shape, strict=True))
        return ctx.const(np.ascontiguousarray(x.const[index]))  # type: ignore[index]
    return ctx.emit("strided_slice", x, begin=b2, end=e2, strides=list(strides))


def _onnx_bounds(d: int, start: int, end: int, step: int) -> tuple[int, int]:
    """ONNX Slice's clamping (the operator text, as onnxruntime implements it), as NumPy
    bounds: a negative step clamps start into [0, d-1] (NumPy would make an out-of-range
    start empty) and end into [-1, d-1], -1 meaning "through index 0" (written -d-1 for
    NumPy); an end of INT64_MAX with a negative step also runs through index 0
    (onnxruntime; PyTorch exports flips this way)."""
    if d == 0:
        return 0, 0
    if start < 0:
        start += d
    if step < 0 and end >= _INT64_MAX:
        end = -1
    elif end < 0:
        end += d
    if step > 0:
        return min(max(start, 0), d), min(max(end, 0), d)
    start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
    return start, (-d - 1 if end < 0 else end)


@register("Slice")
class Slice(OnnxOpConverter):
    graph_ops = ("strided_slice",)

    @classmethod
    def _slice(cls, ctx: Context, x: Value, starts: list[int], ends: list[int],
               axes: list[int] | None, steps: list[int] | None) -> Value:
        axes = list(range(len(starts))) if axes is None else axes
        steps = [1] * len(starts) if steps is None else steps
        if not len(starts) == len(ends) == len(axes) == len(steps):
            raise ctx.error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} "
                            "differ in length")
        begin, end, stride = [0] * x.rank, list(x.shape), [1] * x.rank
        for a, b, e, s in zip(norm_axes(ctx, axes, x.rank), starts, ends, steps, strict=True):
            if s == 0:
                raise ctx.error("slice steps must not be 0")
            d = x.shape[a]
            if isinstance(e, SymDim) and e == d:  # ``x[:, :seq]`` of a seq axis: all of it
                e = _INT64_MAX
            bound = next((v for v in (b, e) if isinstance(v, SymDim)), None)
            if bound is not None:
                raise ctx.error(f"slice bounds of axis {a} (extent {d}) hold the symbolic dim "
                                f"{bound}: the slice's extent would depend on it at run time")
            # a symbolic axis keeps the bounds (NumPy clamps as ONNX does for a positive
            # step; strided_slice refuses a negative one there)
            begin[a], end[a] = (b, e) if isinstance(d, SymDim) else _onnx_bounds(d, b, e, s)
            stride[a] = s
        return strided_slice(ctx, x, begin, end, stride)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        starts, ends = ints_attr(attrs, "starts"), ints_attr(attrs, "ends")
        if starts is None or ends is None:
            raise ctx.error("starts and ends are required")
        return cls._slice(ctx, _first(args), starts, ends, ints_attr(attrs, "axes"), None)

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        def ints(k: int, what: str) -> list[int] | None:
            v = _opt(args, k)
            return None if v is None else [int(i) for i in ctx.const_value(v, what).tolist()]

        def bounds(k: int, what: str) -> list[Any]:  # may hold dims: x[:, :seq]
            return ctx.dims_value(_opt(args, k), what)

        starts, ends = bounds(1, "input 'starts'"), bounds(2, "input 'ends'")
        assert starts is not None and ends is not None
        return cls._slice(ctx, _first(args), starts, ends, ints(3, "input 'axes'"),
                          ints(4, "input 'steps'"))


@register("Split")
class Split(OnnxOpConverter):
    graph_ops = ("strided_slice",)

    @classmethod
    def _split(cls, ctx: Context, x: Value, axis: int, split: list[int] | None,
               n_out: int) -> list[Value]:
        axis = norm_axis(ctx, axis, x.rank)
        dim = x.shape[axis]
        if split is None:
            if n_out < 1:
                raise ctx.error("Split needs 'split' or at least one output")
            chunk = -(-dim // n_out)  # opset 18: the last chunk may be smaller
            split = [min(chunk, dim - k * chunk) for k in range(n_out)]
        if sum(split) != dim or any(s < 0 for s in split):
            raise ctx.error(f"split {split} does not add up to dim {dim} of axis {axis}")
        out, start = [], 0
        for size in split:
            begin, end = [0] * x.rank, list(x.shape)
            begin[axis], end[axis] = start, start + size
            out.append(strided_slice(ctx, x, begin, end, [1] * x.rank))
            start += size
        return out

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        split = ints_attr(attrs, "split")
        if split is None and _opt(args, 1) is not None:
            split = ctx.const_value(args[1], "input 'split'").tolist()
        return cls._split(ctx, _first(args), int(attrs.get("axis", 0)), split,
                          ctx.n_outputs)

    @classmethod
    def _impl_v13(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        s = _opt(args, 1)
        split = None if s is None else [int(v) for v in ctx.const_value(s, "input 'split'")]
        n_out = int(attrs.get("num_outputs", ctx.n_outputs))
        return cls._split(ctx, _first(args), int(attrs.get("axis", 0)), split, n_out)


@register("Gather")
class Gather(OnnxOpConverter):
    graph_ops = ("take",)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, idx = _first(args), args[1]
        assert idx is not None
        axis = norm_axis(ctx, int(attrs.get("axis", 0)), x.rank)
        if idx.dtype_name not in ("int32", "int64"):
            raise ctx.error(f"indices must be int32 or int64, got {idx.dtype_name}")
        if x.is_const and idx.is_const:  # shape arithmetic: evaluated with NumPy
            d = x.shape[axis]
            i = np.clip(np.where(idx.const < 0, idx.const + d, idx.const), 0, max(d - 1, 0))
            return ctx.const(np.take(x.const, i, axis=axis))
        return ctx.emit("take", x, idx, axis=axis)


# ---------------------------------------------------------------------------
# Pad
# ---------------------------------------------------------------------------

@register("Pad")
class Pad(OnnxOpConverter):
    graph_ops = ("astype", "pad", "reshape")

    @classmethod
    def _pad(cls, ctx: Context, x: Value, pads: list[int], value: Value | None,
             mode: str) -> Value:
        r = x.rank
        if len(pads) != 2 * r:
            raise ctx.error(f"pads {pads} must have {2 * r} values (begins then ends)")
        if mode not in ("constant", "reflect", "edge", "wrap"):
            raise ctx.error(f"mode {mode!r} is not supported (constant, reflect, edge, wrap)")
        if any(p < 0 for p in pads):  # negative pads crop, before padding (onnxruntime:
            begin = [max(-p, 0) for p in pads[:r]]  # 'wrap' repeats the cropped axis)
            end = [d - max(-p, 0) for d, p in zip(x.shape, pads[r:], strict=True)]
            x = strided_slice(ctx, x, begin, end, [1] * r)
            return cls._pad(ctx, x, [max(p, 0) for p in pads], value, mode)
        if not any(pads):
            return x
        fill = ctx.scalar(0, x) if value is None else ctx.reshape(
            ctx.astype(value, x.dtype_name), ())
        return ctx.emit("pad", x, fill, pad_width=pads, mode=mode)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        pads = ints_attr(attrs, "pads", ints_attr(attrs, "paddings"))
        if pads is None:
            raise ctx.error("pads is required")
        return cls._pad(ctx, x, pads, ctx.scalar(attrs.get("value", 0.0), x),
                        attrs.get("mode", "constant"))

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        pads = [int(p) for p in ctx.const_value(_opt(args, 1), "input 'pads'").tolist()]
        value = _opt(args, 2)
        axes_v = _opt(args, 3)
        if axes_v is not None:  # opset 18: pads name only these axes
            axes = norm_axes(ctx, ctx.const_value(axes_v, "input 'axes'").tolist(), x.rank)
            full = [0] * (2 * x.rank)
            for k, a in enumerate(axes):
                full[a], full[x.rank + a] = pads[k], pads[len(axes) + k]
            pads = full
        return cls._pad(ctx, x, pads, value, attrs.get("mode", "constant"))


# ---------------------------------------------------------------------------
# constants: Shape, Size, ConstantOfShape, Range, Constant; Identity, Dropout, Cast
# ---------------------------------------------------------------------------

@register("Shape")
class Shape(OnnxOpConverter):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        start, end = int(attrs.get("start", 0)), attrs.get("end")
        dims = x.shape[slice(start, None if end is None else int(end))]
        return ctx.const(dimvalues.from_dims(dims))


@register("Size")
class Size(OnnxOpConverter):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        return ctx.const(dimvalues.from_dims([_prod(_first(args).shape)]).reshape(()))


@register("ConstantOfShape")
class ConstantOfShape(OnnxOpConverter):
    graph_ops = ("broadcast_to",)  # a constant at import, unless its shape is symbolic

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        shape = tuple(ctx.dims_value(_opt(args, 0), "input 'shape'"))
        fill = np.asarray(attrs.get("value", np.zeros(1, np.float32))).reshape(-1)
        if fill.dtype.name not in _SUPPORTED:
            raise ctx.error(f"value of dtype {fill.dtype} is not supported")
        if _symbolic(shape):  # a symbolic extent: made at run time
            return ctx.emit("broadcast_to", ctx.const(fill[:1].reshape(())), shape=shape)
        return ctx.const(ctx.full(shape, fill[0]))


@register("Range")
class Range(OnnxOpConverter):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        code = _first(args).dtype  # float16/bfloat16 bounds are computed in float32
        start, limit, delta = (narrow.widen(ctx.const_value(_opt(args, k), f"input {name!r}"),
                                            code)
                               for k, name in enumerate(("start", "limit", "delta")))
        if not delta:
            raise ctx.error("delta must not be 0")
        # ONNX: n = max(ceil((limit - start) / delta), 0), computed in the input dtype
        start, limit, delta = (np.asarray(v).reshape(()) for v in (start, limit, delta))
        n = max(int(np.ceil((limit - start) / delta)), 0)
        ctx.const_shape((n,), "the range's length")
        values = (start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype)
        return ctx.const(narrow.to_storage(values, code), code=code)


@register("Constant")
class Constant(OnnxOpConverter):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        for key, dtype in (("value", None), ("value_float", np.float32),
                           ("value_floats", np.float32), ("value_int", np.int64),
                           ("value_ints", np.int64)):
            if key in attrs:
                return ctx.const(np.asarray(attrs[key], dtype=dtype))
        raise ctx.error(f"attributes {sorted(attrs)} are not supported (value, value_float(s), "
                        "value_int(s))")


@register("Identity")
class Identity(OnnxOpConverter):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        return _first(args)


@register("Dropout")
class Dropout(OnnxOpConverter):
    """Inference: the input unchanged, and an all-true mask when the mask is asked for."""
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        x = _first(args)
        if len(args) > 2 and args[2] is not None and bool(
                np.any(ctx.const_value(args[2], "input 'training_mode'"))):
            raise ctx.error("training_mode=true is not supported (inference only)")
        return [x, ctx.const(ctx.full(x.shape, np.bool_(True)))]


@register("Cast")
class Cast(OnnxOpConverter):
    graph_ops = ("astype",)

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = _first(args)
        to = attrs.get("to")
        name = ONNX_TO_NUMPY.get(int(to)) if isinstance(to, int) else str(to).lower()
        if name not in _SUPPORTED:
            raise ctx.error(f"Cast to {to!r} is not supported ({', '.join(_SUPPORTED)})")
        return ctx.astype(x, name)


@register("CastLike")
class CastLike(OnnxOpConverter):
    graph_ops = ("astype",)

    @classmethod
    def _impl_v15(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        like = args[1]
        assert like is not None
        return ctx.astype(_first(args), like.dtype_name)


@register("ScatterND")
class ScatterND(OnnxOpConverter):
    graph_ops = ("astype", "scatter_nd")

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        data, idx, upd = _first(args), args[1], args[2]
        assert idx is not None and upd is not None
        ctx.const_value(idx, "input 'indices'")
        return ctx.emit("scatter_nd", data, ctx.astype(idx, "int64"), upd,
                        reduction=attrs.get("reduction", "none"))
