"""FuseTIR: Primitive functions become one PrimFunc; chains become one loop nest.

Checked: results equal the unfused module's (bit for bit: inlining keeps every
operation and its dtype), the shape of the fused loops (one nest, no scratch, for
an elementwise chain and for a reduction/matmul epilogue), dedup, naming and
attributes, clear errors, and random legalized graphs through the whole chain.
"""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import Graph, inputs_for
from hypothesis import given, settings
from passes_helpers import assert_same_results

import irkernel as ik
import passes
from irkernel import ops, tir, transform
from irkernel.testing import functions_with_inputs, random_function, random_inputs
from passes import fuse_tir


def _lowered(mod: ik.IRModule) -> ik.IRModule:
    fused = passes.FuseOps()(mod)
    out = passes.FuseTIR()(fused)
    ik.verify(out)
    assert not any(isinstance(f, ik.Function) and f.attrs.get("Primitive")
                   for f in out.functions.values())
    inputs = inputs_for(mod)
    assert_same_results(ik.interpret(mod, *inputs), ik.interpret(out, *inputs), "FuseTIR")
    return out


def _fused_funcs(mod: ik.IRModule) -> dict[str, tir.PrimFunc]:
    return {k: f for k, f in mod.functions.items()
            if isinstance(f, tir.PrimFunc) and str(f.attrs.get("op_name", "")).startswith("fused_")}


def _is_single_nest(body: tir.Stmt, depth: int) -> bool:
    for _ in range(depth):
        if not isinstance(body, tir.For):
            return False
        body = body.body
    return isinstance(body, tir.BufferStore)


def _allocations(body: tir.Stmt) -> list[tir.Allocate]:
    return [n for n in tir.post_order(body) if isinstance(n, tir.Allocate)]


def test_elementwise_chain_becomes_one_loop_nest() -> None:
    g = Graph()
    x, y, b = g.param("x"), g.param("y"), g.param("b", (8,))
    v = g.call("exp", g.call("add", g.call("neg", x), g.call("flip", y)))
    out = _lowered(g.module(g.call("bias", v, b)))
    (name, pf), = _fused_funcs(out).items()
    assert name == "fused_negative_flip_add_exp_add"
    assert pf.attrs["op_name"] == name
    assert pf.attrs["op_pattern"] == ops.INJECTIVE
    assert "global_symbol" not in pf.attrs
    assert [p.name for p in pf.params] == ["p0", "p1", "p2", "out"]
    assert _is_single_nest(pf.body, 2)
    assert not _allocations(pf.body)
    main = out["main"]
    assert main.op(int(main.outputs[0])).name == "call_tir"
    assert main.node_attrs(int(main.outputs[0]))["callee"] == name


def test_reduction_epilogue_is_applied_inside_the_reduction_nest() -> None:
    g = Graph()
    x = g.param("x")
    out = _lowered(g.module(g.call("rowexp", g.call("rowsum", g.call("exp", x)))))
    (pf,) = _fused_funcs(out).values()
    assert pf.attrs["op_pattern"] == ops.REDUCE
    assert not _allocations(pf.body)
    assert isinstance(pf.body, tir.For)              # one nest over the output axis
    last = pf.body.body.stmts[-1]
    assert isinstance(last, tir.BufferStore)
    assert "exp" in tir.printer.expr_text(last.value)


def test_broadcast_epilogue_of_a_reduction_keeps_a_small_scratch() -> None:
    g = Graph()
    x = g.param("x")
    out = _lowered(g.module(g.call("rowsub", x, g.call("rowsum", x))))
    (pf,) = _fused_funcs(out).values()
    (alloc,) = _allocations(pf.body)
    assert [int(s.value) for s in alloc.buffer.shape] == [4]   # the row sums, not [4, 8]


