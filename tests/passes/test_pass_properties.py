"""Properties every graph pass has, parametrized over the registry (and O2, fixpoint).

The interpreter is the oracle: on random graphs from ``irkernel.testing``'s
strategies (every dtype, scalars and small broadcasting tensors, calls into
helper functions, NaN/inf/-0.0 and int min/max inputs) a pass's output must
verify and compute the same values bit for bit (any NaN matches any NaN).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from passes_helpers import (
    GRAPH_PASSES,
    IDEMPOTENT,
    PASS_FACTORIES,
    as_module,
    assert_same_results,
    column_digest,
    make_pass,
)

import irkernel as ik
import passes
from irkernel import transform
from irkernel.testing import functions_with_inputs, modules, random_inputs, random_module

ALL = tuple(PASS_FACTORIES)
# At least 100 examples for the oracle tests (more under the "thorough" profile).
_EXAMPLES = settings(max_examples=max(100, settings().max_examples))


# ---------------------------------------------------------------------------
# semantics (the interpreter oracle)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
@_EXAMPLES
@given(case=functions_with_inputs(module=True, special_values=True))
def test_output_verifies_and_computes_the_same_values(name: str, case) -> None:
    mod, inputs = case
    expected = ik.interpret(mod, *inputs)
    out = make_pass(name)(mod)
    ik.verify(out)
    assert_same_results(expected, ik.interpret(out, *inputs), name)


@pytest.mark.parametrize("name", ALL)
@_EXAMPLES
@given(case=functions_with_inputs(module=False, special_values=True, shapes="small",
                                  const_fraction=st.floats(0.2, 0.6),
                                  const_subgraph_fraction=st.floats(0.1, 0.3)))
def test_constant_heavy_tensor_graphs_keep_their_values(name: str, case) -> None:
    func, inputs = case
    expected = ik.interpret(func, *inputs)
    out = make_pass(name)(as_module(func))
    ik.verify(out)
    assert_same_results(expected, ik.interpret(out, *inputs), name)


@pytest.mark.parametrize("seed", range(4))
def test_scalar_graphs_of_every_dtype_keep_their_values_at_2000_nodes(seed: int) -> None:
    mod = random_module(2000, seed=seed, call_funcs=True, const_fraction=0.3,
                        const_subgraph_fraction=0.3, duplicate_fraction=0.2)
    inputs = random_inputs(mod, seed=seed, special_values=True)
    expected = ik.interpret(mod, *inputs)
    for name in ALL:
        out = make_pass(name)(mod)
        ik.verify(out)
        assert_same_results(expected, ik.interpret(out, *inputs), name)


# ---------------------------------------------------------------------------
# change tracking: idempotent, deterministic, identity when unchanged, no mutation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", IDEMPOTENT)
@_EXAMPLES
@given(mod=modules())
def test_a_second_run_returns_the_very_same_module(name: str, mod: ik.IRModule) -> None:
    once = make_pass(name)(mod)
    twice = make_pass(name)(once)
    assert twice is once


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=20)
@given(mod=modules())
def test_two_runs_give_structurally_equal_modules(name: str, mod: ik.IRModule) -> None:
    a = make_pass(name)(mod)
    b = make_pass(name)(mod)
    assert ik.structural_equal(a, b)
    assert ik.structural_hash(a) == ik.structural_hash(b)
    assert a.script() == b.script()


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=20)
@given(mod=modules())
def test_the_input_module_is_never_mutated(name: str, mod: ik.IRModule) -> None:
    before = column_digest(mod)
    functions = dict(mod.functions)
    make_pass(name)(mod)
    assert column_digest(mod) == before
    assert dict(mod.functions) == functions  # same objects under the same names
    for func in mod.functions.values():
        if isinstance(func, ik.Function):
            assert not any(getattr(func, c).flags.writeable
                           for c in ("kind", "a0", "a1", "dtype", "shape_id", "attr_id"))


def _untouchable() -> ik.IRModule:
    """A graph none of the passes can improve: params only, no constants, no duplicates."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    y = bb.param("y", (3,), "float32")
    s = bb.add(bb.exp(x), y)
    return ik.IRModule({"main": bb.finish([bb.multiply(s, x)])})


@pytest.mark.parametrize("name", ALL)
def test_a_pass_that_changes_nothing_returns_its_input(name: str) -> None:
    mod = _untouchable()
    assert make_pass(name)(mod) is mod


@pytest.mark.parametrize("name", ALL)
def test_a_pass_that_changes_something_returns_a_new_module(name: str) -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int32")
    one = bb.const(np.int32(1))
    dup_a = bb.add(x, bb.add(one, one))
    dup_b = bb.add(x, bb.add(one, one))
    bb.negative(x)  # dead
    mod = ik.IRModule({"main": bb.finish([bb.add(bb.subtract(dup_a, dup_b),
                                                     bb.multiply(x, one))])})
    out = make_pass(name)(mod)
    assert out is not mod
    assert out["main"] is not mod["main"]
    assert_same_results(ik.interpret(mod, np.int32(5)), ik.interpret(out, np.int32(5)), name)


