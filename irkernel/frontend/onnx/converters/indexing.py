"""Element-indexed ONNX ops, lowered at import to ``take`` and ``scatter_nd`` on a
flattened tensor: GatherElements, ScatterElements (reductions none/add/mul/max/min),
GatherND (``batch_dims``), ReverseSequence (a GatherElements along time), TopK (the
graph op ``topk_indices``, then its values gathered as GatherElements does), and the scans CumSum/CumProd (graph ops of their own).

The lowering is exact: an element's position along ``axis`` comes from the index
tensor and its other coordinates from the index's own position, so the flat index is
``wrap(index) * stride[axis] + base`` with ``base`` a constant of the index's shape
(NumPy, at import). Index components are wrapped with ``floor_mod`` (``i`` in
``[-d, d)`` selects ``i mod d``; ONNX leaves other values undefined, and here they
stay inside the axis), so no flat index strays into another row. Imports the converter
machinery only.
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


def _strides(shape: tuple[int, ...]) -> np.ndarray:
    """C-order element strides of ``shape`` (int64)."""
    out = np.ones(len(shape), np.int64)
    for a in range(len(shape) - 2, -1, -1):
        out[a] = out[a + 1] * shape[a + 1]
    return out


def _index(ctx: Context, idx: Value | None, what: str) -> Value:
    if idx is None or idx.dtype_name not in ("int32", "int64"):
        raise ctx.error(f"{what} must be an int32 or int64 tensor")
    return ctx.astype(idx, "int64")


def _flat_elements(ctx: Context, data: Value, idx: Value | None, axis: int,
                   in_range: bool = False) -> Value:
    """The flat (C-order) positions in ``data`` that GatherElements/ScatterElements address
    (``in_range``: the indices are known to be in ``[0, extent)``, no wrap needed)."""
    index = _index(ctx, idx, "input 'indices'")
    if index.rank != data.rank:
        raise ctx.error(f"indices of rank {index.rank} must have the data's rank {data.rank}")
    for a, (i, d) in enumerate(zip(index.shape, data.shape, strict=True)):
        if a != axis and i > d:
            raise ctx.error(f"indices shape {list(index.shape)} exceeds the data shape "
                            f"{list(data.shape)} on axis {a}")
    if data.shape[axis] == 0 and int(np.prod(index.shape)):
        raise ctx.error(f"cannot index the empty axis {axis} of shape {list(data.shape)}")
    strides = _strides(data.shape)
    coords = np.indices(index.shape, np.int64)
    base = sum((coords[a] * strides[a] for a in range(data.rank) if a != axis),
               np.zeros(index.shape, np.int64))
    dim = ctx.const(np.int64(max(data.shape[axis], 1)))
    wrapped = index if in_range else ctx.emit("floor_mod", index, dim)
    scaled = ctx.emit("multiply", wrapped, ctx.const(np.int64(strides[axis])))
    return ctx.emit("add", scaled, ctx.const(base))


@register("GatherElements")
class GatherElements(OnnxOpConverter):
    graph_ops = ("add", "astype", "floor_mod", "multiply", "reshape", "take")

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        data = args[0]
        assert data is not None
        if data.rank == 0:
            raise ctx.error("GatherElements needs data of rank >= 1")
        axis = norm_axis(ctx, int(attrs.get("axis", 0)), data.rank)
        flat = _flat_elements(ctx, data, args[1], axis)
        return ctx.emit("take", ctx.reshape(data, (-1,)), flat, axis=0)


@register("ReverseSequence")
class ReverseSequence(OnnxOpConverter):
    """GatherElements along the time axis at ``len[b] - 1 - t`` for ``t < len[b]`` (else
    ``t``); the lengths may be a run-time tensor."""
    graph_ops = ("add", "astype", "broadcast_to", "less", "multiply", "permute_dims",
                 "reshape", "subtract", "take", "where")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        data = args[0]
        assert data is not None
        time = norm_axis(ctx, int(attrs.get("time_axis", 0)), max(data.rank, 2))
        batch = norm_axis(ctx, int(attrs.get("batch_axis", 1)), max(data.rank, 2))
        lens = _index(ctx, args[1], "input 'sequence_lens'")
        if data.rank < 2 or {time, batch} != {0, 1} or lens.shape != (data.shape[batch],):
            raise ctx.error(f"data {list(data.shape)} needs time_axis and batch_axis 0 and 1, "
                            f"and sequence_lens {list(lens.shape)} one length per batch")
        steps = data.shape[time]
        t = ctx.const(np.arange(steps, dtype=np.int64).reshape(1, steps))
        n = ctx.reshape(lens, (lens.shape[0], 1))
        src = ctx.emit("where", ctx.emit("less", t, n),
                       ctx.emit("subtract", ctx.emit("subtract", n, ctx.const(np.int64(1))), t),
                       t)  # [batch, time]
        if time == 0:
            src = ctx.emit("permute_dims", src, axes=(1, 0))
        src = ctx.reshape(src, src.shape + (1,) * (data.rank - 2))
        src = ctx.emit("broadcast_to", src, shape=data.shape)
        flat = _flat_elements(ctx, data, src, time, in_range=True)
        return ctx.emit("take", ctx.reshape(data, (-1,)), flat, axis=0)


@register("ScatterElements", "Scatter")
class ScatterElements(OnnxOpConverter):
    graph_ops = ("add", "astype", "floor_mod", "multiply", "reshape", "scatter_nd")

    @classmethod
    def _impl_v9(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        data, updates = args[0], args[2]
        assert data is not None and updates is not None
        if data.rank == 0:
            raise ctx.error("ScatterElements needs data of rank >= 1")
        if updates.shape != (args[1].shape if args[1] is not None else None):
            raise ctx.error(f"updates shape {list(updates.shape)} must equal the indices "
                            "shape")
        axis = norm_axis(ctx, int(attrs.get("axis", 0)), data.rank)
        reduction = attrs.get("reduction", "none")
        flat = _flat_elements(ctx, data, args[1], axis)
        count = int(np.prod(flat.shape, dtype=np.int64))
        out = ctx.emit("scatter_nd", ctx.reshape(data, (-1,)), ctx.reshape(flat, (count, 1)),
                       ctx.reshape(updates, (count,)), reduction=reduction)
        return ctx.reshape(out, data.shape)


@register("GatherND")
class GatherND(OnnxOpConverter):
    graph_ops = ("add", "astype", "floor_mod", "multiply", "reshape", "sum", "take")

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        data = args[0]
        assert data is not None
        index = _index(ctx, args[1], "input 'indices'")
        b = int(attrs.get("batch_dims", 0))
        k = index.shape[-1] if index.rank else -1
        if not (0 <= b < min(data.rank, index.rank) and 0 <= k <= data.rank - b
                and index.shape[:b] == data.shape[:b]):
            raise ctx.error(f"indices {list(index.shape)} do not fit data {list(data.shape)} "
                            f"with batch_dims {b}")
        block = data.shape[b:b + k]
        if 0 in block and int(np.prod(index.shape[:-1])):
            raise ctx.error(f"cannot index the empty axes of data {list(data.shape)}")
        dims = ctx.const(np.maximum(np.array(block, np.int64), 1))
        wrapped = ctx.emit("floor_mod", index, dims)
        lin = ctx.emit("sum", ctx.emit("multiply", wrapped, ctx.const(_strides(block))),
                       axis=-1)
        size = int(np.prod(block, dtype=np.int64))
        if b:
            batch = np.indices(index.shape[:-1], np.int64)[:b]
            offset = sum((batch[a] * _strides(data.shape[:b])[a] for a in range(b)),
                         np.zeros(index.shape[:-1], np.int64)) * size
            lin = ctx.emit("add", lin, ctx.const(offset))
        rows = int(np.prod(data.shape[:b + k], dtype=np.int64))
        return ctx.emit("take", ctx.reshape(data, (rows, *data.shape[b + k:])), lin, axis=0)


@register("TopK")
class TopK(OnnxOpConverter):
    """``topk_indices`` (k constant: an attribute at opset 1, a one-element input since 10),
    then the values at those indices, gathered along the axis on the flattened input."""

    graph_ops = ("add", "multiply", "reshape", "take", "topk_indices")

    @classmethod
    def _topk(cls, ctx: Context, x: Value | None, k: int, attrs: dict[str, Any]) -> list[Value]:
        assert x is not None
        if x.rank == 0:
            raise ctx.error("TopK needs an input of rank >= 1")
        axis = norm_axis(ctx, int(attrs.get("axis", -1)), x.rank)
        if not 0 <= k <= x.shape[axis]:
            raise ctx.error(f"k = {k} must be in [0, {x.shape[axis]}] (axis {axis} of input "
                            f"shape {list(x.shape)})")
        indices = ctx.emit("topk_indices", x, k=k, axis=axis,
                           largest=bool(int(attrs.get("largest", 1))),
                           sorted=bool(int(attrs.get("sorted", 1))))
        flat = _flat_elements(ctx, x, indices, axis, in_range=True)
        return [ctx.emit("take", ctx.reshape(x, (-1,)), flat, axis=0), indices]

    @classmethod
    def _impl_v1(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        if "k" not in attrs:
            raise ctx.error("attribute 'k' is required")
        return cls._topk(ctx, args[0], int(attrs["k"]), attrs)

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        k = ctx.const_value(args[1] if len(args) > 1 else None, "input 'K'")
        if k.size != 1 or k.dtype.kind != "i":
            raise ctx.error(f"input 'K' must hold one integer, got {k!r}")
        return cls._topk(ctx, args[0], int(k.reshape(())), attrs)


class _Cumulative(OnnxOpConverter):
    op = ""

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        if x.rank == 0:
            raise ctx.error(f"{cls.__name__} needs an input of rank >= 1")
        axis_value = ctx.const_value(args[1], "input 'axis'")
        if axis_value.size != 1 or axis_value.dtype.kind != "i":
            raise ctx.error(f"input 'axis' must be one integer, got {axis_value!r}")
        axis = norm_axis(ctx, int(axis_value.reshape(())), x.rank)
        return ctx.emit(cls.op, x, axis=axis, exclusive=bool(attrs.get("exclusive", 0)),
                        reverse=bool(attrs.get("reverse", 0)))


@register("CumSum")
class CumSum(_Cumulative):
    graph_ops = ("cumsum",)
    op = "cumsum"


@register("CumProd")
class CumProd(_Cumulative):
    graph_ops = ("cumprod",)
    op = "cumprod"


__all__ = ["CumProd", "CumSum", "GatherElements", "GatherND", "ScatterElements", "TopK"]