def test_scheduled_matmul_writes_the_output_and_the_epilogue_runs_in_place() -> None:
    g = Graph()
    x, w, b = g.param("x"), g.param("w", (8, 8)), g.param("b", (8,))
    out = _lowered(g.module(g.call("exp", g.call("bias", g.call("matmul", x, w), b))))
    (pf,) = _fused_funcs(out).values()
    assert pf.attrs["op_pattern"] == ops.OUT_EWISE_FUSABLE
    assert not _allocations(pf.body)                 # no [4, 8] scratch for the product
    assert isinstance(pf.body, tir.SeqStmt)
    epilogue = pf.body.stmts[-1]
    assert _is_single_nest(epilogue, 2)
    text = tir.printer.expr_text(epilogue.body.body.value)
    assert "out[" in text
    assert "p2[" in text


def test_matmul_storing_a_tile_gets_the_epilogue_in_its_store() -> None:
    g = Graph()
    x, w, b = g.param("x"), g.param("w", (8, 8)), g.param("b", (8,))
    out = _lowered(g.module(g.call("exp", g.call("bias", g.call("matmul_acc", x, w), b))))
    (pf,) = _fused_funcs(out).values()
    stores = [n for n in tir.post_order(pf.body)
              if isinstance(n, tir.BufferStore) and n.buffer.name == "out"]
    assert len(stores) == 1                          # no second pass over the output
    assert isinstance(stores[0].value, tir.Let)      # let v = acc[j] in exp(v + p2[j])
    assert isinstance(pf.body, tir.For)              # the matmul's own nest, nothing after it


def test_identical_groups_share_one_prim_func_and_unchanged_modules_are_returned() -> None:
    g = Graph()
    x, y = g.param("x"), g.param("y")
    mod = g.module([g.call("exp", g.call("neg", x)), g.call("exp", g.call("neg", y))])
    out = _lowered(mod)
    assert list(_fused_funcs(out)) == ["fused_negative_exp"]
    assert passes.FuseTIR()(mod) is mod              # no Primitive functions
    assert passes.FuseTIR()(out) is out


def test_deep_chains_materialize_instead_of_exceeding_the_tree_depth(monkeypatch) -> None:
    monkeypatch.setattr(fuse_tir, "INLINE_DEPTH", 4)
    g = Graph()
    v = g.param("x")
    for _ in range(12):
        v = g.call("exp", g.call("neg", v))
    out = _lowered(g.module(v))
    (pf,) = _fused_funcs(out).values()
    assert _allocations(pf.body)                     # some values went through scratch


def test_long_legalized_chain_fuses_and_verifies() -> None:
    bb = ik.GraphBuilder("main")
    v = x = bb.param("x", (16,), "float32")
    for k in range(60):
        v = bb.sigmoid(v) if k % 3 == 0 else bb.add(v, x) if k % 3 == 1 else bb.tanh(v)
    mod = passes.LegalizeOps()(ik.IRModule({"main": bb.finish([v])}))
    out = passes.FuseTIR()(passes.FuseOps()(mod))
    ik.verify(out)
    data = np.linspace(-2, 2, 16, dtype=np.float32)
    assert_same_results(ik.interpret(mod, data), ik.interpret(out, data), "FuseTIR")


def test_malformed_primitive_function_is_a_clear_error() -> None:
    bb = ik.GraphBuilder("fused_bad", private=True, attrs={"Primitive": True})
    p = bb.param("p0", (4,), "float32")
    prim = bb.finish([bb.exp(p)])                    # a graph op, not call_tir
    caller = ik.GraphBuilder("main")
    x = caller.param("x", (4,), "float32")
    main = caller.finish([caller.call_func("fused_bad", x, dtype="float32", shape=(4,))])
    with pytest.raises(ik.IRError, match=r"fused_bad: node 1.*not call_tir"):
        passes.FuseTIR()(ik.IRModule({"main": main, "fused_bad": prim}))


def test_registered_at_opt_level_0() -> None:
    p = transform.get_pass("FuseTIR")
    assert p.info.name == "FuseTIR"
    assert p.info.opt_level == 0


@settings(max_examples=25, deadline=None)
@given(case=functions_with_inputs(module=True, shapes="small", special_values=True))
def test_fuse_ops_then_fuse_tir_never_changes_results(case) -> None:
    mod, inputs = case
    legal = passes.LegalizeOps()(mod)
    out = passes.DeadCodeElimination()(passes.FuseTIR()(passes.FuseOps()(legal)))
    ik.verify(out)
    assert_same_results(ik.interpret(legal, *inputs), ik.interpret(out, *inputs), "FuseTIR")


