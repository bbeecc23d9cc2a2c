"""Shape-generic kernels: one compiled kernel per (op, dtypes), for tensors of any shape.

Specialized templates (``templates.py``) give one PrimFunc per distinct
signature, with static extents: the best code for large tensors, but a graph
of 1e5 small ops has thousands of signatures, and every one would be a kernel
to lower and compile (about 10 ms each). A shape-generic kernel reads its
extents and strides from a small ``int64`` *meta* buffer, so one compiled
kernel serves every shape. LegalizeOps uses them for small tensors (config
``LegalizeOps.generic_max_elements``), where launch and compile cost
dominate and fusion buys little; large tensors keep specialized, fused kernels.

Parameters are the operands, the meta buffer, then the output (destination
passing: call_tir appends the result last). Three families, all over flat
(1-D) buffers with a 4-d loop nest, NumPy's
broadcasting expressed as zero strides (dimensions are collapsed where the
layout allows; a view that still needs more than four is not generic):

* ``map`` (elementwise, broadcast, where, astype, and the layout ops
  reshape / permute_dims / broadcast_to as strided copies)::

      meta = [n0, n1, n2, n3, strides of x0 (4), strides of x1 (4), ...]
      out[flat(i)] = f(x0[i . s0], x1[i . s1], ...)      # out is C-contiguous

* ``reduce`` (sum, max, mean over any axes)::

      meta = [kept extents (4), their x strides (4), reduced extents (4), their strides (4)]
      out[flat(o)] = init; out[...] = combine(out[...], x[o . ks + r . rs]) for r; (mean) / count

* ``matmul`` (NumPy matmul: 1-d promotion, broadcast batch dims)::

      meta = [B0, B1, M, N, K, a strides (b0, b1, m, k), b strides (b0, b1, k, n)]

* ``concat`` of up to ``CONCAT_PARTS`` tensors, seen as ``outer`` rows::

      meta = [outer, out row length, (part row length, column offset) per part]

The loop structure and the scalar functions are those of the specialized
templates (``templates._BINARY`` / ``_UNARY``, ``te.combine``), so a generic
kernel computes bit for bit what the specialized one does, in the same order.
Generic PrimFuncs are OPAQUE to FuseOps (they are never fused). Imports
``irkernel.ir`` and ``irkernel.tir`` only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from irkernel.ir.ids import DTYPE_NAMES, FLOAT_DTYPES
from irkernel.ir.ops import OPAQUE, TensorType, normalize_axes, permutation
from irkernel.tir import dtype as dt
from irkernel.tir import te
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.construct import cast, const, select
from irkernel.tir.expr import IntImm, PrimExpr, Var
from irkernel.tir.function import Attrs, PrimFunc
from irkernel.tir.stmt import BufferStore, For, LetStmt, Stmt, seq
from passes.topi.templates import _BINARY, _UNARY

#: Loop depth of every generic kernel (dimensions after collapsing).
RANK = 4
#: The most parts of a generic concat (SplitConcat makes larger concats trees of these).
CONCAT_PARTS = 8
_IDX = dt.INDEX


@dataclass(frozen=True)
class GenericCall:
    """A node's generic kernel and the meta values it runs with."""

    prim: PrimFunc
    meta: np.ndarray  # int64

    @property
    def name(self) -> str:
        """A readable module name for the kernel (``generic_add_float32_float32``)."""
        return str(self.prim.attrs["generic_name"])


# ---------------------------------------------------------------------------
# strided views: collapsing dimensions
# ---------------------------------------------------------------------------

Strides = tuple[int, ...]


def c_strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _broadcast_strides(shape: Sequence[int], out: Sequence[int]) -> list[int]:
    """Element strides reading an operand of ``shape`` broadcast to ``out`` (0 on
    broadcast axes, missing leading axes included)."""
    lead = len(out) - len(shape)
    own = c_strides(shape)
    return [0] * lead + [0 if d == 1 else s for d, s in zip(shape, own, strict=True)]


def collapse(extents: Sequence[int], views: Sequence[Sequence[int]],
             rank: int = RANK) -> tuple[list[int], list[list[int]]] | None:
    """Merge neighbouring dimensions that every view walks contiguously; pad to ``rank``.

    ``views`` are stride lists, one per array, for the dimensions ``extents``
    (an output laid out in C order is one of them). Dimensions of extent 1 are
    dropped. Returns (extents, strides per view), each ``rank`` long with
    leading 1s (stride 0), or None when more than ``rank`` remain.
    """
    dims = [(n, [v[k] for v in views]) for k, n in enumerate(extents) if n != 1]
    merged: list[tuple[int, list[int]]] = []
    for n, strides in dims:
        if merged:
            m, outer = merged[-1]
            if all(o == s * n for o, s in zip(outer, strides, strict=True)):
                merged[-1] = (m * n, strides)
                continue
        merged.append((n, strides))
    if len(merged) > rank:
        return None
    pad = rank - len(merged)
    ext = [1] * pad + [n for n, _ in merged]
    per_view = [[0] * pad + [s[k] for _, s in merged] for k in range(len(views))]
    return ext, per_view


