"""EliminateCommonSubexpr: what is merged (and what never is)."""

from __future__ import annotations

import numpy as np
import pytest
from passes_helpers import assert_same_results, ops_of

import irkernel as ik
import passes
from irkernel import ops, transform
from irkernel.testing import random_function, random_inputs


def _cse(mod: ik.IRModule) -> ik.IRModule:
    out = passes.EliminateCommonSubexpr()(mod)
    ik.verify(out)
    return out


def _module(build) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    outs = build(bb)
    return ik.IRModule({"main": bb.finish(outs)})


def test_duplicates_are_merged_and_their_uses_redirected() -> None:
    def build(bb):
        x = bb.param("x", (3,), "float32")
        a, b = bb.exp(x), bb.exp(x)
        return [bb.add(a, bb.negative(b))]
    mod = _module(build)
    res = _cse(mod)
    assert ops_of(res["main"]) == ["param", "exp", "negative", "add"]
    x_in = np.array([0.5, np.nan, -np.inf], np.float32)
    assert_same_results(ik.interpret(mod, x_in), ik.interpret(res, x_in))


def test_equal_subexpressions_collapse_bottom_up_in_one_run() -> None:
    def build(bb):
        x = bb.param("x", (), "int32")
        y = bb.param("y", (), "int32")
        chains = []
        for _ in range(3):
            v = x
            for _ in range(5):
                v = bb.multiply(bb.add(v, y), v)
            chains.append(v)
        return [bb.subtract(chains[0], chains[1]), chains[2]]
    mod = _module(build)
    res = _cse(mod)
    assert res["main"].num_nodes == 2 + 10 + 1
    assert passes.EliminateCommonSubexpr()(res) is res


@pytest.mark.parametrize("op", [o.name for o in ops.BUILTIN_OPS if o.commutative])
def test_commutative_ops_merge_with_operands_in_either_order(op: str) -> None:
    dtype = "bool" if op.startswith("logical_") else "int64"

    def build(bb):
        x = bb.param("x", (2,), dtype)
        y = bb.param("y", (2,), dtype)
        return [bb.call(op, x, y), bb.call(op, y, x), bb.call(op, x, y)]
    res = _cse(_module(build))
    func = res["main"]
    assert func.num_nodes == 3
    assert len(set(func.outputs.tolist())) == 1


@pytest.mark.parametrize("op", ["subtract", "divide", "less", "greater", "power", "matmul"])
def test_non_commutative_ops_keep_operand_order(op: str) -> None:
    def build(bb):
        x = bb.param("x", (2, 2), "float64")
        y = bb.param("y", (2, 2), "float64")
        return [bb.call(op, x, y), bb.call(op, y, x)]
    mod = _module(build)
    assert _cse(mod) is mod


def test_params_are_never_merged() -> None:
    def build(bb):
        x = bb.param("x", (4,), "float32")
        y = bb.param("y", (4,), "float32")  # same type as x
        return [bb.add(bb.exp(x), bb.exp(y))]
    mod = _module(build)
    assert _cse(mod) is mod


def test_equal_constants_are_merged_different_ones_not() -> None:
    def build(bb):
        x = bb.param("x", (), "float64")
        one_a, one_b = bb.const(np.float64(1.0)), bb.const(np.float64(1.0))
        zero, neg_zero = bb.const(np.float64(0.0)), bb.const(np.float64(-0.0))
        one32 = bb.const(np.float32(1.0))
        return [bb.add(bb.add(x, one_a), bb.add(x, one_b)), bb.add(x, zero),
                bb.add(x, neg_zero), bb.astype(one32, dtype="float64")]
    mod = _module(build)
    func = _cse(mod)["main"]
    consts = [i for i in range(func.num_nodes) if func.op(i).name == "const"]
    assert len(consts) == 4  # 1.0, 0.0, -0.0 (different bits) and float32 1.0
    assert ops_of(func).count("add") == 4
    assert_same_results(ik.interpret(mod, np.float64(-0.0)), ik.interpret(func, np.float64(-0.0)))


def test_equal_tensor_constants_are_merged() -> None:
    def build(bb):
        a = bb.const(np.arange(6, dtype=np.int32).reshape(2, 3))
        b = bb.const(np.arange(6, dtype=np.int32).reshape(2, 3))
        c = bb.const(np.arange(6, dtype=np.int32).reshape(3, 2))  # same bytes, other shape
        return [bb.add(a, b), c]
    func = _cse(_module(build))["main"]
    assert ops_of(func) == ["const", "const", "add"]


