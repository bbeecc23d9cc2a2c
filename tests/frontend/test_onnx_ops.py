"""Converters that use the op contract's graph ops (conv, pooling, slicing, ...) against
onnxruntime: the conversion logic (auto_pad, ceil_mode, negative pads, slice bounds, LSTM
unrolling, ...) is what is tested here; the ops' own semantics are tested with the op table.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper
from onnx_helpers import check, model

RNG = np.random.default_rng(7)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("attrs", [
    {},
    {"strides": [2, 2], "pads": [1, 0, 2, 1]},
    {"dilations": [2, 1], "pads": [2, 1, 2, 1]},
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER", "strides": [2, 3]},
    {"auto_pad": "VALID", "strides": [1, 2]},
    {"group": 2},
    {"group": 4, "pads": [1, 1, 1, 1]},  # depthwise
])
def test_conv2d(attrs):
    c_in = 4
    groups = attrs.get("group", 1)
    x, w, b = _f32(2, c_in, 9, 8), _f32(8, c_in // groups, 3, 3), _f32(8)
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)], {"x": x}, ["y"],
              {"w": w, "b": b})
    check(m, {"x": x})


def test_conv1d_without_bias():
    x, w = _f32(1, 3, 17), _f32(5, 3, 4)
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[3], pads=[1, 2])],
              {"x": x}, ["y"], {"w": w})
    check(m, {"x": x})


@pytest.mark.parametrize("attrs", [
    {}, {"strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 0]},
    {"group": 2, "dilations": [2, 1]}, {"strides": [2, 2], "output_shape": [10, 9]},
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]}])
def test_conv_transpose(attrs):
    x, w, b = _f32(1, 4, 4, 4), _f32(4, 3, 3, 3), _f32(3 * attrs.get("group", 1))
    if attrs.get("group") == 2:
        w = _f32(4, 3, 3, 3)
    m = model([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)], {"x": x},
              ["y"], {"w": w, "b": b})
    check(m, {"x": x})


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 0, 1, 1], "ceil_mode": 1,
     "count_include_pad": 1},
])
def test_pooling(attrs):
    x = _f32(1, 2, 8, 7)
    max_attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    m = model([helper.make_node("MaxPool", ["x"], ["mx"], **max_attrs),
               helper.make_node("AveragePool", ["x"], ["av"], **attrs)], {"x": x}, ["mx", "av"])
    check(m, {"x": x})


def test_maxpool_dilations_1d():
    x = _f32(2, 3, 11)
    m = model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3], dilations=[2],
                                strides=[2], pads=[1, 1])], {"x": x}, ["y"])
    check(m, {"x": x})


def test_lrn():
    x = _f32(2, 7, 3, 3)
    m = model([helper.make_node("LRN", ["x"], ["y"], size=3, alpha=1e-3, beta=0.75, bias=2.0)],
              {"x": x}, ["y"])
    check(m, {"x": x})


def test_slice_steps_negative_indices_and_split():
    x = _f32(6, 7, 8)
    inits = {"s": np.array([-1, 1, 0], np.int64), "e": np.array([-7, 100, -1], np.int64),
             "a": np.array([0, 1, 2], np.int64), "st": np.array([-2, 3, 2], np.int64),
             "sp": np.array([2, 4, 2], np.int64)}
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"]),
             helper.make_node("Split", ["x", "sp"], ["p0", "p1", "p2"], axis=2),
             helper.make_node("Split", ["x"], ["q0", "q1", "q2"], axis=0, num_outputs=3)]
    check(model(nodes, {"x": x}, ["y", "p0", "p1", "p2", "q0", "q1", "q2"], inits, opset=18),
          {"x": x})


def test_gather_with_runtime_and_constant_indices():
    x, idx = _f32(5, 4, 3), np.array([[0, -1], [2, 4]], np.int64)
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], axis=0),
             helper.make_node("Gather", ["x", "c"], ["z"], axis=1)]
    check(model(nodes, {"x": x, "i": idx}, ["y", "z"], {"c": np.array(-2, np.int64)}),
          {"x": x, "i": idx})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_and_negative_pads(mode):
    x = _f32(1, 2, 5, 6)
    pads = np.array([0, 0, 2, -1, 0, 1, -2, 3], np.int64)
    nodes = [helper.make_node("Pad", ["x", "p", "v"], ["y"], mode=mode)]
    check(model(nodes, {"x": x}, ["y"], {"p": pads, "v": np.array(1.5, np.float32)}),
          {"x": x})


def test_scatter_nd_constant_indices():
    data, upd = _f32(4, 5), _f32(2, 5)
    m = model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"])], {"d": data, "u": upd},
              ["y"], {"i": np.array([[3], [1]], np.int64)})
    check(m, {"d": data, "u": upd})


def test_argmax_argmin_reducemin_reduceprod():
    x = _f32(3, 4, 5)
    x[0, 1, 1] = x[0, 1, 3] = 9.0
    nodes = [helper.make_node("ArgMax", ["x"], ["a"], axis=1),
             helper.make_node("ArgMin", ["x"], ["b"], axis=-1, keepdims=0),
             helper.make_node("ArgMax", ["x"], ["c"], axis=2, select_last_index=1),
             helper.make_node("ReduceMin", ["x"], ["d"], axes=[0, 2]),
             helper.make_node("ReduceProd", ["x"], ["e"], axes=[1], keepdims=0)]
    check(model(nodes, {"x": x}, ["a", "b", "c", "d", "e"], opset=13), {"x": x})


def test_erf_gelu_rounding_mod():
    x, y = _f32(4, 6) * 3, np.abs(_f32(6)) + 0.5
    i, j = np.array([7, -7, 5, -5], np.int64), np.array([3, 3, -3, -3], np.int64)
    nodes = [helper.make_node("Erf", ["x"], ["erf"]),
             helper.make_node("Gelu", ["x"], ["gelu"]),
             helper.make_node("Gelu", ["x"], ["gelu_t"], approximate="tanh"),
             helper.make_node("Floor", ["x"], ["fl"]), helper.make_node("Ceil", ["x"], ["ce"]),
             helper.make_node("Round", ["x"], ["ro"]),
             helper.make_node("Mod", ["x", "y"], ["fm"], fmod=1),
             helper.make_node("Mod", ["i", "j"], ["im"]),
             helper.make_node("Mod", ["i", "j"], ["imf"], fmod=1)]
    check(model(nodes, {"x": x, "y": y, "i": i, "j": j},
                ["erf", "gelu", "gelu_t", "fl", "ce", "ro", "fm", "im", "imf"], opset=20),
          {"x": x, "y": y, "i": i, "j": j})


def test_logical():
    a, b = RNG.random((3, 4)) > 0.5, RNG.random(4) > 0.5
    nodes = [helper.make_node("Not", ["a"], ["n"]), helper.make_node("And", ["a", "b"], ["x"]),
             helper.make_node("Or", ["a", "b"], ["o"]), helper.make_node("Xor", ["a", "b"], ["z"])]
    check(model(nodes, {"a": a, "b": b}, ["n", "x", "o", "z"]), {"a": a, "b": b})


@pytest.mark.parametrize(("direction", "extras"), [
    ("forward", False), ("reverse", True), ("bidirectional", True)])
def test_lstm(direction, extras):
    _lstm(direction, 0, extras)


def test_lstm_batch_first_layout_equals_transposed_layout_0():
    """onnxruntime rejects layout=1; its result must be layout 0's, transposed."""
    import irkernel as ik
    from irkernel.frontend.onnx import from_onnx

    m0, x0, _ = _lstm("bidirectional", 0, True, compare=False)
    m1, x1, _ = _lstm("bidirectional", 1, True, compare=False, x=x0.transpose(1, 0, 2))
    y0 = ik.interpret(from_onnx(m0), x0)
    y1 = ik.interpret(from_onnx(m1), x1)
    np.testing.assert_allclose(y1[0], y0[0].transpose(2, 0, 1, 3), rtol=1e-6)
    for a, b in zip(y1[1:], y0[1:], strict=True):
        np.testing.assert_allclose(a, b.transpose(1, 0, 2), rtol=1e-6)


