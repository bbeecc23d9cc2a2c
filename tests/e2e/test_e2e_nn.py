"""The NN ops through the whole pipeline (runtime.build) equal the interpreter, and their
epilogues fuse.

Pools are bit-identical (the templates sum in the references' order); conv and
conv_transpose agree within float rounding (the reference sums channels with BLAS).
A conv followed by a bias add and a relu becomes one fused kernel whose nest holds the
epilogue (no second pass over the output).
"""

from __future__ import annotations

import numpy as np
from e2e_helpers import assert_close_to_interpreter, build_and_run
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import irkernel as ik
import passes
from irkernel.testing import random_inputs
from irkernel.tir import PrimFunc, te

DTYPES = st.sampled_from(["float32", "float64"])


def _check(mod: ik.IRModule, seed: int = 0, special: bool = False) -> None:
    inputs = random_inputs(mod, seed=seed, special_values=special)
    got = build_and_run(mod, inputs)
    assert_close_to_interpreter(mod, inputs, got, "nn")


@st.composite
def conv_cases(draw, transpose: bool = False):
    r = draw(st.integers(1, 2))
    groups = draw(st.sampled_from([1, 2]))
    kernel = [draw(st.integers(1, 3)) for _ in range(r)]
    strides = [draw(st.integers(1, 2)) for _ in range(r)]
    dil = [draw(st.integers(1, 2)) for _ in range(r)]
    pads = [draw(st.integers(0, 2)) for _ in range(2 * r)]
    sizes = [draw(st.integers(max(1, dil[a] * (kernel[a] - 1) + 1 - pads[a] - pads[r + a]),
                              6)) for a in range(r)]
    c = groups * draw(st.integers(1, 2))
    o = groups * draw(st.integers(1, 2))
    attrs = {"strides": strides, "padding": pads, "dilation": dil, "groups": groups}
    if transpose:
        attrs["output_padding"] = [draw(st.integers(0, 1)) for _ in range(r)]
        return (2, c, *sizes), (c, o // groups, *kernel), attrs
    return (2, c, *sizes), (o, c // groups, *kernel), attrs


@settings(max_examples=20, deadline=None)
@given(case=conv_cases(), dtype=DTYPES, seed=st.integers(0, 99))
def test_conv_with_bias_and_relu(case, dtype, seed) -> None:
    xs, ws, attrs = case
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, dtype), bb.param("w", ws, dtype)
    y = bb.conv(x, w, **attrs)
    o = ws[0]
    bias = bb.param("b", (o,) + (1,) * (len(xs) - 2), dtype)
    _check(ik.IRModule({"main": bb.finish([bb.relu(bb.add(y, bias)), y])}), seed)


@settings(max_examples=15, deadline=None)
@given(case=conv_cases(transpose=True), dtype=DTYPES, seed=st.integers(0, 99))
def test_conv_transpose(case, dtype, seed) -> None:
    xs, ws, attrs = case
    r = len(xs) - 2
    # ONNX's output size; the paddings may crop everything, which is not a case
    assume(all((xs[2 + a] - 1) * attrs["strides"][a] - attrs["padding"][a]
               - attrs["padding"][r + a] + attrs["dilation"][a] * (ws[2 + a] - 1)
               + attrs["output_padding"][a] + 1 >= 1 for a in range(r)))
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, dtype), bb.param("w", ws, dtype)
    y = bb.conv_transpose(x, w, **attrs)
    _check(ik.IRModule({"main": bb.finish([bb.multiply(y, y)])}), seed)


@settings(max_examples=25, deadline=None)
@given(r=st.integers(1, 3), data=st.data(), dtype=DTYPES, seed=st.integers(0, 99))
def test_pools(r, data, dtype, seed) -> None:
    kernel = [data.draw(st.integers(1, 3)) for _ in range(r)]
    dil = [data.draw(st.integers(1, 2)) for _ in range(r)]
    pads = [data.draw(st.integers(0, k - 1)) for k in kernel] * 2
    sizes = [data.draw(st.integers(max(1, dil[a] * (kernel[a] - 1) + 1 - 2 * pads[a]), 5))
             for a in range(r)]
    attrs = {"kernel": kernel, "strides": [data.draw(st.integers(1, 3)) for _ in range(r)],
             "padding": pads, "dilation": dil, "ceil_mode": data.draw(st.booleans())}
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3, *sizes), dtype)
    outs = [bb.max_pool(x, **attrs),
            bb.avg_pool(x, count_include_pad=data.draw(st.booleans()), **attrs)]
    _check(ik.IRModule({"main": bb.finish(outs)}), seed, special=True)


def _fused_prims(mod: ik.IRModule) -> dict[str, PrimFunc]:
    legal = passes.LegalizeOps()(mod)
    fused = passes.DeadCodeElimination()(passes.FuseTIR()(passes.FuseOps()(legal)))
    return {n: f for n, f in fused.functions.items() if isinstance(f, PrimFunc)}


def test_bias_and_relu_fuse_into_the_conv_nest() -> None:
    # float64: the canonical template (float32 convs of groups 1, stride 1 are scheduled,
    # tests/e2e/test_e2e_conv_schedule.py)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 4, 8, 8), "float64")
    w = bb.param("w", (6, 4, 3, 3), "float64")
    b = bb.param("b", (6, 1, 1), "float64")
    out = bb.relu(bb.add(bb.conv(x, w, padding=[1, 1, 1, 1]), b))
    mod = ik.IRModule({"main": bb.finish([out])})
    prims = _fused_prims(mod)
    assert len(prims) == 1
    (prim,) = prims.values()
    assert prim.attrs["op_name"] == "fused_conv_add_relu"
    desc = te.extract_compute(prim)  # one canonical reduction: the epilogue is in its nest
    assert desc is None or desc.is_reduction
    script = prim.script()
    assert script.count("for i0") == 1, script  # one nest over the output
    _check(mod, 3)


def test_a_pad_before_a_conv() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 2, 5, 5), "float32")
    w = bb.param("w", (3, 2, 3, 3), "float32")
    zero = bb.const(np.float32(0))
    padded = bb.pad(x, zero, pad_width=(0, 0, 1, 2, 0, 0, 2, 1))
    out = bb.conv(padded, w, strides=[2, 1])
    _check(ik.IRModule({"main": bb.finish([out])}), 4)


def test_depthwise_and_grouped_convs_of_a_mobilenet_block() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 8, 9, 9), "float32")
    dw = bb.param("dw", (8, 1, 3, 3), "float32")
    pw = bb.param("pw", (16, 4, 1, 1), "float32")
    y = bb.relu(bb.conv(x, dw, strides=[2, 2], padding=[1, 1, 1, 1], groups=8))
    z = bb.conv(y, pw, groups=2)
    _check(ik.IRModule({"main": bb.finish([z])}), 5)


@settings(max_examples=15, deadline=None)
@given(size=st.integers(1, 6), channels=st.integers(1, 6), spatial=st.integers(0, 2),
       dtype=DTYPES, seed=st.integers(0, 99))
@example(size=6, channels=2, spatial=0, dtype="float32", seed=0)  # window wider than channels
def test_lrn_with_a_relu_epilogue(size, channels, spatial, dtype, seed) -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, channels, *([3] * spatial)), dtype)
    y = bb.lrn(x, size=size, alpha=0.3, beta=0.75, bias=1.5)
    _check(ik.IRModule({"main": bb.finish([bb.relu(y), y])}), seed)
