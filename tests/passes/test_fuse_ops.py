"""FuseOps: grouping rules on small readable graphs, results unchanged, scale.

Rules under test (see passes/fuse_ops.py): single-use injective producers fuse into
injective consumers and reductions; an elementwise/broadcast epilogue fuses onto a
reduction or matmul; never two of those in one group; outputs and multi-use nodes
are roots; groups are capped; identical groups share one Primitive function.
"""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import Graph, inputs_for, primitive_groups
from hypothesis import given, settings
from passes_helpers import assert_same_results

import irkernel as ik
import passes
from irkernel import ops, transform
from irkernel.testing import functions_with_inputs, random_function, random_inputs
from passes.fuse_ops import fusion_groups


def _fused(g: Graph, outputs: int | list[int], **kw: int) -> ik.IRModule:
    mod = g.module(outputs)
    out = passes.FuseOps(**kw)(mod)
    ik.verify(out)
    inputs = inputs_for(mod)
    assert_same_results(ik.interpret(mod, *inputs), ik.interpret(out, *inputs), "FuseOps")
    return out


def test_elementwise_chain_is_one_group_called_once() -> None:
    g = Graph()
    x, y = g.param("x"), g.param("y")
    out = _fused(g, g.call("exp", g.call("add", g.call("neg", x), y)))
    assert primitive_groups(out) == [["negative", "add", "exp"]]
    main = out["main"]
    assert main.num_nodes == 3  # x, y, call_func
    assert main.op(2).name == "call_func"
    assert main.node_attrs(2)["callee"] == "fused_negative_add_exp"
    prim = out["fused_negative_add_exp"]
    assert prim.attrs["Primitive"] is True
    assert "global_symbol" not in prim.attrs
    assert prim.param_names == ("p0", "p1")  # external inputs in order of first use


def test_multi_use_producer_and_outputs_are_roots() -> None:
    g = Graph()
    x = g.param("x")
    e = g.call("exp", x)  # two uses: stays a root
    a = g.call("neg", e)
    b = g.call("neg", e)
    n = g.call("neg", a)  # an output and used again: a root
    out = _fused(g, [g.call("add", n, b), n])
    # exp is alone; neg(a)->neg(n) fuse; n is an output so it cannot join add; b joins add.
    assert primitive_groups(out) == [["negative", "negative"], ["negative", "add"]]


def test_injective_producers_fuse_into_a_reduction() -> None:
    g = Graph()
    x = g.param("x")
    out = _fused(g, g.call("rowsum", g.call("exp", g.call("flip", x))))
    assert primitive_groups(out) == [["flip", "exp", "sum"]]


def test_reduction_epilogue_but_not_into_injective_or_second_reduction() -> None:
    g = Graph()
    x = g.param("x")
    r = g.call("rowexp", g.call("rowsum", x))   # sum + elementwise epilogue
    s = g.call("rowsub", x, r)                   # broadcast epilogue joins too
    f = g.call("flip", s)                        # injective: not onto a heavy group
    out = _fused(g, g.call("rowsum", g.call("exp", f)))
    assert primitive_groups(out) == [["sum", "exp", "subtract"], ["flip", "exp", "sum"]]


def test_matmul_epilogue_and_no_prologue() -> None:
    g = Graph()
    x, w, b = g.param("x"), g.param("w", (8, 8)), g.param("b", (8,))
    h = g.call("matmul", g.call("exp", x), w)    # exp cannot fuse into matmul (OEF)
    h = g.call("exp", g.call("bias", h, b))
    out = _fused(g, g.call("matmul", h, w))      # a second matmul: its own kernel
    assert primitive_groups(out) == [["matmul", "add", "exp"]]
    kinds = [out["main"].op(i).name for i in range(out["main"].num_nodes)]
    assert kinds.count("call_tir") == 2
    assert kinds.count("call_func") == 1


def test_opaque_callees_and_other_nodes_never_fuse() -> None:
    g = Graph()
    x = g.param("x")
    c = g.bb.const(np.ones((4, 8), np.float32))
    y = g.call("opaque", g.call("exp", x))       # no op_pattern -> OPAQUE
    out = _fused(g, g.call("add", g.call("exp", y), c))
    assert primitive_groups(out) == [["exp", "add"]]
    assert out["main"].op(int(out["main"].outputs[0])).name == "call_func"


def test_group_size_is_capped() -> None:
    g = Graph()
    v = g.param("x")
    for _ in range(10):
        v = g.call("neg", v)
    out = _fused(g, v, max_group_size=4)
    # 10 = 4 + 4 + 2; the two groups of four are identical and share one function.
    assert [len(m) for m in primitive_groups(out)] == [4, 2]
    assert np.count_nonzero(out["main"].kind == ops.OP_CALL_FUNC) == 3


def test_identical_groups_share_one_primitive_function() -> None:
    g = Graph()
    x, y = g.param("x"), g.param("y")
    a = g.call("exp", g.call("neg", x))
    b = g.call("exp", g.call("neg", y))
    out = _fused(g, [a, b])                       # outputs: two roots, same structure
    assert primitive_groups(out) == [["negative", "exp"]]
    main = out["main"]
    calls = [main.node_attrs(int(o))["callee"] for o in main.outputs]
    assert calls == ["fused_negative_exp", "fused_negative_exp"]


