"""Real models against onnxruntime: the PyTorch exports (tests/frontend/models) and the nine
light models of the onnx wheel with random weights; vgg19's constants are never copied.

Tolerance: rtol 1e-3 and atol 1e-4 * max|expected| (float32), as the issue asks. The
exported CNNs run at reduced resolution (64x64, ViT 32x32; see export_models.py) so that
each builds and runs in seconds on today's untuned kernels.
"""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_weights import MODEL_NAMES, load  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx_helpers import assert_close, model_inputs, run_ort  # noqa: E402

import irkernel as ik  # noqa: E402
import runtime  # noqa: E402
from irkernel.frontend.onnx import from_onnx  # noqa: E402

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
         "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def _compare(model: onnx.ModelProto) -> None:
    inputs = model_inputs(model)
    want = run_ort(model, inputs)
    mod = from_onnx(model)
    got = runtime.build(mod)["main"](*inputs.values())
    assert_close(got, want)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_pytorch_export_matches_onnxruntime(name):
    model = load(name)
    _compare(model)


def random_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """The light model with its ConstantOfShape weights replaced by random initializers:
    He-scaled normals for tensors of rank >= 2, uniform(0.5, 1.5) for vectors (positive, so
    batch-norm variances stay valid)."""
    rng = np.random.default_rng(seed)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {i.name: numpy_helper.to_array(i) for i in out.graph.initializer}
    keep = []
    for node in out.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = tuple(int(d) for d in inits[node.input[0]])
            if len(shape) >= 2:
                fan_in = int(np.prod(shape[1:]))
                arr = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
            else:
                arr = rng.uniform(0.5, 1.5, shape)
            out.graph.initializer.append(
                numpy_helper.from_array(arr.astype(np.float32), node.output[0]))
        else:
            keep.append(node)
    del out.graph.node[:]
    out.graph.node.extend(keep)
    used = {name for node in keep for name in node.input}
    live = [i for i in out.graph.initializer if i.name in used or not i.name.endswith("__SHAPE")]
    dropped = {i.name for i in out.graph.initializer} - {i.name for i in live}
    del out.graph.initializer[:]
    out.graph.initializer.extend(live)
    inputs = [i for i in out.graph.input if i.name not in dropped]  # ir_version 3 lists them
    del out.graph.input[:]
    out.graph.input.extend(inputs)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT)
def test_light_model_with_random_weights_matches_onnxruntime(name):
    model = onnx.load(os.path.join(LIGHT_DIR, f"light_{name}.onnx"))
    _compare(random_weights(model))


def test_vgg19_constants_are_not_copied():
    """light_vgg19's 575 MB of ConstantOfShape weights: one array per distinct weight, held
    by reference by the module (np.shares_memory) and no second copy while importing."""
    model = onnx.load(os.path.join(LIGHT_DIR, "light_vgg19.onnx"))
    tracemalloc.start()
    try:
        mod = from_onnx(model)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    pool = mod["main"].consts
    held = pool.external_nbytes
    assert held > 500e6  # the weights are in the module ...
    assert len(pool.data) < 1e6  # ... by reference, not in the flat buffer
    assert peak < 1.15 * held  # and were never copied while importing
    f = mod["main"]
    values = [f.const_value(int(i)) for i in np.flatnonzero(f.kind == ik.ops.OP_CONST)]
    big = [v for v in values if v.nbytes >= 1 << 16]
    assert all(any(np.shares_memory(v, e) for e in pool.external.values()) for v in big)
