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

Decisions where ONNX leaves room: tensors of element types without an irkernel
dtype (``ONNX_DTYPES``) are rejected with an error naming the input, except int4
and uint4 initializers, held as int8/uint8 (never a graph input or output);
ops of other domains (``com.microsoft``) convert at that domain's opset (version 1
when the model names none); dimensions that are symbolic in the
model need a value through ``shape_dict`` (``dims.py``: an input's shape fixes the
dims it names for every input sharing them; the error, :class:`SymbolicDimsError`,
names the dims left and points to ``DynamicModel``, which binds them per call);
a graph output that is a constant of the model is returned as such.

A model is untrusted input (``checks.py``): a path must be a regular file, external
data must stay inside the model's folder, every tensor must hold exactly the values
its dims need, and any failure of a converter is an :class:`ONNXImportError` naming
the node: never an AssertionError, IndexError, KeyError or NumPy error.
"""

from __future__ import annotations

import math
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
    DEFAULT_DOMAINS,
    Context,
    ONNXImportError,
    OpNotImplemented,
    Value,
    lookup,
    op_key,
)
from irkernel.frontend.onnx.dims import SymbolicDims, SymbolicDimsError
from irkernel.frontend.onnx.symbolic import declare as declare_dims
from irkernel.frontend.onnx.symbolic import variable_names
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
#: ONNX element types irkernel holds widened (4-bit ints, as int8/uint8): never a graph
#: input or output.
_WIDENED_TYPES = (onnx.TensorProto.INT4, onnx.TensorProto.UINT4)


def model_opset(model: onnx.ModelProto) -> int:
    """The model's opset of the default domain (1 when it names none)."""
    versions = [imp.version for imp in model.opset_import if imp.domain in DEFAULT_DOMAINS]
    return int(max(versions)) if versions else 1


def domain_opsets(model: onnx.ModelProto) -> dict[str, int]:
    """``{domain: version}`` of the model's other domains (``com.microsoft``: 1)."""
    return {imp.domain: int(imp.version) for imp in model.opset_import
            if imp.domain not in DEFAULT_DOMAINS}


def _opset_of(domain: str, opset: int, others: Mapping[str, int]) -> int:
    return opset if domain in DEFAULT_DOMAINS else others.get(domain, 1)


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


def unsupported_ops(graph: onnx.GraphProto, opset: int,
                    other_opsets: Mapping[str, int] | None = None) -> dict[str, int]:
    """``{op_type: count}`` of the nodes no converter handles at ``opset`` (ops of other
    domains, named ``domain.op_type``, at their version in ``other_opsets``, default 1),
    counting the nodes of subgraphs (If's branches) too."""
    others = other_opsets or {}
    nodes = [*graph.node, *(inner for node in graph.node for inner in _nodes_within(node))]
    counts = Counter((node.domain, node.op_type) for node in nodes)
    return {op_key(domain, op_type): n for (domain, op_type), n in counts.items()
            if lookup(op_key(domain, op_type), _opset_of(domain, opset, others)) is None}


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


def load_model(model: Any) -> onnx.ModelProto:
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


def _declared_const(name: str, value: Any, info: onnx.ValueInfoProto) -> np.ndarray:
    """A ``const_inputs`` value as the input declares it: of its element type (``16000``
    for an int64 ``sr``; a value that type cannot hold exactly is an error, never
    rounded), and of its static shape when the sizes agree (``[3]`` for a ``[1, 3]``)."""
    array = np.asarray(value)
    ttype = info.type.tensor_type if info.type.HasField("tensor_type") else None
    if ttype is not None and ttype.elem_type in ONNX_DTYPES and \
            ONNX_DTYPES[ttype.elem_type] != "bfloat16":  # NumPy has no bfloat16
        dtype = np.dtype(ONNX_DTYPES[ttype.elem_type])
        if array.dtype != dtype:
            with np.errstate(all="ignore"):
                cast = array.astype(dtype)
            if not np.array_equal(cast, array, equal_nan=array.dtype.kind in "fc"):
                raise ValueError(f"from_onnx: const_inputs[{name!r}]: {array.dtype} value does "
                                 f"not fit the input's type {dtype} exactly")
            array = cast
    if ttype is not None and ttype.HasField("shape"):
        dims = ttype.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shape = tuple(int(d.dim_value) for d in dims)
            if array.shape != shape and array.size == math.prod(shape):
                array = array.reshape(shape)
    return array