# ---------------------------------------------------------------------------
# kernel construction
# ---------------------------------------------------------------------------


def _flat(name: str, dtype: str) -> Buffer:
    return Buffer(name, (Var(f"n_{name}", _IDX),), dtype)


def _load(meta: Buffer, k: int) -> PrimExpr:
    return BufferLoad(meta, (IntImm(k, _IDX),))


def _lets(names: Sequence[Var], meta: Buffer, first: int, body: Stmt) -> Stmt:
    """``let v_k = meta[first + k]`` around ``body`` (loop-invariant scalars, named)."""
    for k in range(len(names) - 1, -1, -1):
        body = LetStmt(names[k], _load(meta, first + k), body)
    return body


def _nest(loop_vars: Sequence[Var], extents: Sequence[PrimExpr], body: Stmt) -> Stmt:
    for v, n in zip(reversed(loop_vars), reversed(extents), strict=True):
        body = For(v, IntImm(0, _IDX), n, "serial", body)
    return body


def _dot(index: Sequence[PrimExpr], strides: Sequence[PrimExpr]) -> PrimExpr:
    total: PrimExpr = IntImm(0, _IDX)
    for i, s in zip(index, strides, strict=True):
        total = total + i * s
    return total


def _c_order(index: Sequence[PrimExpr], extents: Sequence[PrimExpr]) -> PrimExpr:
    flat: PrimExpr = index[0]
    for i, n in zip(index[1:], extents[1:], strict=True):
        flat = flat * n + i
    return flat


def _vars(prefix: str, count: int = RANK) -> list[Var]:
    return [Var(f"{prefix}{k}", _IDX) for k in range(count)]


def _prim(name: str, params: Sequence[Buffer], body: Stmt, op_name: str) -> PrimFunc:
    return PrimFunc(tuple(params), body, Attrs({"op_name": op_name, "op_pattern": OPAQUE,
                                                "generic_name": name,
                                                "schedule": "generic"}))


@lru_cache(maxsize=1024)
def map_kernel(op_name: str, in_dtypes: tuple[str, ...], out_dtype: str,
               scalar: Callable[..., PrimExpr]) -> PrimFunc:
    """``out[flat(i)] = scalar(x0[i . s0], ...)`` over a 4-d nest (see the module doc)."""
    xs = [_flat(f"x{k}", d) for k, d in enumerate(in_dtypes)]
    out = _flat("out", out_dtype)
    meta = Buffer("meta", (IntImm(RANK * (1 + len(xs)), _IDX),), "int64")
    n, i = _vars("n"), _vars("i")
    strides = [_vars(f"s{k}_") for k in range(len(xs))]
    value = scalar(*(BufferLoad(x, (_dot(i, s),)) for x, s in zip(xs, strides, strict=True)))
    body: Stmt = _nest(i, n, BufferStore(out, value, (_c_order(i, n),)))
    for k in range(len(xs) - 1, -1, -1):
        body = _lets(strides[k], meta, RANK * (1 + k), body)
    body = _lets(n, meta, 0, body)
    return _prim(f"generic_{op_name}_{'_'.join(in_dtypes)}", [*xs, meta, out], body, op_name)


_REDUCE = {"sum": ("sum", False), "max": ("max", False), "mean": ("sum", True)}


@lru_cache(maxsize=256)
def reduce_kernel(op_name: str, dtype: str) -> PrimFunc:
    """One reduction over any axes (see the module doc); the te combiner and init."""
    combiner, divides = _REDUCE[op_name]
    x, out = _flat("x", dtype), _flat("out", dtype)
    meta = Buffer("meta", (IntImm(4 * RANK, _IDX),), "int64")
    kn, ks, rn, rs = _vars("kn"), _vars("ks"), _vars("rn"), _vars("rs")
    o, r = _vars("o"), _vars("r")
    at = (_c_order(o, kn),)
    acc = BufferLoad(out, at)
    source = BufferLoad(x, (_dot(o, ks) + _dot(r, rs),))
    init = const(0, dtype) if combiner == "sum" else te.min_value(dtype)
    steps = [BufferStore(out, init, at),
             _nest(r, rn, BufferStore(out, te.combine(combiner, acc, source), at))]
    if divides:
        count: PrimExpr = rn[0] * rn[1] * rn[2] * rn[3]
        steps.append(BufferStore(out, acc / cast(dtype, count), at))
    body: Stmt = _nest(o, kn, seq(*steps))
    for names, first in ((rs, 3 * RANK), (rn, 2 * RANK), (ks, RANK), (kn, 0)):
        body = _lets(names, meta, first, body)
    return _prim(f"generic_{op_name}_{dtype}", [x, meta, out], body, op_name)