def test_unchanged_module_is_returned_and_skip_optimization_is_honoured() -> None:
    g = Graph()
    x = g.param("x")
    mod = g.module(g.call("exp", x))               # one op: nothing to fuse
    assert passes.FuseOps()(mod) is mod
    g2 = Graph(SkipOptimization=True)
    x = g2.param("x")
    skipped = g2.module(g2.call("exp", g2.call("neg", x)))
    assert passes.FuseOps()(skipped) is skipped


def test_registered_with_opt_level_1_and_checks_arguments() -> None:
    p = transform.get_pass("FuseOps")
    assert p.info.name == "FuseOps"
    assert p.info.opt_level == 1
    with pytest.raises(ValueError, match="max_group_size"):
        passes.FuseOps(max_group_size=1)
    with pytest.raises(TypeError, match="max_group_size"):
        passes.FuseOps(max_group_size=2.5)  # type: ignore[arg-type]


def test_bad_op_pattern_is_a_clear_error() -> None:
    g = Graph()
    x = g.param("x")
    mod = g.module(g.call("exp", g.call("neg", x)))
    bad = mod.with_function("neg", mod["neg"].with_attr("op_pattern", 5))
    with pytest.raises(ik.IRError, match=r"neg.*op_pattern 5"):
        passes.FuseOps()(bad)


def test_kernel_roots_form_trees_of_single_use_edges() -> None:
    """The sweep on raw arrays: a chain a->b->c, then a diamond c -> (d, e) -> e whose
    paths re-join at e: c's group joins e's (TVM's post-dominator rule)."""
    g = Graph()
    x = g.param("x")
    a = g.call("neg", x)
    b = g.call("neg", a)
    c = g.call("add", b, b)                        # one consumer reading b twice: fuses
    d = g.call("neg", c)
    e = g.call("add", c, d)                        # c's consumers d and e both end in e
    mod = g.module(e)
    root, size = fusion_groups(mod["main"], mod)
    assert root.tolist() == [0, e, e, e, e, e]
    assert size[e] == 5


def test_a_multi_use_value_read_outside_the_group_stays_a_root() -> None:
    """c's consumers do not re-join in one group (f reads c too, after e), and a value
    that is also an output must exist: both keep c a root."""
    g = Graph()
    x = g.param("x")
    c = g.call("neg", x)
    d = g.call("neg", c)
    e = g.call("add", c, d)
    f = g.call("exp", c)
    g2 = g.call("add", e, f)
    mod = g.module(g2)
    root, _ = fusion_groups(mod["main"], mod)
    assert root[c] in (c, g2) and root[d] == root[e]
    g = Graph()
    x = g.param("x")
    c = g.call("neg", x)
    e = g.call("add", c, g.call("neg", c))
    mod = g.module([e, c])
    root, _ = fusion_groups(mod["main"], mod)
    assert root[c] == c


def test_sweep_kernel_compiles_one_specialization() -> None:
    from passes.fuse_ops import fuse_groups_kernel

    for seed in range(2):
        passes.FuseOps()(passes.LegalizeOps()(ik.IRModule({"main": random_function(300, seed)})))
    g = Graph()
    x = g.param("x")
    mod = g.module(g.call("exp", g.call("neg", x)))
    passes.FuseOps()(mod)
    assert len(fuse_groups_kernel.signatures) == 1, fuse_groups_kernel.signatures


# ---------------------------------------------------------------------------
# results never change (legalized random graphs, the interpreter as oracle)
# ---------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(case=functions_with_inputs(module=True, shapes="small", special_values=True))
def test_fusion_never_changes_results(case) -> None:
    mod, inputs = case
    legal = passes.LegalizeOps()(mod)
    fused = passes.FuseOps()(legal)
    ik.verify(fused)
    assert_same_results(ik.interpret(legal, *inputs), ik.interpret(fused, *inputs), "FuseOps")
    assert passes.FuseOps()(fused) is fused  # call_func roots are opaque: nothing new fuses


def test_fuses_a_1e5_op_generated_graph() -> None:
    # Its time is measured in bench/bench_scaling.py (no wall-clock asserts in tests).
    func = random_function(100_000, seed=3)
    legal = passes.LegalizeOps()(ik.IRModule({"main": func}))
    fused = passes.FuseOps()(legal)
    assert fused["main"].num_nodes < legal["main"].num_nodes
    small = ik.IRModule({"main": random_function(2000, seed=3)})
    small_legal = passes.LegalizeOps()(small)
    inputs = random_inputs(small_legal, seed=1)
    assert_same_results(ik.interpret(small_legal, *inputs),
                        ik.interpret(passes.FuseOps()(small_legal), *inputs), "FuseOps")


def test_kernels_with_symbolic_shapes_are_not_fused() -> None:
    from irkernel.tir import script as T

    n = T.var("int64")

    @T.prim_func(private=True)
    def neg_any(x: T.Buffer((n,), "float32"), out: T.Buffer((n,), "float32")):
        T.func_attr({"op_name": "negative", "op_pattern": ops.ELEMWISE})
        for i in T.serial(n):
            out[i] = -x[i]

    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    v = bb.call("call_tir", x, callee="neg_any", dtype="float32", shape=(4,))
    v = bb.call("call_tir", v, callee="neg_any", dtype="float32", shape=(4,))
    mod = ik.IRModule({"main": bb.finish([v]), "neg_any": neg_any})
    assert passes.FuseOps()(mod) is mod