def _input_type(info: onnx.ValueInfoProto, shape: tuple[Any, ...],
                dtype_dict: Mapping[str, Any]) -> str:
    """The dtype of a parameter input; its ``shape`` (from :class:`SymbolicDims`) is checked."""
    name = info.name
    ttype = info.type.tensor_type if info.type.HasField("tensor_type") else None
    if name in dtype_dict:
        dtype = DTYPE_NAMES[dtype_code(dtype_dict[name])]
    elif ttype is None:
        raise ONNXImportError(f"graph input {name!r} is not a tensor")
    elif ttype.elem_type in _WIDENED_TYPES:
        elem = onnx.TensorProto.DataType.Name(ttype.elem_type)
        raise ONNXImportError(f"graph input {name!r} has element type {elem}: 4-bit tensors are "
                              "supported inside the graph only (initializers and constants, held "
                              "as int8/uint8), not as graph inputs or outputs")
    elif ttype.elem_type not in ONNX_DTYPES:
        elem = onnx.TensorProto.DataType.Name(ttype.elem_type)
        raise ONNXImportError(f"graph input {name!r} has element type {elem}, which is not "
                              f"supported ({', '.join(DTYPE_NAMES)}); override it with dtype_dict")
    else:
        dtype = ONNX_DTYPES[ttype.elem_type]
    problem = shape_problem(tuple(d for d in shape if isinstance(d, int)))
    if problem is not None:
        raise ONNXImportError(f"graph input {name!r}: shape {list(shape)}: {problem}")
    return dtype


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
              const_inputs: Mapping[str, Any] | None = None, *, symbolic: bool = False,
              bounds: Mapping[str, tuple[int | None, int | None]] | None = None) -> IRModule:
    """Import an ONNX model.

    Parameters
    ----------
    model : onnx.ModelProto, path or bytes
        The model. A path must be a regular file (not a FIFO or device); its external
        data is read from files inside its folder only. A ModelProto or bytes cannot
        have external data.
    shape_dict : mapping, optional
        ``{input name: shape}`` fixing or overriding input shapes (symbolic dims need it).
        An int fixes an axis, and the dim the model names there for every input that
        shares it; ``None`` or ``-1`` keeps the model's axis.
    dtype_dict : mapping, optional
        ``{input name: dtype}`` overriding input dtypes.
    opset : int, optional
        The default-domain opset to convert at; defaults to the model's.
    const_inputs : mapping, optional
        ``{input name: array}`` binding graph inputs to constant values: they are not
        parameters of ``main``, and shapes, axes or pads computed from them fold at import.
    symbolic : bool
        Keep the dims ``shape_dict`` leaves without a value as shape variables of ``main``
        (``symbolic.py``; ``?`` dims are named ``INPUT_dimK``); shapes computed from them
        (``Shape -> Gather -> Concat -> Reshape``) become symbolic dims. An op that can
        not handle a symbolic dim is an ONNXImportError naming the node and the dim.
    bounds : mapping, optional
        With ``symbolic``: ``{dim: (low, high)}``, inclusive, either end ``None``; the
        variables' bounds (default ``[1, inf]``).

    Returns
    -------
    IRModule
        ``main`` takes the graph's non-initializer inputs in graph order and returns the
        graph's outputs (a list, in graph order); initializers are constants.

    Raises
    ------
    OpNotImplemented
        Listing every unsupported op type with its count, before any conversion.
    SymbolicDimsError
        Without ``symbolic``: an ONNXImportError naming the symbolic dims ``shape_dict``
        leaves without a value (``irkernel.frontend.onnx.dynamic.DynamicModel`` imports
        such a model once, symbolically, or per binding).
    ONNXImportError
        Naming the node, input, initializer or attribute that cannot be imported, or the
        file that is not a model.
    """
    model = load_model(model)
    if len(model.functions):  # model-local functions (newer exporters): inlined first
        from onnx import inliner

        try:
            model = inliner.inline_local_functions(model)
        except Exception as exc:  # NOTE: a malformed function body, named as the model's
            raise ONNXImportError(f"model-local functions cannot be inlined: {exc}") from None
    graph = model.graph
    opset = model_opset(model) if opset is None else int(opset)
    others = domain_opsets(model)
    missing = unsupported_ops(graph, opset, others)
    if missing:
        raise OpNotImplemented(missing, opset)
    shape_dict, dtype_dict = dict(shape_dict or {}), dict(dtype_dict or {})
    const_inputs = dict(const_inputs or {})
    known_inputs = {i.name for i in graph.input}
    for name in [*shape_dict, *dtype_dict, *const_inputs]:
        if name not in known_inputs:
            raise ValueError(f"from_onnx: {name!r} is not an input of the graph "
                             f"(inputs: {', '.join(sorted(known_inputs)) or 'none'})")
    constant = {i.name for i in graph.initializer} | set(const_inputs)
    if bounds is not None and not symbolic:
        raise ValueError("from_onnx: bounds are the symbolic dims' (symbolic=True)")
    dims = SymbolicDims(graph, {k: v for k, v in shape_dict.items() if k not in constant},
                        bounds, skip=constant)
    bb = GraphBuilder("main")
    if symbolic:
        shapes = declare_dims(bb, dims, variable_names(dims.dims, sanitize_names))
    elif dims.dims:
        raise SymbolicDimsError(dims.dims, dims.describe())
    else:
        shapes = dims.shapes(dims.fixed)
    ctx = Context(bb, opset)
    ctx.other_opsets = others
    env = _bind_inputs(ctx, graph, shapes, dtype_dict, const_inputs)
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
        int4_type = env[out.name].int4_type or _declared_int4(out)
        if int4_type:
            raise ONNXImportError(f"graph output {out.name!r} is of type {int4_type}, which "
                                  "irkernel has no dtype for (4-bit tensors are supported "
                                  "inside the graph only, held as int8/uint8)")
        outputs.append(ctx.node(env[out.name]))
    if not outputs:
        raise ONNXImportError("the graph has no outputs")
    return IRModule({"main": bb.finish(outputs)})


