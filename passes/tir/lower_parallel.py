"""LowerParallel: normalize parallel loops into what the runtime can launch.

The runtime runs each ``parallel`` loop by outlining its body into a
function over an iteration range and splitting ``[0, extent)`` into one
contiguous chunk per thread (``runtime/lower.py`` and ``runtime/threadpool.py``;
TVM also outlines in codegen, ``CodeGenCPU::CreateParallelLaunch``). That
needs, and this pass establishes:

* no nesting: a ``parallel`` loop inside another parallel loop becomes
  ``serial`` (the outer loop already occupies the pool; TVM rejects nesting);
* no trivial launches: a parallel loop whose extent is a constant ``<= 1``
  becomes serial (a launch costs tens of microseconds).

Semantics do not change: ``parallel`` asserts independent iterations.
Returns the input itself when nothing applies.
"""

from __future__ import annotations

from typing import Any

from irkernel import transform
from irkernel.tir.analysis import const_int
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import Mutator
from irkernel.tir.stmt import For, Stmt


class _Lower(Mutator):
    def __init__(self) -> None:
        self.inside = False

    def visit_For(self, s: For) -> Stmt:
        if s.kind != "parallel":
            return self.generic(s)
        extent = const_int(s.extent)
        if self.inside or (extent is not None and extent <= 1):
            return self.generic(s).replace(kind="serial")
        self.inside = True
        try:
            return self.generic(s)
        finally:
            self.inside = False


def lower_parallel(func: PrimFunc) -> PrimFunc:
    """Serialize nested and trivial parallel loops of ``func`` (see the module docstring)."""
    return func.with_body(_Lower().visit(func.body))


def has_parallel(func: PrimFunc) -> bool:
    """Whether ``func`` has a parallel loop (the runtime then passes its thread pool)."""
    from irkernel.tir.functor import post_order

    return any(isinstance(n, For) and n.kind == "parallel" for n in post_order(func.body))


def LowerParallel() -> transform.PrimFuncPass:
    """Make parallel loops launchable: no nesting, no trivial launches (opt level 0)."""

    def run(func: PrimFunc, mod: Any, ctx: transform.PassContext) -> PrimFunc:
        del mod, ctx
        return lower_parallel(func)

    return transform.prim_func_pass(run, opt_level=0, name="LowerParallel")


transform.register_pass("LowerParallel", LowerParallel)

__all__ = ["LowerParallel", "has_parallel", "lower_parallel"]
