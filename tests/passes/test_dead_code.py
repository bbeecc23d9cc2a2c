"""DeadCodeElimination: unused nodes inside functions and unreachable functions in the module."""

from __future__ import annotations

import numpy as np
import pytest
from passes_helpers import assert_same_results, ops_of

import irkernel as ik
import passes
from irkernel import transform


def _dce(mod: ik.IRModule, **kw: object) -> ik.IRModule:
    out = passes.DeadCodeElimination(**kw)(mod)  # type: ignore[arg-type]
    if all(isinstance(f, ik.Function) for f in out.functions.values()):
        ik.verify(out)
    return out


def _helper(name: str, callee: str | None = None) -> ik.Function:
    """A private function ``a -> a + a`` (or a call of ``callee`` on it)."""
    bb = ik.GraphBuilder(name, private=True)
    a = bb.param("a", (), "float32")
    out = bb.add(a, a) if callee is None else bb.call_func(callee, a, dtype="float32", shape=())
    return bb.finish([out])


def _caller(name: str = "main", callees: tuple[str, ...] = (), private: bool = False,
            dead_callees: tuple[str, ...] = ()) -> ik.Function:
    bb = ik.GraphBuilder(name, private=private)
    x = bb.param("x", (), "float32")
    v = x
    for c in callees:
        v = bb.call_func(c, v, dtype="float32", shape=())
    for c in dead_callees:
        bb.call_func(c, x, dtype="float32", shape=())
    return bb.finish([v])


# ---------------------------------------------------------------------------
# nodes
# ---------------------------------------------------------------------------

def test_unused_nodes_are_removed_and_the_order_kept() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    dead = bb.exp(x)
    bb.add(dead, x)  # dead too (reads a dead node)
    live = bb.negative(x)
    bb.sqrt(live)  # dead, reads a live node
    out = bb.multiply(live, bb.const(np.float32(2)))
    mod = ik.IRModule({"main": bb.finish([out])})
    res = _dce(mod)
    assert ops_of(res["main"]) == ["param", "negative", "const", "multiply"]
    x_in = np.array([1.0, np.nan, -0.0], np.float32)
    assert_same_results(ik.interpret(mod, x_in), ik.interpret(res, x_in))


def test_params_are_never_removed() -> None:
    bb = ik.GraphBuilder("main")
    unused = bb.param("unused", (2,), "int32")
    bb.negative(unused)  # dead
    x = bb.param("x", (), "float64")
    also_unused = bb.param("also_unused", (), "bool")
    mod = ik.IRModule({"main": bb.finish([bb.exp(x)])})
    func = _dce(mod)["main"]
    assert func.param_names == ("unused", "x", "also_unused")
    assert ops_of(func) == ["param", "param", "param", "exp"]
    assert [func.node_type(int(p)) for p in func.params] == [
        ("int32", (2,)), ("float64", ()), ("bool", ())]
    assert [int(func.a0[p]) for p in func.params] == [0, 1, 2]  # positions unchanged
    assert (unused, also_unused) == (0, 3)  # the dead negative sat between them
    assert func.params.tolist() == [0, 1, 2] and func.outputs.tolist() == [3]
    args = (np.zeros(2, np.int32), np.float64(0.5), np.bool_(True))
    assert_same_results(ik.interpret(mod, *args), ik.interpret(func, *args))


def test_outputs_may_be_params_consts_or_repeated() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int32")
    c = bb.const(np.int32(4))
    bb.add(x, c)  # dead
    y = bb.multiply(x, x)
    mod = ik.IRModule({"main": bb.finish([y, x, c, y])})
    res = _dce(mod)
    assert ops_of(res["main"]) == ["param", "const", "multiply"]
    assert_same_results(ik.interpret(mod, np.int32(3)), ik.interpret(res, np.int32(3)))


def test_variadic_operands_keep_their_inputs_alive() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "float32")
    a, b = bb.exp(x), bb.log(x)
    bb.tanh(x)  # dead
    cond = bb.less(a, b)
    mod = ik.IRModule({"main": bb.finish([bb.call("concat", bb.where(cond, a, b), x)])})
    res = _dce(mod)
    assert "tanh" not in ops_of(res["main"])
    assert res["main"].num_nodes == mod["main"].num_nodes - 1


def test_unused_impure_nodes_are_kept(impure_op: str) -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float32")
    effect = bb.call(impure_op, x)  # unused, but it has an effect
    bb.exp(effect)  # dead: pure and unused
    mod = ik.IRModule({"main": bb.finish([bb.negative(x)])})
    assert ops_of(_dce(mod)["main"]) == ["param", impure_op, "negative"]


def test_nothing_dead_returns_the_input() -> None:
    mod = ik.IRModule({"main": _caller(callees=("h",)), "h": _helper("h")})
    assert _dce(mod) is mod


# ---------------------------------------------------------------------------
# functions
# ---------------------------------------------------------------------------

def test_unreachable_private_functions_are_removed() -> None:
    mod = ik.IRModule({"main": _caller(callees=("h",)), "h": _helper("h"),
                       "orphan": _helper("orphan")})
    res = _dce(mod)
    assert set(res.functions) == {"main", "h"}
    assert res["main"] is mod["main"] and res["h"] is mod["h"]


