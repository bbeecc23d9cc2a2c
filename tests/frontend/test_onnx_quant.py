"""Quantized ONNX models: the quantization ops one by one, and whole models quantized by
onnxruntime's own quantizer, against onnxruntime (onnx.reference where onnxruntime
lacks a case).

Per-op cases are built with onnx.helper and must match **exactly**: the converters
compute what the ONNX text and onnxruntime's kernels compute (true division, round half
to even, saturation, exact integer accumulation, onnxruntime's requantization), and the
inputs include ties (x.5 after the division), saturation edges, negative zero points,
per-axis and blocked scales. Every case runs through the interpreter and runtime.build.

Whole models (squeezenet1_1 and resnet18 at 64x64, the transformer encoder and the
MLP of tests/frontend/models) are quantized here into tmp_path with
``quantize_static`` (QDQ and QOperator formats, random calibration data) and
``quantize_dynamic``. Two assertions each:
- against onnxruntime with graph optimizations off (it then runs each op as the ONNX
  text says, which is what irkernel imports): every output element within one step of
  the last DequantizeLinear's scale, and 90% of them equal to float rounding;
- against onnxruntime's default (optimized) session, which fuses QDQ groups into its
  integer kernels and so rounds differently: issue 26's accuracy target, a relative L2
  distance of at most ``1.5 * max(d, 0.3%) + 0.1%``, with ``d`` the distance between
  onnxruntime's two sessions.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from model_weights import load  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx_helpers import run_ort  # noqa: E402

import irkernel as ik  # noqa: E402
import runtime  # noqa: E402
from irkernel.frontend.onnx import ONNXImportError, from_onnx  # noqa: E402

_ELEM = {np.dtype(k): v for k, v in [
    ("float32", TensorProto.FLOAT), ("float16", TensorProto.FLOAT16),
    ("int8", TensorProto.INT8), ("uint8", TensorProto.UINT8), ("int16", TensorProto.INT16),
    ("uint16", TensorProto.UINT16), ("int32", TensorProto.INT32)]}
MS = "com.microsoft"


def _model(nodes, inputs, outputs, inits=None, opset=21, ms=False):
    ins = [helper.make_tensor_value_info(k, _ELEM[v.dtype], list(v.shape))
           for k, v in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(k) for k in outputs]
    tensors = [v if isinstance(v, onnx.TensorProto) else numpy_helper.from_array(np.asarray(v), k)
               for k, v in (inits or {}).items()]
    graph = helper.make_graph(nodes, "g", ins, outs, tensors)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(MS, 1)] if ms else [])
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 10
    return m


def _ours(m, inputs):
    mod = from_onnx(m)
    args = list(inputs.values())
    return mod, ik.interpret(mod, *args), runtime.build(mod)["main"](*args)


def check_exact(m, inputs, oracle="ort"):
    """Interpreter and compiled code equal onnxruntime (or onnx.reference) exactly."""
    if oracle == "ort":
        want = run_ort(m, inputs)
    else:
        want = [np.asarray(w) for w in ReferenceEvaluator(m).run(None, inputs)]
    mod, interp, built = _ours(m, inputs)
    for got in (interp, built):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
            np.testing.assert_array_equal(g, w)
    return mod


def _node(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, **kw)


# ---------------------------------------------------------------------------
# QuantizeLinear / DequantizeLinear
# ---------------------------------------------------------------------------

def _ties(scale, n=24, seed=0):
    """x / scale lands on k + 0.5 (ties), near the saturation edges and beyond them."""
    k = np.arange(-n, n, dtype=np.float32) + np.float32(0.5)
    edges = np.array([126.5, 127.5, 128.5, -127.5, -128.5, -129.5, 254.5, 255.5, 1e6, -1e6],
                     np.float32)
    rng = np.random.default_rng(seed)
    return np.concatenate([k, edges, rng.standard_normal(30).astype(np.float32) * 60]) * \
        np.float32(scale)


@pytest.mark.parametrize("zp", [np.int8(-3), np.uint8(130), np.int8(0), None])
@pytest.mark.parametrize("opset", [10, 13, 19, 21])
def test_quantize_per_tensor_ties_and_saturation(zp, opset):
    x = np.concatenate([_ties(0.25), np.array([np.inf, -np.inf], np.float32)])
    inits = {"s": np.float32(0.25)}
    ins = ["x", "s"]
    if zp is not None:
        inits["z"], ins = zp, ["x", "s", "z"]
    m = _model([_node("QuantizeLinear", ins, ["y"])], {"x": x}, ["y"], inits, opset)
    check_exact(m, {"x": x})


def test_quantize_divides_rather_than_multiplying_by_the_reciprocal():
    """Values where x / s and x * (1 / s) round to different integers (onnxruntime divides)."""
    s = np.float32(0.1)
    k = np.arange(-120, 120, dtype=np.float32) + np.float32(0.5)
    xs = (k * s).astype(np.float32)
    xs = np.concatenate([xs, np.nextafter(xs, np.float32(np.inf)),
                         np.nextafter(xs, np.float32(-np.inf))])
    x = xs[np.rint(xs / s) != np.rint(xs * (np.float32(1) / s))]
    assert x.size > 10
    m = _model([_node("QuantizeLinear", ["x", "s", "z"], ["y"])], {"x": x}, ["y"],
               {"s": s, "z": np.int8(0)}, 13)
    check_exact(m, {"x": x})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_quantize_dequantize_per_axis(dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    x = (rng.standard_normal((2, 3, 5)) * 40).astype(np.float32)
    scale = np.array([0.5, 0.25, 0.125], np.float32)
    zp = np.array([info.min + 3, 0, info.max - 5] if info.min < 0 else [3, 128, info.max - 5],
                  dtype)
    nodes = [_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=-2),
             _node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)]
    check_exact(_model(nodes, {"x": x}, ["q", "y"], {"s": scale, "z": zp}), {"x": x})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_quantize_dequantize_blocked(dtype):
    """Blocks of 4 along axis 1 of width 10: the last block is cut short."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 10)) * 20).astype(np.float32)
    scale = (rng.uniform(0.05, 0.5, (3, 3))).astype(np.float32)
    zp = rng.integers(-5, 5, (3, 3)).astype(dtype) if dtype == np.int8 else \
        rng.integers(100, 140, (3, 3)).astype(dtype)
    nodes = [_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=4),
             _node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=4)]
    check_exact(_model(nodes, {"x": x}, ["q", "y"], {"s": scale, "z": zp}), {"x": x})


