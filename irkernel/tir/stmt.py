"""TIR statements: stores, bindings, branches, loops, allocations and sequences.

Statements are immutable dataclasses like expressions (structural ``==`` and
``hash``, a depth guard, ``replace`` returning ``self`` when nothing changes).
Loops run ``loop_var`` over ``[min, min + extent)``; ``kind`` is a scheduling
hint that lowering honours (``serial``, ``parallel``: chunks on the runtime's
thread pool, ``vectorized``: LLVM vector ops, ``unrolled``: copies). A
``SeqStmt`` of no statements is the no-op.
Imports ``irkernel.tir.expr``, ``construct``, ``buffer`` and ``dtype``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer, index_lanes, index_tuple
from irkernel.tir.construct import as_expr
from irkernel.tir.expr import Node, PrimExpr, Var, _depth, _set

#: Loop kinds, as in TVM's ForKind.
FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled")


class Stmt(Node):
    """Base of statements."""

    __slots__ = ()


def _check_stmt(owner: str, value: Any, what: str) -> None:
    if not isinstance(value, Stmt):
        raise TypeError(f"{owner}: {what} must be a Stmt, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class BufferStore(Stmt):
    """``buffer[indices] = value``; a vector index stores a vector value of the same lanes."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.buffer, Buffer):
            raise TypeError(f"BufferStore: expected a Buffer, got {self.buffer!r}")
        indices = index_tuple(self.buffer, self.indices, "BufferStore")
        want = dt.with_lanes(self.buffer.dtype, index_lanes(indices))
        if not isinstance(self.value, PrimExpr) or self.value.dtype != want:
            got = getattr(self.value, "dtype", type(self.value).__name__)
            raise TypeError(f"BufferStore {self.buffer.name}: value is {got}, the buffer "
                            f"element at these indices is {want}")
        _set(self, "indices", indices)
        _depth(self, self.value, *indices)


@dataclass(frozen=True, slots=True)
class LetStmt(Stmt):
    """``body`` with ``var`` bound to ``value``."""

    var: Var
    value: PrimExpr
    body: Stmt

    def __post_init__(self) -> None:
        if not isinstance(self.var, Var) or not isinstance(self.value, PrimExpr):
            raise TypeError("LetStmt: expects a Var and a PrimExpr value")
        if self.var.dtype != self.value.dtype:
            raise TypeError(f"LetStmt {self.var.name}: var is {self.var.dtype}, "
                            f"value is {self.value.dtype}")
        _check_stmt("LetStmt", self.body, "body")
        _depth(self, self.value, self.body)


@dataclass(frozen=True, slots=True)
class IfThenElse(Stmt):
    """``if condition: then_case else: else_case`` (``else_case`` may be None)."""

    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None

    def __post_init__(self) -> None:
        cond = self.condition
        if not isinstance(cond, PrimExpr) or cond.dtype != "bool":
            raise TypeError(f"IfThenElse: condition must be a scalar bool, got {cond!r}")
        _check_stmt("IfThenElse", self.then_case, "then_case")
        if self.else_case is not None:
            _check_stmt("IfThenElse", self.else_case, "else_case")
            _depth(self, cond, self.then_case, self.else_case)
        else:
            _depth(self, cond, self.then_case)


@dataclass(frozen=True, slots=True)
class For(Stmt):
    """``for loop_var in range(min, min + extent)`` of the given ``kind``."""

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    body: Stmt
    annotations: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.loop_var, Var):
            raise TypeError(f"For: loop_var must be a Var, got {self.loop_var!r}")
        name, vdt = self.loop_var.name, self.loop_var.dtype
        if not dt.is_int(vdt):
            raise TypeError(f"For {name}: loop variable must be an int, got {vdt}")
        lo, ext = as_expr(self.min, vdt), as_expr(self.extent, vdt)
        if lo.dtype != vdt or ext.dtype != vdt:
            raise TypeError(f"For {name}: min ({lo.dtype}) and extent ({ext.dtype}) must have "
                            f"the loop variable's dtype {vdt}")
        if self.kind not in FOR_KINDS:
            raise ValueError(f"For {name}: kind must be one of {', '.join(FOR_KINDS)}, "
                             f"got {self.kind!r}")
        _check_stmt(f"For {name}", self.body, "body")
        annotations = self.annotations
        if isinstance(annotations, dict):
            annotations = tuple(sorted(annotations.items()))
        _set(self, "min", lo)
        _set(self, "extent", ext)
        _set(self, "annotations", tuple(annotations))
        _depth(self, lo, ext, self.body)


@dataclass(frozen=True, slots=True)
class Allocate(Stmt):
    """``buffer`` is a fresh, uninitialized, C-contiguous array inside ``body``.

    Lowering puts small constant-size buffers on the stack and the rest on the
    heap (freed when ``body`` ends).
    """

    buffer: Buffer
    body: Stmt

    def __post_init__(self) -> None:
        if not isinstance(self.buffer, Buffer):
            raise TypeError(f"Allocate: expected a Buffer, got {self.buffer!r}")
        if self.buffer.strides:
            raise ValueError(f"Allocate {self.buffer.name}: allocated buffers are contiguous "
                             "(no strides)")
        _check_stmt(f"Allocate {self.buffer.name}", self.body, "body")
        _depth(self, self.buffer, self.body)


@dataclass(frozen=True, slots=True)
class SeqStmt(Stmt):
    """Statements in order; the empty sequence is the no-op."""

    stmts: tuple[Stmt, ...]

    def __post_init__(self) -> None:
        stmts = tuple(self.stmts)
        for s in stmts:
            _check_stmt("SeqStmt", s, "every element")
        _set(self, "stmts", stmts)
        _depth(self, *stmts)


@dataclass(frozen=True, slots=True)
class Evaluate(Stmt):
    """Evaluate an expression for its effect (TIR expressions have none: a no-op marker)."""

    value: PrimExpr

    def __post_init__(self) -> None:
        _set(self, "value", as_expr(self.value))
        _depth(self, self.value)


def seq(*stmts: Stmt) -> Stmt:
    """The sequence of ``stmts``, flattening nested SeqStmts; a single stmt is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            _check_stmt("seq", s, "every argument")
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


def is_no_op(stmt: Stmt) -> bool:
    """Whether ``stmt`` does nothing (empty sequence or Evaluate)."""
    return (isinstance(stmt, SeqStmt) and all(is_no_op(s) for s in stmt.stmts)) or isinstance(
        stmt, Evaluate)


__all__ = ["FOR_KINDS", "Allocate", "BufferStore", "Evaluate", "For", "IfThenElse", "LetStmt",
           "SeqStmt", "Stmt", "is_no_op", "seq"]
