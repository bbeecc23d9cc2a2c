"""runtime.build of graph modules and the GraphExecutor: results equal ik.interpret."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from executor_helpers import add4, rowsum, scale4, tir_call

import irkernel as ik
import runtime
from irkernel import instrument, transform
from irkernel.tir import script as T
from runtime.executor import check_kernel_call, make_kernels

NO_FUSION = ["FuseOps", "FuseTIR"]


@T.prim_func(private=True)
def clobber(a: T.Buffer((4,), "float32"), c: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        a[i] = 0.0
        c[i] = 1.0


_tir = tir_call


def _build(mod: ik.IRModule, **kw) -> runtime.Executable:
    with transform.PassContext(disabled_pass=NO_FUSION):
        return runtime.build(mod, **kw)


def _hand_module() -> tuple[ik.IRModule, dict[str, int]]:
    """x -> add(x, c) -> scale -> add(., x) ... with a const, a helper call and a reduction."""
    helper = ik.GraphBuilder("helper", private=True)
    h = helper.param("h", (4,), "float32")
    helper_fn = helper.finish([_tir(helper, "scale4", h)])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    m = bb.param("m", (2, 4), "float32")
    c = bb.const(np.arange(4, dtype=np.float32))
    y = _tir(bb, "add4", x, c)
    y = _tir(bb, "scale4", y)
    y = bb.call_func("helper", y, dtype="float32", shape=(4,))
    z = _tir(bb, "add4", y, x)
    z = _tir(bb, "add4", z, z)
    s = _tir(bb, "rowsum", m, shape=(2,))
    main = bb.finish([z, s, x, c, z])
    mod = ik.IRModule({"main": main, "helper": helper_fn, "add4": add4, "scale4": scale4,
                       "rowsum": rowsum})
    return mod, {"x": x, "c": c}


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal(4).astype(np.float32),
            rng.standard_normal((2, 4)).astype(np.float32))


def test_hand_made_module_equals_interpret_and_numpy() -> None:
    mod, _ = _hand_module()
    ex = _build(mod)
    x, m = _inputs()
    got = ex["main"](x, m)
    want = ik.interpret(mod, x, m)
    assert len(got) == len(want) == 5
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    z = ((x + np.arange(4, dtype=np.float32)) * 3 * 3 + x) * 2
    np.testing.assert_allclose(got[0], z, rtol=1e-6)
    np.testing.assert_allclose(got[1], m.sum(axis=1), rtol=1e-6)


def test_outputs_are_fresh_arrays() -> None:
    mod, _ = _hand_module()
    ex = _build(mod)
    x, m = _inputs()
    first = ex["main"](x, m)
    keep = [a.copy() for a in first]
    assert first[2] is not x
    assert not np.shares_memory(first[2], x)
    assert not np.shares_memory(first[0], first[4])     # the same node twice: two arrays
    assert all(a.flags.writeable for a in first)
    second = ex["main"](x * 2, m * 2)
    for a, k in zip(first, keep, strict=True):
        np.testing.assert_array_equal(a, k)              # a later call does not clobber
    np.testing.assert_allclose(second[1], 2 * m.sum(axis=1), rtol=1e-6)


def test_graph_without_ops() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "int64")
    c = bb.const(np.array(7, dtype=np.int64))
    ex = runtime.build(ik.IRModule({"main": bb.finish([c, x])}))
    x_in = np.arange(3, dtype=np.int64)
    out = ex["main"](x_in)
    assert out[0].shape == ()
    assert int(out[0]) == 7
    np.testing.assert_array_equal(out[1], x_in)
    assert not np.shares_memory(out[1], x_in)
    assert ex.memory_plan("main").planned_bytes == 0


@pytest.mark.parametrize(("args", "error", "match"), [
    ((), TypeError, r"main takes 2 inputs \(x, m\), got 0"),
    ((np.ones(4, np.float32),), TypeError, "main takes 2 inputs"),
    ((np.ones(4), np.ones((2, 4), np.float32)), TypeError,
     r"main: input 0 \('x'\) must have dtype float32, got float64"),
    ((np.ones(4, np.float32), np.ones((4, 2), np.float32)), ValueError,
     r"main: input 1 \('m'\) must have shape \(2, 4\), got \(4, 2\)"),
])
def test_bad_inputs_raise_clear_errors(args, error, match) -> None:
    ex = _build(_hand_module()[0])
    with pytest.raises(error, match=match):
        ex["main"](*args)


def test_non_contiguous_and_misaligned_inputs_are_copied() -> None:
    mod, _ = _hand_module()
    ex = _build(mod)
    x, m = _inputs()
    strided = np.repeat(x, 2)[::2]
    raw = np.zeros(4 * 4 + 1, np.uint8)
    misaligned = raw[1:].view(np.float32)
    misaligned[:] = x
    want = ik.interpret(mod, x, m)[0]
    for arg in (strided, misaligned):
        np.testing.assert_allclose(ex["main"](arg, m)[0], want, rtol=1e-6)


def test_concurrent_calls_use_private_arenas() -> None:
    mod, _ = _hand_module()
    ex = _build(mod)
    rng = np.random.default_rng(1)
    cases = [(rng.standard_normal(4).astype(np.float32),
              rng.standard_normal((2, 4)).astype(np.float32)) for _ in range(4)]
    wants = [ik.interpret(mod, *c)[0] for c in cases]
    errors: list[str] = []

    def work(k: int) -> None:
        for _ in range(300):
            got = ex["main"](*cases[k])[0]
            if not np.allclose(got, wants[k], rtol=1e-6):
                errors.append(f"thread {k}: {got} != {wants[k]}")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:2]


def test_kernel_signature_mismatch_is_an_ir_error() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    bad = bb.call("call_tir", x, callee="add4", dtype="float32", shape=(4,))
    mod = ik.IRModule({"main": bb.finish([bad]), "add4": add4})
    with pytest.raises(ik.IRError, match=r"main: node 1 \(call_tir.*3 parameters"):
        _build(mod)


def test_check_kernel_call_guards_raw_pointer_calls() -> None:
    # The executor's own check (verify may catch these earlier in runtime.build).
    kern = make_kernels({"add4": runtime.build(add4)["main"]})["add4"]
    f32 = np.dtype(np.float32)
    check_kernel_call("main", 3, kern, [(f32, (4,))] * 3)
    with pytest.raises(ik.IRError, match=r"main: node 3 \(call_tir 'add4'\): parameter 1 "
                                         r"\('b'\) is float32\[4\], but the operand is "
                                         r"float64\[4\]"):
        check_kernel_call("main", 3, kern, [(f32, (4,)), (np.dtype(np.float64), (4,)),
                                            (f32, (4,))])
    with pytest.raises(ik.IRError, match=r"parameter 2 \('c'\) is float32\[4\], but the "
                                         r"result is float32\[5\]"):
        check_kernel_call("main", 3, kern, [(f32, (4,)), (f32, (4,)), (f32, (5,))])
    with pytest.raises(ik.IRError, match="has 3 parameters, expected 2"):
        check_kernel_call("main", 3, kern, [(f32, (4,))] * 2)


def test_kernel_writing_an_operand_is_rejected() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    y = bb.call("call_tir", x, callee="clobber", dtype="float32", shape=(4,))
    mod = ik.IRModule({"main": bb.finish([y]), "clobber": clobber})
    with pytest.raises(ik.IRError, match="writes operand 'a'"):
        _build(mod)


def _graph_module() -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (8, 16), "float32")
    w = bb.param("w", (16, 4), "float32")
    b = bb.const(np.linspace(-1, 1, 4, dtype=np.float32))
    h = bb.call("relu", bb.call("add", bb.call("matmul", x, w), b))
    e = bb.call("exp", bb.call("subtract", h, bb.call("max", h, axis=1, keepdims=True)))
    sm = bb.call("divide", e, bb.call("sum", e, axis=1, keepdims=True))
    t = bb.call("permute_dims", sm)
    return ik.IRModule({"main": bb.finish([sm, t, bb.call("mean", x, axis=0)])})


def test_generated_graph_equals_interpret() -> None:
    mod = _graph_module()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 4)).astype(np.float32)
    want = ik.interpret(mod, x, w)
    for disabled in ([], NO_FUSION):
        with transform.PassContext(disabled_pass=disabled):
            ex = runtime.build(mod)
        got = ex["main"](x, w)
        for g, v in zip(got, want, strict=True):
            np.testing.assert_allclose(g, v, rtol=2e-5, atol=1e-6)
        assert ex.lowered_module is not None


def test_unlegalized_op_is_a_clear_error() -> None:
    with transform.PassContext(disabled_pass=["LegalizeOps"]), \
            pytest.raises(ik.IRError, match="only param, const, call_tir and call_func"):
        runtime.build(_graph_module())


class _Names(instrument.PassInstrument):
    def __init__(self) -> None:
        self.names: list[str] = []

    def run_before_pass(self, mod, info) -> None:
        self.names.append(info.name)


def test_instruments_see_graph_and_tir_passes() -> None:
    names = _Names()
    timing = instrument.PassTimingInstrument()
    with transform.PassContext(instruments=[names, timing]):
        runtime.build(_hand_module()[0], cache=False)
    assert names.names[0] == "GraphLowering"
    assert {"FoldConstant", "EliminateCommonSubexpr", "DeadCodeElimination"} <= set(names.names)
    assert {"LowerTIR", "FlattenBuffer", "Simplify"} <= set(names.names)
    assert "GraphLowering" in timing.render()
    assert "LowerTIR" in timing.render()


def test_opt_level_override_keeps_the_context() -> None:
    names = _Names()
    timing = instrument.PassTimingInstrument()
    mod = _hand_module()[0]
    with transform.PassContext(opt_level=3, instruments=[names, timing],
                               disabled_pass=["SimplifyArith"]) as ctx:
        transform.get_pass("FoldConstant")(mod)             # before the build
        runtime.build(mod, opt_level=0, cache=False)
        assert transform.PassContext.current() is ctx
        assert ctx.opt_level == 3
        runtime.build(mod, cache=False)
    seen = names.names
    first_build = seen[1:seen.index("GraphLowering", 2)]
    assert "EliminateCommonSubexpr" not in first_build   # opt_level 1 > 0: skipped
    assert "SimplifyArith" not in seen                   # disabled stays disabled
    assert "EliminateCommonSubexpr" in seen[seen.index("GraphLowering", 2):]
    assert timing.render().splitlines()[1].lstrip().startswith("FoldConstant")  # not reset


def test_executable_mapping_and_memory_plan() -> None:
    ex = _build(_hand_module()[0])
    assert list(ex)[:2] == ["main", "helper"]
    assert isinstance(ex["main"], runtime.GraphExecutor)
    assert isinstance(ex["add4"], runtime.Kernel)
    plan = ex.memory_plan("main")
    assert 0 < plan.planned_bytes <= plan.naive_bytes
    with pytest.raises(KeyError, match="no graph function 'add4'"):
        ex.memory_plan("add4")
    with pytest.raises(KeyError, match="no function 'nope'"):
        ex["nope"]
    assert "kernels" in repr(ex["main"])


def test_launch_table_names_the_node_and_kernel_of_each_launch() -> None:
    mod, _ = _hand_module()
    ex = _build(mod)
    for name in ("main", "helper"):
        func = ex.lowered_module[name]
        table = ex[name].launch_table
        calls = [n for n in range(func.num_nodes) if func.op(n).name == "call_tir"]
        assert table.nodes.tolist() == calls                       # launch order = node order
        assert table.kernel_names == tuple(sorted(set(table.kernel_names)))
        assert [table.kernel_names[k] for k in table.kernel_ids.tolist()] == \
            [func.node_attrs(n)["callee"] for n in calls]
    assert ex["main"].launch_table.kernel_names == ("add4", "rowsum", "scale4")
