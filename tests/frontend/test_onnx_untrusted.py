"""ONNX input is untrusted input (issue 28 part 4): each malformed-model rule of
``irkernel/frontend/onnx/checks.py`` and the importer, one test each; every failure is
an ONNXImportError naming the node, input or initializer at fault."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_helpers import model  # noqa: E402

import irkernel as ik  # noqa: E402
from irkernel.cli import main  # noqa: E402
from irkernel.frontend.onnx import ONNXImportError, from_onnx  # noqa: E402
from irkernel.frontend.onnx.common import FOLD_MAX_ELEMENTS  # noqa: E402

X = np.ones((2, 3), np.float32)


def _add_model(weight: onnx.TensorProto) -> onnx.ModelProto:
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], {"x": X}, ["y"])
    m.graph.initializer.append(weight)
    return m


def test_a_fifo_is_refused_as_a_model_path(tmp_path) -> None:
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)  # opening it for reading would block forever
    with pytest.raises(ONNXImportError, match="not a regular file .a FIFO."):
        from_onnx(str(fifo))
    with pytest.raises(ONNXImportError, match="a directory"):
        from_onnx(str(tmp_path))


def test_the_cli_refuses_a_fifo(tmp_path, capsys) -> None:
    fifo = tmp_path / "m.onnx"
    os.mkfifo(fifo)
    assert main(["import", str(fifo), "-o", str(tmp_path / "out.ir")]) == 1
    assert "FIFO" in capsys.readouterr().err


def test_bytes_that_are_not_a_model_name_the_file(tmp_path) -> None:
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\xff\xfe not a protobuf \x00" * 3)
    with pytest.raises(ONNXImportError, match="junk.onnx: not"):
        from_onnx(str(path))
    with pytest.raises(ONNXImportError, match="model bytes"):
        from_onnx(b"\x0a\xff\xff\xff\xff\x0f")


def test_an_initializer_shorter_than_its_dims_is_rejected() -> None:
    w = numpy_helper.from_array(X, "w")
    w.raw_data = w.raw_data[:-4]
    with pytest.raises(ONNXImportError, match=r"initializer 'w': raw_data holds 20 bytes"):
        from_onnx(_add_model(w))
    typed = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [1.0] * 6)
    del typed.float_data[-1]  # helper.make_tensor checks the count; a file need not
    with pytest.raises(ONNXImportError, match=r"initializer 'w': float_data holds 5 values"):
        from_onnx(_add_model(typed))


def test_an_initializer_with_absurd_dims_is_rejected_before_allocation() -> None:
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**40, 2**40])
    with pytest.raises(ONNXImportError, match=r"initializer 'w': dims .* exceeds the limit"):
        from_onnx(_add_model(w))
    deep = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1] * 80, float_data=[1.0])
    with pytest.raises(ONNXImportError, match=r"initializer 'w': dims .* rank 80"):
        from_onnx(_add_model(deep))


def test_a_graph_input_with_absurd_dims_is_rejected() -> None:
    m = model([helper.make_node("Relu", ["x"], ["y"])], {"x": X}, ["y"])
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2**62
    with pytest.raises(ONNXImportError, match=r"graph input 'x': shape .* exceeds"):
        from_onnx(m)


def _external_model(tmp_path, location: str, data: bytes, length: int | None = None):
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    w.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": "0"}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        w.external_data.add(key=k, value=v)
    m = _add_model(w)
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "weights.bin").write_bytes(data)
    path = folder / "m.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def test_external_data_inside_the_folder_loads(tmp_path) -> None:
    data = np.arange(6, dtype=np.float32).tobytes()
    mod = from_onnx(str(_external_model(tmp_path, "weights.bin", data, 24)))
    out = ik.interpret(mod, X)[0]
    np.testing.assert_array_equal(out, X + np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "sub/../../secret.bin",
                                      "link.bin"])
def test_external_data_outside_the_folder_is_rejected_before_opening(tmp_path,
                                                                     location) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\x00" * 24)
    path = _external_model(tmp_path, location, b"\x00" * 24, 24)
    (path.parent / "link.bin").symlink_to(secret)
    with pytest.raises(ONNXImportError, match=r"initializer 'w': external data location"):
        from_onnx(str(path))


def test_external_data_that_is_a_fifo_or_too_short_is_rejected(tmp_path) -> None:
    path = _external_model(tmp_path, "weights.bin", b"\x00" * 8, 24)
    with pytest.raises(ONNXImportError, match="holds 8 bytes"):
        from_onnx(str(path))
    os.mkfifo(path.parent / "pipe.bin")
    path = _external_model(tmp_path, "pipe.bin", b"", 24)
    with pytest.raises(ONNXImportError, match="a FIFO"):
        from_onnx(str(path))


def test_external_data_of_an_in_memory_model_is_refused(tmp_path) -> None:
    path = _external_model(tmp_path, "weights.bin", b"\x00" * 24, 24)
    proto = onnx.ModelProto.FromString(path.read_bytes())
    with pytest.raises(ONNXImportError, match="needs the model's folder"):
        from_onnx(proto)


def test_a_wrong_attribute_type_names_the_node() -> None:
    node = helper.make_node("Transpose", ["x"], ["y"], name="t0")
    node.attribute.append(helper.make_attribute("perm", 1.5))  # a float, not ints
    m = model([node], {"x": X}, ["y"])
    with pytest.raises(ONNXImportError, match=r"node 0 't0' \(Transpose\)"):
        from_onnx(m)


def test_a_huge_constant_of_shape_stays_a_run_time_computation() -> None:
    """ConstantOfShape of more elements than the import may hold is made by the graph."""
    n = FOLD_MAX_ELEMENTS + 1
    shape = numpy_helper.from_array(np.array([n], np.int64), "s")
    m = model([helper.make_node("ConstantOfShape", ["s"], ["c"]),
               helper.make_node("ReduceMax", ["c"], ["y"], keepdims=0)], {}, ["y"])
    m.graph.initializer.append(shape)
    mod = from_onnx(m)
    assert "broadcast_to" in mod.script()


def test_a_range_too_long_to_fold_is_rejected() -> None:
    inits = {"a": np.array(0, np.int64), "b": np.array(2**62, np.int64),
             "d": np.array(1, np.int64)}
    m = model([helper.make_node("Range", ["a", "b", "d"], ["y"], name="r")], {}, ["y"],
              initializers=inits)
    with pytest.raises(ONNXImportError, match=r"node 0 'r' \(Range\): the range's length"):
        from_onnx(m)


def test_a_node_reading_an_undefined_name_and_a_cycle_are_errors() -> None:
    m = model([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
              {"x": X}, ["b"])
    with pytest.raises(ONNXImportError, match=r"node 0 .*input 'b' is not produced"):
        from_onnx(m)


def test_a_missing_initializer_is_named() -> None:
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], {"x": X}, ["y"])
    with pytest.raises(ONNXImportError, match="input 'w' is not produced"):
        from_onnx(m)
