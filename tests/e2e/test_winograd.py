"""Winograd F(2x2,3x3) (``passes/topi/winograd.py``) equals the direct conv and the
interpreter within float32 rounding, folds epilogues, and is deterministic.

The kernel pads the image to whole 2x2 output tiles, groups tile rows into bands padded
to whole register tiles and splits output channels into a full-block part and a tail
block, so the shapes aim at those edges: odd and even maps from 3 to 30, channel counts
that are no multiple of the register tile, paddings 0 to 2 on each side (asymmetric),
batch 1 and 2. The kernel itself is checked on any channel count (built directly); the
graph path (LegalizeOps choosing it, FuseTIR folding bias + relu or a residual add into
its one store to ``out``) on shapes the cost rule gives it.
"""

from __future__ import annotations

import math

import numpy as np
from e2e_helpers import assert_close_to_interpreter, build_and_run
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import passes
import runtime
from irkernel import transform
from irkernel.testing import random_inputs
from irkernel.tir import PrimFunc
from passes.topi.conv import scheduled_conv
from passes.topi.winograd import MIN_CHANNELS, MIN_SIDE, MIN_TILES, WINOGRAD, scheduled_winograd


def _reference(x: np.ndarray, w: np.ndarray, pads: tuple[int, int, int, int]) -> np.ndarray:
    """The conv in float64: nine shifted channel contractions of the padded image."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(3):
        for j in range(3):
            out += np.einsum("kc,nchw->nkhw", w[:, :, i, j].astype(np.float64),
                             xp[:, :, i:i + oh, j:j + ow])
    return out


def _run(prim: PrimFunc, x: np.ndarray, w: np.ndarray, out_shape) -> np.ndarray:
    out = np.zeros(out_shape, np.float32)
    exe = runtime.build(prim)
    exe[next(iter(exe))](x, w, out)
    return out


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 70), k=st.integers(1, 70),
       h=st.integers(3, 30), w=st.integers(3, 30),
       pads=st.tuples(*[st.integers(0, 2)] * 4), seed=st.integers(0, 99))
def test_kernel_matches_the_direct_conv(n, c, k, h, w, pads, seed) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    want = _reference(x, wt, pads)
    out_hw = want.shape[2:]
    wino = _run(scheduled_winograd(x.shape, wt.shape, pads[:2], out_hw), x, wt, want.shape)
    direct = _run(scheduled_conv(x.shape, wt.shape, 1, (1, 1), pads[:2], pads[2:], (1, 1),
                                 out_hw), x, wt, want.shape)
    # rounding scales with the sum of the products' magnitudes (a float32 sum of 9c terms)
    bound = 2e-5 * _reference(np.abs(x), np.abs(wt), pads) + 1e-30
    assert (np.abs(wino - want) <= bound).all(), np.abs(wino - want).max()
    assert (np.abs(wino - direct) <= 2 * bound).all()


def _module(xs, ws, pads, epilogue: str) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, "float32"), bb.param("w", ws, "float32")
    y = bb.conv(x, w, padding=list(pads))
    out_shape = (xs[0], ws[0], xs[2] + pads[0] + pads[2] - 2, xs[3] + pads[1] + pads[3] - 2)
    if epilogue == "bias_relu":
        y = bb.relu(bb.add(y, bb.param("b", (ws[0], 1, 1), "float32")))
    elif epilogue == "residual":
        y = bb.add(y, bb.param("r", out_shape, "float32"))
    return ik.IRModule({"main": bb.finish([y])})


def _fused_scripts(mod: ik.IRModule) -> list[PrimFunc]:
    legal = passes.LegalizeOps()(mod)
    fused = passes.DeadCodeElimination()(passes.FuseTIR()(passes.FuseOps()(legal)))
    return [f for f in fused.functions.values() if isinstance(f, PrimFunc)]


@st.composite
def rule_shapes(draw):
    """Convs the cost rule gives to Winograd: enough channels and output pixels."""
    pads = draw(st.tuples(*[st.integers(0, 2)] * 4))
    side = max(MIN_SIDE, 2 * math.isqrt(MIN_TILES))  # output pixels a side
    h = draw(st.integers(side + 2 - pads[0] - pads[2], side + 5))
    w = draw(st.integers(side + 2 - pads[1] - pads[3], side + 5))
    c, k = draw(st.integers(MIN_CHANNELS, 45)), draw(st.integers(MIN_CHANNELS, 45))
    return (draw(st.integers(1, 2)), c, h, w), (k, c, 3, 3), pads


@settings(max_examples=5, deadline=None)
@given(shapes=rule_shapes(), epilogue=st.sampled_from(["none", "bias_relu", "residual"]),
       seed=st.integers(0, 99))
def test_graph_convs_with_epilogues_equal_the_interpreter(shapes, epilogue, seed) -> None:
    xs, ws, pads = shapes
    mod = _module(xs, ws, pads, epilogue)
    (prim,) = _fused_scripts(mod)
    assert prim.attrs["schedule"] == "conv_winograd"
    # the epilogue folded into the template's stores: no second nest reading out back
    (template,) = [f for f in passes.LegalizeOps()(mod).functions.values()
                   if isinstance(f, PrimFunc) and f.attrs.get("op_name") == "conv"]
    assert prim.script().count("out[") == template.script().count("out[")
    inputs = random_inputs(mod, seed=seed)
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        got = build_and_run(mod, inputs)
    assert_close_to_interpreter(mod, inputs, got, "conv")


def test_config_and_cost_rule_choose_the_direct_conv() -> None:
    big = _module((1, 32, 16, 16), (32, 32, 3, 3), (1, 1, 1, 1), "none")
    small = _module((1, 16, 16, 16), (32, 16, 3, 3), (1, 1, 1, 1), "none")
    strided = ik.GraphBuilder("main")
    y = strided.conv(strided.param("x", (1, 32, 16, 16), "float32"),
                     strided.param("w", (32, 32, 3, 3), "float32"), strides=[2, 2])
    cases = [(big, True, "conv_winograd"), (big, False, "conv_implicit_gemm"),
             (small, True, "conv_implicit_gemm"),
             (ik.IRModule({"main": strided.finish([y])}), True, "conv_implicit_gemm")]
    for mod, on, schedule in cases:
        with transform.PassContext(config={WINOGRAD: on}):
            (prim,) = _fused_scripts(mod)
        assert prim.attrs["schedule"] == schedule


def test_bitwise_equal_at_one_and_two_threads() -> None:
    """Every output element is summed by one task in channel order: no split changes it."""
    mod = _module((2, 40, 17, 19), (36, 40, 3, 3), (1, 0, 2, 1), "bias_relu")
    inputs = random_inputs(mod, seed=7)
    fn = runtime.build(mod)["main"]
    previous = runtime.get_num_threads()
    try:
        outs = []
        for threads in (1, 2):
            runtime.set_num_threads(threads)
            outs.append(np.asarray(fn(*inputs)[0]).tobytes())
    finally:
        runtime.set_num_threads(previous)
    assert outs[0] == outs[1]
    (prim,) = _fused_scripts(mod)
    assert prim.attrs["schedule"] == "conv_winograd"