def _declared_int4(info: onnx.ValueInfoProto) -> str | None:
    elem = info.type.tensor_type.elem_type if info.type.HasField("tensor_type") else 0
    return onnx.TensorProto.DataType.Name(elem).lower() if elem in _WIDENED_TYPES else None


def _bind_inputs(ctx: Context, graph: onnx.GraphProto, shapes: dict[str, tuple[Any, ...]],
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
    infos = {i.name: i for i in graph.input}
    for name, value in const_inputs.items():
        ctx.where = f"const_inputs[{name!r}]"
        env[name] = ctx.const(_declared_const(name, value, infos[name]))
    inputs = [i for i in graph.input if i.name not in env]
    for info, pname in zip(inputs, sanitize_names([i.name for i in inputs]), strict=True):
        shape = shapes[info.name]
        dtype = _input_type(info, shape, dtype_dict)
        node = ctx.bb.param(pname, shape, dtype)
        env[info.name] = Value(dtype_code(dtype), ctx.bb.node_type(node)[1], node=node)
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
    convert = lookup(op_key(node.domain, node.op_type),
                     _opset_of(node.domain, ctx.opset, ctx.other_opsets))
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


__all__ = ["ONNX_DTYPES", "domain_opsets", "from_onnx", "load_model", "model_opset", "sanitize_names",
           "unsupported_ops"]
