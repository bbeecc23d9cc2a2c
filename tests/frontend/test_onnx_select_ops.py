"""TopK, MaxPool's Indices output, AveragePool with dilations and reductions over an empty
axis against onnxruntime: the converters' lowering (k as an attribute or an input, the
take of the values, the index tables of MaxPool, the identity constants) is what is
tested here; ``topk_indices`` itself is tested with the op table."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper
from onnx_helpers import assert_close, check, model, run_ort

import irkernel as ik
import runtime
from irkernel.frontend.onnx import ONNXImportError, from_onnx

RNG = np.random.default_rng(5)


def _ties(dtype: str, *shape: int) -> np.ndarray:
    """Few distinct values (many ties), with NaN and infinities for floats."""
    x = RNG.integers(-3, 4, shape).astype(dtype)
    if dtype.startswith("float"):
        x[x == 3] = np.nan
        x[x == -3] = -np.inf
        x[x == 2] = np.inf
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize(("shape", "axis", "k"), [((4, 9), -1, 3), ((5, 3, 2), 0, 5),
                                                  ((2, 6, 3), 1, 1), ((7,), 0, 0)])
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_sorted_matches_onnxruntime(dtype, shape, axis, k, largest):
    x = _ties(dtype, *shape)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    check(model([node], {"x": x}, ["v", "i"], {"k": np.array([k], np.int64)}, opset=11),
          {"x": x})


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_unsorted_selects_onnxruntimes_elements(largest):
    """sorted=0: onnxruntime's order is its own; the selected positions are the same set
    (irkernel gives them in index order)."""
    x = _ties("float32", 3, 40)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=largest, sorted=0)
    m = model([node], {"x": x}, ["v", "i"], {"k": np.array([7], np.int64)}, opset=11)
    _, want = run_ort(m, {"x": x})
    for mode in ("interpret", "build"):
        mod = from_onnx(m)
        vals, idx = (ik.interpret(mod, x) if mode == "interpret"
                     else runtime.build(mod)["main"](x))
        np.testing.assert_array_equal(idx, np.sort(want, axis=-1))
        np.testing.assert_array_equal(vals, np.take_along_axis(x, idx, axis=-1))


@pytest.mark.parametrize("opset", [1, 10])
def test_topk_k_as_attribute_and_as_input(opset):
    x = _ties("float32", 3, 5, 4)
    if opset == 1:
        nodes, inits = [helper.make_node("TopK", ["x"], ["v", "i"], k=2, axis=1)], {}
    else:
        nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)]
        inits = {"k": np.array([2], np.int64)}
    check(model(nodes, {"x": x}, ["v", "i"], inits, opset=opset), {"x": x})


def test_topk_rejects_k_beyond_the_axis():
    x = _ties("float32", 2, 3)
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"])], {"x": x}, ["v", "i"],
              {"k": np.array([4], np.int64)}, opset=11)
    with pytest.raises(ONNXImportError, match="k = 4 must be in"):
        from_onnx(m)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 2, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 2], "dilations": [2, 1], "storage_order": 1},
    {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2], "storage_order": 1},
])
def test_maxpool_indices_match_onnxruntime(attrs):
    x = _ties("float32", 2, 3, 7, 6)
    x[np.isnan(x)] = 1.0        # onnxruntime does not order NaN (see _max_pool_indices)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    check(model([node], {"x": x}, ["y", "i"], opset=12), {"x": x})


def test_maxpool_indices_1d_and_3d():
    x1, x3 = _ties("float32", 1, 2, 9), _ties("float32", 1, 2, 4, 5, 3)
    x1[np.isnan(x1)] = 0.5
    x3[np.isnan(x3)] = 0.5
    nodes = [helper.make_node("MaxPool", ["a"], ["y", "i"], kernel_shape=[3], strides=[2],
                              pads=[1, 1]),
             helper.make_node("MaxPool", ["b"], ["z", "j"], kernel_shape=[2, 2, 2],
                              pads=[0, 1, 1, 1, 0, 0])]
    check(model(nodes, {"a": x1, "b": x3}, ["y", "i", "z", "j"], opset=12),
          {"a": x1, "b": x3})


@pytest.mark.parametrize("attrs", [
    {"dilations": [2, 2]},
    {"dilations": [2, 1], "pads": [1, 1, 1, 0], "count_include_pad": 1},
    {"dilations": [1, 3], "strides": [2, 1], "pads": [1, 2, 1, 2], "ceil_mode": 1},
])
def test_averagepool_dilations(attrs):
    x = RNG.standard_normal((1, 2, 8, 9)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3], **attrs)
    check(model([node], {"x": x}, ["y"], opset=19), {"x": x})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd",
                                "ReduceLogSumExp"])
@pytest.mark.parametrize("keepdims", [1, 0])
def test_reductions_over_an_empty_axis(op, keepdims):
    x = np.zeros((2, 0, 3), np.float32)
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
    m = model([node], {"x": x}, ["y"], {"axes": np.array([1], np.int64)}, opset=18)
    mod = from_onnx(m)
    want = run_ort(m, {"x": x})
    assert_close(ik.interpret(mod, x), want)
    assert_close(runtime.build(mod)["main"](x), want)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_int_reduce_max_min_over_an_empty_axis_are_the_dtype_extremes(dtype):
    x = np.zeros((3, 0), dtype)
    nodes = [helper.make_node("ReduceMax", ["x", "axes"], ["hi"], keepdims=0),
             helper.make_node("ReduceMin", ["x", "axes"], ["lo"])]
    m = model(nodes, {"x": x}, ["hi", "lo"], {"axes": np.array([-1], np.int64)}, opset=18)
    hi, lo = ik.interpret(from_onnx(m), x)
    info = np.iinfo(dtype)
    assert hi.dtype == dtype and hi.tolist() == [info.min] * 3
    assert lo.shape == (3, 1) and lo.ravel().tolist() == [info.max] * 3
