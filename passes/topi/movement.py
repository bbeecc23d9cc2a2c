"""TIR templates of the movement ops: strided_slice, take, pad (canonical injective form),
scatter_nd (a copy nest, then a serial scatter loop) and the scans cumsum/cumprod (a
serial loop along the axis).

Every template reads inside its buffers whatever the data: index operands
(``take``'s and ``scatter_nd``'s) are wrapped (``i in [-d, d)`` selects ``i mod d``)
and clamped into ``[0, d - 1]``, as the references in ``irkernel.ir.ops.references``
do; ``pad`` reads clamped indices under a select (both sides of a select are
evaluated). Index arithmetic is int64 (TIR's index dtype); int32 indices are
widened first. Imports ``irkernel.ir`` and ``irkernel.tir`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.ops.opdef import INJECTIVE, OPAQUE, TensorType
from irkernel.ir.ops.type_rules import normalize_axes, slice_range
from irkernel.tir import dtype as dt
from irkernel.tir import te
from irkernel.tir.buffer import Buffer
from irkernel.tir.construct import cast, const, ne, select
from irkernel.tir.expr import FloorMod, IntImm, Max, Min, PrimExpr, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.stmt import BufferStore, Evaluate, For, Stmt, seq


def _idx(v: int) -> PrimExpr:
    return IntImm(v, dt.INDEX)


def _inputs(types: Sequence[TensorType]) -> list[te.Tensor]:
    return [te.placeholder(s, DTYPE_NAMES[c], f"x{k}") for k, (c, s) in enumerate(types)]


def _finish(name: str, pattern: int, inputs: Sequence[te.Tensor], out: te.Tensor) -> PrimFunc:
    return te.create_prim_func(inputs, out, {"op_name": name, "op_pattern": pattern})


def clamp(e: PrimExpr, lo: int, hi: int) -> PrimExpr:
    """``e`` clamped into ``[lo, hi]`` (int64)."""
    return Max(Min(e, _idx(hi)), _idx(lo))


def wrap_index(e: PrimExpr, dim: int) -> PrimExpr:
    """An index operand as a safe int64 index: ``i mod dim`` for ``i`` in ``[-dim, dim)``,
    else clamped into ``[0, dim - 1]`` (``dim >= 1``)."""
    i = cast(dt.INDEX, e)
    return clamp(select(i < _idx(0), i + _idx(dim), i), 0, dim - 1)


# ---------------------------------------------------------------------------
# strided_slice, take, pad
# ---------------------------------------------------------------------------


def strided_slice(types: Sequence[TensorType], attrs: Mapping[str, Any],
                  result: TensorType) -> PrimFunc:
    (x,) = _inputs(types)
    starts = [slice_range(b, e, s, d)[0] for b, e, s, d in
              zip(attrs["begin"], attrs["end"], attrs["strides"], x.shape, strict=True)]

    def fcompute(*i: PrimExpr) -> PrimExpr:
        index = []
        for v, start, step in zip(i, starts, attrs["strides"], strict=True):
            e = v * _idx(step) if step != 1 else v
            index.append(e + _idx(start) if start else e)
        return x[tuple(index)]

    return _finish("strided_slice", INJECTIVE, [x], te.compute(result[1], fcompute, "out"))


def take(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    data, indices = _inputs(types)
    (axis,) = normalize_axes((attrs["axis"],), data.ndim)
    dim, q = data.shape[axis], indices.ndim

    def fcompute(*i: PrimExpr) -> PrimExpr:
        at = wrap_index(indices[tuple(i[axis:axis + q])], dim)
        return data[(*i[:axis], at, *i[axis + q:])]

    if dim == 0:  # then the indices are empty too (type rule): so is the result
        out = te.compute(result[1], lambda *i: const(0, data.dtype), "out")
    else:
        out = te.compute(result[1], fcompute, "out")
    return _finish("take", INJECTIVE, [data, indices], out)


def _reflect(s: PrimExpr, dim: int) -> PrimExpr:
    """NumPy's ``reflect`` source index of a position ``s`` (any int) on an axis of ``dim``:
    the axis mirrored about its end elements, repeated with period ``2 * (dim - 1)``."""
    if dim == 1:
        return _idx(0)
    period = 2 * (dim - 1)
    m = FloorMod(s, _idx(period))
    return select(m < _idx(dim), m, _idx(period) - m)


def pad(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    x, value = _inputs(types)
    widths, mode = attrs["pad_width"], attrs["mode"]
    rank = x.ndim

    def fcompute(*i: PrimExpr) -> PrimExpr:
        index, inside = [], None
        for k, (v, d) in enumerate(zip(i, x.shape, strict=True)):
            b, e = widths[k], widths[rank + k]
            s = v - _idx(b) if b else v
            if not b and not e:
                index.append(v)
            elif mode == "reflect":
                index.append(_reflect(s, d))
            elif mode == "edge":
                index.append(clamp(s, 0, d - 1))
            elif mode == "wrap":  # the axis repeated periodically (np.pad's wrap)
                index.append(FloorMod(s, _idx(d)))
            else:
                index.append(clamp(s, 0, max(d - 1, 0)))
                cond = (s >= _idx(0)) & (s < _idx(d))
                inside = cond if inside is None else inside & cond
        if mode == "constant" and 0 in x.shape:  # nothing to read: all padding
            return value[()]
        return x[tuple(index)] if inside is None else select(inside, x[tuple(index)], value[()])

    return _finish("pad", INJECTIVE, [x, value], te.compute(result[1], fcompute, "out"))


# ---------------------------------------------------------------------------
# scatter_nd
# ---------------------------------------------------------------------------


def scatter_nd(types: Sequence[TensorType], attrs: Mapping[str, Any],
               result: TensorType) -> PrimFunc:
    """``out = data``, then for every index row in row-major order (serially, so the last
    update of a repeated target wins, and reductions combine in row order)
    ``out[clamped row, ...] = updates[row, ...]`` (or ``combine(out[...], updates[...])``)."""
    (dcode, dshape), (icode, ishape), _ = types
    data = Buffer("x0", dshape, DTYPE_NAMES[dcode])
    indices = Buffer("x1", ishape, DTYPE_NAMES[icode])
    updates = Buffer("x2", types[2][1], DTYPE_NAMES[types[2][0]])
    out = Buffer("out", dshape, DTYPE_NAMES[dcode])
    k, batch = ishape[-1], ishape[:-1]
    copy_vars = [Var(f"i{a}", dt.INDEX) for a in range(len(dshape))]
    copy: Stmt = BufferStore(out, data[tuple(copy_vars)], tuple(copy_vars))
    for v, n in zip(reversed(copy_vars), reversed(dshape), strict=True):
        copy = For(v, _idx(0), _idx(n), "serial", copy)
    rows = [Var(f"r{a}", dt.INDEX) for a in range(len(batch))]
    cols = [Var(f"j{a}", dt.INDEX) for a in range(len(dshape) - k)]
    target = [wrap_index(indices[(*rows, _idx(m))], dshape[m]) for m in range(k)]
    new = updates[(*rows, *cols)]
    combine = _SCATTER_COMBINE[attrs.get("reduction", "none")]
    if combine is not None:
        new = combine(out[(*target, *cols)], new)
    scatter: Stmt = BufferStore(out, new, (*target, *cols))
    for v, n in zip(reversed([*rows, *cols]), reversed([*batch, *dshape[k:]]), strict=True):
        scatter = For(v, _idx(0), _idx(n), "serial", scatter)
    empty = any(n == 0 for n in batch) or any(n == 0 for n in dshape[k:])
    body = copy if empty else seq(copy, scatter)
    return PrimFunc((data, indices, updates, out), body,
                    {"op_name": "scatter_nd", "op_pattern": OPAQUE})


def nan_max(x: PrimExpr, y: PrimExpr) -> PrimExpr:
    """``ops.references.nan_max``: NaN if x is NaN, else ``x if x > y else y``."""
    return select(ne(x, x) | (x > y), x, y) if dt.is_float(x.dtype) else Max(x, y)


def nan_min(x: PrimExpr, y: PrimExpr) -> PrimExpr:
    return select(ne(x, x) | (x < y), x, y) if dt.is_float(x.dtype) else Min(x, y)


_SCATTER_COMBINE: dict[str, Callable[[PrimExpr, PrimExpr], PrimExpr] | None] = {
    "none": None, "add": lambda a, b: a + b, "mul": lambda a, b: a * b,
    "max": nan_max, "min": nan_min}


# ---------------------------------------------------------------------------
# cumsum, cumprod
# ---------------------------------------------------------------------------


def _loops(index: Sequence[Var], extents: Sequence[int], body: Stmt) -> Stmt:
    for v, n in zip(reversed(index), reversed(extents), strict=True):
        body = For(v, _idx(0), _idx(n), "serial", body)
    return body


def cumulative(name: str) -> Callable[[Sequence[TensorType], Mapping[str, Any], TensorType],
                                      PrimFunc]:
    """cumsum/cumprod: per position of the outer axes, the first element along ``axis``,
    then a serial loop ``out[k] = out[k - 1] (+|*) x[k or k - 1]`` whose inner axes are
    the innermost loops (contiguous, so they vectorize); ``reverse`` mirrors ``k``."""
    is_sum = name == "cumsum"

    def template(types: Sequence[TensorType], attrs: Mapping[str, Any],
                 result: TensorType) -> PrimFunc:
        ((code, shape),) = types
        dtype = DTYPE_NAMES[code]
        x, out = Buffer("x0", shape, dtype), Buffer("out", shape, dtype)
        (axis,) = normalize_axes((attrs["axis"],), len(shape))
        n, exclusive, reverse = shape[axis], attrs["exclusive"], attrs["reverse"]
        outer = [Var(f"i{a}", dt.INDEX) for a in range(axis)]
        inner = [Var(f"j{a}", dt.INDEX) for a in range(axis + 1, len(shape))]
        k = Var("k", dt.INDEX)

        def at(e: PrimExpr) -> tuple[PrimExpr, ...]:
            return (*outer, _idx(n - 1) - e if reverse else e, *inner)

        first = const(0 if is_sum else 1, dtype) if exclusive else x[at(_idx(0))]
        prev, src = out[at(k - _idx(1))], x[at(k - _idx(1) if exclusive else k)]
        step = prev + src if is_sum else prev * src
        inner_shape = shape[axis + 1:]
        body = seq(_loops(inner, inner_shape, BufferStore(out, first, at(_idx(0)))),
                   For(k, _idx(1), _idx(n - 1), "serial",
                       _loops(inner, inner_shape, BufferStore(out, step, at(k)))))
        if n <= 1:
            body = _loops(inner, inner_shape, BufferStore(out, first, at(_idx(0))))
        if n == 0:
            body = Evaluate(const(0, "int32"))
        return PrimFunc((x, out), _loops(outer, shape[:axis], body),
                        {"op_name": name, "op_pattern": OPAQUE})
    return template


TEMPLATES = {"strided_slice": strided_slice, "take": take, "pad": pad, "scatter_nd": scatter_nd,
             "cumsum": cumulative("cumsum"), "cumprod": cumulative("cumprod")}

__all__ = ["TEMPLATES", "clamp", "cumulative", "nan_max", "nan_min", "pad", "scatter_nd",
           "strided_slice", "take", "wrap_index"]
