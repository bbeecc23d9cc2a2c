"""from_onnx: the contract (signature, names, errors, opsets) and converters against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx_helpers import check, model, run_ort

import irkernel as ik
from irkernel.frontend.onnx import (
    ONNXImportError,
    OpNotImplemented,
    SymbolicDimsError,
    from_onnx,
    sanitize_names,
)

RNG = np.random.default_rng(0)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# -- the contract ------------------------------------------------------------------

def test_signature_outputs_in_graph_order_and_initializers_as_constants():
    w = _f32(3, 4)
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"]),
               helper.make_node("Relu", ["y"], ["r"])],
              {"x": _f32(2, 3)}, ["r", "y"], {"w": w})
    mod = check(m, {"x": _f32(2, 3)})
    f = mod["main"]
    assert f.param_names == ("x",) and len(f.outputs) == 2
    consts = [f.const_value(int(i)) for i in np.flatnonzero(f.kind == ik.ops.OP_CONST)]
    assert any(np.array_equal(c, w) for c in consts)
    ik.verify(mod)
    assert ik.structural_equal(ik.parse(mod.script()), mod)


def test_names_are_sanitized_for_the_text_format():
    assert sanitize_names(["0", "gpu_0/data_0", "a.b", "a_b", "x"]) == \
        ["v0", "gpu_0_data_0", "a_b", "a_b_1", "x"]
    m = model([helper.make_node("Add", ["0", "gpu_0/data_0"], ["out:0"])],
              {"0": _f32(2), "gpu_0/data_0": _f32(2)}, ["out:0"])
    mod = check(m, {"0": _f32(2), "gpu_0/data_0": _f32(2)})
    assert mod["main"].param_names == ("v0", "gpu_0_data_0")
    assert ik.structural_equal(ik.parse(mod.script()), mod)


def test_all_unsupported_ops_are_listed_up_front_with_counts():
    nodes = [helper.make_node("DFT", ["x"], ["a"]), helper.make_node("DFT", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["c"]),
             helper.make_node("NonMaxSuppression", ["c"], ["d"]),
             helper.make_node("Foo", ["d"], ["f"], domain="com.example")]
    m = model(nodes, {"x": _f32(4)}, ["f"])
    with pytest.raises(OpNotImplemented) as info:
        from_onnx(m)
    assert info.value.unsupported == {"DFT": 2, "NonMaxSuppression": 1, "com.example.Foo": 1}
    assert "DFT (x2)" in str(info.value) and "NonMaxSuppression (x1)" in str(info.value)


def test_symbolic_dims_need_shape_dict():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                              [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ONNXImportError, match=r"symbolic dims batch \(input 'x' \[batch, 3\]\)"
                       r".*DynamicModel") as info:
        from_onnx(m)
    assert isinstance(info.value, SymbolicDimsError) and info.value.dims == ("batch",)
    mod = from_onnx(m, shape_dict={"x": (5, 3)})
    assert mod["main"].shapes[int(mod["main"].shape_id[0])] == (5, 3)
    with pytest.raises(ValueError, match="'nope' is not an input"):
        from_onnx(m, shape_dict={"nope": (1,)})


def test_dtype_dict_and_unsupported_dtype():
    m = model([helper.make_node("Relu", ["x"], ["y"])], {"x": _f32(3)}, ["y"])
    mod = from_onnx(m, dtype_dict={"x": "float64"})
    assert ik.interpret(mod, np.array([-1.0, 0.0, 2.0]))[0].dtype == np.float64
    m.graph.input[0].type.tensor_type.elem_type = TensorProto.UINT32
    with pytest.raises(ONNXImportError, match="'x' has element type UINT32"):
        from_onnx(m)


def test_bad_models_name_the_node():
    m = model([helper.make_node("Relu", ["nowhere"], ["y"])], {"x": _f32(3)}, ["y"])
    with pytest.raises(ONNXImportError, match=r"node 0 \(Relu\): input 'nowhere' is not produced"):
        from_onnx(m)
    m = model([helper.make_node("Add", ["x", "z"], ["y"], name="add1")],
              {"x": _f32(3), "z": _f32(4)}, ["y"])
    with pytest.raises(ONNXImportError, match=r"node 0 'add1' \(Add\).*do not broadcast"):
        from_onnx(m)
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])],
              {"x": _f32(6), "s": np.array([2, 3], np.int64)}, ["y"])
    with pytest.raises(ONNXImportError, match="input 'shape' must be a constant"):
        from_onnx(m)
    mod = from_onnx(m, const_inputs={"s": np.array([3, 2], np.int64)})
    assert ik.interpret(mod, np.arange(6, dtype=np.float32))[0].shape == (3, 2)
    with pytest.raises(TypeError, match="ModelProto"):
        from_onnx(42)


def test_opset_defaults_to_the_model_and_can_be_overridden():
    # Softmax: opset < 13 coerces to 2-D at axis 1; opset 13 normalizes along axis -1 only
    x = _f32(2, 3, 4)
    m11 = model([helper.make_node("Softmax", ["x"], ["y"])], {"x": x}, ["y"], opset=11)
    m13 = model([helper.make_node("Softmax", ["x"], ["y"])], {"x": x}, ["y"], opset=13)
    check(m11, {"x": x})
    check(m13, {"x": x})
    (old,) = ik.interpret(from_onnx(m13, opset=11), x)
    np.testing.assert_allclose(old, run_ort(m11, {"x": x})[0], rtol=1e-5)


# -- converters vs onnxruntime (existing graph ops) ----------------------------------

UNARY = ["Neg", "Abs", "Exp", "Tanh", "Sigmoid", "Relu", "Reciprocal", "Softsign", "Sign",
         "LeakyRelu", "Elu", "Selu", "HardSigmoid", "HardSwish", "Softplus"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_activations(op):
    x = (_f32(3, 5) * 4).astype(np.float32)
    check(model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"]), {"x": x}, build=False)


def test_activations_compiled():
    x = (_f32(4, 8) * 4).astype(np.float32)
    nodes = [helper.make_node(op, ["x"], [f"y{k}"]) for k, op in enumerate(UNARY)]
    check(model(nodes, {"x": x}, [f"y{k}" for k in range(len(UNARY))]), {"x": x})


@pytest.mark.parametrize("opset", [6, 9])
def test_prelu_slope_broadcasting(opset):
    x, slope = _f32(2, 3, 4, 5), np.array([0.1, 0.2, 0.3], np.float32)
    s = slope if opset < 7 else slope.reshape(3, 1, 1)
    m = model([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": s},
              opset=opset)
    mod = from_onnx(m)
    (got,) = ik.interpret(mod, x)
    np.testing.assert_allclose(got, np.where(x < 0, x * slope.reshape(3, 1, 1), x), rtol=1e-6)


@pytest.mark.parametrize("opset", [7, 11])
def test_clip_attribute_and_input_forms(opset):
    x = _f32(10) * 3
    if opset < 11:
        m = model([helper.make_node("Clip", ["x"], ["y"], min=-1.0, max=0.5)], {"x": x}, ["y"],
                  opset=opset)
    else:
        m = model([helper.make_node("Clip", ["x", "", "hi"], ["y"])], {"x": x}, ["y"],
                  {"hi": np.array(0.5, np.float32)}, opset=opset)
    check(m, {"x": x})


def test_integer_division_truncates_like_onnx():
    a = np.array([7, -7, 7, -7, 6, -6, 0], np.int64)
    b = np.array([2, 2, -2, -2, 3, 3, 5], np.int64)
    check(model([helper.make_node("Div", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"]),
          {"a": a, "b": b})


@given(st.lists(st.integers(-50, 50), min_size=1, max_size=8),
       st.lists(st.integers(1, 9), min_size=1, max_size=1))
@settings(max_examples=25)
def test_integer_division_property(xs, ys):
    a, b = np.array(xs, np.int32), np.array(ys * len(xs), np.int32) * np.sign(np.array(xs) + .5)
    b = b.astype(np.int32)
    m = model([helper.make_node("Div", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    (got,) = ik.interpret(from_onnx(m), a, b)
    np.testing.assert_array_equal(got, np.trunc(a / b).astype(np.int32))


def test_comparisons_where_cast_pow():
    a, b = _f32(4, 3), _f32(3)
    nodes = [helper.make_node("Less", ["a", "b"], ["lt"]),
             helper.make_node("Greater", ["a", "b"], ["gt"]),
             helper.make_node("Equal", ["a", "a"], ["eq"]),
             helper.make_node("LessOrEqual", ["a", "b"], ["le"]),
             helper.make_node("GreaterOrEqual", ["a", "b"], ["ge"]),
             helper.make_node("Where", ["lt", "a", "b"], ["w"]),
             helper.make_node("Cast", ["a"], ["c"], to=TensorProto.INT32),
             helper.make_node("Abs", ["a"], ["abs"]),
             helper.make_node("Pow", ["abs", "b"], ["p"]),
             helper.make_node("Sqrt", ["abs"], ["s"]), helper.make_node("Log", ["abs"], ["l"])]
    outs = ["lt", "gt", "eq", "le", "ge", "w", "c", "p", "s", "l"]
    check(model(nodes, {"a": a, "b": b}, outs), {"a": a, "b": b})


def test_variadic_sum_mean_max_min_legacy_broadcast():
    a, b, c = _f32(2, 3), _f32(3), _f32(2, 1)
    nodes = [helper.make_node(op, ["a", "b", "c"], [op.lower()])
             for op in ("Sum", "Mean", "Max", "Min")]
    check(model(nodes, {"a": a, "b": b, "c": c}, ["sum", "mean", "max", "min"]),
          {"a": a, "b": b, "c": c})
    # opset 6: broadcast=1 with axis aligns b's dims with a's from axis
    x, y = _f32(2, 3, 4), _f32(3)
    m = model([helper.make_node("Add", ["x", "y"], ["z"], broadcast=1, axis=1)],
              {"x": x, "y": y}, ["z"], opset=6)
    (got,) = ik.interpret(from_onnx(m), x, y)
    np.testing.assert_allclose(got, x + y.reshape(3, 1), rtol=1e-6)


@pytest.mark.parametrize(("ta", "tb", "alpha", "beta"), [(0, 0, 1.0, 1.0), (1, 0, 0.5, 2.0),
                                                         (0, 1, 2.0, 0.0), (1, 1, 1.0, 0.5)])
def test_gemm(ta, tb, alpha, beta):
    a = _f32(4, 3) if not ta else _f32(3, 4)
    b = _f32(3, 5) if not tb else _f32(5, 3)
    c = _f32(5)
    m = model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=ta, transB=tb,
                                alpha=alpha, beta=beta)], {"a": a}, ["y"], {"b": b, "c": c})
    check(m, {"a": a})


def test_matmul_batch_broadcasting():
    a, b = _f32(2, 1, 4, 3), _f32(5, 3, 6)
    check(model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"]),
          {"a": a, "b": b})


def test_batchnorm_softmax_logsoftmax_layernorm():
    x = _f32(2, 3, 4, 5)
    s, bias, mean = _f32(3), _f32(3), _f32(3)
    var = np.abs(_f32(3)) + 0.5
    ln_s, ln_b = _f32(4, 5), _f32(4, 5)
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"],
                              epsilon=1e-3),
             helper.make_node("Softmax", ["bn"], ["sm"], axis=1),
             helper.make_node("LogSoftmax", ["x"], ["lsm"], axis=-1),
             helper.make_node("LayerNormalization", ["x", "ls", "lb"], ["ln"], axis=-2),
             helper.make_node("GlobalAveragePool", ["x"], ["gap"]),
             helper.make_node("GlobalMaxPool", ["x"], ["gmp"])]
    m = model(nodes, {"x": x}, ["bn", "sm", "lsm", "ln", "gap", "gmp"],
              {"s": s, "b": bias, "m": mean, "v": var, "ls": ln_s, "lb": ln_b})
    check(m, {"x": x})


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reductions_attribute_and_input_axes(opset):
    x = _f32(3, 4, 5)
    names = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL1", "ReduceL2", "ReduceSumSquare",
             "ReduceLogSumExp"]
    nodes, inits = [], {}
    for k, op in enumerate(names):
        if opset >= (13 if op == "ReduceSum" else 18):
            nodes.append(helper.make_node(op, ["x", "axes"], [f"y{k}"], keepdims=k % 2))
            inits["axes"] = np.array([0, -1], np.int64)
        else:
            nodes.append(helper.make_node(op, ["x"], [f"y{k}"], axes=[0, -1], keepdims=k % 2))
    nodes.append(helper.make_node("ReduceMean", ["x"], ["all"]))
    check(model(nodes, {"x": x}, [f"y{k}" for k in range(len(names))] + ["all"], inits,
                opset=opset), {"x": x})


def test_shape_arithmetic_folds_at_import():
    """Shape -> Concat -> Reshape, Unsqueeze/Squeeze, Flatten, ConstantOfShape, Range, Expand,
    Tile, Transpose: every shape computation is a constant; the graph keeps only data ops."""
    x = _f32(2, 3, 4)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["minus1"], value_ints=[-1]),
             helper.make_node("Concat", ["minus1", "s"], ["s2"], axis=0),
             helper.make_node("Shape", ["x"], ["last"], start=-1),
             helper.make_node("Concat", ["minus1", "last"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "ax"], ["u"]),
             helper.make_node("Squeeze", ["u", "ax"], ["q"]),
             helper.make_node("Flatten", ["x"], ["f"], axis=2),
             helper.make_node("ConstantOfShape", ["last"], ["ones"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("Add", ["q", "ones"], ["qa"]),
             helper.make_node("Range", ["r0", "r1", "r2"], ["rng"]),
             helper.make_node("Cast", ["rng"], ["rngf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["qa", "rngf"], ["m"]),
             helper.make_node("Expand", ["m", "big"], ["e"]),
             helper.make_node("Tile", ["x", "reps"], ["t"]),
             helper.make_node("Transpose", ["x"], ["tr"], perm=[2, 0, 1])]
    inits = {"ax": np.array([0], np.int64), "r0": np.array(0.0, np.float32),
             "r1": np.array(4.0, np.float32), "r2": np.array(1.0, np.float32),
             "big": np.array([2, 1, 4], np.int64), "reps": np.array([1, 2, 3], np.int64)}
    mod = check(model(nodes, {"x": x}, ["e", "f", "t", "tr", "s2"], inits), {"x": x})
    kinds = {ik.ops.get_op(int(k)).name for k in mod["main"].kind}
    assert not kinds & {"concat"}  # the shape concats folded


def test_large_initializer_is_held_by_reference_without_a_second_copy():
    import tracemalloc

    w = RNG.standard_normal((2048, 4096)).astype(np.float32)  # 32 MB
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": _f32(2, 2048)}, ["y"],
              {"w": w})
    tracemalloc.start()
    try:
        mod = from_onnx(m)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    pool = mod["main"].consts
    assert pool.external_nbytes == w.nbytes and len(pool.data) < 1024
    assert peak < 1.2 * w.nbytes  # the array decoded from the protobuf, nothing more
    (held,) = pool.external.values()
    np.testing.assert_array_equal(held, w)


@given(st.data())
@settings(max_examples=40, deadline=None)
def test_reshape_family_property(data):
    """Reshape (0 and -1), Flatten, Squeeze/Unsqueeze and Transpose on random shapes vs
    onnxruntime (the shape arithmetic is the frontend's; the data movement the graph's)."""
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    rank = len(shape)
    target = [0 if data.draw(st.booleans()) else d for d in shape]
    target[data.draw(st.integers(0, rank - 1))] = -1
    perm = data.draw(st.permutations(range(rank)))
    flat_axis = data.draw(st.integers(-rank, rank))
    unsq = data.draw(st.integers(-rank - 1, rank))  # an axis of the unsqueezed result
    nodes = [helper.make_node("Reshape", ["x", "t"], ["r"]),
             helper.make_node("Flatten", ["x"], ["f"], axis=flat_axis),
             helper.make_node("Transpose", ["x"], ["p"], perm=list(perm)),
             helper.make_node("Unsqueeze", ["x", "u"], ["q"]),
             helper.make_node("Squeeze", ["q", "u"], ["z"])]
    inits = {"t": np.array(target, np.int64), "u": np.array([unsq], np.int64)}
    check(model(nodes, {"x": x}, ["r", "f", "p", "q", "z"], inits), {"x": x}, build=False)


def test_model_local_functions_are_inlined():
    fn = helper.make_function("custom", "Swishy", ["a"], ["b"],
                              [helper.make_node("Sigmoid", ["a"], ["s"]),
                               helper.make_node("Mul", ["a", "s"], ["b"])],
                              [helper.make_opsetid("", 17)])
    x = _f32(3, 4)
    m = model([helper.make_node("Swishy", ["x"], ["y"], domain="custom")], {"x": x}, ["y"])
    m.functions.append(fn)
    m.opset_import.append(helper.make_opsetid("custom", 1))
    (got,) = ik.interpret(from_onnx(m), x)
    np.testing.assert_allclose(got, x / (1 + np.exp(-x)), rtol=1e-5)
