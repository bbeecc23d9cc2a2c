"""``from_onnx(model, symbolic=True)``: dim_param dims as shape variables, shape arithmetic
as dim expressions, and ``DynamicModel.bind`` by substitution.

The exported ``*_dynamic`` models are imported once and interpreted at several bindings
against onnxruntime; each binding by substitution must equal a fresh import at that
size (structurally, and when built and run). Hand-made models cover the shape chains
(Shape -> Gather -> Concat -> Reshape, Expand, ConstantOfShape, Slice) and the errors,
which must name the node and the dim.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_weights import DYNAMIC_MODEL_NAMES, load  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_helpers import assert_close, model_inputs, run_ort  # noqa: E402

import irkernel as ik  # noqa: E402
import runtime  # noqa: E402
from irkernel.frontend.onnx import ONNXImportError, from_onnx  # noqa: E402
from irkernel.frontend.onnx.dynamic import DynamicModel  # noqa: E402
from irkernel.ir.binding import specialize  # noqa: E402

SIZES = [{"batch": 1, "seq": 5}, {"batch": 3, "seq": 9}, {"batch": 4, "seq": 4}]


def _model(inputs: dict[str, list], nodes: list, outputs: list[str],
           initializers: dict[str, np.ndarray] | None = None,
           dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    ins = [helper.make_tensor_value_info(k, dtype, dims) for k, dims in inputs.items()]
    graph = helper.make_graph(nodes, "g", ins, [helper.make_empty_tensor_value_info(o)
                                                for o in outputs],
                              [numpy_helper.from_array(v, k)
                               for k, v in (initializers or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _param_types(mod: ik.IRModule) -> list[str]:
    f = mod["main"]
    return [f.shapes.shape_text(int(f.shape_id[p])) for p in f.params.tolist()]


@pytest.fixture(scope="module", params=DYNAMIC_MODEL_NAMES)
def exported(request):
    model = load(request.param)
    return model, from_onnx(model, symbolic=True)


def test_exported_models_import_once_and_interpret_at_every_size(exported):
    model, mod = exported
    names = mod["main"].shapes.symbols.var_names
    assert "batch" in names
    for size in SIZES[:2] if "seq" in names else SIZES[:1] + [{"batch": 5}]:
        inputs = model_inputs(model, sizes=size)
        got = ik.interpret(mod, *inputs.values())
        assert got[0].shape[0] == size["batch"]
        assert_close(got, run_ort(model, inputs))


def test_binding_by_substitution_equals_a_fresh_import(exported):
    """Structurally equal to ``from_onnx`` at that size (b == s included), and the bound
    module builds and runs like onnxruntime."""
    model, mod = exported
    func = mod["main"]
    names = func.shapes.symbols.var_names
    for k, size in enumerate(SIZES if "seq" in names else SIZES[:2]):
        bound = ik.IRModule({"main": specialize(func, [size[n] for n in names])})
        inputs = model_inputs(model, sizes=size)
        fresh = from_onnx(model, shape_dict={n: a.shape for n, a in inputs.items()})
        assert ik.structural_equal(bound, fresh)
        if k == 0:  # one build per model: the runtime sees a plain static module
            got = runtime.build(bound)["main"](*inputs.values())
            assert_close(got, run_ort(model, inputs))


def test_dynamic_model_binds_the_one_symbolic_module():
    model = load("transformer_encoder_dynamic")
    dm = DynamicModel(model, bounds={"batch": (1, 64)})
    assert dm.symbolic_error is None and dm.symbolic_module is not None
    assert "dim batch in [1, 64]" in dm.symbolic_module.script()
    mod = dm.bind(batch=2, seq=7)
    assert ik.structural_equal(mod, dm.import_at({"batch": 2, "seq": 7}))
    assert dm.bind(batch=2, seq=7) is mod  # kept per binding


def test_a_binding_outside_the_variables_bounds_imports_per_binding():
    """batch = 0 is a valid ONNX size but below the variable's default lower bound 1:
    the module comes from a fresh import, as before."""
    m = _model({"x": ["batch", 3]}, [helper.make_node("Relu", ["x"], ["y"])], ["y"])
    dm = DynamicModel(m)
    assert dm.symbolic_module is not None
    assert _param_types(dm.bind(batch=0)) == ["0, 3"]
    assert _param_types(dm.bind(batch=2)) == ["2, 3"]


def test_shared_unnamed_expression_and_fixed_dims():
    m = _model({"a": ["batch", "seq"], "b": ["batch", "seq+1"], "c": ["2*batch", None, 3],
                "d": ["floor(seq/2)", "batch*seq"]},
               [helper.make_node("Relu", [n], [f"{n}_out"]) for n in "abcd"],
               ["a_out", "b_out", "c_out", "d_out"])
    mod = from_onnx(m, symbolic=True, bounds={"seq": (2, 100)})
    assert _param_types(mod) == ["batch, seq", "batch, seq + 1", "2*batch, c_dim1, 3",
                                 "seq // 2, batch*seq"]
    assert "dim seq in [2, 100]" in mod.script()
    fixed = from_onnx(m, shape_dict={"a": [2, None]}, symbolic=True)  # batch fixed only
    assert _param_types(fixed) == ["2, seq", "2, seq + 1", "4, c_dim1, 3", "seq // 2, 2*seq"]
    arrays = [np.ones(s, np.float32) for s in ((2, 6), (2, 7), (4, 5, 3), (3, 12))]
    assert [g.shape for g in ik.interpret(fixed, *arrays)] == [a.shape for a in arrays]
    with pytest.raises(ValueError, match="bounds are the symbolic dims'"):
        from_onnx(m, bounds={"seq": (2, 100)})


def test_shape_chains_become_dim_expressions():
    """Shape -> Gather -> Mul -> Concat -> Reshape gives ``batch*seq``; Expand and
    ConstantOfShape take symbolic shapes; Slice ``[:, :seq]`` and ``[:, -1]``; checked
    against onnxruntime at two sizes."""
    c = helper.make_node
    nodes = [
        c("Shape", ["x"], ["shape"]),
        c("Gather", ["shape", "i0"], ["b"], axis=0),
        c("Gather", ["shape", "i1"], ["s"], axis=0),
        c("Mul", ["b", "s"], ["bs"]),
        c("Unsqueeze", ["bs", "ax0"], ["bs1"]),
        c("Concat", ["bs1", "eight"], ["flat"], axis=0),
        c("Reshape", ["x", "flat"], ["rows"]),                    # (batch*seq, 8)
        c("Slice", ["shape", "zero1", "two1"], ["bs_shape"]),
        c("ConstantOfShape", ["bs_shape"], ["ones"],
          value=numpy_helper.from_array(np.ones(1, np.float32))),  # (batch, seq)
        c("Unsqueeze", ["ones", "ax2"], ["ones3"]),
        c("Expand", ["ones3", "shape"], ["wide"]),                 # (batch, seq, 8)
        c("Add", ["x", "wide"], ["y"]),
        c("Unsqueeze", ["s", "ax0"], ["s1"]),
        c("Slice", ["x", "zero1", "s1", "ax1"], ["head"]),         # x[:, :seq]
        c("Slice", ["x", "minus1", "big", "ax1"], ["last"]),       # x[:, -1:]
    ]
    consts = {"i0": np.array(0), "i1": np.array(1), "ax0": np.array([0]),
              "ax1": np.array([1]), "ax2": np.array([2]), "eight": np.array([8]),
              "zero1": np.array([0]), "two1": np.array([2]), "minus1": np.array([-1]),
              "big": np.array([2**62])}
    m = _model({"x": ["batch", "seq", 8]}, nodes, ["rows", "y", "head", "last"], consts)
    mod = from_onnx(m, symbolic=True)
    f = mod["main"]
    outs = [f.shapes.shape_text(int(f.shape_id[o])) for o in f.outputs.tolist()]
    assert outs == ["batch*seq, 8", "batch, seq, 8", "batch, seq, 8", "batch, 1, 8"]
    for b, s in ((1, 1), (3, 4)):
        x = np.random.default_rng(b).standard_normal((b, s, 8)).astype(np.float32)
        assert_close(ik.interpret(mod, x), run_ort(m, {"x": x}))
        # (a static import folds ConstantOfShape and Expand to constants: the bound module
        # makes them at run time, so only the values are compared here)
        bound = ik.IRModule({"main": specialize(f, [b, s])})
        assert_close(ik.interpret(bound, x), run_ort(m, {"x": x}))


@pytest.mark.parametrize(("nodes", "match"), [
    # Range over a dim: its values are data whose extent is the dim
    ([helper.make_node("Range", ["zero", "n", "one"], ["r"], name="ramp"),
      helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
      helper.make_node("Add", ["x", "rf"], ["y"])],
     r"node 2 'ramp' \(Range\): input 'limit' holds the symbolic dim n"),
    # a dim as run-time data
    ([helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT, name="to_float"),
      helper.make_node("Mul", ["x", "nf"], ["y"])],
     r"node 2 'to_float' \(Cast\): astype: symbolic dim n: it becomes a float32 value"),
    # Squeeze without axes: whether n is 1 is known at run time only
    ([helper.make_node("Squeeze", ["x"], ["y"], name="sq")],
     r"node 2 'sq' \(Squeeze\): .*whether the symbolic dim n is 1"),
    # a slice whose extent is a dim of another axis
    ([helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
      helper.make_node("Slice", ["w", "zero1", "n1"], ["y"], name="cut")],
     r"node 3 'cut' \(Slice\): slice bounds of axis 0 \(extent 10\) hold the symbolic dim n"),
])
def test_ops_that_can_not_take_a_symbolic_dim_name_node_and_dim(nodes, match):
    head = [helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "i0"], ["n"], axis=0)]
    consts = {"i0": np.array(0), "zero": np.array(0), "one": np.array(1),
              "ax0": np.array([0]), "zero1": np.array([0]), "w": np.ones(10, np.float32)}
    m = _model({"x": ["n"]}, head + nodes, ["y"], consts)
    with pytest.raises(ONNXImportError, match=match):
        from_onnx(m, symbolic=True)
    dm = DynamicModel(m)  # falls back to one import per binding, with the reason kept
    assert dm.symbolic_module is None and isinstance(dm.symbolic_error, ONNXImportError)
    assert _param_types(dm.bind(n=1)) == ["1"]


def test_integer_division_of_dims_is_exact_or_refused():
    """ONNX Div truncates; a dim divided by a positive constant floors the same way."""
    c = helper.make_node
    nodes = [c("Shape", ["x"], ["shape"]), c("Gather", ["shape", "i1"], ["s"], axis=0),
             c("Div", ["s", "four"], ["q"]), c("Unsqueeze", ["q", "ax0"], ["q1"]),
             c("Concat", ["minus1", "q1"], ["target"], axis=0),
             c("Reshape", ["x", "target"], ["y"])]
    consts = {"i1": np.array(1), "four": np.array(4), "ax0": np.array([0]),
              "minus1": np.array([-1])}
    m = _model({"x": ["batch", "4*n"]}, nodes, ["y"], consts)
    mod = from_onnx(m, symbolic=True)
    f = mod["main"]
    assert f.shapes.shape_text(int(f.shape_id[int(f.outputs[0])])) == "4*batch, n"
    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    assert_close(ik.interpret(mod, x), run_ort(m, {"x": x}))
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "seq"
    with pytest.raises(ONNXImportError, match=r"\(Reshape\): cannot reshape \[batch, seq\] "
                                              r"to \[-1, seq // 4\]: cannot decide"):
        from_onnx(m, symbolic=True)  # seq need not be a multiple of 4
    m.graph.node[2].input[1] = "s"  # s / s: division by a dim
    with pytest.raises(ONNXImportError, match=r"\(Div\): divide: symbolic dim seq: a dim "
                                              "divides only by positive constants"):
        from_onnx(m, symbolic=True)
