"""TIR template of the selection op ``topk_indices``: per row (every position of the
other axes), an insertion of each element into a sorted buffer of ``k`` indices.

The buffer is the output row itself. Elements are visited in index order and one
enters only where it is strictly better than the entry before it, so equal values stay
in index order, as the reference (``irkernel.ir.ops.references.topk_indices_ref``)
orders them; "better" ranks NaN above every number in both directions, as the reference
does. The insertion is branch-free: for each slot ``p`` from the last down to the first
(so slot ``p - 1`` still holds its old entry), the new entry of ``p`` is the old one of
``p - 1`` (the element goes further up), the old one of ``p`` (it goes further down, or
not in at all) or the element itself. That is ``O(n * k)`` per row: correct first, and
fast for the small ``k`` exports use. ``sorted=False`` then puts each row in index order
(``k`` passes of compare-and-swap over neighbouring slots).

Imports ``irkernel.ir`` and ``irkernel.tir`` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.ops.opdef import OPAQUE, TensorType
from irkernel.ir.ops.type_rules import normalize_axes
from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer
from irkernel.tir.construct import const, ne, select
from irkernel.tir.expr import IntImm, Max, Min, PrimExpr, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.stmt import BufferStore, For, IfThenElse, LetStmt, Stmt, seq


def _idx(v: int) -> PrimExpr:
    return IntImm(v, dt.INDEX)


def _loops(index: Sequence[Var], extents: Sequence[int], body: Stmt) -> Stmt:
    for v, n in zip(reversed(index), reversed(extents), strict=True):
        body = For(v, _idx(0), _idx(n), "serial", body)
    return body


def better(a: PrimExpr, b: PrimExpr, largest: bool) -> PrimExpr:
    """``a`` ranks strictly before ``b``: larger (smaller), NaN above every number."""
    if not dt.is_float(a.dtype):
        return a > b if largest else a < b
    a_nan, b_nan = ne(a, a), ne(b, b)
    if largest:
        return (a > b) | (a_nan & ~b_nan)
    return (a < b) | (~a_nan & b_nan)


def topk_indices(types: Sequence[TensorType], attrs: Mapping[str, Any],
                 result: TensorType) -> PrimFunc:
    ((code, shape),) = types
    x = Buffer("x0", shape, DTYPE_NAMES[code])
    out = Buffer("out", result[1], "int64")
    (axis,) = normalize_axes((attrs["axis"],), len(shape))
    n, k, largest = shape[axis], attrs["k"], attrs["largest"]
    outer = [Var(f"i{a}", dt.INDEX) for a in range(axis)]
    inner = [Var(f"i{a}", dt.INDEX) for a in range(axis + 1, len(shape))]
    rows = [*outer, *inner]
    row_extents = [*shape[:axis], *shape[axis + 1:]]

    def at(e: PrimExpr) -> tuple[PrimExpr, ...]:
        return (*outer, e, *inner)

    j, q = Var("j", dt.INDEX), Var("q", dt.INDEX)
    if k == 0:  # an empty result: a store in a loop that never runs
        return PrimFunc((x, out), _loops([*rows, q], [*row_extents, 0], BufferStore(
            out, const(0, "int64"), at(q))), {"op_name": "topk_indices", "op_pattern": OPAQUE})
    p = _idx(k - 1) - q                      # slots from the last down to the first
    value = x[at(j)]
    # the slots' entries as indices into x: p - 1 is filled when p > 0 (the store runs for
    # p <= j), p when p < j; an unfilled slot (any bits) reads x at 0 instead (selects and
    # loads are evaluated whatever the condition, so every load must stay in bounds)
    zero = const(0, "int64")
    prev = select(p > _idx(0), out[at(Max(p - _idx(1), _idx(0)))], zero)
    cur = select(p < j, out[at(p)], zero)
    up = (p > _idx(0)) & better(value, x[at(prev)], largest)
    stay = (p < j) & ~better(value, x[at(cur)], largest)
    insert = BufferStore(out, select(up, prev, select(stay, cur, j)), at(p))
    body: Stmt = For(j, _idx(0), _idx(n), "serial",
                     For(q, _idx(0), _idx(k), "serial", IfThenElse(p <= j, insert)))
    if not attrs["sorted"] and k > 1:
        body = seq(body, _index_order(out, at, k))
    return PrimFunc((x, out), _loops(rows, row_extents, body),
                    {"op_name": "topk_indices", "op_pattern": OPAQUE})


def _index_order(out: Buffer, at: Any, k: int) -> Stmt:
    """``k`` passes of compare-and-swap over slots ``(s, s + 1)``: the row ascending."""
    s, a, b = Var("s", dt.INDEX), Var("a", "int64"), Var("b", "int64")
    swap = LetStmt(a, out[at(s)], LetStmt(b, out[at(s + _idx(1))], seq(
        BufferStore(out, Min(a, b), at(s)), BufferStore(out, Max(a, b), at(s + _idx(1))))))
    return For(Var("t", dt.INDEX), _idx(0), _idx(k), "serial",
               For(s, _idx(0), _idx(k - 1), "serial", swap))


TEMPLATES = {"topk_indices": topk_indices}

__all__ = ["TEMPLATES", "better", "topk_indices"]