def test_quantize_output_dtype_without_zero_point():
    x = _ties(0.5)
    m = _model([_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TensorProto.INT16)],
               {"x": x * 300}, ["y"], {"s": np.float32(0.5)})
    check_exact(m, {"x": x * 300})


def test_quantize_float16_input_and_dequantize_to_float16():
    x = _ties(0.25)
    x = x[np.abs(x) < 1e4].astype(np.float16)  # onnx.reference casts inf to int32 (undefined)
    nodes = [_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             _node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    m = _model(nodes, {"x": x}, ["q", "y"], {"s": np.float16(0.25), "z": np.int8(-2)}, 19)
    check_exact(m, {"x": x}, oracle="reference")


def test_quantize_precision_attribute():
    """Opset 23: a float16 input divided in float32 (x / s in float16 would round first)."""
    rng = np.random.default_rng(15)
    x = (rng.standard_normal(200) * 30).astype(np.float16)
    m = _model([_node("QuantizeLinear", ["x", "s", "z"], ["y"], precision=TensorProto.FLOAT)],
               {"x": x}, ["y"], {"s": np.float16(0.0999), "z": np.int8(1)}, 23)
    check_exact(m, {"x": x}, oracle="reference")


def test_dequantize_int32_and_output_dtype():
    x = np.array([-2**31, -5, 0, 7, 2**31 - 1, 123456789], np.int32)
    nodes = [_node("DequantizeLinear", ["x", "s"], ["y"]),
             _node("DequantizeLinear", ["x", "s"], ["h"], output_dtype=TensorProto.FLOAT16)]
    m = _model(nodes, {"x": x}, ["y", "h"], {"s": np.float32(1e-4)}, 23)
    check_exact(m, {"x": x}, oracle="reference")


def test_int4_weights_unpacked_at_import_and_folded():
    """A blocked int4 weight (the form of 4-bit LLM exports): DequantizeLinear of an int4
    initializer folds at import into a float constant feeding MatMul."""
    rng = np.random.default_rng(3)
    w = rng.integers(-8, 8, (8, 6))
    w_t = helper.make_tensor("w", TensorProto.INT4, [8, 6], w.flatten().tolist())
    z_t = helper.make_tensor("z", TensorProto.INT4, [2, 6], rng.integers(-2, 3, 12).tolist())
    scale = rng.uniform(0.01, 0.1, (2, 6)).astype(np.float32)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    nodes = [_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0, block_size=4),
             _node("MatMul", ["x", "wf"], ["y"])]
    m = _model(nodes, {"x": x}, ["y"], {"w": w_t, "s": scale, "z": z_t})
    want = run_ort(m, {"x": x})[0]
    mod, interp, built = _ours(m, {"x": x})
    np.testing.assert_allclose(built[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(interp[0], want, rtol=1e-5, atol=1e-6)
    kinds = {mod["main"].node_type(int(i))[0] for i in range(len(mod["main"].kind))}
    assert "int8" not in kinds  # the weight is a float constant: nothing int4 runs


@pytest.mark.parametrize("signed", [True, False])
def test_int4_quantize_saturates_to_four_bits(signed):
    x = _ties(0.5, n=12)
    z = helper.make_tensor("z", TensorProto.INT4 if signed else TensorProto.UINT4, [],
                           [-1 if signed else 7])
    nodes = [_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             _node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    m = _model(nodes, {"x": x}, ["y"], {"s": np.float32(0.5), "z": z})
    check_exact(m, {"x": x})


def test_int4_graph_inputs_and_outputs_are_named_errors():
    z = helper.make_tensor("z", TensorProto.INT4, [], [1])
    x = np.zeros(4, np.float32)
    out = _model([_node("QuantizeLinear", ["x", "s", "z"], ["q4"])], {"x": x}, ["q4"],
                 {"s": np.float32(0.5), "z": z})
    with pytest.raises(ONNXImportError, match="graph output 'q4' is of type int4"):
        from_onnx(out)
    graph = helper.make_graph(
        [_node("DequantizeLinear", ["w4", "s"], ["y"])], "g",
        [helper.make_tensor_value_info("w4", TensorProto.UINT4, [4])],
        [helper.make_empty_tensor_value_info("y")], [numpy_helper.from_array(np.float32(1), "s")])
    with pytest.raises(ONNXImportError, match="graph input 'w4' has element type UINT4"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))


def test_bad_scale_shapes_are_named_errors():
    x = np.zeros((2, 3), np.float32)
    m = _model([_node("QuantizeLinear", ["x", "s"], ["y"], axis=1)], {"x": x}, ["y"],
               {"s": np.ones(4, np.float32)})
    with pytest.raises(ONNXImportError, match=r"y_scale of shape \[4\] is neither one value"):
        from_onnx(m)
    m = _model([_node("DequantizeLinear", ["x8", "s"], ["y"], axis=1, block_size=2)],
               {"x8": np.zeros((2, 3), np.int8)}, ["y"], {"s": np.ones((2, 1), np.float32)})
    with pytest.raises(ONNXImportError, match="does not block"):
        from_onnx(m)


_QTYPES = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16}


def _numpy_quantize(x, scale, zp, dtype):
    info = np.iinfo(dtype)
    q = np.rint(x / scale).astype(np.float64) + zp.astype(np.float64)
    return np.clip(q, info.min, info.max).astype(dtype)


@settings(max_examples=25)
@given(st.data())
def test_quantize_dequantize_match_numpy(data):
    """Random shapes, axes, granularity, scales, zero points and ties, in the interpreter."""
    rank = data.draw(st.integers(1, 3), label="rank")
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    name = data.draw(st.sampled_from(sorted(_QTYPES)), label="dtype")
    dtype = _QTYPES[name]
    info = np.iinfo(dtype)
    axis = data.draw(st.integers(-rank, rank - 1), label="axis")
    per_axis = data.draw(st.booleans(), label="per_axis")
    n = shape[axis] if per_axis else 1
    seed = data.draw(st.integers(0, 2**16), label="seed")
    rng = np.random.default_rng(seed)
    scale = (2.0 ** rng.integers(-6, 3, n) * rng.choice([1.0, 0.3, 0.7], n)).astype(np.float32)
    zp = rng.integers(info.min, int(info.max) + 1, n).astype(dtype)
    bshape = [1] * rank
    bshape[axis] = n
    s_b, z_b = scale.reshape(bshape), zp.reshape(bshape)
    steps = rng.integers(-2 * 2**15, 2 * 2**15, shape) / 2.0  # half-integers: ties
    x = (steps * s_b + rng.standard_normal(shape) * s_b * rng.integers(0, 2)).astype(np.float32)
    s_arr, z_arr = (scale, zp) if per_axis else (scale.reshape(()), zp.reshape(()))
    nodes = [_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=axis),
             _node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=axis)]
    mod = from_onnx(_model(nodes, {"x": x}, ["q", "y"], {"s": s_arr, "z": z_arr}))
    q, y = ik.interpret(mod, x)
    want_q = _numpy_quantize(x, s_b, z_b, dtype)
    np.testing.assert_array_equal(q, want_q)
    want_y = ((want_q.astype(np.float32) - z_b.astype(np.float32)) * s_b).astype(np.float32)
    np.testing.assert_array_equal(y, want_y)


