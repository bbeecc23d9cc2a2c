"""float16 ONNX models import and run: a float16 conversion of squeezenet1_1 (the PyTorch
export in tests/frontend/models) against onnxruntime on the very same float16 model.

The conversion is done here (initializers, graph inputs and outputs, Constant nodes and
Cast targets become float16), so the test does not depend on onnxconverter-common.
irkernel computes each float16 op in float32 and rounds its result once
(``irkernel.ir.narrow``); onnxruntime's float16 kernels round differently, hence 0.5%.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from model_weights import load  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import irkernel as ik  # noqa: E402
import runtime  # noqa: E402
from irkernel.frontend.onnx import from_onnx  # noqa: E402

FLOAT, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16


def to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every float32 tensor, input, output and cast made float16."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    for k, init in enumerate(graph.initializer):
        if init.data_type == FLOAT:
            arr = numpy_helper.to_array(init).astype(np.float16)
            graph.initializer[k].CopyFrom(numpy_helper.from_array(arr, init.name))
    for info in [*graph.input, *graph.output, *graph.value_info]:
        if info.type.tensor_type.elem_type == FLOAT:
            info.type.tensor_type.elem_type = FLOAT16
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == FLOAT:
                arr = numpy_helper.to_array(attr.t).astype(np.float16)
                attr.t.CopyFrom(numpy_helper.from_array(arr, attr.t.name))
            elif node.op_type == "Cast" and attr.name == "to" and attr.i == FLOAT:
                attr.i = FLOAT16
    return out


def test_float16_squeezenet_matches_onnxruntime() -> None:
    model = to_float16(load("squeezenet1_1"))
    onnx.checker.check_model(model)
    info = model.graph.input[0]
    dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
    x = np.random.default_rng(3).standard_normal(dims).astype(np.float16)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {info.name: x})
    mod = from_onnx(model)
    assert mod["main"].node_type(int(mod["main"].params[0]))[0] == "float16"
    (got,) = runtime.build(mod)["main"](x)
    assert got.dtype == np.float16 and got.shape == want.shape
    scale = float(np.abs(want.astype(np.float32)).max())
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=5e-3,
                               atol=5e-3 * scale)
    # and the compiled model equals the interpreter's float16 semantics closely
    (ref,) = ik.interpret(mod, x)
    np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=2e-3,
                               atol=2e-3 * scale)


def test_float16_weights_are_widened_at_build_time() -> None:
    """A float16 weight is widened to float32 once, at build time (LegalizeOps), not by a
    cast kernel on every call; the result is the interpreter's."""
    rng = np.random.default_rng(3)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 16, 12, 12), "float16")
    w = bb.const(rng.standard_normal((32, 16, 3, 3)).astype(np.float16))  # 4608 elements
    m = bb.const(rng.standard_normal((32 * 144, 20)).astype(np.float16))
    y = bb.relu(bb.conv(x, w, padding=[1, 1, 1, 1]))
    z = bb.matmul(bb.reshape(y, shape=[1, 32 * 144]), m)
    mod = ik.IRModule({"main": bb.finish(z)})
    xv = rng.standard_normal((1, 16, 12, 12)).astype(np.float16)
    ex = runtime.build(mod, cache=False)
    ops_run = [row.ops for row in ex.profile(xv, repeat=1).rows]
    assert ("astype",) not in ops_run, ops_run  # no kernel that only widens a weight
    # a few float16 ulps apart: the conv's float16 results can round the other way, and
    # the matmul sums their 4608 products in another order
    got, want = ex["main"](xv)[0], ik.interpret(mod, xv)[0]
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=5e-3,
                               atol=5e-3 * float(np.abs(want).max()))
