"""Convs over images of a few channels run as row-stored register tiles
(``passes/topi/conv_stem.py``): against the interpreter for random shapes, kernels,
strides 1-3, dilations and asymmetric padding, with a fused bias + SiLU or relu epilogue,
at two register widths; bit-identical to the implicit GEMM it replaces (same tiles, same
accumulation order); the overlapping last tile of a row."""

from __future__ import annotations

import numpy as np
import pytest
from e2e_helpers import assert_close_to_interpreter, assert_scheduled_and_exact
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.target import host_target
from irkernel.testing import random_inputs
from passes.topi.conv import conv_ok, scheduled_conv
from passes.topi.conv_stem import row_tiles, scheduled_stem, stem_ok


@st.composite
def stem_cases(draw):
    k = [draw(st.integers(1, 7)), draw(st.integers(1, 7))]
    s = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    d = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    pads = [draw(st.integers(0, 3)) for _ in range(4)]
    low = max(1, d[0] * (k[0] - 1) + 1 - pads[0] - pads[2])  # 13 for a 7-tap dilation 2
    h = draw(st.integers(low, max(low, 12)))
    # at least 32 output columns (four 8-lane vectors at 256 bits), up to a few tiles
    ow = draw(st.integers(32, 70))
    w = max(1, (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1 - pads[1] - pads[3])
    c, o = draw(st.integers(1, 4)), draw(st.integers(4, 20))
    attrs = {"strides": s, "padding": pads, "dilation": d, "groups": 1}
    return (draw(st.integers(1, 2)), c, h, w), (o, c, *k), attrs


@settings(max_examples=25, deadline=None)
@given(case=stem_cases(), silu=st.booleans(), seed=st.integers(0, 99))
def test_stem_convs_equal_the_interpreter(case, silu, seed) -> None:
    xs, ws, attrs = case
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, "float32"), bb.param("w", ws, "float32")
    b = bb.param("b", (1, ws[0], 1, 1), "float32")
    y = bb.add(bb.conv(x, w, **attrs), b)
    y = bb.multiply(y, bb.sigmoid(y)) if silu else bb.relu(y)
    mod = ik.IRModule({"main": bb.finish([y])})
    inputs = random_inputs(mod, seed=seed, special_values=False)
    with transform.PassContext(config={"topi.vector_bits": 256,
                                       "runtime.generic_max_elements": 0}):
        ex = runtime.build(mod)
    assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), "stem")
    if conv_ok(xs, ws, 1, "float32"):  # else too small for any schedule
        assert "conv_stem" in ex.get_source("tir")


@pytest.mark.parametrize("case", [
    ((1, 3, 224, 224), (32, 3, 3, 3), 2, 1),   # mobilenet_v2, efficientnet_b0
    ((1, 3, 224, 224), (64, 3, 3, 3), 2, 0),   # squeezenet1_1: 111 columns
    ((1, 3, 224, 224), (64, 3, 7, 7), 2, 3),   # resnet18
    ((2, 4, 40, 200), (20, 4, 5, 5), 3, 2),    # a tail block of channels, two images
])
@pytest.mark.parametrize("bits", [256, 512])
def test_stem_is_bitwise_the_implicit_gemm(case, bits) -> None:
    xs, ws, s, p = case
    oh, ow = ((xs[a] + 2 * p - ws[a]) // s + 1 for a in (2, 3))
    assert stem_ok(xs, ws, 1, "float32", (oh, ow), bits)
    args = (xs, ws, (s, s), (p, p), (p, p), (1, 1), (oh, ow))
    stem = runtime.build(scheduled_stem(*args, bits=bits).with_attr("global_symbol", "f"))
    gemm = runtime.build(scheduled_conv(xs, ws, 1, *args[2:], bits=bits, tile=())
                         .with_attr("global_symbol", "f"))
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    a, b = (np.empty((xs[0], ws[0], oh, ow), np.float32) for _ in range(2))
    stem["f"](x, w, a)
    gemm["f"](x, w, b)
    assert np.array_equal(a, b)


def test_row_tiles_end_with_an_overlapping_tile() -> None:
    assert row_tiles(112, 32, 16) == [(0, 32), (32, 32), (64, 32), (96, 16)]
    assert row_tiles(111, 32, 16) == [(0, 32), (32, 32), (64, 32), (95, 16)]
    assert row_tiles(120, 32, 16) == [(0, 32), (32, 32), (64, 32), (88, 32)]
    assert row_tiles(64, 32, 16) == [(0, 32), (32, 32)]


def test_only_few_channel_images_are_stems() -> None:
    assert not stem_ok((1, 8, 64, 64), (16, 8, 3, 3), 1, "float32", (32, 32), 512)
    assert not stem_ok((1, 3, 64, 64), (15, 1, 3, 3), 3, "float32", (32, 32), 512)
    assert not stem_ok((1, 3, 24, 24), (16, 3, 3, 3), 1, "float32", (12, 12), 512)
    assert not stem_ok((1, 3, 64, 64), (16, 3, 3, 3), 1, "float32", (32, 32), 512)
    assert stem_ok((1, 3, 64, 64), (16, 3, 3, 3), 1, "float32", (32, 32), 256)


@pytest.mark.skipif(host_target().isa == "sse4.2", reason="the host cannot run AVX2 code")
def test_an_avx2_build_equals_the_interpreter() -> None:
    """A stem with SiLU compiled for x86-64-v3 (8-lane tiles, exp without vscalefps)."""
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", (1, 3, 31, 80), "float32"), bb.param("w", (13, 3, 3, 3), "float32")
    y = bb.conv(x, w, strides=[2, 2], padding=[1, 1, 1, 1])
    assert_scheduled_and_exact(ik.IRModule({"main": bb.finish([bb.multiply(y, bb.sigmoid(y))])}),
                               {"target": "x86-64-v3"}, "conv_stem", 5, special=False)
