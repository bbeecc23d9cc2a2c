"""Fusion never changes results; SkipOptimization is honoured; instruments see every pass.

FuseOps is disabled through the PassContext (the user-facing switch), so the
unfused build runs one kernel per op and the fused build fewer, and the two
must agree: bit for bit where the ops are exact (fusion only inlines loads
into one loop nest), within tolerance where a float reduction's epilogue moved.
"""

from __future__ import annotations

import numpy as np
import pytest
from e2e_helpers import assert_close_to_interpreter, compare, output_tolerances
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import instrument, ops, transform
from irkernel.testing import functions_with_inputs

TIR_PASSES = ("LowerParallel", "FlattenBuffer", "Simplify", "VectorizeLoop", "UnrollLoop")
#: The modules here have small tensors, which runtime.build would run on shape-generic
#: kernels (never fused); these tests are about fusion and TIR lowering, so they ask for
#: specialized kernels.
SPECIALIZE = {"runtime.generic_max_elements": 0}


def _kernels(ex: runtime.Executable, name: str = "main") -> list[str]:
    func = ex.lowered_module[name]
    return [func.node_attrs(n)["callee"] for n in np.nonzero(func.kind == ops.OP_CALL_TIR)[0]]


def _build(mod: ik.IRModule, fuse: bool, **kw: object) -> runtime.Executable:
    with transform.PassContext(disabled_pass=[] if fuse else ["FuseOps"], config=SPECIALIZE):
        return runtime.build(mod, **kw)


@settings(max_examples=25, deadline=None)
@given(case=functions_with_inputs(module=True, special_values=True, shapes="small",
                                  n_nodes=st.integers(2, 30), max_dim=st.integers(1, 4)))
def test_fusion_never_changes_results(case) -> None:
    mod, inputs = case
    fused = _build(mod, True)
    unfused = _build(mod, False)
    assert not any(k.startswith("fused_") for k in _kernels(unfused))
    got_fused, got_unfused = fused["main"](*inputs), unfused["main"](*inputs)
    for k, (f, u, tol) in enumerate(zip(got_fused, got_unfused, output_tolerances(mod),
                                        strict=True)):
        compare(u, f, tol, f"fused vs unfused, output {k}")
    assert_close_to_interpreter(mod, inputs, got_fused, "fused")


def _chain_module(skip_main: bool, skip_helper: bool) -> ik.IRModule:
    helper = ik.GraphBuilder("helper", private=True)
    h = helper.param("h", (3, 5), "float32")
    helper_fn = helper.finish([helper.relu(helper.multiply(helper.add(h, h), h))])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3, 5), "float32")
    y = bb.param("y", (5,), "float32")
    z = bb.negative(bb.abs(bb.subtract(bb.multiply(x, y), y)))
    z = bb.call_func("helper", z, dtype="float32", shape=(3, 5))
    main = bb.finish([bb.maximum(z, x), bb.call("sum", z, axis=1)])
    if skip_main:
        main = main.with_attr("SkipOptimization", True)
    if skip_helper:
        helper_fn = helper_fn.with_attr("SkipOptimization", True)
    return ik.IRModule({"main": main, "helper": helper_fn})