@lru_cache(maxsize=64)
def matmul_kernel(dtype: str) -> PrimFunc:
    """Batched matmul with strided operands (see the module doc), summed in k order."""
    a, b, out = _flat("a", dtype), _flat("b", dtype), _flat("out", dtype)
    meta = Buffer("meta", (IntImm(13, _IDX),), "int64")
    b0, b1, m, nn, kk = (Var(name, _IDX) for name in ("b0", "b1", "m", "n", "k"))
    sa, sb = _vars("sa"), _vars("sb")
    i, k = _vars("i", 4), Var("kk", _IDX)  # i: batch0, batch1, row, column
    at = (_c_order(i, [b0, b1, m, nn]),)
    left = BufferLoad(a, (i[0] * sa[0] + i[1] * sa[1] + i[2] * sa[2] + k * sa[3],))
    right = BufferLoad(b, (i[0] * sb[0] + i[1] * sb[1] + k * sb[2] + i[3] * sb[3],))
    update = BufferStore(out, BufferLoad(out, at) + left * right, at)
    body: Stmt = _nest(i, [b0, b1, m, nn], seq(
        BufferStore(out, const(0, dtype), at),
        For(k, IntImm(0, _IDX), kk, "serial", update)))
    body = _lets(sb, meta, 9, body)
    body = _lets(sa, meta, 5, body)
    body = _lets([b0, b1, m, nn, kk], meta, 0, body)
    return _prim(f"generic_matmul_{dtype}", [a, b, meta, out], body, "matmul")


@lru_cache(maxsize=256)
def concat_kernel(n_parts: int, dtype: str) -> PrimFunc:
    """``concat`` of ``n_parts`` tensors as one strided copy per part (see the module doc)."""
    xs = [_flat(f"x{k}", dtype) for k in range(n_parts)]
    out = _flat("out", dtype)
    meta = Buffer("meta", (IntImm(2 + 2 * n_parts, _IDX),), "int64")
    outer, row = Var("outer", _IDX), Var("row", _IDX)
    parts: list[Stmt] = []
    part_vars: list[tuple[Var, Var]] = []
    for k, x in enumerate(xs):
        length, offset = Var(f"len{k}", _IDX), Var(f"off{k}", _IDX)
        part_vars.append((length, offset))
        o, j = Var(f"o{k}", _IDX), Var(f"j{k}", _IDX)
        copy = BufferStore(out, BufferLoad(x, (o * length + j,)), (o * row + offset + j,))
        parts.append(_nest([o, j], [outer, length], copy))
    body: Stmt = seq(*parts)
    for k in range(n_parts - 1, -1, -1):
        body = _lets(part_vars[k], meta, 2 + 2 * k, body)
    body = _lets([outer, row], meta, 0, body)
    return _prim(f"generic_concat{n_parts}_{dtype}", [*xs, meta, out], body, "concat")


# ---------------------------------------------------------------------------
# meta values per signature
# ---------------------------------------------------------------------------


def _scalar_of(op_name: str, attrs: Mapping[str, Any],
               result: TensorType) -> Callable[..., PrimExpr] | None:
    if op_name in _BINARY:
        return _BINARY[op_name]
    if op_name in _UNARY:
        return _UNARY[op_name]
    if op_name == "where":
        return select
    if op_name == "astype":
        return _CASTS[DTYPE_NAMES[result[0]]]
    if op_name in ("reshape", "permute_dims", "broadcast_to"):
        return _identity
    return None


def _identity(x: PrimExpr) -> PrimExpr:
    return x


def _cast_to(target: str) -> Callable[[PrimExpr], PrimExpr]:
    def to(x: PrimExpr) -> PrimExpr:
        return cast(target, x)
    return to


_CASTS = {name: _cast_to(name) for name in DTYPE_NAMES}


def _map_views(op_name: str, attrs: Mapping[str, Any], shapes: Sequence[tuple[int, ...]],
               out: tuple[int, ...]) -> list[list[int]]:
    """Stride lists (output first, then each operand) over the output's dimensions."""
    if op_name == "reshape":  # same elements in the same order: a flat copy
        return [c_strides(out), c_strides(out)]
    if op_name == "permute_dims":
        perm = permutation(attrs["axes"], len(shapes[0]))
        own = c_strides(shapes[0])
        return [c_strides(out), [own[p] for p in perm]]
    return [c_strides(out), *(_broadcast_strides(s, out) for s in shapes)]


