"""Tests of irkernel.testing: the seeded random-graph generator and its strategies."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
from irkernel import ops
from irkernel.testing import (
    DEFAULT_OPS,
    GraphSpec,
    functions,
    functions_with_inputs,
    graph_fractions,
    graph_specs,
    modules,
    random_function,
    random_inputs,
    random_module,
)

FRACTIONS = ("const_fraction", "const_subgraph_fraction", "dead_fraction", "duplicate_fraction")


def op_names(func: ik.Function) -> set[str]:
    return {ops.get_op(int(k)).name for k in np.unique(func.kind)}


# -- spec ---------------------------------------------------------------------

@pytest.mark.parametrize(("field", "value"), [
    ("n_nodes", 0), ("n_nodes", 2.5), ("seed", -1), ("max_rank", -1), ("max_dim", 0),
    ("n_params", -2), ("n_outputs", 0), ("const_fraction", 1.5), ("dead_fraction", -0.1),
    ("duplicate_fraction", float("nan")), ("const_subgraph_fraction", "0.1"),
    ("shapes", "big"), ("dtypes", ()), ("dtypes", ("float8",)), ("dtypes", "float32"),
    ("ops", ("frobnicate",)), ("ops", ("param",)), ("ops", {"add": -1.0}), ("ops", {"add": 0}),
    ("ops", "add"),
])
def test_bad_field_is_a_value_error_naming_it(field, value):
    with pytest.raises(ValueError, match=field):
        GraphSpec(**{"n_nodes": 10, field: value})


def test_const_subgraphs_need_constants():
    with pytest.raises(ValueError, match="const_subgraph_fraction"):
        GraphSpec(10, const_fraction=0.0, const_subgraph_fraction=0.1)
    GraphSpec(10, const_fraction=0.0, const_subgraph_fraction=0.0)


def test_ops_normalized_to_weights_in_table_order():
    spec = GraphSpec(10, ops=("multiply", "add", "add"))
    assert spec.ops == (("add", 2.0), ("multiply", 1.0))
    assert GraphSpec(10, ops={"exp": 3}).ops == (("exp", 3.0),)
    assert GraphSpec(10).ops == tuple((name, 1.0) for name in DEFAULT_OPS)
    assert "call_func" not in DEFAULT_OPS
    assert "param" not in DEFAULT_OPS
    assert spec == GraphSpec(10, ops={"add": 2, "multiply": 1})
    hash(spec)


def test_random_function_arguments():
    spec = GraphSpec(50, seed=4)
    assert ik.structural_equal(random_function(spec), random_function(50, seed=4))
    assert ik.structural_equal(random_function(spec, seed=5), random_function(50, seed=5))
    assert random_function(spec, n_outputs=2).outputs.shape == (2,)
    with pytest.raises(TypeError, match="colour"):
        random_function(10, colour="red")
    with pytest.raises(TypeError):
        random_function("10")


def test_no_applicable_op_is_a_value_error():
    with pytest.raises(ValueError, match="ops"):
        random_function(20, ops=("exp",), dtypes=("int32",))
    with pytest.raises(ValueError, match="ops"):
        random_function(20, ops=("exp",), dtypes=("bool",), shapes="small")


# -- determinism and size ------------------------------------------------------

@pytest.mark.parametrize("shapes", ["scalar", "small"])
def test_same_seed_same_graph(shapes):
    a = random_function(400, seed=11, shapes=shapes)
    b = random_function(400, seed=11, shapes=shapes)
    c = random_function(400, seed=12, shapes=shapes)
    assert ik.structural_equal(a, b)
    assert ik.structural_hash(a) == ik.structural_hash(b) != ik.structural_hash(c)
    m1 = random_module(200, seed=3, shapes=shapes, call_funcs=True)
    m2 = random_module(200, seed=3, shapes=shapes, call_funcs=True)
    assert ik.structural_equal(m1, m2)


def test_determinism_across_processes():
    code = ("from irkernel.testing import random_function; import irkernel as ik; "
            "print(ik.structural_hash(random_function(300, seed=9)), "
            "ik.structural_hash(random_function(100, seed=9, shapes='small')))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": seed, **_env()}).stdout
            for seed in ("1", "2")}
    assert len(outs) == 1


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}


@pytest.mark.parametrize("shapes", ["scalar", "small"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 40, 257])
def test_exact_node_count_and_valid(shapes, n):
    for seed in range(3):
        func = random_function(n, seed=seed, shapes=shapes)
        assert func.num_nodes == n
        ik.verify(func)


# -- fields honoured -----------------------------------------------------------

@pytest.mark.parametrize("fracs", [
    {},
    {"const_fraction": 0.35, "const_subgraph_fraction": 0.25, "dead_fraction": 0.3,
     "duplicate_fraction": 0.05},
    {"const_fraction": 0.05, "const_subgraph_fraction": 0.0, "dead_fraction": 0.0,
     "duplicate_fraction": 0.3},
])
def test_scalar_fractions_match_on_1e4_nodes(fracs):
    spec = GraphSpec(10_000, seed=1, **fracs)
    func = random_function(spec)
    ik.verify(func)
    got = graph_fractions(func)
    for name in FRACTIONS:
        assert got[name] == pytest.approx(getattr(spec, name), abs=0.012), name
    assert len(func.outputs) == spec.n_outputs
    if spec.dead_fraction == 0.0:
        assert got["dead_fraction"] == 0.0


def test_small_fractions_match():
    spec = GraphSpec(2_000, seed=2, shapes="small", dead_fraction=0.2, duplicate_fraction=0.15,
                     const_fraction=0.25, const_subgraph_fraction=0.12, n_outputs=2)
    func = random_function(spec)
    ik.verify(func)
    got = graph_fractions(func)
    for name in FRACTIONS:
        assert got[name] == pytest.approx(getattr(spec, name), abs=0.03), name
    assert len(func.outputs) == 2


@pytest.mark.parametrize("shapes", ["scalar", "small"])
def test_dtypes_ops_and_params_restricted(shapes):
    func = random_function(1500, seed=3, shapes=shapes, dtypes=("float64", "bool"),
                           ops={"add": 2.0, "less": 1.0, "where": 1.0, "exp": 1.0}, n_params=3)
    ik.verify(func)
    assert set(np.unique(func.dtype).tolist()) <= {ik.DTYPE_NAMES.index("float64"),
                                                   ik.DTYPE_NAMES.index("bool")}
    assert op_names(func) <= {"param", "const", "add", "less", "where", "exp"}
    assert {"add", "less", "where", "exp"} <= op_names(func)
    assert len(func.params) == 3
    assert func.param_names == ("p0", "p1", "p2")


def test_scalar_mode_is_all_scalars_and_mix_follows_weights():
    func = random_function(20_000, seed=5, ops={"add": 3.0, "multiply": 1.0},
                           dtypes=("int32",), duplicate_fraction=0.0)
    assert np.all(func.shape_id == 0)
    assert func.shapes.shapes == ((),)
    counts = Counter(ops.get_op(int(k)).name for k in func.kind)
    assert counts["add"] / counts["multiply"] == pytest.approx(3.0, rel=0.15)
    func = random_function(3000, seed=6)
    assert np.all(func.shape_id == 0)
    assert op_names(func) == set(DEFAULT_OPS) - {"matmul", "concat"} | {"param", "const"}


def test_small_mode_shapes_bounded_and_every_op_covered():
    seen: set[str] = set()
    for seed in range(3):
        func = random_function(1500, seed=seed, shapes="small", max_rank=3, max_dim=4)
        ik.verify(func)
        shapes = [func.shapes[int(s)] for s in np.unique(func.shape_id)]
        assert all(len(s) <= 3 and all(1 <= d <= 4 for d in s) for s in shapes)
        assert any(len(s) == 3 for s in shapes)
        assert () in shapes
        seen |= op_names(func)
        attrs = [func.node_attrs(i) for i in range(func.num_nodes)]
        assert any(a.get("keepdims") for a in attrs)
        assert any(-1 in (a.get("shape") or ()) for a in attrs)
    assert seen == set(DEFAULT_OPS) | {"param", "const"}
    flat = random_function(300, seed=1, shapes="small", max_rank=0)
    assert flat.shapes.shapes == ((),)


def test_dead_nodes_are_unreachable_and_outputs_exact():
    func = random_function(5000, seed=8, dead_fraction=0.25, n_outputs=5)
    assert len(func.outputs) == 5 == len(set(func.outputs.tolist()))
    assert graph_fractions(func)["dead_fraction"] == pytest.approx(0.25, abs=0.01)


def test_modules_call_private_helpers():
    for shapes in ("scalar", "small"):
        mod = random_module(400, seed=1, shapes=shapes, call_funcs=True)
        ik.verify(mod)
        main = mod["main"]
        assert main.attrs["global_symbol"] == "main"
        helpers = [name for name in mod if name != "main"]
        assert helpers
        assert all("global_symbol" not in mod[h].attrs for h in helpers)
        assert np.any(main.kind == ops.OP_CALL_FUNC)
        out = ik.interpret(mod, *random_inputs(mod, seed=1))
        assert len(out) == len(main.outputs)
    plain = random_module(100, seed=1)
    assert list(plain) == ["main"]


def test_bulk_scale_bytes_per_node():
    func = random_function(1_000_000, seed=2)
    assert func.num_nodes == 1_000_000
    assert func.nbytes / func.num_nodes <= 40
    ik.verify(func)


# -- inputs ----------------------------------------------------------------------

def test_random_inputs_match_params():
    func = random_function(300, seed=4, shapes="small")
    for special in (True, False):
        arrays = random_inputs(func, seed=1, special_values=special)
        assert len(arrays) == len(func.params)
        for arr, p in zip(arrays, func.params, strict=True):
            dtype, shape = func.node_type(int(p))
            assert arr.dtype == np.dtype(dtype)
            assert arr.shape == shape
            assert arr.flags.c_contiguous
    big = GraphSpec(3, n_params=3, dtypes=("float32", "int64", "bool"), shapes="small",
                    max_rank=1, max_dim=4)
    func = random_function(big)
    many = [random_inputs(func, seed=s) for s in range(200)]
    floats = np.concatenate([m[0].ravel() for m in many])
    assert np.isnan(floats).any()
    assert np.isinf(floats).any()
    assert (np.signbit(floats) & (floats == 0)).any()
    plain = np.concatenate([random_inputs(func, seed=s, special_values=False)[0].ravel()
                            for s in range(50)])
    assert np.isfinite(plain).all()
    ints = np.concatenate([m[1].ravel() for m in many])
    assert ints.dtype == np.int64
    assert (np.abs(ints) <= 50).mean() > 0.8
    again = zip(random_inputs(func, 7), random_inputs(func, 7), strict=True)
    assert all(np.array_equal(a, b) for a, b in again)
    with pytest.raises(TypeError):
        random_inputs("main")


# -- strategies --------------------------------------------------------------------

@settings(max_examples=40)
@given(functions())
def test_generated_functions_verify(func):
    ik.verify(func)


@settings(max_examples=25)
@given(modules())
def test_generated_modules_verify(mod):
    ik.verify(mod)


@settings(max_examples=25)
@given(functions_with_inputs(n_nodes=st.integers(1, 60)))
def test_generated_functions_interpret_to_declared_types(pair):
    func, inputs = pair
    outs = ik.interpret(ik.IRModule({"main": func}), *inputs)
    for out, node in zip(outs, func.outputs, strict=True):
        dtype, shape = func.node_type(int(node))
        assert out.dtype == ik.ids.NUMPY_DTYPES[ik.ids.dtype_code(dtype)]  # bfloat16: uint16
        assert out.shape == shape


@settings(max_examples=30)
@given(graph_specs(shapes="scalar", n_nodes=st.integers(1, 2000)))
def test_spec_strategy_fields_honoured(spec):
    func = random_function(spec)
    assert func.num_nodes == spec.n_nodes
    assert {ik.DTYPE_NAMES[c] for c in np.unique(func.dtype)} <= set(spec.dtypes)
    assert op_names(func) <= {name for name, _ in spec.ops} | {"param", "const"}
    assert len(func.outputs) >= spec.n_outputs


def test_strategy_overrides_and_module_pairs():
    @settings(max_examples=10)
    @given(graph_specs(n_nodes=7, dtypes=("int32",), shapes=st.just("small")))
    def check(spec):
        assert spec.n_nodes == 7
        assert spec.dtypes == ("int32",)
        assert spec.shapes == "small"

    check()

    @settings(max_examples=5)
    @given(functions_with_inputs(module=True, special_values=False, n_nodes=20))
    def check_module(pair):
        mod, inputs = pair
        assert isinstance(mod, ik.IRModule)
        assert all(np.isfinite(x).all() for x in inputs if x.dtype.kind == "f")

    check_module()
    with pytest.raises(TypeError, match="bogus"):
        graph_specs(bogus=1)


def test_import_without_hypothesis():
    code = ("import sys; sys.modules['hypothesis'] = None; import irkernel.testing as t; "
            "t.random_function(30)\n"
            "try:\n    t.graph_specs()\nexcept ImportError as e:\n    print('ok', e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("ok")
