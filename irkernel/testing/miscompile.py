"""A planted miscompile for testing debugging tools (the reducer's tests, bench, docs).

:func:`buggy_rewrite` is a deliberately wrong "optimization": on the 3-node pattern
``tanh(add(multiply(a, b), c))`` it turns the ``add`` into a ``subtract``.
:func:`shows_miscompile` is the predicate a user would write: the module's outputs
under the interpreter differ from the rewritten module's on seeded random inputs.
A random graph holds the pattern a few times per 1e5 nodes, so a reducer must find
one of them and throw away the rest. Imports ``irkernel.ir`` and ``testing.generate``.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.interp import interpret
from irkernel.ir.module import IRModule
from irkernel.ir.rebuild import rebuild
from irkernel.testing.generate import random_function, random_inputs

#: An op mix whose values stay finite over 1e5 random nodes (tanh and sigmoid bound them),
#: so a wrong value at the pattern reaches the outputs instead of drowning in NaN.
BOUNDED_OPS = {"add": 1.0, "multiply": 1.0, "subtract": 1.0, "tanh": 2.0, "sigmoid": 1.0,
               "negative": 0.5, "maximum": 0.5}

_TANH, _ADD, _MUL = (ops.get_op(name).opcode for name in ("tanh", "add", "multiply"))


def pattern_roots(func: Function) -> np.ndarray:
    """The ``add`` nodes of every ``tanh(add(multiply(a, b), c))`` (whole-array)."""
    kind, a0 = func.kind, func.a0
    tanhs = np.nonzero(kind == _TANH)[0]
    adds = a0[tanhs][kind[a0[tanhs]] == _ADD]
    return np.unique(adds[kind[a0[adds]] == _MUL])


def buggy_rewrite(func: Function) -> Function:
    """``func`` with the add of every pattern turned into a subtract (the planted bug)."""
    roots = pattern_roots(func)
    if not len(roots):
        return func
    kind = func.kind.copy()
    kind[roots] = ops.get_op("subtract").opcode
    return rebuild(func, kind=kind, pass_name="buggy_rewrite")


def planted_module(n_nodes: int, seed: int = 0) -> IRModule:
    """A random float32 module of ``n_nodes`` nodes (16 outputs, :data:`BOUNDED_OPS`) that
    holds the pattern; :func:`shows_miscompile` is true on it for the seeds tried (0-3)."""
    func = random_function(n_nodes, seed=seed, dtypes=("float32",), ops=BOUNDED_OPS,
                           n_outputs=16)
    return IRModule({"main": func})


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def shows_miscompile(mod: IRModule, entry: str = "main", seed: int = 0) -> bool:
    """True when ``entry`` computes something else after :func:`buggy_rewrite`."""
    func = mod[entry]
    wrong = mod.with_functions({entry: buggy_rewrite(func)})
    inputs = random_inputs(func, seed=seed)
    return not all(_same(a, b) for a, b in zip(interpret(mod, *inputs, entry=entry),
                                              interpret(wrong, *inputs, entry=entry),
                                              strict=True))


__all__ = ["BOUNDED_OPS", "buggy_rewrite", "planted_module", "pattern_roots", "shows_miscompile"]
