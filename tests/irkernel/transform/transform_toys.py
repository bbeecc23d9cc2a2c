"""Shared helpers for the pass-infrastructure tests: small modules, toy passes, a scoped registry.

Toy passes are registered only inside the ``scoped_registry`` fixture (see
conftest.py), which swaps in a copy of the registry for one test, so the
process-wide registry holds only what the library and ``passes`` register.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import irkernel as ik
from irkernel import transform
from irkernel.transform import PassContext


def small_function(name: str = "main", private: bool = False,
                   extra_neg: bool = False) -> ik.Function:
    """``exp(x) + c`` over float32[4] (optionally negated)."""
    bb = ik.GraphBuilder(name, private=private)
    x = bb.param("x", (4,), "float32")
    c = bb.const(np.arange(4, dtype=np.float32))
    y = bb.add(bb.exp(x), c)
    if extra_neg:
        y = bb.negative(y)
    return bb.finish([y])


def small_module(n_funcs: int = 1) -> ik.IRModule:
    funcs: dict[str, Any] = {"main": small_function("main")}
    for i in range(1, n_funcs):
        funcs[f"f{i}"] = small_function(f"f{i}", private=True)
    return ik.IRModule(funcs)


def negate_output(func: ik.Function) -> ik.Function:
    """A new function computing ``-func(x)`` (changes semantics on purpose)."""
    name = str(func.attrs.get("global_symbol", "main"))
    return small_function(name, private="global_symbol" not in func.attrs, extra_neg=True)


class FakePrimFunc:
    """Stands in for tir.PrimFunc: the class marker is what PrimFuncPass tests."""

    _irkernel_prim_func = True

    def __init__(self, body: str, attrs: dict[str, Any] | None = None) -> None:
        self.body = body
        self.attrs = dict(attrs or {})

    def script(self) -> str:
        return f"primfunc {{ {self.body} }}"


def module_with_prim_func() -> ik.IRModule:
    return ik.IRModule({"main": small_function(), "kernel": FakePrimFunc("a"),
                        "skipped": FakePrimFunc("b", {"SkipOptimization": True})})


def log_pass(log: list[str], name: str, opt_level: int = 0,
             required: list[str] | None = None, change: bool = False) -> transform.ModulePass:
    """A module pass appending ``name`` to ``log``; with ``change`` it returns a new module."""

    def run(mod: ik.IRModule, ctx: PassContext) -> ik.IRModule:
        log.append(name)
        if change:
            return ik.IRModule(dict(mod.functions), mod.attrs)
        return mod

    return transform.module_pass(run, opt_level=opt_level, name=name, required=required)


def identity_factory(name: str, opt_level: int = 0) -> Any:
    """A factory of function passes that change nothing; options are recorded on the pass."""

    def factory(**options: Any) -> transform.FunctionPass:
        p = transform.function_pass(lambda f, m, c: f, opt_level=opt_level, name=name)
        p.options = options  # type: ignore[attr-defined]  # for the tests to read back
        return p

    return factory
