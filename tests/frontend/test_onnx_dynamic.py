"""Models with symbolic input dims: SymbolicDims (shared, ``?`` and expression dims, bounds),
DynamicModel (import per binding) and its executable (build per binding, run any size).

The exported ``*_dynamic`` models run through ONE DynamicModel at several sizes against
onnxruntime; hand-made models cover the dim kinds and every error, which must name the
input, the axis and the dim.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_weights import DYNAMIC_MODEL_NAMES, load  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_helpers import assert_close, model_inputs, run_ort  # noqa: E402

import irkernel as ik  # noqa: E402
from irkernel.frontend.onnx import (  # noqa: E402
    DimError,
    SymbolicDimsError,
    from_onnx,
)
from irkernel.frontend.onnx.backend import IrkernelBackend  # noqa: E402
from irkernel.frontend.onnx.dims import DimExpr, parse_dim_param  # noqa: E402
from irkernel.frontend.onnx.dynamic import DynamicModel  # noqa: E402


def _model(inputs: dict[str, list], nodes: list, outputs: list[str],
           initializers: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    ins = [helper.make_tensor_value_info(k, TensorProto.FLOAT, dims) for k, dims in inputs.items()]
    graph = helper.make_graph(nodes, "g", ins, [helper.make_empty_tensor_value_info(o)
                                                for o in outputs],
                              [numpy_helper.from_array(v, k)
                               for k, v in (initializers or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def mixed() -> onnx.ModelProto:
    """Shared dims (batch, seq), an expression (seq+1, 2*batch) and an unnamed ``?`` dim."""
    return _model({"a": ["batch", "seq"], "b": ["batch", "seq+1"], "c": ["2*batch", None, 3]},
                  [helper.make_node("Relu", [n], [f"{n}_out"]) for n in "abc"],
                  ["a_out", "b_out", "c_out"])


def _param_shapes(mod: ik.IRModule) -> list[tuple[int, ...]]:
    f = mod["main"]
    return [f.shapes[int(f.shape_id[p])] for p in f.params.tolist()]


def test_dims_shared_unnamed_and_expressions(mixed):
    dm = DynamicModel(mixed)
    assert dm.dims == ("batch", "seq", "c.dim1")
    assert dm.input_names == ("a", "b", "c")
    mod = dm.bind(batch=2, seq=5, **{"c.dim1": 7})
    assert _param_shapes(mod) == [(2, 5), (2, 6), (4, 7, 3)]
    arrays = [np.ones(s, np.float32) for s in _param_shapes(mod)]
    assert dm.binding_from_inputs(*arrays) == {"batch": 2, "seq": 5, "c.dim1": 7}
    assert dm.bind_from_inputs(*arrays) is mod  # cached per binding
    got = ik.interpret(mod, *arrays)
    assert [g.shape for g in got] == [(2, 5), (2, 6), (4, 7, 3)]


def test_unknown_dim_markers_are_separate_dims():
    """Exporters write an unknown axis as ``?`` (paddle2onnx), ``-1`` or ``None`` in
    ``dim_param`` and as ``dim_value: -1``: each such axis is a dim of its own, never one
    dim shared by every axis that carries the marker (a 3x48x192 image must bind)."""
    model = _model({"x": ["?", 3, "?", "?"], "y": ["-1", "None"]},
                   [helper.make_node("Relu", [n], [f"{n}_out"]) for n in "xy"],
                   ["x_out", "y_out"])
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    dm = DynamicModel(model)
    assert dm.dims == ("x.dim0", "x.dim2", "x.dim3", "y.dim0", "y.dim1")
    x, y = np.ones((1, 3, 48, 192), np.float32), np.ones((2, 5), np.float32)
    assert dm.binding_from_inputs(x, y) == {"x.dim0": 1, "x.dim2": 48, "x.dim3": 192,
                                            "y.dim0": 2, "y.dim1": 5}
    got = dm.build()["main"](x, y)
    assert [g.shape for g in got] == [(1, 3, 48, 192), (2, 5)]


def test_dim_params_parse_as_names_constants_expressions_or_opaque_names():
    assert parse_dim_param("batch") == "batch"
    assert parse_dim_param("12") == 12
    half = parse_dim_param("floor(h/2)")
    assert isinstance(half, DimExpr) and half.names == ("h",) and half({"h": 7}) == 3
    assert parse_dim_param("2*s0 + 1")({"s0": 4}) == 9
    assert parse_dim_param("min(a, b)").names == ("a", "b")
    # not the accepted grammar: one variable named by the whole text
    for text in ("CeilToInt(IntTrueDiv(s0, 2))", "input.1_dim_0", "a**2", "x.y", "-1"):
        assert parse_dim_param(text) == text


@settings(max_examples=300)
@given(st.text(alphabet="ab01279+-*/%() ,.?floorceilminax_\x00", max_size=60),
       st.integers(0, 9))
def test_any_dim_param_parses_and_evaluates_or_names_the_problem(text, value):
    """A model's dim_param is untrusted: it is a name, a constant or an expression, and
    evaluating or solving an expression gives values or a DimError, never another
    exception; a binding found from a shape gives that shape back."""
    parsed = parse_dim_param(text)
    assert isinstance(parsed, (str, int, DimExpr))
    m = _model({"x": [text]}, [helper.make_node("Relu", ["x"], ["o"])], ["o"])
    dims = DynamicModel(m).symbolic
    try:
        shape = dims.shapes(dims.values(dict.fromkeys(dims.dims, value)))["x"]
        found = dims.infer([shape])
    except DimError:
        return
    assert dims.shapes(found)["x"] == shape


def test_expression_dims_solve_and_check():
    m = _model({"x": ["2*n"], "y": ["n+1", "floor(k/2)"]}, [helper.make_node("Relu", ["x"], ["o"])],
               ["o"])
    dm = DynamicModel(m)
    assert dm.dims == ("n", "k")
    with pytest.raises(DimError, match=r"dim 'k' cannot be inferred .* 'floor\(k/2\)' \(input "
                                       r"'y' axis 1\); bind it by name"):
        dm.binding_from_shapes([(6,), (4, 2)])
    assert _param_shapes(dm.bind(n=3, k=5)) == [(6,), (4, 2)]
    with pytest.raises(DimError, match=r"input 'x' axis 0 is 5, but the model declares it as "
                                       r"'2\*n', which no value of 'n' gives"):
        dm.binding_from_shapes([(5,), (4, 2)])
    with pytest.raises(DimError, match=r"input 'y' axis 0 is 5, but dim 'n\+1' is 4 at n = 3 "
                                       r"\(from input 'x' axis 0\)"):
        dm.binding_from_shapes([(6,), (5, 2)])


def test_contradictions_bounds_and_ranks_name_the_input_axis_and_dim(mixed):
    dm = DynamicModel(mixed, bounds={"batch": (1, 4)})
    ok = [(2, 5), (2, 6), (4, 7, 3)]
    cases = [
        ([(2, 5), (3, 6), (4, 7, 3)],
         r"input 'b' axis 0 is 3, but dim 'batch' is 2 \(from input 'a' axis 0\)"),
        ([(5, 5), (5, 6), (10, 7, 3)],
         r"dim 'batch' = 5 \(input 'a' axis 0\) is outside its bounds \[1, 4\]"),
        ([(2, 5), (2, 6), (4, 7)],
         r"input 'c' has rank 2 \(shape \(4, 7\)\), but the model declares rank 3: "
         r"\[2\*batch, c.dim1, 3\]"),
        ([(2, 5), (2, 6), (4, 7, 2)], r"input 'c' axis 2 is 2, but the model fixes it to 3"),
        ([(2, 5), (2, 6)], r"the model takes 3 inputs \(a, b, c\), got 2"),
    ]
    assert dm.binding_from_shapes(ok)["batch"] == 2
    for shapes, message in cases:
        with pytest.raises(DimError, match=message):
            dm.binding_from_inputs(*[np.zeros(s, np.float32) for s in shapes])


def test_bind_errors_name_the_dim(mixed):
    dm = DynamicModel(mixed, bounds={"seq": (None, 8)})
    full = {"batch": 1, "seq": 2, "c.dim1": 3}
    with pytest.raises(DimError, match=r"'sq' is not a dim of the model \(dims: batch, seq, "
                                       r"c.dim1\)"):
        dm.bind(**full, sq=1)
    with pytest.raises(DimError, match=r"no value for dim\(s\) c.dim1"):
        dm.bind(batch=1, seq=2)
    with pytest.raises(DimError, match=r"dim 'seq' = 9 \(given\) is outside its bounds "
                                       r"\[-inf, 8\]"):
        dm.bind(**{**full, "seq": 9})
    with pytest.raises(DimError, match=r"dim 'batch': expected an int, got 1.5"):
        dm.bind(**{**full, "batch": 1.5})
    with pytest.raises(ValueError, match=r"bounds: 'nope' is not a dim of the model"):
        DynamicModel(mixed, bounds={"nope": (1, 2)})
    with pytest.raises(ValueError, match=r"bounds\['batch'\] = \(3, 2\): low is above high"):
        DynamicModel(mixed, bounds={"batch": (3, 2)})


def test_shape_dict_fixes_dims_for_every_input_that_shares_them(mixed):
    dm = DynamicModel(mixed, shape_dict={"a": (4, None)})
    assert dm.dims == ("seq", "c.dim1") and dm.fixed == {"batch": 4}
    assert _param_shapes(dm.bind(seq=2, **{"c.dim1": 1})) == [(4, 2), (4, 3), (8, 1, 3)]
    with pytest.raises(DimError, match=r"dim 'batch' is fixed to 4 by shape_dict, got 3"):
        dm.bind(batch=3, seq=2, **{"c.dim1": 1})
    with pytest.raises(DimError, match=r"shape_dict 'b' axis 0 is 5, but dim 'batch' is 4 "
                                       r"\(from shape_dict 'a' axis 0\)"):
        DynamicModel(mixed, shape_dict={"a": (4, -1), "b": (5, -1)})
    # from_onnx: the shapes given fix the shared dims; what is left is named
    with pytest.raises(SymbolicDimsError, match=r"symbolic dims seq, c.dim1 .*DynamicModel"):
        from_onnx(mixed, shape_dict={"a": (4, None)})
    mod = from_onnx(mixed, shape_dict={"a": (4, 2), "c": (None, 1, None)})
    assert _param_shapes(mod) == [(4, 2), (4, 3), (8, 1, 3)]


def test_modules_and_builds_are_kept_for_the_last_bindings():
    m = _model({"x": ["n", 4]}, [helper.make_node("MatMul", ["x", "w"], ["y"])], ["y"],
               {"w": np.arange(8, dtype=np.float32).reshape(4, 2)})
    dm = DynamicModel(m, max_modules=1)
    first = dm.bind(n=1)
    assert dm.bind(n=1) is first and dm.bind(n=2) is not first and dm.bind(n=1) is not first
    ex = dm.build(max_builds=2)
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    for n in (3, 1, 3, 2):
        x = np.full((n, 4), n, np.float32)
        np.testing.assert_allclose(ex["main"](x)[0], x @ w, rtol=1e-6)
    assert ex.bindings == [{"n": 3}, {"n": 2}]  # n=1 dropped, least recently used
    assert ex.executable(n=2) is ex.executable_for(np.zeros((2, 4), np.float32))
    x = np.ones((2, 4), np.float32)
    out = [np.empty((2, 2), np.float32)]
    assert ex["main"](x, out=out)[0] is out[0]
    np.testing.assert_allclose(out[0], x @ w, rtol=1e-6)
    profile = ex.profile(x, repeat=2)
    np.testing.assert_allclose(profile.outputs[0], x @ w, rtol=1e-6)
    with pytest.raises(DimError, match=r"input 'x' axis 1 is 5, but the model fixes it to 4"):
        ex["main"](np.ones((2, 5), np.float32))
    with pytest.raises(KeyError, match="no function 'other'"):
        ex["other"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'optlevel'"):
        dm.build(optlevel=3)
    with pytest.raises(ValueError, match="max_builds must be an int >= 1"):
        dm.build(max_builds=0)


# (batch, seq) bindings of the exported models: a few small sizes, one DynamicModel each
DYNAMIC_SIZES = [{"batch": 1, "seq": 5}, {"batch": 3, "seq": 9}, {"batch": 2, "seq": 5}]


@pytest.mark.parametrize("name", DYNAMIC_MODEL_NAMES)
def test_exported_dynamic_model_runs_at_several_sizes(name):
    model = load(name)
    dm = DynamicModel(model, bounds={"batch": (1, 64)})
    assert "batch" in dm.dims
    ex = dm.build()
    sizes = DYNAMIC_SIZES if "seq" in dm.dims else DYNAMIC_SIZES[:2]
    for size in sizes:
        inputs = model_inputs(model, sizes=size)
        got = ex["main"](*inputs.values())
        assert got[0].shape[0] == size["batch"]
        assert_close(got, run_ort(model, inputs))
    assert len(ex.bindings) == len(sizes)


def test_backend_prepares_a_symbolic_model_for_any_size():
    m = _model({"x": ["batch", 3], "y": ["batch", 3]}, [helper.make_node("Mul", ["x", "y"], ["z"])],
               ["z"])
    del m.graph.output[:]  # onnx's checker (the backend's prepare) wants output types
    m.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3]))
    for mode in ("build", "interpret"):
        rep = IrkernelBackend.prepare(m, mode=mode)
        assert rep.dynamic is not None and rep.dynamic.dims == ("batch",)
        for n in (1, 4):
            x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
            (z,) = rep.run([x, x])
            np.testing.assert_allclose(z, x * x)
        with pytest.raises(DimError, match=r"input 'y' axis 0 is 2, but dim 'batch' is 1"):
            rep.run([np.ones((1, 3), np.float32), np.ones((2, 3), np.float32)])
