"""MergeLoops: two perfectly nested serial loops over contiguous memory become one loop.

Why: a canonical nest over an NCHW map loops ``for h: for w:`` with ``w`` of 7 or 14 on
the small maps of a CNN (a squeeze-excite scale, a global mean, a conv's copy of its
image). LLVM's loop vectorizer vectorizes a loop of fewer than 16 iterations only by
folding the tail into masked loads and stores, the whole row at once. With AVX-512 that
is one mask register; with AVX2 it is a vector compare of 64-bit indices per vector and
``vmaskmovps``, whose store form is microcoded on AMD cores: efficientnet_b0's
squeeze-excite scale ran 3-4x slower in the AVX2 build than in the AVX-512 one, on the
same core, and 2x standalone (``x * s`` over 480 x 14 x 14). Merged, the loop runs
``14 * 14 = 196`` iterations: whole vectors and a short remainder, on any ISA.

The rule (TVM's ``fuse`` of two axes, applied where it is free): an outer loop ``i`` of
extent ``E`` whose body is exactly a loop ``j`` of extent ``F`` (both serial, from 0, no
annotations) becomes one loop ``j`` of extent ``E * F`` when every use of ``i`` and ``j``
is inside a buffer index ``a * i + b * j + rest`` with ``a == b * F`` (``rest`` free of
both): that index is ``b * (F * i + j) + rest``, so it becomes ``b * j + rest`` with the
merged ``j``, and the iterations run in the same order (a reduction accumulates in the
same order too). Any other use of either var (a value, a condition, a bound, a
non-affine index) leaves the pair alone. Runs bottom-up, so a three-deep contiguous nest
becomes one loop. Runs after ``FlattenBuffer`` (one flat index per access) and before
``VectorizeLoop``. Imports irkernel only.
"""

from __future__ import annotations

from typing import Any

from irkernel import transform
from irkernel.tir.analysis import const_int, linear_form
from irkernel.tir.buffer import BufferLoad
from irkernel.tir.expr import IntImm, PrimExpr, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import Mutator, free_vars, substitute
from irkernel.tir.stmt import BufferStore, For, Stmt


class _Cannot(Exception):
    """A use of the loop vars that the merge can not rewrite."""


class _MergeIndices(Mutator):
    """Rewrites every index that uses ``i`` or ``j`` into one of the merged ``j``."""

    def __init__(self, outer: Var, inner: Var, inner_extent: int) -> None:
        self.outer, self.inner, self.extent = outer, inner, inner_extent
        self.names = {outer.name, inner.name}
        self.zero = IntImm(0, outer.dtype)

    def index(self, e: PrimExpr) -> PrimExpr:
        """``e`` for the merged loop (a load inside an index is not affine: refused)."""
        if not self.names & set(free_vars(e)):
            return e
        form = linear_form(e)
        if form is None:
            raise _Cannot
        coeffs = form[0]
        a, b = coeffs.get(self.outer.name, 0), coeffs.get(self.inner.name, 0)
        if a != b * self.extent:
            raise _Cannot
        # b * i * F + b * j + rest -> b * j + rest: the merged j stands for F * i + j
        return substitute(e, {self.outer.name: self.zero})

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        indices = tuple(self.index(i) for i in e.indices)
        same = all(x is y for x, y in zip(indices, e.indices, strict=True))
        return e if same else e.replace(indices=indices)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        value = self.visit(s.value)
        indices = tuple(self.index(i) for i in s.indices)
        if value is s.value and all(x is y for x, y in zip(indices, s.indices, strict=True)):
            return s
        return s.replace(value=value, indices=indices)

    def visit_Var(self, v: Var) -> PrimExpr:
        if v.name in self.names:  # a use outside every index
            raise _Cannot
        return v


def _mergeable(loop: Stmt) -> bool:
    return (isinstance(loop, For) and loop.kind == "serial" and not loop.annotations
            and const_int(loop.min) == 0 and (const_int(loop.extent) or 0) > 0)


def _merge_pair(outer: For) -> Stmt:
    """``outer`` and the loop that is its whole body as one loop, or ``outer`` itself."""
    inner = outer.body
    if not (_mergeable(outer) and _mergeable(inner)) \
            or outer.loop_var.dtype != inner.loop_var.dtype:
        return outer
    extent = const_int(inner.extent)
    try:
        body = _MergeIndices(outer.loop_var, inner.loop_var, extent).visit(inner.body)
    except _Cannot:
        return outer
    total = const_int(outer.extent) * extent
    return inner.replace(body=body, extent=IntImm(total, inner.loop_var.dtype))


class _Merge(Mutator):
    def visit_For(self, s: For) -> Stmt:
        out = self.generic(s)  # inner nests first
        return _merge_pair(out) if isinstance(out, For) else out


def merge_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with contiguous serial loop pairs merged (see the module docstring)."""
    body = _Merge().visit(func.body)
    return func if body is func.body else func.replace(body=body)


def MergeLoops() -> transform.PrimFuncPass:
    """:func:`merge_loops` on every PrimFunc (opt level 0)."""

    def run(func: PrimFunc, mod: Any, ctx: transform.PassContext) -> PrimFunc:
        del mod, ctx
        return merge_loops(func)

    return transform.prim_func_pass(run, opt_level=0, name="MergeLoops")


transform.register_pass("MergeLoops", MergeLoops)

__all__ = ["MergeLoops", "merge_loops"]