# ---------------------------------------------------------------------------
# DynamicQuantizeLinear, integer and QLinear ops
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["normal", "positive", "negative", "zeros"])
def test_dynamic_quantize_linear(case):
    rng = np.random.default_rng(4)
    x = {"normal": rng.standard_normal((3, 7)) * 3, "positive": rng.uniform(0.5, 4, (3, 7)),
         "negative": -rng.uniform(0.5, 4, (3, 7)), "zeros": np.zeros((3, 7))}[case]
    x = x.astype(np.float32)
    m = _model([_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], {"x": x},
               ["y", "s", "z"], opset=11)
    check_exact(m, {"x": x})


def _ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)


@pytest.mark.parametrize("k", [16, 2048])  # 2048: the bound passes 2**24, float64 sums
def test_matmul_integer_exact(k):
    rng = np.random.default_rng(5)
    a, b = _ints(rng, np.uint8, (2, 3, k)), _ints(rng, np.int8, (k, 5))
    inits = {"b": b, "az": np.uint8(17), "bz": _ints(rng, np.int8, (5,))}
    m = _model([_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], {"a": a}, ["y"], inits,
               opset=10)
    mod = check_exact(m, {"a": a})
    dtypes = {mod["main"].node_type(int(i))[0] for i in range(len(mod["main"].kind))}
    assert ("float64" in dtypes) == (k == 2048)


