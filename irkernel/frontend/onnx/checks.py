"""ONNX input is untrusted input: the checks made before the importer trusts a model.

A model file comes from anywhere. Everything the importer reads is checked here,
in the model's terms (the initializer, input or node by name), before anything
is allocated, folded or opened:

* **paths** (:func:`read_model_file`): the model must be a regular file, opened
  non-blocking and checked with ``fstat`` (a FIFO or a device would block or never
  end); a file that does not parse as a ModelProto is an error naming it.
* **external data** (:func:`load_external_data`): each location must be a relative
  path that stays inside the model's folder after resolving ``..`` and symbolic
  links (onnx's CVE-2024-27318 and CVE-2024-5187 read and wrote files outside it),
  and a regular file holding ``offset + length`` bytes; all of it is checked for
  every tensor before the first data file is opened. A ModelProto given in memory
  has no folder, so external data is refused there.
* **names** (:func:`check_names`): every name is text (protobuf returns a string
  field that is not UTF-8 as bytes);
* **tensors** (:func:`tensor_problem`): initializers and tensor attributes (Constant)
  have a known element type, dims within ``ids.MAX_RANK`` and ``ids.MAX_ELEMENTS``,
  and exactly as many values as their dims need (a short ``raw_data`` made NumPy
  raise; a long one was silently cut).

Imports onnx, NumPy and ``irkernel.ir`` only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import onnx
from onnx import TensorProto

from irkernel.frontend.onnx.common import ONNXImportError
from irkernel.ir.ids import shape_problem

#: Bytes per element of the ONNX element types whose data can be ``raw_data``.
_ITEMSIZE = {
    TensorProto.FLOAT: 4, TensorProto.DOUBLE: 8, TensorProto.INT8: 1, TensorProto.UINT8: 1,
    TensorProto.INT16: 2, TensorProto.UINT16: 2, TensorProto.INT32: 4, TensorProto.UINT32: 4,
    TensorProto.INT64: 8, TensorProto.UINT64: 8, TensorProto.BOOL: 1, TensorProto.FLOAT16: 2,
    TensorProto.BFLOAT16: 2, TensorProto.COMPLEX64: 8, TensorProto.COMPLEX128: 16,
}
#: The typed field holding the values of each element type when there is no raw_data,
#: and how many field entries one element takes.
_FIELD = {
    TensorProto.FLOAT: ("float_data", 1), TensorProto.DOUBLE: ("double_data", 1),
    TensorProto.INT64: ("int64_data", 1), TensorProto.UINT32: ("uint64_data", 1),
    TensorProto.UINT64: ("uint64_data", 1), TensorProto.COMPLEX64: ("float_data", 2),
    TensorProto.COMPLEX128: ("double_data", 2), TensorProto.STRING: ("string_data", 1),
    **{t: ("int32_data", 1) for t in (TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16,
                                      TensorProto.UINT16, TensorProto.INT32, TensorProto.BOOL,
                                      TensorProto.FLOAT16, TensorProto.BFLOAT16,
                                      TensorProto.INT4, TensorProto.UINT4)},
}
#: 4-bit element types: two elements per byte of ``raw_data`` and per ``int32_data`` entry.
_PACKED_4BIT = (TensorProto.INT4, TensorProto.UINT4)


def read_model_file(path: str | os.PathLike[str]) -> tuple[onnx.ModelProto, Path]:
    """The ModelProto in the regular file ``path`` (external data not loaded) and its folder."""
    where = os.fspath(path)
    try:
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ONNXImportError(f"{where}: cannot open the model: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ONNXImportError(f"{where}: not a regular file ({_file_kind(info.st_mode)}); "
                                  "a model must be a file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read()
    finally:
        os.close(fd)
    return parse_model(data, where), Path(where).resolve().parent


def parse_model(data: bytes, where: str) -> onnx.ModelProto:
    """``data`` parsed as a ModelProto; an error naming ``where`` when it is not one."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # NOTE: protobuf's DecodeError and others, named as one error
        raise ONNXImportError(f"{where}: not a readable ONNX model ({type(exc).__name__}: "
                              f"{exc})") from None
    if not model.HasField("graph"):
        raise ONNXImportError(f"{where}: not an ONNX model (no graph)")
    return model


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def model_tensors(model: onnx.ModelProto) -> list[tuple[str, TensorProto]]:
    """Every tensor of the model's main graph and subgraphs, with what it is in words:
    initializers, sparse initializers' values and indices, and tensor attributes."""
    out: list[tuple[str, TensorProto]] = []
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        out.extend((f"initializer {t.name!r}", t) for t in graph.initializer)
        for sparse in graph.sparse_initializer:
            out.append((f"sparse initializer {sparse.values.name!r}", sparse.values))
            out.append((f"sparse initializer {sparse.values.name!r} (indices)", sparse.indices))
        for k, node in enumerate(graph.node):
            for attr in node.attribute:
                what = f"node {k} ({node.op_type}) attribute {attr.name!r}"
                if attr.HasField("t"):
                    out.append((what, attr.t))
                out.extend((what, t) for t in attr.tensors)
                graphs.extend(attr.graphs)
                if attr.HasField("g"):
                    graphs.append(attr.g)
    return out