def test_skip_optimization_is_legalized_but_not_fused() -> None:
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((3, 5)).astype(np.float32),
              rng.standard_normal(5).astype(np.float32)]
    inputs[0][0, 0] = np.nan
    baseline = _chain_module(False, False)
    with transform.PassContext(config=SPECIALIZE):
        ex = runtime.build(baseline)
    assert _kernels(ex)[0] == "fused_multiply_subtract_abs_negative"   # z has two readers
    assert _kernels(ex, "helper") == ["fused_add_multiply_relu"]
    want = ex["main"](*inputs)
    for skip_main, skip_helper in ((True, False), (False, True), (True, True)):
        mod = _chain_module(skip_main, skip_helper)
        with transform.PassContext(config=SPECIALIZE):
            ex = runtime.build(mod)
        lowered = ex.lowered_module
        ik.verify(lowered)
        for name, skipped in (("main", skip_main), ("helper", skip_helper)):
            func = lowered[name]
            assert func.attrs.get("SkipOptimization", False) is skipped
            kinds = set(np.unique(func.kind).tolist())
            assert kinds <= {ops.OP_PARAM, ops.OP_CONST, ops.OP_CALL_TIR, ops.OP_CALL_FUNC}
            fused = [k for k in _kernels(ex, name) if k.startswith("fused_")]
            if skipped:  # one kernel per op, each a plain op template
                assert not fused, (name, _kernels(ex, name))
                assert len(_kernels(ex, name)) == {"main": 6, "helper": 3}[name]
            else:
                assert fused
        assert not any(isinstance(f, ik.Function) and f.attrs.get("Primitive")
                       for n, f in lowered.functions.items()
                       if (n == "main" and skip_main) or (n == "helper" and skip_helper))
        got = ex["main"](*inputs)
        assert_close_to_interpreter(mod, inputs, got, f"skip {skip_main} {skip_helper}")
        compare(want[0], got[0], 0.0, "fused vs SkipOptimization")


class _Seen(instrument.PassInstrument):
    def __init__(self) -> None:
        self.before: list[str] = []
        self.after: list[str] = []

    def run_before_pass(self, mod, info) -> None:
        self.before.append(info.name)

    def run_after_pass(self, mod, info) -> None:
        self.after.append(info.name)


def test_instruments_see_every_graph_and_tir_pass() -> None:
    mod = _chain_module(False, False)
    timing = instrument.PassTimingInstrument()
    seen = _Seen()
    with transform.PassContext(instruments=[timing, seen], config=SPECIALIZE):
        runtime.build(mod, cache=False)
    table = timing.render()
    for name in ("GraphLowering", "FoldConstant", "LegalizeOps", "FuseOps", "FuseTIR",
                 "DeadCodeElimination", "LowerTIR", *TIR_PASSES):
        assert name in table, f"{name} missing from the timing table:\n{table}"
        assert name in seen.before, name
    assert sorted(seen.before) == sorted(seen.after)
    order = seen.before
    assert order.index("LegalizeOps") < order.index("FuseOps") < order.index("FuseTIR") \
        < order.index("LowerTIR") < order.index("FlattenBuffer")
    with transform.PassContext(config=SPECIALIZE):
        ex = runtime.build(mod)
    n_kernels = len(set(_kernels(ex, "main") + _kernels(ex, "helper")))
    assert order.count("LowerTIR") == n_kernels   # one TIR lowering per compiled kernel
    assert order.count("FlattenBuffer") == n_kernels


def test_disabled_tir_pass_still_compiles_and_agrees() -> None:
    """VectorizeLoop/UnrollLoop are optimizations: disabling them must not change results."""
    mod = _chain_module(False, False)
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((3, 5)).astype(np.float32),
              rng.standard_normal(5).astype(np.float32)]
    seen = _Seen()
    with transform.PassContext(disabled_pass=["VectorizeLoop", "UnrollLoop"],
                               instruments=[seen], config=SPECIALIZE):
        ex = runtime.build(mod, cache=False)
    assert "VectorizeLoop" not in seen.before
    assert "FlattenBuffer" in seen.before
    assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), "no vectorize/unroll")


def test_debug_instruments_run_through_a_whole_build() -> None:
    """Regression: CheckSemantics raised "no entry function 'main'" on the per-kernel TIR
    lowering modules of runtime.build; modules of PrimFuncs only are now skipped by it."""
    mod = _chain_module(False, False)
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((3, 5)).astype(np.float32),
              rng.standard_normal(5).astype(np.float32)]
    checks = [instrument.CheckSemantics(inputs=inputs, rtol=1e-5, atol=1e-6),
              instrument.VerifyEach(), instrument.CheckImmutable()]
    with transform.PassContext(instruments=checks):
        ex = runtime.build(mod, cache=False)
    assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), "checked build")
    # the graph modules of the build are still interpreted (here: inputs of a wrong shape)
    bad = instrument.CheckSemantics(inputs=[inputs[0][:2], inputs[1]])
    with transform.PassContext(instruments=[bad]), pytest.raises(ValueError, match="shape"):
        runtime.build(mod, cache=False)
