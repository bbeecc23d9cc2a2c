"""The scheduled convs (``passes/topi/conv.py``) equal the interpreter on random shapes.

The schedule copies the image into a zero-padded scratch, reads the taps of a wide
grid of pixels (``q = oh * Wp + ow``) as contiguous slices, and copies the real pixels
out; the shapes here aim at its edges: odd sizes, asymmetric padding wider than the
kernel reach, dilations, batch > 1, output channels not a multiple of the register tile,
pixel counts not a multiple of the tile width, 1x1 kernels, strides up to 3 (the phase
split), depthwise convs (groups = channels), one-pixel 1x1 convs (dot products). Each
case checks that LegalizeOps chose the schedule (its scratch buffers are in the kernel),
so a change of the dispatch rule can not silently turn these into tests of the canonical
template.
"""

from __future__ import annotations

import pytest
from e2e_helpers import assert_close_to_interpreter, build_and_run
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import passes
from irkernel import transform
from irkernel.testing import random_inputs
from irkernel.tir import PrimFunc
from passes.topi.conv import conv_ok, depthwise_ok, gemv_ok


def _fused_scripts(mod: ik.IRModule) -> list[str]:
    legal = passes.LegalizeOps()(mod)
    fused = passes.DeadCodeElimination()(passes.FuseTIR()(passes.FuseOps()(legal)))
    return [f.script() for f in fused.functions.values() if isinstance(f, PrimFunc)]


@st.composite
def cases(draw):
    kernel = [draw(st.integers(1, 3)) for _ in range(2)]
    dil = [draw(st.integers(1, 2)) for _ in range(2)]
    pads = [draw(st.integers(0, 3)) for _ in range(4)]
    sizes = [draw(st.integers(max(1, dil[a] * (kernel[a] - 1) + 1 - pads[a] - pads[2 + a]),
                              9)) for a in range(2)]
    n = draw(st.integers(1, 2))
    c = draw(st.integers(1, 5))
    strides = [draw(st.integers(1, 3)) for _ in range(2)]
    if draw(st.booleans()):  # depthwise: one filter per channel
        attrs = {"strides": strides, "padding": pads, "dilation": dil, "groups": c}
        return (n, c, *sizes), (c, 1, *kernel), attrs
    o = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 12]))
    attrs = {"strides": strides, "padding": pads, "dilation": dil, "groups": 1}
    return (n, c, *sizes), (o, c, *kernel), attrs


def _out_shape(xs, ws, attrs) -> tuple[int, ...]:
    pads, dil = attrs["padding"], attrs["dilation"]
    strides = attrs["strides"]
    return (xs[0], ws[0], *((xs[2 + a] + pads[a] + pads[2 + a] - dil[a] * (ws[2 + a] - 1) - 1)
                            // strides[a] + 1 for a in range(2)))


def _module(xs, ws, attrs, epilogue: str) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, "float32"), bb.param("w", ws, "float32")
    y = bb.conv(x, w, **attrs)
    if epilogue == "bias_relu":
        y = bb.relu(bb.add(y, bb.param("b", (ws[0], 1, 1), "float32")))
    elif epilogue == "residual":
        y = bb.add(y, bb.param("r", _out_shape(xs, ws, attrs), "float32"))
    return ik.IRModule({"main": bb.finish([y])})


@settings(max_examples=40, deadline=None)
@given(case=cases(), epilogue=st.sampled_from(["none", "bias_relu", "residual"]),
       seed=st.integers(0, 99))
def test_scheduled_conv_equals_interpreter(case, epilogue, seed) -> None:
    xs, ws, attrs = case
    mod = _module(xs, ws, attrs, epilogue)
    pads = attrs["padding"]
    gemv = gemv_ok(xs, ws, attrs["groups"], "float32", _out_shape(xs, ws, attrs)[2:],
                   tuple(attrs["strides"]), tuple(pads[:2]), tuple(pads[2:]))
    scheduled = conv_ok(xs, ws, attrs["groups"], "float32") or depthwise_ok(
        xs, ws, attrs["groups"], "float32")
    scripts = _fused_scripts(mod)
    assert any(("lanes" if gemv else "xpad") in s for s in scripts) == (gemv or scheduled)
    inputs = random_inputs(mod, seed=seed)
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        got = build_and_run(mod, inputs)  # the schedule, not the small-tensor kernels
    assert_close_to_interpreter(mod, inputs, got, "conv")


def test_bias_relu_and_residual_fold_into_the_copy_out() -> None:
    """conv + bias + relu, and conv + residual add: one kernel each, whose only store to the
    output is the copy-out with the epilogue in it."""
    for residual in (False, True):
        bb = ik.GraphBuilder("main")
        x = bb.param("x", (2, 8, 9, 11), "float32")
        w = bb.param("w", (12, 8, 3, 3), "float32")
        b = bb.param("b", (12, 1, 1), "float32")
        y = bb.add(bb.conv(x, w, padding=[1, 2, 0, 1]), b)
        if residual:
            y = bb.add(y, bb.param("r", (2, 12, 8, 12), "float32"))
        mod = ik.IRModule({"main": bb.finish([bb.relu(y)])})
        scripts = _fused_scripts(mod)
        assert len(scripts) == 1
        assert "xpad" in scripts[0]
        assert scripts[0].count("out[") == 1, scripts[0]
        inputs = random_inputs(mod, seed=5)
        assert_close_to_interpreter(mod, inputs, build_and_run(mod, inputs), "conv")


#: Shapes whose pixel grid is the output's own order with no tail tile (the register tiles
#: store straight into the output, no copy-out), with and without the padded copy.
DIRECT = [((2, 3, 8, 6), (5, 3, 1, 1), [1, 1], [0, 0, 0, 0]),    # 1x1: reads the image
          ((1, 4, 10, 4), (6, 4, 3, 1), [1, 1], [0, 0, 0, 0]),   # 3x1: reads the image
          ((1, 3, 8, 8), (4, 3, 1, 1), [2, 2], [0, 0, 0, 0]),    # strided: phase copy
          ((2, 2, 6, 8), (3, 2, 3, 1), [1, 1], [1, 0, 1, 0])]    # padded rows only


@pytest.mark.parametrize(("xs", "ws", "strides", "pads"), DIRECT)
def test_direct_stores_with_a_residual_epilogue(xs, ws, strides, pads) -> None:
    attrs = {"strides": strides, "padding": pads, "dilation": [1, 1], "groups": 1}
    mod = _module(xs, ws, attrs, "residual")
    (script,) = _fused_scripts(mod)
    assert "wide" not in script, script  # no copy-out: the tiles store into out
    inputs = random_inputs(mod, seed=2)
    assert_close_to_interpreter(mod, inputs, build_and_run(mod, inputs), "conv")


@pytest.mark.parametrize(("n", "c", "o"), [(1, 144, 576), (2, 37, 5), (1, 8, 3), (3, 16, 16)])
def test_one_pixel_convs_are_dot_products(n, c, o) -> None:
    """A squeeze-excite block's 1x1 conv on a pooled image: channel-vectorized dot
    products with the lanes and the channel tail summed after, epilogue in the store."""
    xs, ws = (n, c, 1, 1), (o, c, 1, 1)
    attrs = {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1}
    mod = _module(xs, ws, attrs, "bias_relu")
    assert any("lanes" in s for s in _fused_scripts(mod))
    inputs = random_inputs(mod, seed=3)
    assert_close_to_interpreter(mod, inputs, build_and_run(mod, inputs), "conv")
