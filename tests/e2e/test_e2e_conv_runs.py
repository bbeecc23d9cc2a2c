"""Implicit-GEMM convs whose tasks run several pixel tiles row block by row block
(``passes.topi.conv.tile_run``): short reductions (1x1 convs of a few channels, as
mobilenet_v2's expand convs) on maps of many tiles, runs that do not divide the tiles
(the last run's tail tiles are skipped), strided and padded forms whose results go
through the wide scratch, with fused epilogues (bias + relu6, a residual add), float32
and float64, at AVX2 and AVX-512 tiles, against ``ik.interpret``."""
from __future__ import annotations

import numpy as np
from e2e_helpers import assert_close_to_interpreter
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.testing import random_inputs
from passes.topi.conv import MIN_TASKS, tile_run


def _out(size: int, kernel: int, stride: int, pads: int) -> int:
    return (size + pads - kernel) // stride + 1


def _module(xs, ws, strides, pads, dtype, epilogue: str) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, dtype), bb.param("w", ws, dtype)
    y = bb.conv(x, w, strides=strides, padding=pads)
    out = (xs[0], ws[0], *(_out(xs[2 + a], ws[2 + a], strides[a], pads[a] + pads[2 + a])
                           for a in range(2)))
    if epilogue == "bias_relu6":
        y = bb.add(y, bb.param("b", (ws[0], 1, 1), dtype))
        y = bb.call("minimum", bb.call("maximum", y, bb.const(0.0, dtype)),
                    bb.const(6.0, dtype))
    elif epilogue == "residual":
        y = bb.add(y, bb.param("r", out, dtype))
    return ik.IRModule({"main": bb.finish([y])})


@st.composite
def short_reductions(draw):
    """A conv of 1-32 input channels (1x1 mostly, else 3x3) over a map of 8-60 pixels a
    side, stride 1-2, padding 0-1, 1-40 output channels."""
    k = draw(st.sampled_from([1, 1, 1, 3]))
    side = [draw(st.integers(8, 60)) for _ in range(2)]
    stride = draw(st.sampled_from([1, 1, 2]))
    pads = [draw(st.integers(0, 1)) for _ in range(4)] if k == 3 or stride == 2 else [0] * 4
    c, o = draw(st.integers(1, 32)), draw(st.integers(1, 40))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    return (1, c, *side), (o, c, k, k), [stride, stride], pads, dtype


@settings(max_examples=30, deadline=None)
@given(case=short_reductions(), epilogue=st.sampled_from(["none", "bias_relu6", "residual"]),
       bits=st.sampled_from([256, 512]), l1=st.sampled_from([0, 0, 4096]),
       seed=st.integers(0, 99))
def test_short_reduction_convs_equal_the_interpreter(case, epilogue, bits, l1, seed) -> None:
    """``l1``: the L1 size runs are sized for (``topi.l1d_bytes``; 0: the host's)."""
    xs, ws, strides, pads, dtype = case
    mod = _module(xs, ws, strides, pads, dtype, epilogue)
    inputs = random_inputs(mod, seed=seed, special_values=True)
    config = {"topi.vector_bits": bits, "runtime.generic_max_elements": 0,
              "topi.l1d_bytes": l1}
    with transform.PassContext(config=config):
        ex = runtime.build(mod)
    assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), "conv run")


def test_a_mobilenet_expand_conv_runs_tiles_and_equals_the_interpreter() -> None:
    """16 -> 96 channels on 112x112 (392 tiles of 32): runs of 8 tiles, relu6 fused."""
    mod = _module((1, 16, 112, 112), (96, 16, 1, 1), [1, 1], [0] * 4, "float32",
                  "bias_relu6")
    inputs = random_inputs(mod, seed=3)
    with transform.PassContext(config={"topi.vector_bits": 512, "topi.l1d_bytes": 32768}):
        ex = runtime.build(mod)
    tir = ex.get_source("tir")
    assert "conv_implicit_gemm" in tir and "for ri in T.serial(8)" in tir
    assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), "expand conv")


def test_tile_runs_fit_half_of_l1_and_keep_the_tasks() -> None:
    l1 = 32 * 1024
    assert tile_run(16 * 32 * 4, 392, 1, l1) == 8      # 2 KiB panels: 8 in 16 KiB
    assert tile_run(24 * 32 * 4, 98, 1, l1) == 5
    assert tile_run(32 * 32 * 4, 25, 1, l1) == 1       # 25 tiles: MIN_TASKS tasks first
    assert tile_run(160 * 32 * 4, 392, 1, l1) == 1     # a long reduction: one tile
    assert tile_run(4 * 16 * 4, 4 * MIN_TASKS, 2, l1) == 8   # groups count as tasks
    assert tile_run(4, 3, 1, l1) == 1
    for panel, tiles, groups in ((64, 1000, 1), (2048, 50, 3), (10**6, 7, 1)):
        run = tile_run(panel, tiles, groups, l1)
        assert 1 <= run <= tiles
        assert run == 1 or (run * panel <= l1 // 2 and groups * tiles // run >= MIN_TASKS)


def test_float64_runs_take_half_the_lanes() -> None:
    """The same conv in float64: runs of 16-lane tiles, exact against the interpreter."""
    mod = _module((1, 8, 40, 40), (24, 8, 1, 1), [1, 1], [0] * 4, "float64", "bias_relu6")
    inputs = random_inputs(mod, seed=5)
    with transform.PassContext(config={"topi.vector_bits": 512, "topi.l1d_bytes": 32768,
                                       "runtime.generic_max_elements": 0}):
        ex = runtime.build(mod)
    assert "for ri in T.serial(" in ex.get_source("tir")
    got = ex["main"](*inputs)
    assert np.asarray(got[0]).dtype == np.float64
    assert_close_to_interpreter(mod, inputs, got, "float64 run")
