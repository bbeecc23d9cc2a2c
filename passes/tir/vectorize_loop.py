"""VectorizeLoop: loops of kind ``vectorized`` become vector expressions (LLVM vector ops).

A ``vectorized`` loop with a constant extent ``n`` is replaced by its body
with the loop var replaced by ``Ramp(min, 1, n)``; the change propagates
upward (TVM's Vectorizer):

* an operator with one vector operand broadcasts the other; ``Ramp +- x``,
  ``Ramp * c`` and ``Ramp + Ramp`` stay ramps, so contiguous accesses keep a
  ``Ramp(base, 1, n)`` index (a vector load/store in codegen; other vector
  indices become gathers/scatters);
* a store with a vector index stores a vector (a scalar value is broadcast);
* a let whose value becomes a vector is inlined into its body (vars are
  scalars), unless the body stores to a buffer the value reads (inlined, the
  value would read the stored elements: the loop stays serial); inner loops whose bounds do not depend on the lane stay loops
  with vectorized bodies; a branch on a scalar condition stays a branch.

When the body can not be vectorized (a vector branch condition, a vector
value stored to a scalar location, an allocation, a non-constant extent,
nested vector widths), the loop falls back to a serial loop, which is always
correct. As in TVM, ``vectorized`` asserts that iterations are independent.
"""

from __future__ import annotations

from typing import Any