# ---------------------------------------------------------------------------
# SkipOptimization, PrimFuncs and other functions
# ---------------------------------------------------------------------------

def _improvable(name: str = "main", **kw: object) -> ik.Function:
    """Foldable, simplifiable, duplicated and dead nodes, all at once."""
    bb = ik.GraphBuilder(name, **kw)  # type: ignore[arg-type]
    x = bb.param("x", (), "int64")
    c = bb.add(bb.const(np.int64(2)), bb.const(np.int64(3)))
    a = bb.multiply(bb.add(x, bb.const(np.int64(0))), c)
    b = bb.multiply(bb.add(x, bb.const(np.int64(0))), c)
    bb.exp(bb.astype(x, dtype="float32"))  # dead
    return bb.finish([bb.subtract(a, b)])


@pytest.mark.parametrize("name", ALL)
def test_skip_optimization_functions_are_left_alone(name: str) -> None:
    skipped = _improvable().with_attr("SkipOptimization", True)
    mod = ik.IRModule({"main": skipped})
    assert make_pass(name)(mod) is mod


@pytest.mark.parametrize("name", ALL)
def test_skip_optimization_holds_per_function(name: str) -> None:
    skipped = _improvable("kept").with_attr("SkipOptimization", True)
    mod = ik.IRModule({"main": _improvable(), "kept": skipped})
    out = make_pass(name)(mod)
    assert out["kept"] is skipped
    assert out["main"] is not mod["main"]


@pytest.mark.parametrize("name", ALL)
def test_every_function_of_the_module_is_transformed(name: str) -> None:
    mod = ik.IRModule({"main": _improvable(), "other": _improvable("other")})
    out = make_pass(name)(mod)
    assert set(out.functions) == {"main", "other"}
    assert out["main"] is not mod["main"] and out["other"] is not mod["other"]
    for fname in ("main", "other"):
        assert_same_results(ik.interpret(mod, np.int64(7), entry=fname),
                            ik.interpret(out, np.int64(7), entry=fname), fname)


# ---------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", GRAPH_PASSES)
def test_every_pass_is_registered_under_its_constructor_name(name: str) -> None:
    made = transform.get_pass(name)
    assert made.info.name == name
    assert getattr(passes, name)().info.name == name
    assert getattr(passes, name).__name__ == name
    assert name in transform.list_passes()


def test_pass_kinds_and_opt_levels_are_documented_ones() -> None:
    assert isinstance(passes.FoldConstant(), transform.FunctionPass)
    assert isinstance(passes.EliminateCommonSubexpr(), transform.FunctionPass)
    assert isinstance(passes.SimplifyArith(), transform.FunctionPass)
    assert isinstance(passes.DeadCodeElimination(), transform.ModulePass)
    assert passes.FoldConstant().info.opt_level == 0  # as in TVM Relax
    assert passes.EliminateCommonSubexpr().info.opt_level == 1


def test_o2_runs_the_four_passes_in_order() -> None:
    o2 = passes.O2()
    assert isinstance(o2, transform.Sequential)
    assert [p.info.name for p in o2.passes] == ["FoldConstant", "SimplifyArith",
                                                 "EliminateCommonSubexpr",
                                                 "DeadCodeElimination"]
    assert str(transform.parse_pipeline("O2")) == "O2"


def test_fixpoint_repeats_o2_until_nothing_changes() -> None:
    fp = passes.fixpoint()
    assert isinstance(fp, transform.FixedPoint)
    assert [p.info.name for p in fp.passes] == [p.info.name for p in passes.O2().passes]
    custom = passes.fixpoint(passes.SimplifyArith(), passes.DeadCodeElimination())
    assert [p.info.name for p in custom.passes] == ["SimplifyArith", "DeadCodeElimination"]


def test_o2_needs_a_second_round_where_fixpoint_does_not() -> None:
    """Why O2 is not in IDEMPOTENT: CSE exposes ``x - x``, SimplifyArith then makes zeros."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int32")
    d = bb.subtract(bb.negative(x), bb.negative(x))  # equal only after CSE
    mod = ik.IRModule({"main": bb.finish([bb.add(bb.abs(d), x)])})
    once = passes.O2()(mod)
    assert passes.O2()(once) is not once
    fixed = passes.fixpoint()(mod)
    assert passes.fixpoint()(fixed) is fixed
    assert [fixed["main"].op(i).name for i in range(fixed["main"].num_nodes)] == ["param"]
