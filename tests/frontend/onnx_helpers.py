"""Helpers of the ONNX frontend tests: tiny models with onnx.helper, onnxruntime as the oracle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import irkernel as ik

_ELEM = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("float64"): TensorProto.DOUBLE,
         np.dtype("int32"): TensorProto.INT32, np.dtype("int64"): TensorProto.INT64,
         np.dtype("bool"): TensorProto.BOOL}


def model(nodes: Sequence[onnx.NodeProto], inputs: dict[str, np.ndarray],
          outputs: Sequence[str], initializers: dict[str, np.ndarray] | None = None,
          opset: int = 17) -> onnx.ModelProto:
    """A model of ``nodes`` whose inputs have the types of the given arrays; output types
    are left to inference (onnxruntime does not need them)."""
    ins = [helper.make_tensor_value_info(k, _ELEM[v.dtype], list(v.shape))
           for k, v in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(k) for k in outputs]
    inits = [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(list(nodes), "g", ins, outs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def run_ort(m: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3  # no warnings about unused initializers
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in sess.run(None, inputs)]


def assert_close(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> None:
    """rtol 1e-3 and atol 1e-4 * max|expected| (the issue's float32 tolerance)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype.kind == "f":
            scale = float(np.max(np.abs(w))) if w.size else 0.0
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4 * scale + 1e-30)
        else:
            np.testing.assert_array_equal(g, w)


def check(m: onnx.ModelProto, inputs: dict[str, np.ndarray], build: bool = True,
          **kw: Any) -> ik.IRModule:
    """from_onnx == onnxruntime, through the interpreter and (optionally) runtime.build."""
    from irkernel.frontend.onnx import from_onnx

    mod = from_onnx(m, **kw)
    want = run_ort(m, inputs)
    args = list(inputs.values())
    assert_close(ik.interpret(mod, *args), want)
    if build:
        import runtime

        assert_close(runtime.build(mod)["main"](*args), want)
    return mod


def model_inputs(model: onnx.ModelProto, seed: int = 1,
                 sizes: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Random normal inputs, each symbolic dim set from ``sizes``. An input named ``mask``
    is a padding mask of 1.0 (token) and 0.0 (padding): each row keeps a random prefix of
    at least one token, so no row is all padding."""
    rng, sizes = np.random.default_rng(seed), sizes or {}
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for info in model.graph.input:
        if info.name in inits:
            continue
        dims = []
        for d in info.type.tensor_type.shape.dim:
            if d.dim_param and d.dim_param not in sizes:
                raise ValueError(f"input {info.name!r}: symbolic dim {d.dim_param!r} needs "
                                 f"a value in sizes")
            dims.append(sizes[d.dim_param] if d.dim_param else d.dim_value)
        if info.name == "mask":
            lengths = rng.integers(1, dims[1] + 1, size=(dims[0], 1))
            out[info.name] = (np.arange(dims[1]) < lengths).astype(np.float32)
        else:
            out[info.name] = rng.standard_normal(dims).astype(np.float32)
    return out