from irkernel import transform
from irkernel.tir import dtype as dt
from irkernel.tir.analysis import const_int
from irkernel.tir.buffer import BufferLoad
from irkernel.tir.expr import (
    Add,
    BinaryOp,
    Broadcast,
    Call,
    Cast,
    IntImm,
    Let,
    Mul,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import MemoMutator, Mutator, post_order, substitute, used_buffers
from irkernel.tir.stmt import Allocate, BufferStore, For, IfThenElse, LetStmt, Stmt


class _CannotVectorize(Exception):
    """The loop body has a construct this vectorizer does not handle."""


def _widen(e: PrimExpr, lanes: int) -> PrimExpr:
    if e.lanes == lanes:
        return e
    if e.lanes != 1:
        raise _CannotVectorize(f"mixed vector widths {e.lanes} and {lanes}")
    return Broadcast(e, lanes)


def vector_binary(cls: type[BinaryOp], a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``cls(a, b)`` with scalars broadcast and ramp arithmetic kept as ramps."""
    lanes = max(a.lanes, b.lanes)
    a, b = _widen(a, lanes), _widen(b, lanes)
    if cls in (Add, Sub):
        if isinstance(a, Ramp) and isinstance(b, Broadcast):
            return Ramp(cls(a.base, b.value), a.stride, lanes)
        if isinstance(a, Broadcast) and isinstance(b, Ramp):
            stride = b.stride if cls is Add else Sub(IntImm(0, b.stride.dtype), b.stride)
            return Ramp(cls(a.value, b.base), stride, lanes)
        if isinstance(a, Ramp) and isinstance(b, Ramp):
            return Ramp(cls(a.base, b.base), cls(a.stride, b.stride), lanes)
    if cls is Mul:
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Ramp) and isinstance(y, Broadcast):
                return Ramp(Mul(x.base, y.value), Mul(x.stride, y.value), lanes)
    return cls(a, b)


class _Vectorize(MemoMutator):
    """Rewrites one loop body with ``var`` as the vector ``ramp``.

    Memoized by node: an inlined vector let (``visit_Let``) puts its value at every use,
    and a fused epilogue's lets nest, so the body is a DAG whose paths multiply.
    """

    def __init__(self, var: Var, ramp: Ramp) -> None:
        super().__init__()
        self.var = var
        self.ramp = ramp
        self.lanes = ramp.lanes

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.ramp if v.name == self.var.name else v

    def visit(self, node: Any) -> Any:
        if isinstance(node, (Ramp, Broadcast)):
            if self.generic(node) is not node:
                raise _CannotVectorize("a vector expression depends on the vectorized var")
            return node
        return super().visit(node)

    def _binary(self, e: BinaryOp) -> PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        return e if a is e.a and b is e.b else vector_binary(type(e), a, b)

    def generic(self, node: Any) -> Any:
        if isinstance(node, BinaryOp):
            return self._binary(node)
        return super().generic(node)

    def visit_Select(self, e: Select) -> PrimExpr:
        c, t, f = self.visit(e.condition), self.visit(e.true_value), self.visit(e.false_value)
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        lanes = max(c.lanes, t.lanes, f.lanes)
        cond = c if c.lanes == 1 else _widen(c, lanes)
        return Select(cond, _widen(t, lanes), _widen(f, lanes))

    def visit_Cast(self, e: Cast) -> PrimExpr:
        v = self.visit(e.value)
        return e if v is e.value else Cast(dt.element(e.dtype), v)

    def visit_Call(self, e: Call) -> PrimExpr:
        args = tuple(self.visit(a) for a in e.args)
        if all(a is b for a, b in zip(args, e.args, strict=True)):
            return e
        lanes = max(a.lanes for a in args)
        return Call(e.op, tuple(_widen(a, lanes) for a in args))

    def visit_Let(self, e: Let) -> PrimExpr:
        value = self.visit(e.value)
        if value.lanes > 1:
            return self.visit(substitute(e.body, {e.var.name: e.value}))
        return e.replace(value=value, body=self.visit(e.body))

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        indices = tuple(self.visit(i) for i in e.indices)
        return e if all(a is b for a, b in zip(indices, e.indices, strict=True)) else \
            BufferLoad(e.buffer, indices)

    # -- statements --------------------------------------------------------
    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        value = self.visit(s.value)
        indices = tuple(self.visit(i) for i in s.indices)
        index_lanes = max((i.lanes for i in indices), default=1)
        if value.lanes > 1 and index_lanes == 1:
            raise _CannotVectorize(f"a vector value is stored to one element of {s.buffer.name}")
        if value is s.value and all(a is b for a, b in zip(indices, s.indices, strict=True)):
            return s
        return BufferStore(s.buffer, _widen(value, index_lanes), indices)

    def visit_LetStmt(self, s: LetStmt) -> Stmt:
        value = self.visit(s.value)
        if value.lanes > 1:
            stored = {n.buffer.name for n in post_order(s.body) if isinstance(n, BufferStore)}
            if stored & used_buffers(s.value).keys():
                raise _CannotVectorize(f"let {s.var.name} reads a buffer its body stores to "
                                       "(inlined, it would read the stored values)")
            return self.visit(substitute(s.body, {s.var.name: s.value}))
        return s.replace(value=value, body=self.visit(s.body))

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        if self.visit(s.condition).lanes > 1:
            raise _CannotVectorize("a branch condition depends on the vectorized var")
        return self.generic(s)

    def visit_For(self, s: For) -> Stmt:
        lo, ext = self.visit(s.min), self.visit(s.extent)
        if lo.lanes > 1 or ext.lanes > 1:
            raise _CannotVectorize("an inner loop's bounds depend on the vectorized var")
        return s.replace(body=self.visit(s.body))

    def visit_Allocate(self, s: Allocate) -> Stmt:
        raise _CannotVectorize("allocation inside a vectorized loop")


class _LoopVectorizer(Mutator):
    def visit_For(self, s: For) -> Stmt:
        s = s.replace(body=self.visit(s.body))
        if s.kind != "vectorized":
            return s
        lanes = const_int(s.extent)
        if lanes is None or lanes < 1 or lanes > dt.MAX_LANES:
            return s.replace(kind="serial")
        if lanes == 1:
            return substitute(s.body, {s.loop_var.name: s.min})
        if any(isinstance(n, (Ramp, Broadcast)) for n in post_order(s.body)):
            # The body is already vector code (an inner vectorized loop): lanes of two
            # vector indices pair up element-wise (a diagonal), not as an outer product.
            return s.replace(kind="serial")
        ramp = Ramp(s.min, IntImm(1, s.loop_var.dtype), lanes)
        try:
            return _Vectorize(s.loop_var, ramp).visit(s.body)
        except (_CannotVectorize, TypeError):
            # TypeError: a node rejected mixed vector widths; serial is always correct
            return s.replace(kind="serial")


def vectorize_loop(func: PrimFunc) -> PrimFunc:
    """Vectorize ``func``'s ``vectorized`` loops (see the module docstring).

    Returns
    -------
    PrimFunc
        ``func`` itself when it has no vectorized loop.
    """
    return func.with_body(_LoopVectorizer().visit(func.body))


def VectorizeLoop() -> transform.PrimFuncPass:
    """Turn ``vectorized`` loops into vector expressions (opt level 0); falls back to serial."""

    def run(func: PrimFunc, mod: Any, ctx: transform.PassContext) -> PrimFunc:
        del mod, ctx
        return vectorize_loop(func)

    return transform.prim_func_pass(run, opt_level=0, name="VectorizeLoop")


transform.register_pass("VectorizeLoop", VectorizeLoop)

__all__ = ["VectorizeLoop", "vector_binary", "vectorize_loop"]
