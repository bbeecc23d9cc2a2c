"""``from_onnx``: an ONNX ModelProto -> an IRModule whose ``main`` runs the graph.

Steps: (1) every node's op type is checked against the converter table at the
model's opset and *all* unsupported ones are reported at once, with counts,
before any conversion (:class:`OpNotImplemented`); (2) initializers become
constants (NumPy arrays, held by reference by the constant pool), the other
graph inputs become parameters in graph order, with shapes and dtypes from the
model or from ``shape_dict``/``dtype_dict``; (3) one Python loop over the ONNX
nodes calls each node's converter (per node, never per element); (4) the graph
outputs, in order, are ``main``'s outputs.

Names are sanitized for the text format: a parameter is named after its ONNX
input with every character outside ``[A-Za-z0-9_]`` replaced by ``_``, a
leading digit prefixed by ``v``, and a numeric suffix against collisions
(``"gpu_0/data_0" -> gpu_0_data_0``, ``"0" -> v0``).

Decisions where ONNX leaves room: tensors of dtypes other than float32,
float64, int32, int64 and bool are rejected with an error naming the input
(float16 constants are widened to float32); dimensions that are symbolic in the
model need a value in ``shape_dict`` (the error names the input and the dim);
a graph output that is a constant of the model is returned as such.

A model is untrusted input (``checks.py``): a path must be a regular file, external
data must stay inside the model's folder, every tensor must hold exactly the values
its dims need, and any failure of a converter is an :class:`ONNXImportError` naming
the node: never an AssertionError, IndexError, KeyError or NumPy error.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from irkernel.frontend.onnx import converters  # noqa: F401  (fills the converter table)
from irkernel.frontend.onnx.checks import (
    check_names,
    check_tensors,
    load_external_data,
    parse_model,
    read_model_file,
)
from irkernel.frontend.onnx.common import (
    Context,
    ONNXImportError,
    OpNotImplemented,
    Value,
    lookup,
)
from irkernel.ir.builder import GraphBuilder
from irkernel.ir.ids import DTYPE_NAMES, dtype_code, shape_problem
from irkernel.ir.module import IRModule

#: ONNX TensorProto element types with an irkernel dtype.
ONNX_DTYPES: dict[int, str] = {
    onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.INT32: "int32", onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.BOOL: "bool", onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.BFLOAT16: "bfloat16", onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.UINT8: "uint8", onnx.TensorProto.INT16: "int16",
    onnx.TensorProto.UINT16: "uint16",
}
_DEFAULT_DOMAINS = ("", "ai.onnx")


def model_opset(model: onnx.ModelProto) -> int:
    """The model's opset of the default domain (1 when it names none)."""
    versions = [imp.version for imp in model.opset_import if imp.domain in _DEFAULT_DOMAINS]
    return int(max(versions)) if versions else 1


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs held by ``node``'s attributes (If's branches, Loop's body)."""
    out: list[onnx.GraphProto] = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            out.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            out.extend(attr.graphs)
    return out


