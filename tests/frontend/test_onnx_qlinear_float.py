"""onnxruntime's QLinearSigmoid, QLinearLeakyRelu, QLinearAveragePool and QLinearSoftmax
(converters/qlinear_float.py) against onnxruntime, the only oracle for com.microsoft
ops: one quantization step of difference allowed on 1% of the elements."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_onnx_quant import MS, _ints, _model, _ms_exact, _node  # noqa: E402

from irkernel.frontend.onnx import ONNXImportError, from_onnx  # noqa: E402


def _params(dtype, xs=0.05, xz=None, ys=0.004, yz=None):
    info = np.iinfo(dtype)
    mid = (int(info.min) + int(info.max) + 1) // 2
    return {"xs": np.float32(xs), "xz": dtype(mid if xz is None else xz),
            "ys": np.float32(ys), "yz": dtype(info.min if yz is None else yz)}


def _check(op, x, inits, **attrs):
    node = _node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, **attrs)
    _ms_exact(_model([node], {"x": x}, ["y"], inits, ms=True), {"x": x})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_sigmoid(dtype):
    x = _ints(np.random.default_rng(1), dtype, (3, 7, 5))
    _check("QLinearSigmoid", x, _params(dtype))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), xs=st.floats(0.001, 0.5), ys=st.floats(0.001, 0.5),
       alpha=st.floats(0.0, 1.0), signed=st.booleans())
def test_qlinear_leaky_relu(seed, xs, ys, alpha, signed):
    dtype = np.int8 if signed else np.uint8
    rng = np.random.default_rng(seed)
    x = _ints(rng, dtype, (2, 9))
    info = np.iinfo(dtype)
    inits = _params(dtype, xs, int(rng.integers(info.min, int(info.max) + 1)), ys,
                    int(rng.integers(info.min, int(info.max) + 1)))
    _check("QLinearLeakyRelu", x, inits, alpha=alpha)


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("pool", [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                                  dict(kernel_shape=[2, 3], count_include_pad=1,
                                       pads=[0, 1, 1, 0]),
                                  dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)])
def test_qlinear_average_pool(channels_last, pool):
    shape = (2, 9, 8, 6) if channels_last else (2, 6, 9, 8)
    x = _ints(np.random.default_rng(3), np.uint8, shape)
    # scales of no simple ratio: with equal ones, averages of 4 or 6 values hit exact halves,
    # where the float order of the sum (not specified by onnxruntime) picks the side
    _check("QLinearAveragePool", x, _params(np.uint8, ys=0.0371, yz=128),
           channels_last=channels_last, **pool)


@pytest.mark.parametrize("opset,axis", [(13, -1), (13, 1), (1, 1), (1, -1)])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_softmax(opset, axis, dtype):
    x = _ints(np.random.default_rng(4), dtype, (2, 4, 10))
    _check("QLinearSoftmax", x, _params(dtype, xs=0.08, ys=1 / 256.0), opset=opset, axis=axis)


def test_qlinear_softmax_needs_its_opset():
    x = np.zeros((2, 3), np.uint8)
    node = _node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS)
    with pytest.raises(ONNXImportError, match="opset attribute is required"):
        from_onnx(_model([node], {"x": x}, ["y"], _params(np.uint8), ms=True))
