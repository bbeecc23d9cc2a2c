"""Epilogue placement for FuseTIR: move an elementwise epilogue into its producer.

FuseTIR (``passes.fuse_tir``) lets a reduction or matmul write the fused
function's output buffer and then has ``out[axes] = value`` (reading ``out`` at
``axes``) to apply. These helpers try, in order, to put that store inside the
producer's nest (a canonical reduction) or into each of its stores (a kernel
that never reads ``out`` back); the caller falls back to a second nest.
Imports irkernel.tir only.
"""

from __future__ import annotations

from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import IntImm, Let, PrimExpr, Var
from irkernel.tir.functor import Mutator, post_order, substitute
from irkernel.tir.stmt import BufferStore, For, Stmt, seq


def static_extents(buf: Buffer) -> tuple[int, ...] | None:
    """The buffer's dims when all are constants and it has no strides, else None."""
    if not all(isinstance(s, IntImm) for s in buf.shape) or buf.strides:
        return None
    return tuple(int(s.value) for s in buf.shape)  # type: ignore[attr-defined]


def peel(stmt: Stmt, count: int) -> tuple[list[For], Stmt] | None:
    """The ``count`` outermost loops (serial, unannotated) and the body inside them."""
    loops: list[For] = []
    while len(loops) < count:
        if not isinstance(stmt, For) or stmt.kind != "serial" or stmt.annotations:
            return None
        loops.append(stmt)
        stmt = stmt.body
    return loops, stmt


def fold_into_nest(heavy: Stmt, out: Buffer, axes: tuple[Var, ...],
                   value: PrimExpr) -> Stmt | None:
    """A nest over ``out``'s axes storing only at ``out[axes]`` (a canonical reduction)
    gets ``out[axes] = value`` appended inside it: the epilogue in the same pass."""
    peeled = peel(heavy, out.ndim)
    if peeled is None:
        return None
    loops, inner = peeled
    h_axes = tuple(f.loop_var for f in loops)
    extents = tuple(int(f.extent.value) if isinstance(f.extent, IntImm)
                    and isinstance(f.min, IntImm) and f.min.value == 0 else -1 for f in loops)
    stores = [s for s in post_order(inner) if isinstance(s, BufferStore)
              and s.buffer.name == out.name]
    if extents != static_extents(out) or any(s.indices != h_axes for s in stores):
        return None
    moved = substitute(value, {a.name: h for a, h in zip(axes, h_axes, strict=True)})
    fused = seq(inner, BufferStore(out, moved, h_axes))
    for f in reversed(loops):
        fused = f.replace(body=fused)
    return fused


class _EpilogueInStores(Mutator):
    """``out[idx] = x`` becomes ``target[idx] = let acc = x in value(axes := idx)``."""

    def __init__(self, out: Buffer, axes: tuple[Var, ...], value: PrimExpr, acc: Var,
                 target: Buffer) -> None:
        self.out, self.axes, self.acc, self.target = out, axes, acc, target
        self.value = _ReadAs(out.name, acc).visit(value)  # out[axes] -> acc

    def visit_BufferStore(self, store: BufferStore) -> BufferStore:
        if store.buffer.name != self.out.name:
            return store
        moved = substitute(self.value, {a.name: i for a, i in
                                        zip(self.axes, store.indices, strict=True)})
        return BufferStore(self.target, Let(self.acc, store.value, moved), store.indices)


class _ReadAs(Mutator):
    """Every load of buffer ``name`` becomes ``var``."""

    def __init__(self, name: str, var: Var) -> None:
        self.name, self.var = name, var

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        return self.var if load.buffer.name == self.name else self.generic(load)


def fold_into_stores(heavy: Stmt, out: Buffer, axes: tuple[Var, ...], value: PrimExpr,
                     acc: Var, target: Buffer | None = None) -> Stmt | None:
    """When the heavy member never reads ``out`` back (a scheduled matmul storing its
    register tile), apply the epilogue to each stored value: the last store of an
    element wins, so the result is ``value`` of the final product. The stores go to
    ``target`` (default ``out``: a buffer of the epilogue's dtype when it converts)."""
    for n in post_order(heavy):
        if isinstance(n, BufferLoad) and n.buffer.name == out.name:
            return None
        if isinstance(n, BufferStore) and n.buffer.name == out.name and any(
                i.lanes != 1 for i in n.indices):
            return None
    return _EpilogueInStores(out, axes, value, acc, target or out).visit(heavy)


def replace_store_value(stmt: Stmt, depth: int, value: PrimExpr) -> Stmt:
    """A perfect ``depth``-deep nest with its innermost store's value replaced."""
    if depth == 0:
        assert isinstance(stmt, BufferStore)
        return stmt.replace(value=value)
    assert isinstance(stmt, For)
    return stmt.replace(body=replace_store_value(stmt.body, depth - 1, value))
