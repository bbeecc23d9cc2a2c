"""Graph passes on functions with symbolic dims keep their meaning (the interpreter binds
the dims from the inputs): they must not fold or materialize a symbolic shape."""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import passes  # noqa: F401  (registers the passes)
from irkernel import transform
from irkernel.testing.symbolic import symbolic_case

PASSES = ("FoldConstant", "DeadCodeElimination", "EliminateCommonSubexpr", "SimplifyArith")


@pytest.mark.parametrize("name", PASSES)
@pytest.mark.parametrize("seed", range(12))
def test_graph_pass_keeps_a_symbolic_graph_meaning(name: str, seed: int) -> None:
    case = symbolic_case(seed, n_steps=14)
    mod = ik.IRModule({"main": case.symbolic})
    out = transform.get_pass(name)(mod)
    ik.verify(out)
    assert out["main"].shapes.symbols.var_names == case.symbolic.shapes.symbols.var_names
    for got, want in zip(ik.interpret(out, *case.inputs), ik.interpret(mod, *case.inputs),
                         strict=True):
        np.testing.assert_array_equal(got, want)
