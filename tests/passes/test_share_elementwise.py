"""ShareElementwiseKernels: elementwise kernels that differ only in their extent compile
once, as a flat kernel with the extent as a shape var (passes/share_elementwise.py)."""

from __future__ import annotations

import numpy as np

import irkernel as ik
import runtime
from irkernel import instrument, transform
from irkernel.tir.expr import IntImm
from irkernel.tir.stmt import For, IfThenElse
from passes.share_elementwise import flat_form, share_elementwise
from passes.tir.parallelize import PARALLEL_MIN_WORK
from runtime.build import graph_pipeline

#: Lane shapes: 1-d and 2-d, one past the parallel threshold, one tiny.
SHAPES = ((5000,), (4, 1500), (PARALLEL_MIN_WORK + 100,), (3,))
#: Specialize every op (no shape-generic kernels), as large tensors are.
CONFIG = {"runtime.generic_max_elements": 0}


def _lanes(shapes: tuple[tuple[int, ...], ...], broadcast: bool = False) -> ik.IRModule:
    """One lane per shape, each ``tanh(x) * x + x`` (one fused chain per lane); with
    ``broadcast``, one more output adding a row to the last 2-d lane."""
    bb = ik.GraphBuilder("main")
    outs = []
    for k, shape in enumerate(shapes):
        x = bb.param(f"x{k}", shape, "float32")
        outs.append(bb.call("add", bb.call("multiply", bb.call("tanh", x), x), x))
    if broadcast:
        x = bb.param("row", (1500,), "float32")
        outs.append(bb.call("add", outs[1], x))
    return ik.IRModule({"main": bb.finish(outs)})


def _build(mod: ik.IRModule, disabled: tuple[str, ...] = ()) -> tuple[runtime.Executable,
                                                                      dict[str, float]]:
    stats: dict[str, float] = {}

    class Stats(instrument.PassInstrument):
        def run_after_pass(self, m: ik.IRModule, info: transform.PassInfo) -> None:
            stats.update(transform.PassContext.current().statistics.get(info.name, {}))

    with transform.PassContext(config=CONFIG, instruments=[Stats()],
                               disabled_pass=list(disabled)):
        return runtime.build(mod, cache=False), stats


def _inputs(mod: ik.IRModule) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    f = mod["main"]
    return [rng.standard_normal(f.shapes[int(f.shape_id[p])]).astype(np.float32)
            for p in f.params]


def test_lanes_of_different_shapes_share_one_kernel() -> None:
    mod = _lanes(SHAPES)
    shared, stats = _build(mod)
    assert stats["kernels"] == 1 and stats["compiled"] == 1
    inputs = _inputs(mod)
    for got, ref in zip(shared["main"](*inputs), ik.interpret(mod, *inputs), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_without_the_pass_each_shape_compiles_its_own() -> None:
    _, stats = _build(_lanes(SHAPES), disabled=("ShareElementwiseKernels",))
    assert stats["kernels"] == len(SHAPES)


def test_the_shared_loop_runs_parallel_only_past_the_threshold() -> None:
    with transform.PassContext(config=CONFIG):
        lowered = graph_pipeline()(_lanes(SHAPES))
    prims = [f for f in lowered.functions.values() if transform.is_prim_func(f)]
    assert len({f.replace(attrs={}).structural_digest() for f in prims}) == 1
    body = prims[0].body
    assert isinstance(body, IfThenElse)
    assert isinstance(body.then_case, For) and body.then_case.kind == "parallel"
    assert isinstance(body.else_case, For) and body.else_case.kind == "serial"
    assert int(body.condition.b.value) == PARALLEL_MIN_WORK


def test_small_lanes_share_a_serial_loop_and_a_kernel_alone_keeps_its_extent() -> None:
    with transform.PassContext(config=CONFIG):
        small = graph_pipeline()(_lanes(((6,), (2, 5))))
        alone = graph_pipeline()(_lanes(((7,),)))
    for f in small.functions.values():
        if transform.is_prim_func(f):
            assert isinstance(f.body, For) and f.body.kind == "serial"
            assert {p.shape[0].name for p in f.params} == {"n"} and len(f.params) == 2
    (only,) = [f for f in alone.functions.values() if transform.is_prim_func(f)]
    assert all(isinstance(d, IntImm) for p in only.params for d in p.shape)


def test_broadcasts_and_reductions_keep_their_extents() -> None:
    mod = _lanes(SHAPES[:2], broadcast=True)
    with transform.PassContext(config=CONFIG):
        legal = transform.parse_pipeline("FoldConstant,LegalizeOps{generic_max_elements=0},"
                                        "FuseOps,FuseTIR")(mod)
        reduced = transform.parse_pipeline("LegalizeOps{generic_max_elements=0}")(
            _sum_module())
    kept = [f for f in legal.functions.values()
            if transform.is_prim_func(f) and flat_form(f) is None]
    assert kept, "the broadcast add has no flat form"
    for f in reduced.functions.values():
        if transform.is_prim_func(f):
            assert flat_form(f) is None
    inputs = _inputs(mod)
    ex, _ = _build(mod)
    for got, ref in zip(ex["main"](*inputs), ik.interpret(mod, *inputs), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_a_module_without_shared_loops_is_returned_itself() -> None:
    with transform.PassContext(config=CONFIG):
        mod = graph_pipeline()(_lanes(((7,),)))
        assert share_elementwise(mod, transform.PassContext.current()) is mod


def _sum_module() -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4, 9), "float32")
    return ik.IRModule({"main": bb.finish([bb.call("sum", x, axis=[1])])})
