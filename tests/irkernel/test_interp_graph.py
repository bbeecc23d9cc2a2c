"""ik.interpret on whole graphs: constants, outputs, modules, call_func/call_tir, inputs, scale."""

from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import ALL, check, sample

import irkernel as ik
from irkernel import ops

# -- graphs, constants, call_func -------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_constants_of_every_dtype(dtype):
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), dtype)
    scalar = sample(dtype, (), 40)
    arr = sample(dtype, (3,), 41)
    c0, c1 = bb.const(scalar), bb.const(arr)
    f = bb.finish([bb.where(bb.const(np.array([True, False, True])), c0, c1), x, c1])
    out = ik.interpret(f, arr)
    check(out[0], np.where([True, False, True], scalar, arr), dtype)
    check(out[1], arr, dtype)
    check(out[2], arr, dtype)


def test_multi_output_results_are_fresh_arrays():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float64")
    y = bb.exp(x)
    f = bb.finish([x, y, x, bb.reshape(x, shape=(3, 1))])
    inp = np.array([0.0, 1.0, 2.0])
    a, b, c, d = ik.interpret(f, inp)
    assert a is not inp
    assert not np.shares_memory(a, inp)
    assert not np.shares_memory(a, c)
    assert not np.shares_memory(d, inp)
    a[:] = 7.0
    d[:] = 9.0
    np.testing.assert_array_equal(inp, [0.0, 1.0, 2.0])
    check(c, inp, "float64")
    check(b, np.exp(inp), "float64", exact=False)


def test_interpret_accepts_a_module_and_entry():
    bb = ik.GraphBuilder("other")
    x = bb.param("x", (), "int64")
    other = bb.finish([bb.add(x, x)])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int64")
    main = bb.finish([bb.negative(x)])
    mod = ik.IRModule({"main": main, "other": other})
    check(ik.interpret(mod, np.int64(3))[0], -3, "int64")
    check(ik.interpret(mod, np.int64(3), entry="other")[0], 6, "int64")
    with pytest.raises(ValueError, match="no function 'nope'"):
        ik.interpret(mod, np.int64(3), entry="nope")
    with pytest.raises(TypeError, match="expected an IRModule or Function"):
        ik.interpret("main", np.int64(3))


def _call_module(n_args):
    hb = ik.GraphBuilder("helper", private=True)
    ps = [hb.param(f"a{i}", (3,), "float32") for i in range(n_args)]
    acc = ps[0]
    for p in ps[1:]:
        acc = hb.multiply(acc, p)
    helper = hb.finish([hb.add(acc, hb.const(np.float32(1)))])
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"x{i}", (3,), "float32") for i in range(n_args)]
    r = bb.call_func("helper", *xs, dtype="float32", shape=(3,))
    r2 = bb.call_func("helper", *([r] * n_args), dtype="float32", shape=(3,))
    return ik.IRModule({"main": bb.finish([r2]), "helper": helper})


@pytest.mark.parametrize("n_args", [1, 2, 4])
def test_call_func_runs_the_callee(n_args):
    mod = _call_module(n_args)
    ik.verify(mod)
    xs = [np.arange(3, dtype=np.float32) + i for i in range(n_args)]
    r = np.prod(xs, axis=0) + np.float32(1)
    expected = r**n_args + np.float32(1)
    check(ik.interpret(mod, *xs)[0], expected, "float32", exact=False)


def test_call_func_needs_a_module():
    mod = _call_module(1)
    with pytest.raises(ik.IRError, match=r"main: node 1 \(call_func\): callee 'helper'"):
        ik.interpret(mod["main"], np.zeros(3, np.float32))


def test_call_func_recursion_is_an_ir_error_not_a_crash():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int32")
    mod = ik.IRModule({"main": bb.finish([bb.call_func("main", x, dtype="int32", shape=())])})
    with pytest.raises(ik.IRError, match=r"interpret: main: .*closing the recursive cycle"):
        ik.interpret(mod, np.int32(1))


def test_call_tir_needs_a_prim_func_callee():
    # call_tir runs its PrimFunc with tir.interpret (tests/passes/test_legalize_ops.py)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "float32")
    f = bb.finish([bb.call_tir(x, callee="k", dtype="float32", shape=(2,))])
    with pytest.raises(ik.IRError, match=r"main: node 1 \(call_tir\): callee 'k' is not a "
                                         r"PrimFunc"):
        ik.interpret(f, np.zeros(2, np.float32))


# -- input checking -------------------------------------------------------------

def _two_params():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), "float32")
    y = bb.param("y", (3,), "int32")
    return bb.finish([bb.add(x, bb.astype(y, dtype="float32"))])


def test_wrong_input_count_names_the_parameters():
    f = _two_params()
    with pytest.raises(TypeError, match=r"main takes 2 inputs \(x, y\), got 1"):
        ik.interpret(f, np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="got 3"):
        ik.interpret(f, np.zeros((2, 3), np.float32), np.zeros(3, np.int32), 1)


def test_wrong_input_dtype_names_the_parameter():
    f = _two_params()
    with pytest.raises(TypeError, match=r"input 1 \('y'\) must have dtype int32, got int64"):
        ik.interpret(f, np.zeros((2, 3), np.float32), np.zeros(3, np.int64))
    with pytest.raises(TypeError, match=r"input 0 \('x'\) must have dtype float32, got float64"):
        ik.interpret(f, np.zeros((2, 3)), np.zeros(3, np.int32))


def test_wrong_input_shape_names_the_parameter():
    f = _two_params()
    with pytest.raises(ValueError, match=r"input 0 \('x'\) must have shape \(2, 3\), got \(3, 2\)"):
        ik.interpret(f, np.zeros((3, 2), np.float32), np.zeros(3, np.int32))


def test_inputs_may_be_array_likes_of_the_right_dtype():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "float64")
    f = bb.finish([bb.negative(x)])
    check(ik.interpret(f, [1.0, 2.0])[0], [-1.0, -2.0], "float64")


def test_interpret_does_not_modify_inputs():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    f = bb.finish([bb.relu(bb.negative(x)), bb.reshape(x, shape=(2, 2))])
    inp = np.array([1.0, -2.0, 3.0, -4.0], np.float32)
    keep = inp.copy()
    out = ik.interpret(f, inp)
    out[1][0, 0] = 100.0
    np.testing.assert_array_equal(inp, keep)


# -- scale ----------------------------------------------------------------------

@pytest.mark.slow
def test_a_million_node_chain_interprets():
    n = 1_000_000
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float64")
    one = bb.const(np.float64(1.0))
    start = len(bb)
    kind = np.full(n, ops.OP_ADD, np.int16)
    a0 = np.arange(start - 1, start + n - 1, dtype=np.int32)
    a0[0] = x
    a1 = np.full(n, one, np.int32)
    ids = bb.add_nodes(kind, a0, a1)
    f = bb.finish([int(ids[-1])])
    assert f.num_nodes == n + 2
    (out,) = ik.interpret(f, np.float64(0.5))  # timed in bench/bench_scaling.py
    check(out, 0.5 + n, "float64")