def generic_call(op_name: str, attrs: Mapping[str, Any], types: Sequence[TensorType],
                 result: TensorType) -> GenericCall | None:
    """The generic kernel and meta of one op signature, or None when it has none."""
    shapes = [tuple(s) for _, s in types]
    out_shape = tuple(result[1])
    names = [DTYPE_NAMES[c] for c, _ in types]
    if op_name == "matmul":
        return _matmul_call(types, result)
    if op_name in _REDUCE:
        return _reduce_call(op_name, attrs, types[0], result)
    if op_name == "concat":
        return _concat_call(attrs, types, result)
    scalar = _scalar_of(op_name, attrs, result)
    if scalar is None:
        return None
    views = collapse(out_shape, _map_views(op_name, attrs, shapes, out_shape))
    if views is None:
        return None
    extents, strides = views  # strides[0], the output's, is C order by construction
    meta = np.array(extents + [s for view in strides[1:] for s in view], np.int64)
    key = op_name if op_name != "astype" else f"astype_{DTYPE_NAMES[result[0]]}"
    prim = map_kernel(key, tuple(names), DTYPE_NAMES[result[0]], scalar)
    return GenericCall(prim, meta)


def _reduce_call(op_name: str, attrs: Mapping[str, Any], operand: TensorType,
                 result: TensorType) -> GenericCall | None:
    code, shape = operand
    if op_name == "mean" and code not in FLOAT_DTYPES:
        return None
    axes = normalize_axes(attrs["axis"], len(shape))
    if not axes:  # nothing to reduce: the specialized copy keeps -0.0 exactly
        return None
    own = c_strides(shape)
    kept = [d for d in range(len(shape)) if d not in axes]
    kept_view = collapse([shape[d] for d in kept], [[own[d] for d in kept]])
    red_view = collapse([shape[d] for d in axes], [[own[d] for d in axes]])
    if kept_view is None or red_view is None:
        return None
    meta = np.array(kept_view[0] + kept_view[1][0] + red_view[0] + red_view[1][0], np.int64)
    return GenericCall(reduce_kernel(op_name, DTYPE_NAMES[code]), meta)


def _concat_call(attrs: Mapping[str, Any], types: Sequence[TensorType],
                 result: TensorType) -> GenericCall | None:
    """Concat as rows: ``outer`` rows of ``row`` elements; part k fills its columns."""
    if not types or len(types) > CONCAT_PARTS:
        return None
    out = tuple(result[1])
    (axis,) = normalize_axes((attrs["axis"],), len(out))
    outer = math.prod(out[:axis])
    inner = math.prod(out[axis + 1:])
    meta, offset = [outer, out[axis] * inner], 0
    for _, shape in types:
        meta += [shape[axis] * inner, offset * inner]
        offset += shape[axis]
    return GenericCall(concat_kernel(len(types), DTYPE_NAMES[result[0]]),
                       np.array(meta, np.int64))


def _batch_strides(full: Sequence[int], out_batch: Sequence[int]) -> list[int]:
    """Element strides of ``full``'s batch dims (all but the last two, in its own C
    layout) over the output's batch dims: 0 where broadcast or missing."""
    batch, own = full[:-2], c_strides(full)[:-2]
    lead = len(out_batch) - len(batch)
    return [0] * lead + [0 if d == 1 else s for d, s in zip(batch, own, strict=True)]


def _matmul_call(types: Sequence[TensorType], result: TensorType) -> GenericCall | None:
    """NumPy matmul: a 1-d operand is promoted (a row for ``a``, a column for ``b``) and
    the promoted axis leaves the result, which keeps the same flat layout."""
    (code, sa), (_, sb) = types
    a = tuple(sa) if len(sa) >= 2 else (1, *sa)
    b = tuple(sb) if len(sb) >= 2 else (*sb, 1)
    m, k, n = a[-2], a[-1], b[-1]
    out = tuple(result[1])
    out_batch = out[:len(out) - (len(sa) >= 2) - (len(sb) >= 2)]
    views = collapse(out_batch, [c_strides(out_batch), _batch_strides(a, out_batch),
                                 _batch_strides(b, out_batch)], rank=2)
    if views is None:
        return None
    (n0, n1), (_, va, vb) = views
    meta = np.array([n0, n1, m, n, k,
                     va[0], va[1], c_strides(a)[-2], 1,
                     vb[0], vb[1], c_strides(b)[-2], 1], np.int64)
    return GenericCall(matmul_kernel(DTYPE_NAMES[code]), meta)


__all__ = ["CONCAT_PARTS", "RANK", "GenericCall", "collapse", "concat_kernel", "generic_call",
           "map_kernel", "matmul_kernel", "reduce_kernel"]
