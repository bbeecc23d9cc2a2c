"""Parallel outer loops for large loop nests (FuseTIR's and graph lowering's kernels).

Why: a fused elementwise chain over 1e7 floats is one serial loop nest that
LLVM vectorizes but that runs on one core; the machine has more. FuseTIR
knows the shape of what it emitted (canonical nests whose every store is at
the loop's own index), so it can prove the iterations of the outermost loop
independent and mark it ``parallel`` (TVM's schedule would ``parallel`` the
fused outer axis). The runtime outlines the body and splits the range over its
thread pool (``runtime/lower.py``, ``runtime/threadpool.py``); inner loops stay
serial, so LLVM still vectorizes them.

The proof is syntactic and conservative: the outer loop ``v`` is serial, the
nest has no allocation and no parallel loop inside, every store's first index
is ``v`` itself, and every read of a buffer stored in the nest also has ``v``
as its first index (outer loops of extent 1 are looked through: then ``v`` must
be the index at their depth). Iteration ``v`` then only touches slice ``v`` of the
buffers it writes (buffers never alias: ``noalias`` on every kernel argument),
so iterations commute. Nests with less than ``PARALLEL_MIN_WORK`` innermost
iterations stay serial: a launch costs microseconds.

FuseTIR calls :func:`parallelize` on the nests it emits; the registered pass
``ParallelizeNests`` (first in the ``LowerTIR`` pipeline, ``passes/pipelines.py``)
does the same for kernels of graph lowering that no fusion produced (a lone
reduction, an unfused elementwise op). Imports irkernel only.
"""

from __future__ import annotations

from typing import Any

from irkernel import transform
from irkernel.tir.analysis import trip_count
from irkernel.tir.buffer import BufferLoad
from irkernel.tir.expr import IntImm, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import post_order
from irkernel.tir.stmt import Allocate, BufferStore, For, SeqStmt, Stmt

#: Innermost iterations below which a nest stays serial (~10 us of elementwise work; the
#: native pool's launch costs a few us: ``runtime/threadpool.py``).
PARALLEL_MIN_WORK = 1 << 15


def work(stmt: Stmt) -> int:
    """Innermost iterations of ``stmt`` (constant extents; a symbolic one counts as 1)."""
    return trip_count(stmt, symbolic=1) or 0


def _at(indices: tuple, var: Var, pos: int) -> bool:
    return len(indices) > pos and isinstance(indices[pos], Var) and indices[pos].name == var.name


def independent_outer(stmt: Stmt, pos: int = 0) -> bool:
    """Whether ``stmt`` is a serial loop whose iterations provably commute (see above):
    every store, and every load of a buffer stored in it, has the loop variable as index
    ``pos`` (two iterations then touch disjoint slices, whatever the other indices)."""
    if not isinstance(stmt, For) or stmt.kind != "serial" or stmt.annotations:
        return False
    var = stmt.loop_var
    nodes = list(post_order(stmt.body))
    written: set[str] = set()
    for n in nodes:
        if isinstance(n, Allocate) or (isinstance(n, For) and n.kind == "parallel"):
            return False
        if isinstance(n, BufferStore):
            if not _at(n.indices, var, pos):
                return False
            written.add(n.buffer.name)
    return bool(written) and all(
        _at(n.indices, var, pos) for n in nodes
        if isinstance(n, BufferLoad) and n.buffer.name in written)


def parallelize(stmt: Stmt, min_work: int = PARALLEL_MIN_WORK) -> Stmt:
    """``stmt`` with its outer loop ``parallel`` when that is safe and worth a launch.

    Loops of extent 1 (the batch axis of a batch-1 model) are looked through: the first
    loop with more iterations is the one split. Before, such nests never ran in parallel,
    so no elementwise kernel of a one-image CNN used the second core."""
    if not isinstance(stmt, For) or work(stmt) < min_work:
        return stmt
    outer: list[For] = []
    loop = stmt
    while (isinstance(loop, For) and loop.kind == "serial" and not loop.annotations
           and isinstance(loop.extent, IntImm) and loop.extent.value == 1
           and isinstance(loop.body, For)):
        outer.append(loop)
        loop = loop.body
    extent = loop.extent.value if isinstance(loop, For) and isinstance(loop.extent, IntImm) \
        else 0
    if extent < 2 or not independent_outer(loop, len(outer)):
        return stmt
    result: Stmt = loop.replace(kind="parallel")
    for o in reversed(outer):
        result = o.replace(body=result)
    return result


def parallelize_nests(body: Stmt) -> Stmt:
    """``body`` (a nest or a sequence of nests) with each nest parallelized where safe:
    for kernels no fusion produced (a lone reduction, an unfused elementwise op), whose
    nests FuseTIR never saw."""
    if isinstance(body, SeqStmt):
        stmts = tuple(parallelize(s) for s in body.stmts)
        return body if all(a is b for a, b in zip(stmts, body.stmts, strict=True)) \
            else SeqStmt(stmts)
    return parallelize(body)


def ParallelizeNests() -> transform.PrimFuncPass:
    """:func:`parallelize_nests` on kernels of graph lowering (PrimFuncs with ``op_name``;
    opt level 0). User PrimFuncs keep the loops their author wrote."""

    def run(func: PrimFunc, mod: Any, ctx: transform.PassContext) -> PrimFunc:
        del mod, ctx
        if "op_name" not in func.attrs:
            return func
        body = parallelize_nests(func.body)
        return func if body is func.body else func.replace(body=body)

    return transform.prim_func_pass(run, opt_level=0, name="ParallelizeNests")


transform.register_pass("ParallelizeNests", ParallelizeNests)

__all__ = ["PARALLEL_MIN_WORK", "ParallelizeNests", "independent_outer", "parallelize",
           "parallelize_nests", "work"]
