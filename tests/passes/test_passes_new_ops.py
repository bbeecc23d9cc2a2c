"""The graph passes on graphs made of the ops of issue 15: values kept bit for bit.

Random graphs draw from ``GENERATED_OPS`` (the default mix plus the new
elementwise ops and reductions the generators know), in scalar mode (FoldConstant's
compiled scalar path, ``irkernel.ir.ops.scalar``) and with small tensors (its NumPy
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
    elementwise = [op for op in NEW_OPS
                   if ik.ops.get_op(op).pattern in (ik.ops.ELEMWISE, ik.ops.BROADCAST)]
    unary = [op for op in elementwise if ik.ops.get_op(op).arity == 1]
    binary = [op for op in elementwise if ik.ops.get_op(op).arity == 2]
    bb = ik.GraphBuilder("main")
    outs = []
    consts = [bb.const(v) for v in vals]
    for op in unary + binary:
        for a in consts:
            for b in consts if op in binary else [None]:
                try:
                    outs.append(bb.call(op, a) if b is None else bb.call(op, a, b))
                except ValueError as exc:  # only the op's type rule may refuse this dtype
                    assert str(exc).startswith(f"{op}: operand dtype {dtype} not supported"), exc
                    break
    assert outs, f"no new elementwise op takes {dtype}"
    mod = ik.IRModule({"main": bb.finish(outs)})
    folded = passes.FoldConstant()(mod)
    func = folded["main"]
    assert all(int(func.kind[int(o)]) == ik.ops.OP_CONST for o in func.outputs)
    assert_same_results(ik.interpret(mod), ik.interpret(folded), f"FoldConstant {dtype}")


def _movement_graph(duplicate: bool) -> ik.IRModule:
    """Every movement op and arg reduction on a constant and on a parameter (twice each when
    ``duplicate``; the copies are what CSE must merge), plus near-duplicates it must not."""
    bb = ik.GraphBuilder("main")
    c = bb.const(np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5)
    x = bb.param("x", (3, 4), "float32")
    idx = bb.const(np.array([[2], [-1], [9]], np.int64))
    upd = bb.const(np.ones((3, 4), np.float32))
    v = bb.const(np.float32(0.25))
    outs = []
    for base in (c, x):
        for _ in range(2 if duplicate else 1):
            outs += [bb.strided_slice(base, begin=(-1, 0), end=(-9, 9), strides=(-1, 2)),
                     bb.take(base, idx, axis=1),
                     bb.pad(base, v, pad_width=(1, 0, 0, 2), mode="reflect"),
                     bb.scatter_nd(base, idx, upd),
                     bb.argmax(base, axis=1), bb.argmin(base, axis=0, select_last_index=True),
                     bb.min(base, axis=1), bb.prod(base, keepdims=True)]
        outs.append(bb.pad(base, v, pad_width=(1, 0, 0, 2), mode="edge"))  # differs by mode
    return ik.IRModule({"main": bb.finish(outs)})


@pytest.mark.parametrize("name", ALL)
def test_movement_ops_keep_their_values_through_every_pass(name) -> None:
    mod = _movement_graph(duplicate=True)
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    out = make_pass(name)(mod)
    ik.verify(out)
    assert_same_results(ik.interpret(mod, x), ik.interpret(out, x), name)


def test_fold_constant_folds_the_constant_halves() -> None:
    mod = _movement_graph(duplicate=False)
    folded = passes.FoldConstant()(mod)["main"]
    kinds = [ik.ops.get_op(int(folded.kind[int(o)])).name for o in folded.outputs]
    assert kinds[:9] == ["const"] * 9        # every op on the constant
    assert "const" not in kinds[9:]          # nothing on the parameter


def test_cse_merges_equal_movement_nodes_only() -> None:
    mod = _movement_graph(duplicate=True)
    func = passes.EliminateCommonSubexpr()(mod)["main"]
    outs = func.outputs.tolist()
    for base in (0, 17):  # the copies of each op share one node; the edge pad stays apart
        assert outs[base:base + 8] == outs[base + 8:base + 16]
        assert outs[base + 16] not in outs[base:base + 16]


def _nn_graph() -> ik.IRModule:
    """Every NN op on constants (foldable) and on a parameter, each twice (CSE merges the
    copies), plus a conv that differs only by a stride (kept apart)."""
    bb = ik.GraphBuilder("main")
    rng = np.random.default_rng(0)
    c = bb.const(rng.standard_normal((1, 2, 5, 5)).astype(np.float32))
    x = bb.param("x", (1, 2, 5, 5), "float32")
    w = bb.const(rng.standard_normal((4, 1, 3, 3)).astype(np.float32))
    wt = bb.const(rng.standard_normal((2, 3, 2, 2)).astype(np.float32))
    outs = []
    for base in (c, x):
        for _ in range(2):
            outs += [bb.conv(base, w, padding=[1] * 4, groups=2),
                     bb.conv_transpose(base, wt, strides=[2, 2], padding=[0, 1, 1, 0]),
                     bb.max_pool(base, kernel=[2, 2], ceil_mode=True, strides=[2, 2]),
                     bb.avg_pool(base, kernel=[3, 3], padding=[1] * 4, count_include_pad=True),
                     bb.lrn(base, size=3, alpha=0.5)]
        outs.append(bb.conv(base, w, padding=[1] * 4, groups=2, strides=[2, 1]))
    return ik.IRModule({"main": bb.finish(outs)})


@pytest.mark.parametrize("name", ALL)
def test_nn_ops_keep_their_values_through_every_pass(name) -> None:
    mod = _nn_graph()
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)
    out = make_pass(name)(mod)
    ik.verify(out)
    assert_same_results(ik.interpret(mod, x), ik.interpret(out, x), name)


def test_fold_constant_and_cse_on_nn_ops() -> None:
    mod = _nn_graph()
    folded = passes.FoldConstant()(mod)["main"]
    kinds = [ik.ops.get_op(int(folded.kind[int(o)])).name for o in folded.outputs]
    assert kinds[:11] == ["const"] * 11
    assert "const" not in kinds[11:]
    outs = passes.EliminateCommonSubexpr()(mod)["main"].outputs.tolist()
    for base in (0, 11):
        assert outs[base:base + 5] == outs[base + 5:base + 10]
        assert outs[base + 10] not in outs[base:base + 10]
