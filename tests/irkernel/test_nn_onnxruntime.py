"""The NN ops' references (what ik.interpret computes) against onnxruntime.

Small ONNX graphs are built with ``onnx.helper`` (one node each); random configurations
cover strides, paddings, dilations, groups (depthwise included), ``ceil_mode``,
``count_include_pad`` and 1 to 3 spatial axes. onnxruntime rejects pads >= the kernel in
pooling, so those are not drawn; configurations whose window does not fit the padded
input are not drawn either (our type rule rejects them, onnxruntime computes odd sizes).
This pins the semantics the ONNX frontend relies on.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import irkernel as ik
from irkernel.ir.ops.nn_rules import sliding_window

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

OPSET = 19


def run_onnx(op_type: str, inputs: list[np.ndarray], **attrs) -> np.ndarray:
    names = [f"in{k}" for k in range(len(inputs))]
    node = helper.make_node(op_type, names, ["out"], **attrs)
    elem = TensorProto.FLOAT if inputs[0].dtype == np.float32 else TensorProto.DOUBLE
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, elem, a.shape)
                      for n, a in zip(names, inputs, strict=True)],
        [helper.make_tensor_value_info("out", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, dict(zip(names, inputs, strict=True)))[0]


def run_ours(op: str, inputs: list[np.ndarray], **attrs) -> np.ndarray:
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"p{k}", a.shape, a.dtype) for k, a in enumerate(inputs)]
    (out,) = ik.interpret(bb.finish([bb.call(op, *xs, **attrs)]), *inputs)
    return out


def assert_close(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != onnxruntime's {theirs.shape}"
    scale = float(np.max(np.abs(theirs), initial=1.0))
    tol = 2e-5 if ours.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol * scale, err_msg=what)


@st.composite
def windows(draw, pool: bool, max_rank: int = 3):
    """(input spatial sizes, kernel, strides, pads (begins + ends), dilations)."""
    r = draw(st.integers(1, max_rank))
    kernel = [draw(st.integers(1, 3)) for _ in range(r)]
    dil = [draw(st.integers(1, 2)) for _ in range(r)]
    strides = [draw(st.integers(1, 3)) for _ in range(r)]
    limit = [k - 1 if pool else 2 for k in kernel]
    pads = [draw(st.integers(0, lim)) for lim in limit] + [draw(st.integers(0, lim))
                                                           for lim in limit]
    sizes = []
    for a in range(r):
        extent = dil[a] * (kernel[a] - 1) + 1
        low = max(1, extent - pads[a] - pads[r + a])
        sizes.append(draw(st.integers(low, low + 4)))
    return sizes, kernel, strides, pads, dil


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@settings(max_examples=40, deadline=None)
@given(win=windows(pool=False), groups=st.sampled_from([1, 2, 3]), depthwise=st.booleans(),
       seed=st.integers(0, 999))
def test_conv_matches_onnxruntime(win, groups, depthwise, seed):
    dtype = np.float32  # onnxruntime's CPU Conv is float32 only
    sizes, kernel, strides, pads, dil = win
    rng = _rng(seed)
    c = groups * (1 if depthwise else rng.integers(1, 3))
    o = groups * (1 if depthwise else rng.integers(1, 3))
    x = rng.standard_normal((2, c, *sizes)).astype(dtype)
    w = rng.standard_normal((o, c // groups, *kernel)).astype(dtype)
    theirs = run_onnx("Conv", [x, w], kernel_shape=kernel, strides=strides, pads=pads,
                      dilations=dil, group=groups)
    ours = run_ours("conv", [x, w], strides=strides, padding=pads, dilation=dil, groups=groups)
    assert_close(ours, theirs, f"conv {win} groups {groups}")


@settings(max_examples=40, deadline=None)
@given(win=windows(pool=False, max_rank=2), groups=st.sampled_from([1, 2]),
       seed=st.integers(0, 999), data=st.data())
def test_conv_transpose_matches_onnxruntime(win, groups, seed, data):
    sizes, kernel, strides, pads, dil = win
    r = len(sizes)
    # onnxruntime needs output_padding < stride
    extra = [data.draw(st.integers(0, strides[a] - 1)) for a in range(r)]
    out = [(sizes[a] - 1) * strides[a] - pads[a] - pads[r + a] + dil[a] * (kernel[a] - 1)
           + extra[a] + 1 for a in range(r)]
    if min(out) < 1:
        return
    rng = _rng(seed)
    c, og = groups * int(rng.integers(1, 3)), int(rng.integers(1, 3))
    x = rng.standard_normal((2, c, *sizes)).astype(np.float32)
    w = rng.standard_normal((c, og, *kernel)).astype(np.float32)
    theirs = run_onnx("ConvTranspose", [x, w], kernel_shape=kernel, strides=strides, pads=pads,
                      dilations=dil, group=groups, output_padding=extra)
    ours = run_ours("conv_transpose", [x, w], strides=strides, padding=pads, dilation=dil,
                    groups=groups, output_padding=extra)
    assert_close(ours, theirs, f"conv_transpose {win} groups {groups} output_padding {extra}")


@settings(max_examples=60, deadline=None)
@given(win=windows(pool=True), ceil=st.booleans(), cip=st.booleans(),
       op=st.sampled_from(["max_pool", "avg_pool"]), seed=st.integers(0, 999))
def test_pools_match_onnxruntime(win, ceil, cip, op, seed):
    sizes, kernel, strides, pads, dil = win
    x = _rng(seed).standard_normal((2, 3, *sizes)).astype(np.float32)
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads, "dilations": dil,
             "ceil_mode": int(ceil)}
    ours_attrs = {"kernel": kernel, "strides": strides, "padding": pads, "dilation": dil,
                  "ceil_mode": ceil}
    if op == "avg_pool":
        attrs["count_include_pad"] = int(cip)
        ours_attrs["count_include_pad"] = cip
    win = sliding_window(tuple(sizes), tuple(kernel), {
        "strides": strides, "padding": pads, "dilation": dil}, ceil)
    # A window with no tap inside the input (possible with dilation) is where the two
    # differ by design: ours gives -inf (max) / 0 (avg), onnxruntime the lowest float.
    assume(all(any(0 <= t < win.size[a] for t in win.taps(a, o))
               for a in range(win.rank) for o in range(win.out[a])))
    theirs = run_onnx("MaxPool" if op == "max_pool" else "AveragePool", [x], **attrs)
    ours = run_ours(op, [x], **ours_attrs)
    assert_close(ours, theirs, f"{op} {attrs}")


def test_ceil_mode_drops_a_window_that_starts_in_the_end_padding():
    # size 5, kernel 2, stride 2, pads 1/1: ceil((5 + 2 - 2) / 2) + 1 = 4 windows, the
    # last would start at position 6 - 1 = 5, in the end padding: 3 windows remain
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 5)
    for op, onnx_op in (("max_pool", "MaxPool"), ("avg_pool", "AveragePool")):
        ours = run_ours(op, [x], kernel=[2], strides=[2], padding=[1, 1], ceil_mode=True)
        theirs = run_onnx(onnx_op, [x], kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1)
        assert ours.shape == theirs.shape == (1, 1, 3)
        assert_close(ours, theirs, op)


@pytest.mark.parametrize(("cip", "want"), [(0, [2.0, 4.0, 5.0]), (1, [2.0, 4.0, 2.5])])
def test_avg_pool_divisor_of_a_window_past_the_padded_input(cip, want):
    # size 5, kernel 3, stride 2, pad end 1, ceil: windows at 0, 2 and 4; the last holds
    # position 4, position 5 (end padding) and position 6 (past the padded input), so
    # its divisor is 1, or 2 with count_include_pad
    x = np.array([[[1.0, 2.0, 3.0, 4.0, 5.0]]], np.float32)
    ours = run_ours("avg_pool", [x], kernel=[3], strides=[2], padding=[0, 1], ceil_mode=True,
                    count_include_pad=bool(cip))
    theirs = run_onnx("AveragePool", [x], kernel_shape=[3], strides=[2], pads=[0, 1],
                      ceil_mode=1, count_include_pad=cip)
    assert_close(ours, theirs, "avg_pool")
    assert ours.ravel().tolist() == want


@settings(max_examples=30, deadline=None)
@given(size=st.sampled_from([1, 3, 5]), channels=st.integers(1, 7),
       alpha=st.sampled_from([1e-4, 0.5, 2.0]), beta=st.sampled_from([0.75, 0.5, 1.3]),
       bias=st.sampled_from([1.0, 2.0, 0.5]), seed=st.integers(0, 999))
def test_lrn_matches_onnxruntime(size, channels, alpha, beta, bias, seed):
    # onnxruntime's LRN takes odd sizes and 4-d inputs only; even sizes follow the ONNX
    # spec's window [c - floor((size-1)/2), c + ceil((size-1)/2)] (test_interp_nn.py;
    # onnx's reference evaluator is no oracle: its LRN loops over the batch axis)
    x = _rng(seed).standard_normal((2, channels, 3, 2)).astype(np.float32)
    theirs = run_onnx("LRN", [x], size=size, alpha=alpha, beta=beta, bias=bias)
    ours = run_ours("lrn", [x], size=size, alpha=alpha, beta=beta, bias=bias)
    assert_close(ours, theirs, f"lrn size {size}")
