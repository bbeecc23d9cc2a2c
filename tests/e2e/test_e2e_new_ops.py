"""The ops of issue 15 through the whole pipeline (runtime.build) equal the interpreter.

Random graphs weight the new elementwise ops and reductions up (``GENERATED_OPS``);
exact ops must match bit for bit (signed zeros and NaN positions included), values
downstream of inexact ones (erf, float sums and products) within the dtype's tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
from e2e_helpers import assert_close_to_interpreter, build_and_run
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
from irkernel.testing import DEFAULT_OPS, GENERATED_OPS, functions_with_inputs, random_inputs

NEW_OPS = tuple(op for op in GENERATED_OPS if op not in DEFAULT_OPS)
MIX = {**{op: 1.0 for op in DEFAULT_OPS}, **{op: 5.0 for op in NEW_OPS}}


@settings(max_examples=30, deadline=None)
@given(case=functions_with_inputs(module=True, special_values=True, shapes="small",
                                  ops=st.just(MIX), n_nodes=st.integers(1, 25),
                                  max_dim=st.integers(1, 3)),
       opt_level=st.sampled_from([None, 0, 3]))
def test_random_modules_with_the_new_ops(case, opt_level) -> None:
    mod, inputs = case
    got = build_and_run(mod, inputs, opt_level=opt_level)
    assert_close_to_interpreter(mod, inputs, got, f"random module, opt_level {opt_level}")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_each_new_elementwise_op_on_vectors_with_special_values(dtype) -> None:
    """One long vector per op (so VectorizeLoop's vector code runs), every dtype it takes."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (67,), dtype)
    y = bb.param("y", (67,), dtype)
    outs = []
    for op in NEW_OPS:
        if ik.ops.get_op(op).pattern not in (ik.ops.ELEMWISE, ik.ops.BROADCAST):
            continue
        arity = ik.ops.get_op(op).arity
        try:
            outs.append(bb.call(op, x) if arity == 1 else bb.call(op, x, y))
        except ValueError as exc:  # only the op's type rule may refuse this dtype
            assert str(exc).startswith(f"{op}: operand dtype {dtype} not supported"), exc
    assert outs, f"no new elementwise op takes {dtype}"
    mod = ik.IRModule({"main": bb.finish(outs)})
    for seed in range(3):
        inputs = random_inputs(mod, seed=seed, special_values=True)
        if dtype.startswith("int"):  # make zero divisors and INT_MIN % -1 certain
            inputs[1][:3] = [0, -1, 0]
            inputs[0][:3] = [5, np.iinfo(dtype).min, np.iinfo(dtype).min]
        got = build_and_run(mod, inputs)
        assert_close_to_interpreter(mod, inputs, got, f"{dtype} seed {seed}")