def test_scalar_generated_graph_lowers_through_the_chain() -> None:
    mod = passes.LegalizeOps()(ik.IRModule({"main": random_function(1500, seed=5)}))
    out = passes.FuseTIR()(passes.FuseOps()(mod))
    ik.verify(out)
    inputs = random_inputs(mod, seed=2, special_values=True)
    assert_same_results(ik.interpret(mod, *inputs), ik.interpret(out, *inputs), "FuseTIR")


def test_values_read_several_times_are_bound_once_not_copied() -> None:
    """relu reads its operand four times: 12 chained relus stay linear in size (a Let each)."""
    bb = ik.GraphBuilder("main")
    v = x = bb.param("x", (8,), "float32")
    for _ in range(12):
        v = bb.relu(bb.add(v, x))
    mod = passes.LegalizeOps()(ik.IRModule({"main": bb.finish([v])}))
    out = passes.FuseTIR()(passes.FuseOps()(mod))
    (pf,) = _fused_funcs(out).values()
    assert _is_single_nest(pf.body, 1)
    n_nodes = sum(1 for _ in tir.post_order(pf.body))
    assert n_nodes < 40 * 12, n_nodes                # copying would give ~4**12 nodes
    assert sum(1 for n in tir.post_order(pf.body) if isinstance(n, tir.Let)) >= 11
    data = np.linspace(-3, 3, 8, dtype=np.float32)
    assert_same_results(ik.interpret(mod, data), ik.interpret(out, data), "FuseTIR")


# ---------------------------------------------------------------------------
# before / expected (structural equality with hand-written PrimFuncs)
# ---------------------------------------------------------------------------

def test_expected_fused_chain() -> None:
    from irkernel.tir import script as T

    @T.prim_func(private=True)
    def expected(p0: T.Buffer((4, 8), "float32"), p1: T.Buffer((4, 8), "float32"),
                 out: T.Buffer((4, 8), "float32")):
        T.func_attr({"op_name": "fused_negative_add_exp", "op_pattern": ops.BROADCAST})
        for i0, i1 in T.grid(4, 8):
            out[i0, i1] = T.exp(-p0[i0, i1] + p1[i0, i1])

    g = Graph()
    x, y = g.param("x"), g.param("y")
    out = _lowered(g.module(g.call("exp", g.call("add", g.call("neg", x), y))))
    assert ik.structural_equal(out["fused_negative_add_exp"], expected)


def test_expected_reduction_with_prologue_and_epilogue() -> None:
    from irkernel.tir import script as T

    @T.prim_func(private=True)
    def expected(p0: T.Buffer((4, 8), "float32"), out: T.Buffer((4,), "float32")):
        T.func_attr({"op_name": "fused_exp_sum_exp", "op_pattern": ops.REDUCE})
        for i0 in T.serial(4):
            out[i0] = T.float32(0.0)
            for k0 in T.serial(8):
                out[i0] = out[i0] + T.exp(p0[i0, k0])
            out[i0] = T.exp(out[i0])

    g = Graph()
    x = g.param("x")
    out = _lowered(g.module(g.call("rowexp", g.call("rowsum", g.call("exp", x)))))
    assert ik.structural_equal(out["fused_exp_sum_exp"], expected)


def test_a_value_squared_fuses_and_is_computed_once() -> None:
    """Regression: ``t * t`` (one consumer reading t twice) used to end the group, and once
    fused it must be bound by one Let: 30 squarings would otherwise copy 2**30 terms."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (8,), "float32")
    t = x
    for _ in range(30):
        t = bb.call("minimum", bb.multiply(t, t), x)
    mod = ik.IRModule({"main": bb.finish([t])})
    lowered = passes.LegalizeOps()(mod)
    out = passes.DeadCodeElimination()(_lowered(lowered))
    calls = [n for n in range(out["main"].num_nodes)
             if out["main"].kind[n] == ops.get_op("call_tir").opcode]
    assert len(calls) == 1  # 60 ops: one group (the cap is 64)
    (pf,) = _fused_funcs(out).values()
    assert sum(1 for _ in tir.post_order(pf.body)) < 5000