def test_different_attributes_dtypes_or_shapes_are_not_merged() -> None:
    def build(bb):
        x = bb.param("x", (2, 3), "float32")
        return [bb.call("sum", x, axis=0), bb.call("sum", x, axis=1),
                bb.call("sum", x, axis=0, keepdims=True), bb.astype(x, dtype="int32"),
                bb.astype(x, dtype="int64"), bb.call("reshape", x, shape=(6,)),
                bb.call("reshape", x, shape=(3, 2))]
    mod = _module(build)
    assert _cse(mod) is mod


def test_equal_attributes_are_merged() -> None:
    def build(bb):
        x = bb.param("x", (2, 3), "float32")
        return [bb.call("sum", x, axis=0), bb.call("sum", x, axis=(0,)),
                bb.call("permute_dims", x), bb.call("permute_dims", x, axes=None)]
    func = _cse(_module(build))["main"]
    assert ops_of(func) == ["param", "sum", "permute_dims"]


def test_variadic_ops_merge_on_equal_operand_lists() -> None:
    def build(bb):
        x = bb.param("x", (2,), "float32")
        y = bb.param("y", (2,), "float32")
        c = bb.less(x, y)
        return [bb.call("concat", x, y), bb.call("concat", x, y), bb.call("concat", y, x),
                bb.call("concat", x, y, x), bb.where(c, x, y), bb.where(c, x, y),
                bb.where(c, y, x)]
    func = _cse(_module(build))["main"]
    assert ops_of(func).count("concat") == 3
    assert ops_of(func).count("where") == 2


def test_calls_with_equal_arguments_are_merged_as_pure_graph_functions() -> None:
    helper = ik.GraphBuilder("h", private=True)
    a = helper.param("a", (), "float32")
    h = helper.finish([helper.exp(a)])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float32")
    c1 = bb.call_func("h", x, dtype="float32", shape=())
    c2 = bb.call_func("h", x, dtype="float32", shape=())
    mod = ik.IRModule({"main": bb.finish([bb.add(c1, c2)]), "h": h})
    res = _cse(mod)
    assert ops_of(res["main"]).count("call_func") == 1
    assert_same_results(ik.interpret(mod, np.float32(1)), ik.interpret(res, np.float32(1)))


def test_impure_ops_are_never_merged(impure_op: str) -> None:
    """A registered impure op (say a random draw) must keep every instance."""
    name = impure_op
    def build(bb):
        x = bb.param("x", (), "float32")
        return [bb.add(bb.call(name, x), bb.call(name, x))]
    mod = _module(build)
    assert _cse(mod) is mod


def test_merges_are_reported() -> None:
    def build(bb):
        x = bb.param("x", (), "float32")
        return [bb.add(bb.exp(x), bb.exp(x)), bb.exp(x)]
    with transform.PassContext() as ctx:
        passes.EliminateCommonSubexpr()(_module(build))
    assert ctx.statistics["EliminateCommonSubexpr"]["nodes_merged"] == 2


def test_merging_matches_a_python_reference_on_random_graphs() -> None:
    """Node count after CSE equals a dict-based hash-consing of the same graph."""
    func = random_function(3000, seed=7, shapes="scalar", duplicate_fraction=0.3,
                           const_fraction=0.3)
    res = _cse(ik.IRModule({"main": func}))["main"]
    canon: list[int] = []
    seen: dict[tuple, int] = {}
    for i in range(func.num_nodes):
        opdef = func.op(i)
        if opdef.name == "param":
            canon.append(i)
            continue
        if opdef.name == "const":
            key: tuple = ("const", int(func.a0[i]), func.node_type(i))
        else:
            args = [canon[v] for v in func.operands(i)]
            if opdef.commutative:
                args.sort()
            key = (opdef.name, tuple(args), int(func.attr_id[i]), func.node_type(i))
        canon.append(seen.setdefault(key, i))
    assert res.num_nodes == len(set(canon))
    inputs = random_inputs(func, seed=1)
    assert_same_results(ik.interpret(func, *inputs), ik.interpret(res, *inputs))
