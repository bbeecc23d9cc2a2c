"""The command line with ONNX models: import, run --random/--repeat, print and opt of .onnx."""

from __future__ import annotations

import io

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import irkernel as ik  # noqa: E402
from irkernel.cli.errors import UsageError  # noqa: E402
from irkernel.cli.main import main  # noqa: E402
from irkernel.cli.onnx_cmd import parse_dims, parse_shapes  # noqa: E402


@pytest.fixture
def model_path(tmp_path):
    x = helper.make_tensor_value_info("input:0", TensorProto.FLOAT, ["N", 8])
    w = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(8, 4) / 32, "w")
    g = helper.make_graph([helper.make_node("MatMul", ["input:0", "w"], ["a"]),
                           helper.make_node("Relu", ["a"], ["y"])], "g", [x],
                          [helper.make_empty_tensor_value_info("y")], [w])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out), out.getvalue()


def test_import_writes_parseable_ir(model_path, tmp_path):
    target = tmp_path / "m.ir"
    rc, text = _cli("import", str(model_path), "--shape", "input:0=2,8", "-o", str(target))
    assert rc == 0 and "1 inputs, 1 outputs" in text
    mod = ik.parse(target.read_text())
    assert mod["main"].param_names == ("input_0",)
    x = np.ones((2, 8), np.float32)
    np.testing.assert_allclose(ik.interpret(mod, x)[0], x @ (np.arange(32).reshape(8, 4) / 32),
                               rtol=1e-6)


def test_symbolic_dims_without_shape_is_one_line_error(model_path, capsys):
    rc, _ = _cli("import", str(model_path))
    err = capsys.readouterr().err
    assert rc == 1 and "symbolic dims N (input 'input:0' [N, 8]); give them with --dim N=N" in err
    assert "--shape" in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_run_random_prints_shapes_and_time_per_run(model_path):
    rc, text = _cli("run", str(model_path), "--shape", "input:0=3,8", "--random", "--repeat", "3")
    assert rc == 0
    assert "ms per run (median of 3 runs)" in text and "output 0: float32[3, 4]" in text


def test_run_with_npy_inputs(model_path, tmp_path):
    x = np.ones((2, 8), np.float32)
    np.save(tmp_path / "x.npy", x)
    rc, text = _cli("run", str(model_path), "--shape", "input:0=2,8", "--inputs",
                    str(tmp_path / "x.npy"))
    assert rc == 0 and "output 0: float32[2, 4]" in text


def test_print_and_opt_accept_onnx(model_path):
    rc, text = _cli("print", str(model_path), "--shape", "input:0=1,8")
    assert rc == 0 and "param input_0 : float32[1, 8]" in text
    rc, text = _cli("opt", str(model_path), "--shape", "input:0=1,8", "-p", "FoldConstant")
    assert rc == 0 and "matmul" in text


def test_unsupported_ops_and_bad_files(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    g = helper.make_graph([helper.make_node("DFT", ["x"], ["a"]),
                           helper.make_node("NonMaxSuppression", ["a"], ["b"]),
                           helper.make_node("NonMaxSuppression", ["b"], ["c"])], "g", [x],
                          [helper.make_empty_tensor_value_info("c")])
    bad = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(bad))
    assert _cli("import", str(bad))[0] == 1
    assert "DFT (x1), NonMaxSuppression (x2)" in capsys.readouterr().err
    junk = tmp_path / "junk.onnx"
    junk.write_text("not a model")
    assert _cli("print", str(junk))[0] == 1
    assert "not a readable ONNX model" in capsys.readouterr().err


def test_parse_shapes():
    assert parse_shapes(["a=1,2", "b:0=3", "s="]) == {"a": (1, 2), "b:0": (3,), "s": ()}
    with pytest.raises(UsageError, match="expected NAME=D0,D1"):
        parse_shapes(["a=1,x"])


def test_parse_dims():
    assert parse_dims(["batch=4", "seq=16, heads=2", "batch=4"]) == {"batch": 4, "seq": 16,
                                                                     "heads": 2}
    for bad in ("batch", "=4", "batch=x", "batch=-1", "batch=4,"):
        with pytest.raises(UsageError, match="expected NAME=VALUE"):
            parse_dims([bad])
    with pytest.raises(UsageError, match="'batch' given twice"):
        parse_dims(["batch=4", "batch=5"])


@pytest.fixture
def shared_path(tmp_path):
    """Inputs a [batch, seq] and b [batch, seq]: one batch, one seq."""
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq"]) for n in "ab"]
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g", ins,
                          [helper.make_empty_tensor_value_info("y")])
    path = tmp_path / "shared.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_run_binds_dims_from_dim_options_or_npy_inputs(shared_path, tmp_path, capsys):
    rc, text = _cli("run", str(shared_path), "--random", "--dim", "batch=2", "--dim", "seq=5")
    assert rc == 0 and "output 0: float32[2, 5]" in text
    rc, text = _cli("run", str(shared_path), "--random", "--dim", "batch=3,seq=1")
    assert rc == 0 and "output 0: float32[3, 1]" in text
    for name, shape in (("a", (2, 3)), ("b", (2, 3)), ("c", (3, 3))):
        np.save(tmp_path / f"{name}.npy", np.ones(shape, np.float32))
    rc, text = _cli("run", str(shared_path), "--inputs", str(tmp_path / "a.npy"),
                    str(tmp_path / "b.npy"))
    assert rc == 0 and "output 0: float32[2, 3]  min 2  max 2" in text
    capsys.readouterr()
    rc, _ = _cli("run", str(shared_path), "--inputs", str(tmp_path / "a.npy"),
                 str(tmp_path / "c.npy"))
    err = capsys.readouterr().err
    assert rc == 1 and ("the --inputs do not fit the model's dims: input 'b' axis 0 is 3, but "
                        "dim 'batch' is 2 (from input 'a' axis 0)") in err


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["--dim", "batch"], 2, "--dim 'batch': expected NAME=VALUE"),
    (["--dim", "batch=two"], 2, "expected NAME=VALUE with VALUE an int >= 0"),
    (["--dim", "bacth=2,seq=1"], 1, "'bacth' is not a dim of the model (dims: batch, seq)"),
    (["--dim", "batch=2"], 1, "no value for dim(s) seq (the model's dims: batch, seq); give "
                              "them with --dim NAME=VALUE"),
    (["--shape", "a=2,3", "--dim", "batch=4,seq=3"], 1,
     "dim 'batch' is fixed to 2 by shape_dict, got 4"),
])
def test_dim_errors_exit_codes(shared_path, capsys, argv, code, message):
    rc, _ = _cli("import", str(shared_path), *argv)
    err = capsys.readouterr().err
    assert rc == code and message in err and len(err.splitlines()) == 1


