"""Hypothesis over ONNX models (issue 28 part 4): a model is untrusted input.

- bytes: real models (``tests/frontend/models``: lstm, transformer_encoder and vit_tiny
  with their weights restored, the stripped files of the CNNs) with bytes flipped,
  inserted, deleted and cut: ``from_onnx`` returns a module that verifies, or raises
  ``ONNXImportError`` / ``OpNotImplemented``; nothing else, whatever the bytes;
- structure: small valid models with one structured fault: a dim or dtype changed, an
  initializer removed or cut, two nodes made a cycle, an attribute of the wrong type,
  an output dropped: the same contract;
- differential: random small graphs of converted ops (elementwise, MatMul, Transpose,
  reductions, Concat, Gather) on random shapes: the imported module, interpreted,
  matches onnxruntime.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from fuzz_budget import budget
from hypothesis import given
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import irkernel as ik  # noqa: E402
from irkernel.frontend.onnx import ONNXImportError, OpNotImplemented, from_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "frontend"))
from model_weights import HERE, load  # noqa: E402
from onnx_helpers import model as make_model  # noqa: E402
from onnx_helpers import run_ort  # noqa: E402

DOCUMENTED = (ONNXImportError, OpNotImplemented)
#: Models small enough with their weights to import hundreds of times.
WITH_WEIGHTS = ("lstm", "transformer_encoder", "vit_tiny")
STRIPPED = ("resnet18", "squeezenet1_1", "googlenet")


@cache
def real_models() -> tuple[bytes, ...]:
    full = [load(name).SerializeToString() for name in WITH_WEIGHTS]
    return (*full, *((HERE / f"{name}.onnx").read_bytes() for name in STRIPPED))


def _imports_or_documented(data: bytes | onnx.ModelProto) -> None:
    """The contract: a module that verifies, or a documented error."""
    try:
        mod = from_onnx(data)
    except DOCUMENTED:
        return
    ik.verify(mod)


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(real_models())))
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        # mostly in place: a shifted byte breaks the protobuf framing, and the point is
        # to get models past the parser
        how = draw(st.sampled_from(["flip", "flip", "flip", "set", "set", "insert", "delete",
                                    "cut"]))
        if how == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif how == "set":
            data[i] = draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
        elif how == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif how == "delete":
            del data[i:i + draw(st.integers(1, 16))]
        else:
            del data[max(i, 1):]
    return bytes(data)


@budget(150)
@given(mutated_bytes())
def test_mutated_model_bytes_import_or_raise_onnx_import_error(data: bytes) -> None:
    _imports_or_documented(data)


# ---------------------------------------------------------------------------
# structured mutations of small valid models
# ---------------------------------------------------------------------------

X = np.arange(12, dtype=np.float32).reshape(3, 4)
W = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5)


def _templates() -> list[onnx.ModelProto]:
    return [
        make_model([helper.make_node("MatMul", ["x", "w"], ["m"]),
                    helper.make_node("Relu", ["m"], ["y"])], {"x": X}, ["y"], {"w": W}),
        make_model([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                    helper.make_node("Reshape", ["t", "s"], ["y"])], {"x": X}, ["y"],
                   {"s": np.array([2, 6], np.int64)}),
        make_model([helper.make_node("Gather", ["x", "i"], ["g"], axis=1),
                    helper.make_node("ReduceSum", ["g", "a"], ["y"], keepdims=1)], {"x": X},
                   ["y"], {"i": np.array([0, 3, -1], np.int64), "a": np.array([0], np.int64)}),
        make_model([helper.make_node("ConstantOfShape", ["s"], ["c"],
                                     value=numpy_helper.from_array(np.ones(1, np.float32))),
                    helper.make_node("Concat", ["x", "c"], ["y"], axis=0)], {"x": X}, ["y"],
                   {"s": np.array([2, 4], np.int64)}),
        make_model([helper.make_node("Conv", ["x4", "k"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2])],
                   {"x4": np.ones((1, 2, 4, 4), np.float32)}, ["y"],
                   {"k": np.ones((3, 2, 3, 3), np.float32)}),
    ]


_EDGE_INTS = [-(2**63), -(2**31), -1, 0, 1, 2, 3, 7, 2**31 - 1, 2**40, 2**62]


def _mutate(m: onnx.ModelProto, data: st.DataObject) -> None:
    graph = m.graph
    how = data.draw(st.sampled_from(["dims", "dtype", "drop_init", "cut_init", "cycle",
                                     "attr_type", "attr_value", "input_dim", "drop_output",
                                     "rename_input", "opset"]))
    node = graph.node[data.draw(st.integers(0, len(graph.node) - 1))]
    if how in ("dims", "dtype", "drop_init", "cut_init") and graph.initializer:
        init = graph.initializer[data.draw(st.integers(0, len(graph.initializer) - 1))]
        if how == "dims":
            init.dims[:] = data.draw(st.lists(st.sampled_from(_EDGE_INTS), max_size=4))
        elif how == "dtype":
            init.data_type = data.draw(st.integers(0, 30))
        elif how == "drop_init":
            graph.initializer.remove(init)
        else:
            init.raw_data = init.raw_data[:data.draw(st.integers(0, max(0, len(init.raw_data))))]
    elif how == "cycle" and len(graph.node) > 1:
        graph.node[0].input[0] = graph.node[-1].output[0]
    elif how == "attr_type" and node.attribute:
        attr = node.attribute[0]
        value = data.draw(st.sampled_from([1.5, "s", [1.0, 2.0], 7, [2**62, -5],
                                           numpy_helper.from_array(np.ones(2, np.int64))]))
        node.attribute.remove(attr)
        node.attribute.append(helper.make_attribute(attr.name, value))
    elif how == "attr_value" and node.attribute:
        attr = node.attribute[0]
        if attr.ints:
            attr.ints[data.draw(st.integers(0, len(attr.ints) - 1))] = data.draw(
                st.sampled_from(_EDGE_INTS))
        elif attr.type == onnx.AttributeProto.INT:
            attr.i = data.draw(st.sampled_from(_EDGE_INTS))
    elif how == "input_dim" and graph.input:
        dims = graph.input[0].type.tensor_type.shape.dim
        if dims:
            dims[data.draw(st.integers(0, len(dims) - 1))].dim_value = data.draw(
                st.sampled_from([0, 1, 2**31, 2**62]))
    elif how == "drop_output" and node.output:
        node.output[0] = data.draw(st.sampled_from(["", "zz"]))
    elif how == "rename_input" and node.input:
        node.input[data.draw(st.integers(0, len(node.input) - 1))] = data.draw(
            st.sampled_from(["", "nope", node.output[0]]))
    elif how == "opset":
        m.opset_import[0].version = data.draw(st.sampled_from([0, 1, 6, 10, 99]))


@budget(300)
@given(st.integers(0, len(_templates()) - 1), st.data())
def test_structured_faults_raise_onnx_import_error(which: int, data: st.DataObject) -> None:
    m = _templates()[which]
    for _ in range(data.draw(st.integers(1, 3))):
        _mutate(m, data)
    _imports_or_documented(m)
    _imports_or_documented(m.SerializeToString())


# ---------------------------------------------------------------------------
# differential: random small graphs against onnxruntime
# ---------------------------------------------------------------------------

_UNARY = ["Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Exp", "Floor", "Sqrt"]
_BINARY = ["Add", "Sub", "Mul", "Max", "Min"]


@st.composite
def random_graphs(draw: st.DrawFn) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    inputs = {"x": rng.standard_normal((rows, cols)).astype(np.float32),
              "z": rng.standard_normal((1, cols)).astype(np.float32)}
    values = {"x": (rows, cols), "z": (1, cols)}
    nodes = []
    for k in range(draw(st.integers(1, 6))):
        out = f"v{k}"
        name = draw(st.sampled_from(sorted(values)))
        shape = values[name]
        op = draw(st.sampled_from([*_UNARY, *_BINARY, "Transpose", "ReduceSum", "Concat",
                                   "MatMul", "Gather"]))
        if op in _UNARY:
            src = name if op not in ("Sqrt",) else None
            if src is None:  # sqrt of |x|: no NaN compare noise
                nodes.append(helper.make_node("Abs", [name], [f"a{k}"]))
                src = f"a{k}"
            nodes.append(helper.make_node(op, [src], [out]))
        elif op in _BINARY:
            other = draw(st.sampled_from([n for n, s in values.items()
                                          if len(s) == len(shape) and all(
                                              a == b or 1 in (a, b) for a, b in zip(s, shape))]))
            nodes.append(helper.make_node(op, [name, other], [out]))
            shape = tuple(max(a, b) for a, b in zip(values[other], shape))
        elif op == "Transpose":
            nodes.append(helper.make_node(op, [name], [out], perm=[1, 0]))
            shape = shape[::-1]
        elif op == "ReduceSum":
            axis = draw(st.integers(0, 1))
            nodes.append(helper.make_node("ReduceSum", [name], [out], keepdims=1,
                                          axes=[axis]))
            shape = tuple(1 if a == axis else d for a, d in enumerate(shape))
        elif op == "Concat":
            nodes.append(helper.make_node(op, [name, name], [out], axis=0))
            shape = (shape[0] * 2, shape[1])
        elif op == "MatMul":
            wname = f"w{k}"
            weight = rng.standard_normal((shape[1], draw(st.integers(1, 4)))).astype(np.float32)
            nodes.append(helper.make_node("Constant", [], [wname],
                                          value=numpy_helper.from_array(weight)))
            nodes.append(helper.make_node(op, [name, wname], [out]))
            shape = (shape[0], weight.shape[1])
        else:  # Gather of in-range indices (out-of-range ones clamp here: docs/onnx.md)
            iname = f"i{k}"
            idx = rng.integers(-shape[0], shape[0], draw(st.integers(1, 4))).astype(np.int64)
            nodes.append(helper.make_node("Constant", [], [iname],
                                          value=numpy_helper.from_array(idx)))
            nodes.append(helper.make_node(op, [name, iname], [out], axis=0))
            shape = (len(idx), shape[1])
        values[out] = shape
    m = make_model(nodes, inputs, [nodes[-1].output[0]], opset=13 if draw(st.booleans())
                   else 17)
    # ReduceSum takes axes as an input from opset 13: rewrite for the model's opset
    for node in m.graph.node:
        if node.op_type == "ReduceSum":
            axes = [a.ints for a in node.attribute if a.name == "axes"][0]
            cname = f"axes_{node.output[0]}"
            m.graph.initializer.append(numpy_helper.from_array(np.array(list(axes), np.int64),
                                                               cname))
            node.input.append(cname)
            del node.attribute[[a.name for a in node.attribute].index("axes")]
    return m, inputs


@budget(40)
@given(random_graphs())
def test_random_graphs_match_onnxruntime(case) -> None:
    m, inputs = case
    expected = run_ort(m, inputs)
    mod = from_onnx(m)
    got = ik.interpret(mod, *(inputs[i.name] for i in m.graph.input))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_the_structured_templates_are_valid_models() -> None:
    """The mutations start from models that import and match onnxruntime."""
    for m in _templates():
        inputs = {i.name: (X if i.name == "x" else np.ones((1, 2, 4, 4), np.float32))
                  for i in m.graph.input}
        expected = run_ort(m, inputs)
        got = ik.interpret(from_onnx(m), *inputs.values())
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
