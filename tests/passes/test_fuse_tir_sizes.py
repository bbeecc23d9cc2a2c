"""FuseTIR keeps inlined expressions small: a value read at several places and levels is
materialized before its tree (what every later walk sees) outgrows INLINE_SIZE.

The data file is the graph hypothesis found (chains of int64 ``x // x`` through
reshapes): its fused kernel's expression doubled per level, FuseTIR took 10 s and the
build over a minute.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import irkernel as ik
import passes
import runtime
from irkernel import transform
from irkernel.testing import random_inputs
from irkernel.tir.functor import post_order, substitute
from irkernel.tir.function import PrimFunc
from irkernel.tir.stmt import BufferStore
from passes.fuse_tir import INLINE_SIZE, _tree_size

CASE = Path(__file__).parent / "data" / "fuse_tir_shared_subexpressions.ir"


def test_fused_expressions_stay_bounded_and_equal_the_interpreter() -> None:
    mod = ik.parse(CASE.read_text())
    fused = passes.FuseTIR()(passes.FuseOps()(passes.LegalizeOps()(mod)))
    for f in fused.functions.values():
        if isinstance(f, PrimFunc):
            for node in post_order(f.body):
                if isinstance(node, BufferStore):
                    # the root's own template wraps at most a few inlined values
                    assert _tree_size(node.value) <= 8 * INLINE_SIZE
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        ex = runtime.build(mod, cache=False)
    inputs = random_inputs(mod["main"], seed=0)
    for got, want in zip(ex["main"](*inputs), ik.interpret(mod, *inputs), strict=True):
        np.testing.assert_array_equal(got, want)


def test_substitute_rewrites_a_shared_subexpression_once() -> None:
    from irkernel.tir.expr import Var

    x = Var("x", "float32")
    e = x
    for _ in range(60):  # a DAG of 60 levels: 2**60 paths as a tree
        e = e * e
    out = substitute(e, {"x": Var("y", "float32")})
    assert _tree_size(out) == _tree_size(e)  # same shape, found in linear time