def _external_fields(tensor: TensorProto, what: str) -> tuple[str, int, int | None]:
    fields = {entry.key: entry.value for entry in tensor.external_data}
    location = fields.get("location", "")
    try:
        offset = int(fields.get("offset", "0"))
        length = int(fields["length"]) if "length" in fields else None
    except ValueError:
        raise ONNXImportError(f"{what}: external data offset/length are not integers "
                              f"({fields})") from None
    if not location:
        raise ONNXImportError(f"{what}: external data without a location")
    if offset < 0 or (length is not None and length < 0):
        raise ONNXImportError(f"{what}: negative external data offset or length ({fields})")
    return location, offset, length


def external_file(location: str, folder: Path, what: str) -> Path:
    """The file ``location`` names, when it is a regular file inside ``folder``."""
    if os.path.isabs(location) or location.startswith(("\\", "/")) or ":" in location:
        raise ONNXImportError(f"{what}: external data location {location!r} is not a path "
                              "relative to the model's folder")
    base = folder.resolve()
    target = (base / location).resolve()
    if target != base and base not in target.parents:
        raise ONNXImportError(f"{what}: external data location {location!r} is outside the "
                              f"model's folder {str(base)!r}")
    try:
        info = os.stat(target)
    except OSError as exc:
        raise ONNXImportError(f"{what}: external data file {location!r}: "
                              f"{exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ONNXImportError(f"{what}: external data file {location!r} is "
                              f"{_file_kind(info.st_mode)}")
    return target


def load_external_data(model: onnx.ModelProto, folder: Path | None) -> None:
    """Read every external tensor's bytes into its ``raw_data`` (in place), after checking
    all of them (:func:`external_file`, sizes); ``folder`` None: refuse any."""
    plan = []
    for what, tensor in model_tensors(model):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        if folder is None:
            raise ONNXImportError(f"{what}: external data needs the model's folder: give "
                                  "from_onnx the model's path, not a ModelProto")
        location, offset, length = _external_fields(tensor, what)
        path = external_file(location, folder, what)
        size = os.stat(path).st_size
        end = size if length is None else offset + length
        if end > size or offset > size:
            raise ONNXImportError(f"{what}: external data {location!r} holds {size} bytes, "
                                  f"the tensor reads bytes {offset} to {end}")
        plan.append((tensor, path, offset, end - offset))
    for tensor, path, offset, length in plan:
        with open(path, "rb") as fh:
            fh.seek(offset)
            tensor.raw_data = fh.read(length)
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT


def tensor_problem(tensor: TensorProto) -> str | None:
    """What is wrong with a tensor of the model, or None (see the module docstring)."""
    if tensor.data_location == TensorProto.EXTERNAL:
        return "external data that was not loaded (a ModelProto given without its folder)"
    dims = tuple(int(d) for d in tensor.dims)
    problem = shape_problem(dims)
    if problem is not None:
        return f"dims {list(dims)}: {problem}"
    if tensor.data_type not in _FIELD:
        name = TensorProto.DataType.Name(tensor.data_type) \
            if tensor.data_type in TensorProto.DataType.values() else str(tensor.data_type)
        return f"element type {name} is not a tensor element type"
    count = 1
    for d in dims:
        count *= d
    packed = tensor.data_type in _PACKED_4BIT
    if tensor.HasField("raw_data"):
        itemsize = 1 if packed else _ITEMSIZE.get(tensor.data_type)
        if itemsize is None:
            return "raw_data for an element type that cannot have it"
        need = (count + 1) // 2 if packed else count * itemsize
        if len(tensor.raw_data) != need:
            return (f"raw_data holds {len(tensor.raw_data)} bytes, dims {list(dims)} need "
                    f"{need}")
        return None
    field, per = _FIELD[tensor.data_type]
    have = len(getattr(tensor, field))
    need = (count + 1) // 2 if packed else count * per
    if have != need:
        return f"{field} holds {have} values, dims {list(dims)} need {need}"
    return None


def _text_problem(values: list[object]) -> str | None:
    bad = next((v for v in values if not isinstance(v, str)), None)
    return None if bad is None else f"{bad!r} is not valid UTF-8 text"


def check_names(model: onnx.ModelProto) -> None:
    """Every name the importer reads is text: protobuf hands a string field that is not
    valid UTF-8 over as bytes, which no name comparison expects."""
    problem = _text_problem([imp.domain for imp in model.opset_import])
    if problem is not None:
        raise ONNXImportError(f"opset_import: {problem}")
    graph = model.graph
    for what, infos in (("graph input", graph.input), ("graph output", graph.output)):
        problem = _text_problem([i.name for i in infos])
        if problem is not None:
            raise ONNXImportError(f"{what}: {problem}")
    problem = _text_problem([t.name for t in graph.initializer])
    if problem is not None:
        raise ONNXImportError(f"initializer: {problem}")
    for k, node in enumerate(graph.node):
        problem = _text_problem([node.op_type, node.domain, node.name, *node.input,
                                 *node.output, *(a.name for a in node.attribute)])
        if problem is not None:
            raise ONNXImportError(f"node {k}: {problem}")


def check_tensors(model: onnx.ModelProto) -> None:
    """:func:`tensor_problem` of every tensor of the model, raised naming it."""
    for what, tensor in model_tensors(model):
        problem = tensor_problem(tensor)
        if problem is not None:
            raise ONNXImportError(f"{what}: {problem}")


__all__ = ["check_names", "check_tensors", "external_file", "load_external_data", "model_tensors",
           "parse_model", "read_model_file", "tensor_problem"]