def _nodes_within(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """Every node of ``node``'s subgraphs, at any depth (a sweep over a work list)."""
    found: list[onnx.NodeProto] = []
    todo = _subgraphs(node)
    while todo:
        graph = todo.pop()
        found.extend(graph.node)
        for inner in graph.node:
            todo.extend(_subgraphs(inner))
    return found


def unsupported_ops(graph: onnx.GraphProto, opset: int) -> dict[str, int]:
    """``{op_type: count}`` of the nodes no converter handles at ``opset``, counting the
    nodes of subgraphs (If's branches) too."""
    nodes = [*graph.node, *(inner for node in graph.node for inner in _nodes_within(node))]
    counts = Counter(node.op_type if node.domain in _DEFAULT_DOMAINS
                     else f"{node.domain}.{node.op_type}" for node in nodes)
    return {name: n for name, n in counts.items()
            if "." in name or lookup(name, opset) is None}


def sanitize_names(names: Sequence[str]) -> list[str]:
    """Identifiers for the text format, one per name, all distinct (see module doc)."""
    out: list[str] = []
    taken: set[str] = set()
    for name in names:
        base = re.sub(r"\W", "_", name, flags=re.ASCII) or "input"
        if base[0].isdigit():
            base = "v" + base
        cand, k = base, 1
        while cand in taken:
            cand, k = f"{base}_{k}", k + 1
        taken.add(cand)
        out.append(cand)
    return out


def _load(model: Any) -> onnx.ModelProto:
    """The model, its external data read (from inside its folder only) and every tensor
    checked (``checks.py``): nothing later trusts the file."""
    if isinstance(model, onnx.ModelProto):
        folder = None
    elif isinstance(model, (str, os.PathLike)):
        model, folder = read_model_file(model)
    elif isinstance(model, (bytes, bytearray)):
        model, folder = parse_model(bytes(model), "model bytes"), None
    else:
        raise TypeError(f"from_onnx: model must be an onnx.ModelProto or a path, got "
                        f"{type(model).__name__}")
    check_names(model)
    load_external_data(model, folder)
    check_tensors(model)
    return model


def _input_type(info: onnx.ValueInfoProto, shape_dict: Mapping[str, Sequence[int]],
                dtype_dict: Mapping[str, Any]) -> tuple[str, tuple[int, ...]]:
    name = info.name
    ttype = info.type.tensor_type if info.type.HasField("tensor_type") else None
    if name in dtype_dict:
        dtype = DTYPE_NAMES[dtype_code(dtype_dict[name])]
    elif ttype is None:
        raise ONNXImportError(f"graph input {name!r} is not a tensor")
    elif ttype.elem_type not in ONNX_DTYPES:
        elem = onnx.TensorProto.DataType.Name(ttype.elem_type)
        raise ONNXImportError(f"graph input {name!r} has element type {elem}, which is not "
                              f"supported ({', '.join(DTYPE_NAMES)}); override it with dtype_dict")
    else:
        dtype = ONNX_DTYPES[ttype.elem_type]
    if name in shape_dict:
        shape = tuple(int(d) for d in shape_dict[name])
        problem = shape_problem(shape)
        if problem is not None:
            raise ValueError(f"shape_dict[{name!r}] = {shape}: {problem}")
        return dtype, shape
    if ttype is None or not ttype.HasField("shape"):
        raise ONNXImportError(f"graph input {name!r} has no shape; give it in shape_dict")
    dims = []
    for k, dim in enumerate(ttype.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value >= 0:
            dims.append(int(dim.dim_value))
        else:
            label = dim.dim_param or "?"
            raise ONNXImportError(f"graph input {name!r}: dimension {k} is symbolic ({label!r}); "
                                  f"give the input's shape in shape_dict")
    problem = shape_problem(tuple(dims))
    if problem is not None:
        raise ONNXImportError(f"graph input {name!r}: shape {dims}: {problem}")
    return dtype, tuple(dims)


def _attributes(ctx: Context, node: onnx.NodeProto) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for attr in node.attribute:
        try:
            value = onnx.helper.get_attribute_value(attr)
        except Exception as exc:  # NOTE: onnx raises several kinds for a malformed attribute
            raise ctx.error(f"attribute {attr.name!r}: {exc}") from None
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, onnx.TensorProto):
            try:
                value = numpy_helper.to_array(value)  # checked first (checks.tensor_problem)
            except Exception as exc:  # NOTE: an element type NumPy cannot hold, named
                raise ctx.error(f"attribute {attr.name!r}: {exc}") from None
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", "replace") for v in value]
        attrs[attr.name] = value
    return attrs


def _where(index: int, node: onnx.NodeProto) -> str:
    label = f" {node.name!r}" if node.name else ""
    return f"node {index}{label} ({node.op_type})"


def from_onnx(model: Any, shape_dict: Mapping[str, Sequence[int]] | None = None,
              dtype_dict: Mapping[str, Any] | None = None, opset: int | None = None,
              const_inputs: Mapping[str, Any] | None = None) -> IRModule:
    """Import an ONNX model.

    Parameters
    ----------
    model : onnx.ModelProto, path or bytes
        The model. A path must be a regular file (not a FIFO or device); its external
        data is read from files inside its folder only. A ModelProto or bytes cannot
        have external data.
    shape_dict : mapping, optional
        ``{input name: shape}`` fixing or overriding input shapes (symbolic dims need it).
    dtype_dict : mapping, optional
        ``{input name: dtype}`` overriding input dtypes.
    opset : int, optional
        The default-domain opset to convert at; defaults to the model's.
    const_inputs : mapping, optional
        ``{input name: array}`` binding graph inputs to constant values: they are not
        parameters of ``main``, and shapes, axes or pads computed from them fold at import.

    Returns
    -------
    IRModule
        ``main`` takes the graph's non-initializer inputs in graph order and returns the
        graph's outputs (a list, in graph order); initializers are constants.

    Raises
    ------
    OpNotImplemented
        Listing every unsupported op type with its count, before any conversion.
    ONNXImportError
        Naming the node, input, initializer or attribute that cannot be imported, or the
        file that is not a model.
    """
    model = _load(model)
    if len(model.functions):  # model-local functions (newer exporters): inlined first
        from onnx import inliner

        try:
            model = inliner.inline_local_functions(model)
        except Exception as exc:  # NOTE: a malformed function body, named as the model's
            raise ONNXImportError(f"model-local functions cannot be inlined: {exc}") from None
    graph = model.graph
    opset = model_opset(model) if opset is None else int(opset)
    missing = unsupported_ops(graph, opset)
    if missing:
        raise OpNotImplemented(missing, opset)
    shape_dict, dtype_dict = dict(shape_dict or {}), dict(dtype_dict or {})
    const_inputs = dict(const_inputs or {})
    known_inputs = {i.name for i in graph.input}
    for name in [*shape_dict, *dtype_dict, *const_inputs]:
        if name not in known_inputs:
            raise ValueError(f"from_onnx: {name!r} is not an input of the graph "
                             f"(inputs: {', '.join(sorted(known_inputs)) or 'none'})")
    bb = GraphBuilder("main")
    ctx = Context(bb, opset)
    env = _bind_inputs(ctx, graph, shape_dict, dtype_dict, const_inputs)
    # Each tensor is dropped from env after its last reader, so that a constant replaced by
    # a folded one (a transposed weight) is freed during the import, not held to the end.
    # (a subgraph's nodes read the enclosing scope by name: those names live until the node)
    last_use = {name: k for k, node in enumerate(graph.node)
                for name in [*node.input, *(i for inner in _nodes_within(node)
                                            for i in inner.input)]}
    keep = {o.name for o in graph.output}
    for index, node in enumerate(graph.node):
        _convert_node(ctx, env, index, node)
        for name in node.input:
            if last_use.get(name) == index and name not in keep:
                env.pop(name, None)
    ctx.where = ""
    outputs = []
    for out in graph.output:
        if out.name not in env:
            raise ONNXImportError(f"graph output {out.name!r} is not computed by any node")
        outputs.append(ctx.node(env[out.name]))
    if not outputs:
        raise ONNXImportError("the graph has no outputs")
    return IRModule({"main": bb.finish(outputs)})


def _bind_inputs(ctx: Context, graph: onnx.GraphProto, shape_dict: dict[str, Sequence[int]],
                 dtype_dict: dict[str, Any], const_inputs: dict[str, Any]) -> dict[str, Value]:
    """Initializers and ``const_inputs`` as constants, the other inputs as parameters."""
    env: dict[str, Value] = {}
    for init in graph.initializer:
        ctx.where = f"initializer {init.name!r}"
        try:
            array = numpy_helper.to_array(init)  # checked first (checks.tensor_problem)
        except Exception as exc:  # NOTE: an element type NumPy cannot hold, named
            raise ctx.error(f"{type(exc).__name__}: {exc}") from None
        env[init.name] = ctx.const(array)
    if len(graph.sparse_initializer):
        raise ONNXImportError("sparse initializers are not supported")
    for name, value in const_inputs.items():
        ctx.where = f"const_inputs[{name!r}]"
        env[name] = ctx.const(np.asarray(value))
    inputs = [i for i in graph.input if i.name not in env]
    for info, pname in zip(inputs, sanitize_names([i.name for i in inputs]), strict=True):
        dtype, shape = _input_type(info, shape_dict, dtype_dict)
        node = ctx.bb.param(pname, shape, dtype)
        env[info.name] = Value(dtype_code(dtype), shape, node=node)
    return env


def _inline_graph(ctx: Context, env: dict[str, Value], graph: onnx.GraphProto) -> list[Value]:
    """Convert ``graph`` (a branch of If) in the scope ``env``: its initializers become
    constants, its nodes are converted in order, and its outputs are returned. Names it
    defines shadow the enclosing ones and do not leak out."""
    where = ctx.where
    scope = dict(env)
    label = f"{where}, subgraph {graph.name!r}"
    for init in graph.initializer:
        ctx.where = f"{label} initializer {init.name!r}"
        try:
            scope[init.name] = ctx.const(numpy_helper.to_array(init))  # checked first
        except Exception as exc:  # NOTE: an element type NumPy cannot hold, named
            raise ctx.error(f"{type(exc).__name__}: {exc}") from None
    for index, node in enumerate(graph.node):
        _convert_node(ctx, scope, index, node, prefix=f"{label} ")
    ctx.where = where
    missing = [out.name for out in graph.output if out.name not in scope]
    if missing:
        raise ctx.error(f"subgraph {graph.name!r}: output(s) {missing} are not computed")
    return [scope[out.name] for out in graph.output]


def _convert_node(ctx: Context, env: dict[str, Value], index: int, node: onnx.NodeProto,
                  prefix: str = "") -> None:
    ctx.where = prefix + _where(index, node)
    ctx.n_outputs = len(node.output)
    ctx.inline_graph = lambda graph: _inline_graph(ctx, env, graph)
    convert = lookup(node.op_type, ctx.opset)
    assert convert is not None  # checked up front
    args: list[Value | None] = []
    for name in node.input:
        if not name:
            args.append(None)
        elif name in env:
            args.append(env[name])
        else:
            raise ctx.error(f"input {name!r} is not produced by an earlier node, an "
                            "initializer or a graph input (nodes must be in topological order)")
    attrs = _attributes(ctx, node)
    try:
        result = convert(ctx, args, attrs)
    except ONNXImportError:
        raise
    except Exception as exc:  # NOTE: untrusted input: whatever a converter trips on (a
        # wrong attribute type, an index, a NumPy error, an assert) is this node's error
        raise ctx.error(f"{type(exc).__name__}: {exc}") from exc
    results = result if isinstance(result, list) else [result]
    wanted = [name for name in node.output]
    if sum(1 for name in wanted if name) and len(wanted) > len(results):
        extra = [n for n in wanted[len(results):] if n]
        if extra:
            raise ctx.error(f"output(s) {', '.join(map(repr, extra))} are not supported "
                            f"(the converter produces {len(results)})")
    for name, value in zip(wanted, results, strict=False):
        if name:
            env[name] = value


__all__ = ["ONNX_DTYPES", "from_onnx", "model_opset", "sanitize_names", "unsupported_ops"]