def test_entries_default_to_every_global_symbol_function() -> None:
    mod = ik.IRModule({"main": _caller(callees=("h",)), "api": _caller("api", callees=("g",)),
                       "h": _helper("h"), "g": _helper("g"), "unused": _helper("unused")})
    assert set(_dce(mod).functions) == {"main", "api", "h", "g"}


def test_reachability_is_transitive_and_tolerates_cycles_in_the_call_graph() -> None:
    mod = ik.IRModule({"main": _caller(callees=("a",)), "a": _helper("a", callee="b"),
                       "b": _helper("b", callee="c"), "c": _helper("c"),
                       "d": _helper("d", callee="e"), "e": _helper("e", callee="d")})
    assert set(_dce(mod).functions) == {"main", "a", "b", "c"}


def test_entry_functions_argument_sets_the_roots() -> None:
    mod = ik.IRModule({"main": _caller(callees=("h",)), "api": _caller("api", callees=("g",)),
                       "h": _helper("h"), "g": _helper("g")})
    assert set(_dce(mod, entry_functions=["main"]).functions) == {"main", "h"}
    assert set(_dce(mod, entry_functions=("api",)).functions) == {"api", "g"}
    private_root = ik.IRModule({"main": _caller(callees=("h",)), "h": _helper("h", callee="g"),
                                "g": _helper("g")})
    assert set(_dce(private_root, entry_functions=["h"]).functions) == {"h", "g"}


def test_functions_called_only_from_dead_nodes_are_removed() -> None:
    mod = ik.IRModule({"main": _caller(callees=("h",), dead_callees=("g",)),
                       "h": _helper("h"), "g": _helper("g")})
    res = _dce(mod)
    assert set(res.functions) == {"main", "h"}
    assert "call_func" in ops_of(res["main"])
    assert res["main"].num_nodes == mod["main"].num_nodes - 1


def test_dead_nodes_of_called_functions_are_removed_too() -> None:
    bb = ik.GraphBuilder("h", private=True)
    a = bb.param("a", (), "float32")
    bb.exp(a)  # dead
    mod = ik.IRModule({"main": _caller(callees=("h",)), "h": bb.finish([bb.negative(a)])})
    res = _dce(mod)
    assert ops_of(res["h"]) == ["param", "negative"]
    assert_same_results(ik.interpret(mod, np.float32(2)), ik.interpret(res, np.float32(2)))


class _FakePrimFunc:
    """Stands in for a tir.PrimFunc (the marker attribute and ``callees``)."""

    _irkernel_prim_func = True
    attrs: dict[str, object] = {}

    def callees(self) -> tuple[str, ...]:
        return ()


def test_call_tir_edges_keep_prim_funcs_alive() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    out = bb.call("call_tir", x, callee="kernel", dtype="float32", shape=(4,))
    mod = ik.IRModule({"main": bb.finish([out]), "kernel": _FakePrimFunc(),
                       "unused_kernel": _FakePrimFunc()})
    res = passes.DeadCodeElimination()(mod)
    assert set(res.functions) == {"main", "kernel"}


def test_skip_optimization_keeps_dead_nodes_but_not_unreachable_functions() -> None:
    bb = ik.GraphBuilder("main", attrs={"SkipOptimization": True})
    x = bb.param("x", (), "float32")
    bb.exp(x)  # dead, but the function asks not to be optimized
    skipped = bb.finish([bb.call_func("h", x, dtype="float32", shape=())])
    mod = ik.IRModule({"main": skipped, "h": _helper("h"), "orphan": _helper("orphan")})
    res = _dce(mod)
    assert res["main"] is skipped
    assert set(res.functions) == {"main", "h"}


def test_bad_entry_functions_are_clear_errors() -> None:
    with pytest.raises(TypeError, match="entry_functions"):
        passes.DeadCodeElimination(entry_functions="main")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="entry_functions"):
        passes.DeadCodeElimination(entry_functions=[1])  # type: ignore[list-item]
    mod = ik.IRModule({"main": _caller()})
    with pytest.raises(ValueError, match="nope"):
        passes.DeadCodeElimination(entry_functions=["nope"])(mod)


def test_entry_functions_is_a_pipeline_option() -> None:
    mod = ik.IRModule({"main": _caller(), "api": _caller("api")})
    p = transform.get_pass("DeadCodeElimination", entry_functions=["api"])
    assert set(p(mod).functions) == {"api"}
    assert set(transform.parse_pipeline(str(p))(mod).functions) == {"api"}


def test_removed_counts_are_reported() -> None:
    mod = ik.IRModule({"main": _caller(callees=("h",), dead_callees=("g", "g")),
                       "h": _helper("h"), "g": _helper("g")})
    with transform.PassContext() as ctx:
        passes.DeadCodeElimination()(mod)
    stats = ctx.statistics["DeadCodeElimination"]
    assert stats["nodes_removed"] == 2
    assert stats["functions_removed"] == 1