def test_conv_integer_exact():
    rng = np.random.default_rng(6)
    x, w = _ints(rng, np.uint8, (1, 4, 7, 7)), _ints(rng, np.uint8, (6, 4, 3, 3))
    m = _model([_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1],
                      strides=[2, 1])], {"x": x}, ["y"],
               {"w": w, "xz": np.uint8(128), "wz": np.uint8(3)}, opset=10)
    check_exact(m, {"x": x})


@pytest.mark.parametrize("xdtype,wdtype", [(np.uint8, np.int8), (np.int8, np.int8),
                                           (np.uint8, np.uint8)])
def test_qlinear_conv_per_channel_with_bias(xdtype, wdtype):
    rng = np.random.default_rng(7)
    x, w = _ints(rng, xdtype, (1, 4, 9, 9)), _ints(rng, wdtype, (8, 2, 3, 3))
    ydtype = xdtype
    inits = {"xs": np.float32(0.02), "xz": xdtype(3 if xdtype == np.int8 else 120),
             "w": w, "ws": rng.uniform(0.001, 0.01, 8).astype(np.float32),
             "wz": np.zeros(8, wdtype), "ys": np.float32(0.05),
             "yz": ydtype(-4 if ydtype == np.int8 else 100),
             "b": rng.integers(-3000, 3000, 8).astype(np.int32)}
    node = _node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                 group=2, pads=[1, 0, 1, 2], strides=[1, 2])
    check_exact(_model([node], {"x": x}, ["y"], inits, opset=10), {"x": x})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_matmul(dtype):
    rng = np.random.default_rng(8)
    a, b = _ints(rng, dtype, (2, 4, 16)), _ints(rng, dtype, (2, 16, 3))
    inits = {"as": np.float32(0.03), "az": dtype(5), "bs": np.float32(0.02), "bz": dtype(-1 if
             dtype == np.int8 else 130), "ys": np.float32(0.4), "yz": dtype(7)}
    node = _node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    check_exact(_model([node], {"a": a, "b": b}, ["y"], inits, opset=10), {"a": a, "b": b})


