"""ShareElementwiseKernels: elementwise kernels that differ only in their extent share one.

Why: graph lowering specializes a kernel per shape, and FuseTIR fuses a chain into
one kernel per distinct chain *and* shape. An elementwise nest gains nothing from
a constant extent (every operand is read at the store's own index, so the nest is
one flat loop over C-order memory that LLVM vectorizes either way), but each
extent is its own LLVM compile: a generated graph with a new shape per lane
compiled hundreds of kernels that were the same loop (``bench/bench_build_phases.py``,
family ``shapes``).

The pass finds graph-lowered PrimFuncs (those with ``op_name``) in canonical
injective form (``irkernel.tir.te.extract_compute``) whose every buffer has the
output's shape and whose every load reads an input at the store's own indices.
It rewrites each into its *flat* form: one loop ``for i in range(n): out[i] =
value`` over 1-d buffers of extent ``n``, a shape var the launch table binds from
each call's types (``runtime/launch_table.py``: a 1-d buffer parameter takes any
operand's flat view). Flat forms that are structurally equal (same ops, same
dtypes, any extents) have one kernel key, so ``runtime.build`` compiles one
kernel for them all. A flat form only replaces its functions when at least two
of them share it: a kernel of its own keeps its constant extent (and its tier).
When a member is large enough to run parallel
(``passes.tir.parallelize.PARALLEL_MIN_WORK`` elements), the shared loop is
two: ``parallel`` from that extent on, ``serial`` below it (a launch of the
thread pool costs more than a small loop), as the specialized kernels were.
Names and call sites do not change. Module-level, per PrimFunc (not per graph
node). Imports irkernel only.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from irkernel import transform
from irkernel.ir.module import IRModule
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import IntImm, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import Mutator
from irkernel.tir.stmt import BufferStore, For, IfThenElse, Stmt
from irkernel.tir.te import extract_compute
from passes.tir.parallelize import PARALLEL_MIN_WORK

#: The flat form's extent (a shape var) and loop var.
EXTENT, INDEX = Var("n"), Var("i")


class _Flatten(Mutator):
    """Loads of ``inputs`` at ``axes`` -> loads of their flat buffers at ``INDEX``;
    ``ok`` turns False at any other use of an axis (the value would depend on the
    position in a way a flat loop does not keep)."""

    def __init__(self, flat: dict[str, Buffer], axes: tuple[Var, ...]) -> None:
        self.flat, self.axes = flat, axes
        self.axis_names = {v.name for v in axes}
        self.ok = True

    def visit_BufferLoad(self, load: BufferLoad) -> Any:
        buf = self.flat.get(load.buffer.name)
        if buf is None or load.indices != self.axes:
            self.ok = False
            return load
        return BufferLoad(buf, (INDEX,))

    def visit_Var(self, var: Var) -> Any:
        if var.name in self.axis_names:
            self.ok = False
        return var


def _serial(stmt: Stmt) -> Stmt:
    """A nest with its ``parallel`` loops serial (FuseTIR parallelizes large nests; the
    flat form decides that again, by the extent of each call)."""
    if not isinstance(stmt, For):
        return stmt
    body = _serial(stmt.body)
    if body is stmt.body and stmt.kind != "parallel":
        return stmt
    return stmt.replace(kind="serial", body=body)


def flat_form(func: PrimFunc) -> tuple[PrimFunc, int] | None:
    """The serial flat form of an elementwise ``func`` (see the module docstring) and its
    element count, or None when ``func`` is not elementwise in that sense."""
    desc = extract_compute(func.with_body(_serial(func.body)))
    if desc is None or desc.is_reduction or desc.value is None:
        return None
    if any(tuple(b.shape) != tuple(desc.output.shape) for b in desc.inputs):
        return None
    flat = {b.name: Buffer(b.name, (EXTENT,), b.dtype) for b in (*desc.inputs, desc.output)}
    rewrite = _Flatten(flat, desc.axes)
    value = rewrite.visit(desc.value)
    if not rewrite.ok:
        return None
    out = flat[desc.output.name]
    body = For(INDEX, 0, EXTENT, "serial", BufferStore(out, value, (INDEX,)))
    size = 1
    for extent in desc.extents:
        size *= extent
    return PrimFunc(tuple(flat[p.name] for p in func.params), body, func.attrs), size


def _with_parallel(func: PrimFunc) -> PrimFunc:
    """A serial flat form as two loops: parallel from ``PARALLEL_MIN_WORK`` elements on."""
    loop = func.body
    assert isinstance(loop, For)
    big = EXTENT >= IntImm(PARALLEL_MIN_WORK, EXTENT.dtype)
    return func.with_body(IfThenElse(big, loop.replace(kind="parallel"), loop))


def share_elementwise(mod: IRModule, ctx: transform.PassContext) -> IRModule:
    groups: dict[bytes, list[tuple[str, PrimFunc, int]]] = defaultdict(list)
    for name, func in mod.functions.items():
        if not isinstance(func, PrimFunc) or "op_name" not in func.attrs \
                or "generic_name" in func.attrs:
            continue
        found = flat_form(func)
        if found is not None:
            # attrs left out: op_name and op_pattern differ between equal loops
            groups[found[0].replace(attrs={}).structural_digest()].append((name, *found))
    shared: dict[str, PrimFunc] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        parallel = max(size for _, _, size in members) >= PARALLEL_MIN_WORK
        for name, flat, _ in members:
            shared[name] = _with_parallel(flat) if parallel else flat
    if not shared:
        return mod
    ctx.stat("shared_kernels", len(shared))
    ctx.stat("flat_forms", sum(len(m) > 1 for m in groups.values()))
    return mod.with_functions(shared)


def ShareElementwiseKernels() -> transform.ModulePass:
    """Elementwise kernels that differ only in their extent become one flat kernel with
    the extent as a shape var (opt level 1: compiles less, runs the same)."""
    return transform.module_pass(share_elementwise, opt_level=1,
                                 name="ShareElementwiseKernels")


transform.register_pass("ShareElementwiseKernels", ShareElementwiseKernels)

__all__ = ["ShareElementwiseKernels", "flat_form", "share_elementwise"]