def _lstm(direction: str, layout: int, extras: bool, compare: bool = True,
          x: np.ndarray | None = None):
    rng = np.random.default_rng(3)

    def f32(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    seq, batch, n_in, hidden = 5, 2, 3, 4
    n_dir = 2 if direction == "bidirectional" else 1
    drawn = f32(seq, batch, n_in) if not layout else f32(batch, seq, n_in)
    x = drawn if x is None else x
    inits = {"w": f32(n_dir, 4 * hidden, n_in) * 0.5, "r": f32(n_dir, 4 * hidden, hidden) * 0.5,
             "b": f32(n_dir, 8 * hidden) * 0.1}
    names = ["x", "w", "r", "b"]
    if extras:
        h0, c0 = f32(n_dir, batch, hidden), f32(n_dir, batch, hidden)
        if layout:
            h0, c0 = h0.transpose(1, 0, 2).copy(), c0.transpose(1, 0, 2).copy()
        inits.update({"h0": h0, "c0": c0, "p": f32(n_dir, 3 * hidden)})
        names += ["", "h0", "c0", "p"]
    m = model([helper.make_node("LSTM", names, ["y", "yh", "yc"], hidden_size=hidden,
                                direction=direction, layout=layout)],
              {"x": x}, ["y", "yh", "yc"], inits, opset=14)
    if compare:
        check(m, {"x": x})
    return m, x, inits


def test_lstm_rejects_short_sequence_lens():
    from irkernel.frontend.onnx import ONNXImportError, from_onnx

    x = _f32(4, 1, 2)
    inits = {"w": _f32(1, 8, 2), "r": _f32(1, 8, 2), "sl": np.array([3], np.int32)}
    m = model([helper.make_node("LSTM", ["x", "w", "r", "", "sl"], ["y"], hidden_size=2)],
              {"x": x}, ["y"], inits, opset=14)
    with pytest.raises((ONNXImportError, NotImplementedError)):
        from_onnx(m)



@given(st.data())
@settings(max_examples=30, deadline=None)
def test_slice_bounds_property(data):
    """Random starts/ends/steps (negative, out of range, INT64 extremes) vs onnxruntime."""
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    axes = data.draw(st.permutations(range(len(shape))))[: data.draw(
        st.integers(1, len(shape)))]
    bound = st.one_of(st.integers(-7, 7), st.sampled_from([2**63 - 1, -(2**63)]))
    starts = [data.draw(bound) for _ in axes]
    ends = [data.draw(bound) for _ in axes]
    steps = [data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in axes]
    inits = {"s": np.array(starts, np.int64), "e": np.array(ends, np.int64),
             "a": np.array(axes, np.int64), "t": np.array(steps, np.int64)}
    m = model([helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])], {"x": x}, ["y"],
              inits)
    check(m, {"x": x}, build=False)