def test_maxpool_on_int8():
    x = _ints(np.random.default_rng(9), np.int8, (1, 2, 6, 6))
    m = _model([_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                      pads=[1, 1, 1, 1])], {"x": x}, ["y"], opset=12)
    check_exact(m, {"x": x})


def test_qdq_work_fuses_into_the_conv_kernel():
    """The weight's DequantizeLinear folds at import (no integer weight is left), and the
    Q/DQ elementwise work fuses: one kernel quantizes and dequantizes the input, one
    runs the conv with Relu, QuantizeLinear and DequantizeLinear as its epilogue."""
    rng = np.random.default_rng(14)
    inits = {"xs": np.float32(0.02), "xz": np.uint8(128), "w": _ints(rng, np.int8, (8, 4, 3, 3)),
             "ws": np.float32(0.01), "wz": np.int8(0), "ys": np.float32(0.05),
             "yz": np.uint8(100)}
    nodes = [_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             _node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             _node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             _node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]), _node("Relu", ["c"], ["r"]),
             _node("QuantizeLinear", ["r", "ys", "yz"], ["yq"]),
             _node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    x = rng.standard_normal((1, 4, 128, 128)).astype(np.float32)
    m = _model(nodes, {"x": x}, ["y"], inits, opset=17)
    mod = from_onnx(m)
    func = mod["main"]
    dtypes = {func.node_type(int(i))[0] for i in range(len(func.kind))}
    assert "int8" not in dtypes  # the weight is a float constant
    ex = runtime.build(mod)
    kernels = sorted(name for name in ex if name != "main")
    assert len(kernels) == 2 and any(k.startswith("fused_conv_relu_divide_round") for k in kernels), \
        kernels
    # the float conv of a QDQ model sums in another order than the interpreter: a sum
    # on a rounding tie of the QuantizeLinear after it may flip by one step (0.05)
    diff = np.abs(ex["main"](x)[0] - ik.interpret(mod, x)[0])
    assert diff.max() <= 0.05 * 1.0001 and np.mean(diff == 0) >= 0.99


def _ms_exact(m, inputs, at_least=0.99):
    """com.microsoft ops: onnxruntime is the only oracle; its kernels' float order is not
    documented, so one step of difference is allowed on 1% of the elements."""
    want = run_ort(m, inputs)
    _, interp, built = _ours(m, inputs)
    for got in (interp, built):
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
                continue
            assert diff.max() <= 1 and np.mean(diff == 0) >= at_least, diff.max()


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_add_mul(op, dtype):
    rng = np.random.default_rng(10)
    a, b = _ints(rng, dtype, (2, 3, 8)), _ints(rng, dtype, (3, 1))
    inits = {"as": np.float32(0.07), "az": dtype(4), "bs": np.float32(0.03), "bz": dtype(9),
             "cs": np.float32(0.11 if op == "QLinearAdd" else 0.5), "cz": dtype(2)}
    node = _node(op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain=MS)
    _ms_exact(_model([node], {"a": a, "b": b}, ["c"], inits, ms=True), {"a": a, "b": b})


@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(channels_last):
    x = _ints(np.random.default_rng(11), np.uint8, (2, 5, 6, 4))
    inits = {"xs": np.float32(0.05), "xz": np.uint8(128), "ys": np.float32(0.02),
             "yz": np.uint8(120)}
    node = _node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                 channels_last=channels_last)
    _ms_exact(_model([node], {"x": x}, ["y"], inits, ms=True), {"x": x})


def test_qlinear_concat_requantizes_each_input():
    rng = np.random.default_rng(12)
    x0, x1 = _ints(rng, np.uint8, (1, 2, 3)), _ints(rng, np.uint8, (1, 3, 3))
    inits = {"ys": np.float32(0.1), "yz": np.uint8(128), "s0": np.float32(0.1),
             "z0": np.uint8(128), "s1": np.float32(0.037), "z1": np.uint8(90)}
    node = _node("QLinearConcat", ["ys", "yz", "x0", "s0", "z0", "x1", "s1", "z1"], ["y"],
                 domain=MS, axis=1)
    _ms_exact(_model([node], {"x0": x0, "x1": x1}, ["y"], inits, ms=True), {"x0": x0, "x1": x1})