def test_import_and_print_at_a_binding(shared_path, tmp_path, capsys):
    rc, text = _cli("print", str(shared_path))  # the symbolic graph
    assert rc == 0 and text.startswith("# symbolic dims: batch, seq (input 'a' [batch, seq], "
                                       "input 'b' [batch, seq])\n# give --dim")
    assert "dim batch in [1, inf]" in text and "param a : float32[batch, seq]" in text
    assert ik.parse(text).script() in text  # the header is a comment of the text format
    rc, text = _cli("print", str(shared_path), "--dim", "batch=2,seq=3")
    assert rc == 0 and text.startswith("# symbolic dims: batch=2, seq=3 (")
    assert "param a : float32[2, 3]" in text and "param b : float32[2, 3]" in text
    target = tmp_path / "m.ir"
    rc, _ = _cli("import", str(shared_path), "--dim", "seq=4", "--shape", "a=1,-1",
                 "-o", str(target))
    assert rc == 0
    mod = ik.parse(target.read_text())  # the header is a comment of the text format
    f = mod["main"]
    assert [f.shapes[int(f.shape_id[p])] for p in f.params.tolist()] == [(1, 4), (1, 4)]


def test_print_names_why_a_model_has_no_symbolic_graph(tmp_path):
    """A Range over a dim can not be imported symbolically: print shows the dims and the
    reason (the node and the dim), and still prints the graph at a binding."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Squeeze", ["s"], ["n0"]),
             helper.make_node("Constant", [], ["zero"], value_int=0),
             helper.make_node("Constant", [], ["one"], value_int=1),
             helper.make_node("Range", ["zero", "n0", "one"], ["r"], name="ramp"),
             helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "rf"], ["y"])]
    g = helper.make_graph(nodes, "g", [x], [helper.make_empty_tensor_value_info("y")])
    path = tmp_path / "ramp.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    rc, text = _cli("print", str(path))
    assert rc == 0 and text.startswith("# symbolic dims: n (input 'x' [n])\n# the graph can "
                                       "not be imported with symbolic dims: node 4 'ramp'")
    assert "symbolic dim n" in text and "param" not in text
    rc, text = _cli("print", str(path), "--dim", "n=3")
    assert rc == 0 and "param x : float32[3]" in text


@pytest.fixture
def branch_model_path(tmp_path):
    """An If on a run-time input (silero-vad picks its 16 kHz or 8 kHz branch from ``sr``)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    sr = helper.make_tensor_value_info("sr", TensorProto.INT64, [])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])

    def branch(name: str, op: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["x", "x"], [f"{name}_y"])], name, [],
                                 [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT,
                                                                [3])])
    k = numpy_helper.from_array(np.array(16000, np.int64), "k")
    g = helper.make_graph([helper.make_node("Equal", ["sr", "k"], ["c"]),
                           helper.make_node("If", ["c"], ["y"], then_branch=branch("t", "Add"),
                                            else_branch=branch("e", "Mul"))],
                          "g", [x, sr], [out], [k])
    path = tmp_path / "branch.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_const_binds_an_input_that_picks_a_branch(branch_model_path, tmp_path, capsys):
    rc, _ = _cli("run", str(branch_model_path), "--random")
    err = capsys.readouterr().err
    assert rc == 1 and "must be a constant" in err and "--const NAME=VALUE" in err
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.save(tmp_path / "x.npy", x)
    for sr, want in ((16000, x + x), (8000, x * x)):
        target = tmp_path / f"y{sr}.npz"
        rc, text = _cli("run", str(branch_model_path), "--const", f"sr={sr}", "--inputs",
                        str(tmp_path / "x.npy"), "-o", str(target))
        assert rc == 0, text
        np.testing.assert_array_equal(np.load(target)["output0"], want)


def test_const_values_take_the_declared_type_and_bad_ones_are_named(branch_model_path, capsys):
    from irkernel.frontend.onnx import from_onnx
    from irkernel.frontend.onnx.dynamic import DynamicModel

    dm = DynamicModel(str(branch_model_path), const_inputs={"sr": 8000})
    assert dm.input_names == ("x",)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(dm.build()["main"](x)[0], x * x)
    with pytest.raises(ValueError, match=r"const_inputs\['sr'\]: float64 value does not fit"):
        from_onnx(str(branch_model_path), const_inputs={"sr": 16000.5})
    with pytest.raises(ValueError, match="'rate' is not an input of the graph"):
        DynamicModel(str(branch_model_path), const_inputs={"rate": 1})
    for bad in ("sr", "sr=", "=3", "sr=1,x"):
        assert _cli("run", str(branch_model_path), "--const", bad, "--random")[0] == 2
        assert f"--const {bad!r}" in capsys.readouterr().err
