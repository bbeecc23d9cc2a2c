"""The graph passes on graphs made of the ops of issue 15: values kept bit for bit.

Random graphs draw from ``GENERATED_OPS`` (the default mix plus the new
elementwise ops and reductions the generators know), in scalar mode (FoldConstant's
compiled scalar path, ``irkernel.ir.scalar_ops``) and with small tensors (its NumPy
path); hand-built graphs cover the movement and NN ops, which no generator makes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from passes_helpers import PASS_FACTORIES, as_module, assert_same_results, make_pass

import irkernel as ik
import passes
from irkernel.testing import DEFAULT_OPS, GENERATED_OPS, functions_with_inputs

ALL = tuple(PASS_FACTORIES)
NEW_OPS = tuple(op for op in GENERATED_OPS if op not in DEFAULT_OPS)
#: The new ops, weighted up so every graph holds several of them.
MIX = {**{op: 1.0 for op in DEFAULT_OPS}, **{op: 4.0 for op in NEW_OPS}}


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=40, deadline=None)
@given(case=functions_with_inputs(module=True, special_values=True, ops=st.just(MIX),
                                  const_fraction=st.floats(0.1, 0.5),
                                  const_subgraph_fraction=st.floats(0.1, 0.4)))
def test_scalar_graphs_with_the_new_ops_keep_their_values(name, case) -> None:
    mod, inputs = case
    expected = ik.interpret(mod, *inputs)
    out = make_pass(name)(mod)
    ik.verify(out)
    assert_same_results(expected, ik.interpret(out, *inputs), name)


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=30, deadline=None)
@given(case=functions_with_inputs(module=False, special_values=True, shapes="small",
                                  ops=st.just(MIX), const_fraction=st.floats(0.2, 0.6),
                                  const_subgraph_fraction=st.floats(0.1, 0.3)))
def test_tensor_graphs_with_the_new_ops_keep_their_values(name, case) -> None:
    func, inputs = case
    expected = ik.interpret(func, *inputs)
    out = make_pass(name)(as_module(func))
    ik.verify(out)
    assert_same_results(expected, ik.interpret(out, *inputs), name)


def _specials(dtype: str) -> np.ndarray:
    if dtype.startswith("float"):
        return np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 7.0, -7.0, 3.0, np.inf, -np.inf,
                         np.nan, 1e-30], dtype)
    if dtype == "bool":
        return np.array([True, False], bool)
    info = np.iinfo(dtype)
    return np.array([0, 1, -1, 2, -2, 7, -7, 3, info.min, info.max], dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_fold_constant_folds_every_pair_of_special_scalars_exactly(dtype) -> None:
    """FoldConstant's compiled scalar code equals the NumPy references on every pair."""
    vals = _specials(dtype)
    unary = [op for op in NEW_OPS if ik.ops.get_op(op).arity == 1]
    binary = [op for op in NEW_OPS if ik.ops.get_op(op).arity == 2]
    bb = ik.GraphBuilder("main")
    outs = []
    consts = [bb.const(v) for v in vals]
    for op in unary + binary:
        for a in consts:
            for b in consts if op in binary else [None]:
                try:
                    outs.append(bb.call(op, a) if b is None else bb.call(op, a, b))
                except ValueError:  # the op does not take this dtype
                    break
    if not outs:
        pytest.skip(f"no new op takes {dtype}")
    mod = ik.IRModule({"main": bb.finish(outs)})
    folded = passes.FoldConstant()(mod)
    func = folded["main"]
    assert all(int(func.kind[int(o)]) == ik.ops.OP_CONST for o in func.outputs)
    assert_same_results(ik.interpret(mod), ik.interpret(folded), f"FoldConstant {dtype}")