@pytest.mark.parametrize("quantized_output", [True, False])
def test_qgemm(quantized_output):
    rng = np.random.default_rng(13)
    a, b = _ints(rng, np.uint8, (4, 12)), _ints(rng, np.int8, (5, 12))
    inits = {"as": np.float32(0.02), "az": np.uint8(128), "b": b,
             "bs": rng.uniform(0.01, 0.03, 5).astype(np.float32), "bz": np.zeros(5, np.int8),
             "c": rng.integers(-500, 500, 5).astype(np.int32), "ys": np.float32(0.3),
             "yz": np.uint8(110)}
    ins = ["a", "as", "az", "b", "bs", "bz", "c"] + (["ys", "yz"] if quantized_output else [])
    node = _node("QGemm", ins, ["y"], domain=MS, transB=1, alpha=0.5)
    _ms_exact(_model([node], {"a": a}, ["y"], inits, ms=True), {"a": a})


# ---------------------------------------------------------------------------
# Whole models quantized by onnxruntime
# ---------------------------------------------------------------------------

class _Reader(quantization.CalibrationDataReader):
    def __init__(self, name, shape, count=3):
        rng = np.random.default_rng(21)
        self._data = iter([{name: rng.standard_normal(shape).astype(np.float32)}
                           for _ in range(count)])

    def get_next(self):
        return next(self._data, None)


def _shared_constants_as_initializers(model):
    """PyTorch shares equal biases through Identity nodes, which onnxruntime's quantizer
    cannot quantize: each such output becomes an initializer of its own."""
    inits = {t.name: t for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[node.input[0]])
            copy.name = node.output[0]
            model.graph.initializer.append(copy)
            inits[copy.name] = copy
        else:
            nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def _ort_session(model, optimized):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    if not optimized:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _last_dequantize_step(model):
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    dq = [n for n in model.graph.node if n.op_type == "DequantizeLinear"]
    return float(np.max(inits[dq[-1].input[1]])) if dq else None


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


MODELS = [("squeezenet1_1", "QDQ"), ("squeezenet1_1", "QOperator"), ("resnet18", "QOperator"),
          ("transformer_encoder", "QOperator"), ("transformer_encoder", "dynamic"),
          ("mlp", "dynamic")]


@pytest.mark.parametrize("name,form", MODELS, ids=[f"{n}-{f}" for n, f in MODELS])
def test_quantized_model_matches_onnxruntime(name, form, tmp_path):
    model = _shared_constants_as_initializers(load(name))
    info = model.graph.input[0]
    dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
    src, dst = tmp_path / "float.onnx", tmp_path / "quant.onnx"
    onnx.save(model, str(src))
    if form == "dynamic":
        quantization.quantize_dynamic(str(src), str(dst))
    else:
        fmt = quantization.QuantFormat.QDQ if form == "QDQ" else quantization.QuantFormat.QOperator
        # Softmax stays float (onnxruntime would emit its com.microsoft QLinearSoftmax)
        quantization.quantize_static(
            str(src), str(dst), _Reader(info.name, dims), quant_format=fmt,
            per_channel=name == "resnet18",  # per-channel weight scales: QLinearConv, QGemm
            op_types_to_quantize=["Conv", "MatMul", "Gemm", "Add", "Mul", "Concat", "MaxPool",
                                  "GlobalAveragePool", "Relu"])
    qmodel = onnx.load(str(dst))
    domains = {n.domain for n in qmodel.graph.node}
    assert (MS in domains) == (form == "QOperator"), domains
    x = np.random.default_rng(22).standard_normal(dims).astype(np.float32)
    (got,) = runtime.build(from_onnx(qmodel))["main"](x)
    (plain,) = _ort_session(qmodel, optimized=False).run(None, {info.name: x})
    (fused,) = _ort_session(qmodel, optimized=True).run(None, {info.name: x})
    assert got.shape == plain.shape and got.dtype == plain.dtype
    step = _last_dequantize_step(qmodel) if form != "dynamic" else None
    diff = np.abs(got - plain)
    if step is not None:
        assert diff.max() <= step * 1.0001, (diff.max(), step)
        assert np.mean(diff <= 1e-6 * np.abs(plain).max()) >= 0.9
    else:  # a float output (dynamic quantization): the integer parts are exact
        assert _rel(got, plain) <= 1e-4, _rel(got, plain)
    d = _rel(plain, fused)
    assert _rel(got, fused) <= 1.5 * max(d, 0.003) + 0.001, (_rel(got, fused), d)
