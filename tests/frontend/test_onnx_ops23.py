"""The opset-23 transformer ops and the ops that need a constant at import, against
``onnx.reference.ReferenceEvaluator`` (onnxruntime may lack opset 23).

Attention, RMSNormalization and RotaryEmbedding are compositions of graph ops
(``converters/transformer.py``); NonZero, Unique, Compress and If are converted when an
input is a constant (``converters/constant_only.py``). onnx's own node test cases of
these ops run in ``test_onnx_backend.py``; the cases here add random shapes and the
attribute combinations those cases leave out, and the errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import irkernel as ik  # noqa: E402
from irkernel.frontend.onnx import ONNXImportError, from_onnx  # noqa: E402
from irkernel.frontend.onnx.common import NeedsConstant  # noqa: E402

_ELEM = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int64"): TensorProto.INT64,
         np.dtype("bool"): TensorProto.BOOL, np.dtype("float16"): TensorProto.FLOAT16}


def _model(nodes, inputs: dict, outputs: list[str], inits: dict | None = None,
           opset: int = 23) -> onnx.ModelProto:
    ins = [helper.make_tensor_value_info(k, _ELEM[v.dtype], list(v.shape))
           for k, v in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(k) for k in outputs]
    graph = helper.make_graph(nodes, "g", ins, outs,
                              [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(m: onnx.ModelProto, inputs: dict, build: bool = False, rtol: float = 1e-4,
           atol: float = 1e-5) -> None:
    """from_onnx's outputs (interpreted, and built when asked) == onnx.reference's."""
    want = ReferenceEvaluator(m).run(None, inputs)
    mod = from_onnx(m)
    runs = [ik.interpret(mod, *inputs.values())]
    if build:
        import runtime

        runs.append(runtime.build(mod)["main"](*inputs.values()))
    for got in runs:
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# -- Attention ------------------------------------------------------------------------

_ATTN_OUT = ["y", "present_key", "present_value", "qk"]


def _attention_case(rng, *, b=2, hq=4, hkv=2, sq=3, skv=5, d=8, dv=6, three_d=False,
                    mask=None, past=0, **attrs):
    """Inputs and the Attention node of one configuration (mask: None, 'bool', 'float',
    'short' (fewer columns than keys) or 'bool3' (a rank-3 bool mask))."""
    q, k, v = _rand(rng, b, hq, sq, d), _rand(rng, b, hkv, skv, d), _rand(rng, b, hkv, skv, dv)
    if three_d:
        q = q.transpose(0, 2, 1, 3).reshape(b, sq, hq * d)
        k = k.transpose(0, 2, 1, 3).reshape(b, skv, hkv * d)
        v = v.transpose(0, 2, 1, 3).reshape(b, skv, hkv * dv)
        attrs.update(q_num_heads=hq, kv_num_heads=hkv)
    inputs = {"q": q, "k": k, "v": v}
    names = ["q", "k", "v"]
    total = skv + past
    if mask == "bool":
        inputs["mask"] = rng.random((sq, total)) < 0.7
    elif mask == "bool3":
        inputs["mask"] = rng.random((hq, sq, total)) < 0.7
    elif mask == "float":
        inputs["mask"] = _rand(rng, b, 1, sq, total)
    elif mask == "short":
        inputs["mask"] = _rand(rng, sq, total - 2)
    names.append("mask" if mask else "")
    if past:
        inputs["past_k"] = _rand(rng, b, hkv, past, d)
        inputs["past_v"] = _rand(rng, b, hkv, past, dv)
        names += ["past_k", "past_v"]
    node = helper.make_node("Attention", names, _ATTN_OUT, **attrs)
    return node, inputs


ATTENTION_CASES = {
    "mha_4d": dict(hkv=4),
    "gqa_4d": dict(),
    "mqa_3d": dict(hkv=1, three_d=True),
    "gqa_3d_causal": dict(three_d=True, is_causal=1),
    "causal_past": dict(is_causal=1, past=4),
    "bool_mask_causal": dict(mask="bool", is_causal=1),
    "bool3_mask": dict(mask="bool3"),
    "float_mask_scale": dict(mask="float", scale=0.3),
    "short_mask": dict(mask="short"),
    "softcap_mode1": dict(softcap=2.0, qk_matmul_output_mode=1),
    "bias_mode2": dict(mask="float", qk_matmul_output_mode=2, past=2),
    "softmax_mode3": dict(is_causal=1, qk_matmul_output_mode=3, sq=6, skv=4),
    "precision": dict(softmax_precision=1, mask="bool"),
}


@pytest.mark.parametrize("name", sorted(ATTENTION_CASES))
def test_attention_matches_reference(name):
    node, inputs = _attention_case(np.random.default_rng(len(name)), **ATTENTION_CASES[name])
    _check(_model([node], inputs, _ATTN_OUT), inputs, build=name in ("gqa_3d_causal",
                                                                       "bool_mask_causal"))


@pytest.mark.parametrize("opset,attrs", [(24, {"is_causal": 1}), (25, {"left_window_size": 1}),
                                         (25, {"is_causal": 1, "right_window_size": 0,
                                               "left_window_size": 2})])
def test_attention_nonpad_and_windows(opset, attrs):
    """nonpad_kv_seqlen (opset 24) as a run-time input, sliding windows (opset 25)."""
    rng = np.random.default_rng(opset)
    node, inputs = _attention_case(rng, sq=3, skv=6, **attrs)
    if opset == 24:
        inputs["nonpad"] = np.array([6, 4], np.int64)
        node = helper.make_node("Attention", ["q", "k", "v", "", "", "", "nonpad"], _ATTN_OUT,
                                **attrs)
    _check(_model([node], inputs, _ATTN_OUT[:1], opset=opset), inputs)


def test_attention_fully_masked_row_is_zero():
    """A query row whose mask allows no key: zero probabilities, Y = 0 (the reference)."""
    rng = np.random.default_rng(1)
    node, inputs = _attention_case(rng, mask="bool", qk_matmul_output_mode=3)
    inputs["mask"][1] = False
    _check(_model([node], inputs, _ATTN_OUT), inputs)


@given(st.data())
@settings(max_examples=12, deadline=None)
def test_attention_random_shapes(data):
    hkv = data.draw(st.integers(1, 3))
    cfg = dict(b=data.draw(st.integers(1, 2)), hkv=hkv, hq=hkv * data.draw(st.integers(1, 3)),
               sq=data.draw(st.integers(1, 5)), skv=data.draw(st.integers(1, 5)),
               d=data.draw(st.integers(1, 6)), dv=data.draw(st.integers(1, 6)),
               three_d=data.draw(st.booleans()), past=data.draw(st.integers(0, 3)),
               mask=data.draw(st.sampled_from([None, "bool", "float"])))
    if data.draw(st.booleans()):
        cfg["is_causal"] = 1
    if data.draw(st.booleans()):  # mode 1: see test_attention_qk_mode0_with_softcap_is_raw
        cfg.update(softcap=1.5, qk_matmul_output_mode=1)
    node, inputs = _attention_case(np.random.default_rng(0), **cfg)
    if cfg["mask"] == "bool":  # keep the first key: no fully masked row by chance
        inputs["mask"][:, 0] = True
    _check(_model([node], inputs, _ATTN_OUT), inputs)


def test_attention_qk_mode0_with_softcap_is_raw():
    """qk_matmul_output_mode 0 is the raw Q K^T (the spec, onnxruntime); onnx.reference
    returns it soft-capped when ``softcap`` is set, so this one is onnxruntime's."""
    from onnx_helpers import assert_close, run_ort

    node, inputs = _attention_case(np.random.default_rng(4), softcap=1.5)
    m = _model([node], inputs, _ATTN_OUT)
    m.ir_version = 10
    assert_close(ik.interpret(from_onnx(m), *inputs.values()), run_ort(m, inputs))


def test_attention_errors_name_the_node():
    rng = np.random.default_rng(0)
    node, inputs = _attention_case(rng, three_d=True)
    bad = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn", q_num_heads=5,
                           kv_num_heads=2)
    with pytest.raises(ONNXImportError, match=r"'attn' \(Attention\).*not a multiple of 5"):
        from_onnx(_model([bad], inputs, ["y"]))
    no_heads = helper.make_node("Attention", ["q", "k", "v"], ["y"])
    with pytest.raises(ONNXImportError, match="q_num_heads and kv_num_heads are required"):
        from_onnx(_model([no_heads], inputs, ["y"]))


# -- RMSNormalization, RotaryEmbedding ------------------------------------------------------

@given(st.data())
@settings(max_examples=15, deadline=None)
def test_rms_normalization_random(data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(len(shape))
    x = _rand(rng, *shape)
    scale = _rand(rng, *shape[axis % len(shape):])
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-3)
    _check(_model([node], {"x": x}, ["y"], {"s": scale}), {"x": x})


def test_rms_normalization_float16_builds():
    rng = np.random.default_rng(3)
    x = _rand(rng, 2, 3, 16).astype(np.float16)
    s = _rand(rng, 16).astype(np.float16)
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"])
    _check(_model([node], {"x": x, "s": s}, ["y"]), {"x": x, "s": s}, build=True,
           rtol=2e-3, atol=2e-3)


@given(st.data())
@settings(max_examples=15, deadline=None)
def test_rotary_embedding_random(data):
    b, s, heads = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 4)), \
        data.draw(st.integers(1, 3))
    head = 2 * data.draw(st.integers(1, 4))
    rot = 2 * data.draw(st.integers(1, head // 2))
    three_d, interleaved = data.draw(st.booleans()), data.draw(st.booleans())
    positions = data.draw(st.booleans())
    rng = np.random.default_rng(head)
    x = _rand(rng, b, s, heads * head) if three_d else _rand(rng, b, heads, s, head)
    attrs = dict(interleaved=int(interleaved), num_heads=heads if three_d else None,
                 rotary_embedding_dim=rot if rot < head or data.draw(st.booleans()) else None)
    attrs = {k: v for k, v in attrs.items() if v is not None}
    if positions:
        cache = (8, rot // 2)
        inputs = {"x": x, "pos": rng.integers(0, 8, (b, s)).astype(np.int64)}
    else:
        cache = (b, s, rot // 2)
        inputs = {"x": x}
    inits = {"cos": np.cos(_rand(rng, *cache)), "sin": np.sin(_rand(rng, *cache))}
    names = ["x", "cos", "sin"] + (["pos"] if positions else [])
    node = helper.make_node("RotaryEmbedding", names, ["y"], **attrs)
    _check(_model([node], inputs, ["y"], inits), inputs)


def test_rotary_embedding_builds():
    rng = np.random.default_rng(5)
    x = _rand(rng, 1, 2, 3, 8)
    inputs = {"x": x, "cos": _rand(rng, 1, 3, 2), "sin": _rand(rng, 1, 3, 2)}
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], interleaved=1,
                            rotary_embedding_dim=4)
    _check(_model([node], inputs, ["y"]), inputs, build=True)


# -- ops that need a constant at import ----------------------------------------------------

def test_nonzero_and_unique_fold_constants():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 3, (3, 4)).astype(np.float32)
    flat = rng.integers(-3, 3, 9).astype(np.float32)  # (onnx.reference's unsorted Unique
    x = _rand(rng, 3)                                  # without axis needs a 1-D input)
    nodes = [helper.make_node("NonZero", ["c"], ["nz"]),
             helper.make_node("Unique", ["flat"], ["u", "first", "inverse", "counts"], sorted=0),
             helper.make_node("Unique", ["c"], ["ua", "fa", "ia", "ca"], axis=1),
             helper.make_node("Add", ["x", "x"], ["y"])]
    outs = ["nz", "u", "first", "inverse", "counts", "ua", "fa", "ia", "ca", "y"]
    _check(_model(nodes, {"x": x}, outs, {"c": c, "flat": flat}), {"x": x})


@pytest.mark.parametrize("op", ["NonZero", "Unique"])
def test_data_dependent_op_of_a_run_time_tensor_is_named(op):
    x = np.ones((3,), np.float32)
    m = _model([helper.make_node(op, ["x"], ["y"], name="dd")], {"x": x}, ["y"])
    with pytest.raises(NeedsConstant, match=rf"'dd' \({op}\): input 'X' .* must be a constant"):
        from_onnx(m)


def test_compress_with_constant_condition():
    rng = np.random.default_rng(2)
    x = _rand(rng, 4, 3)
    for axis in (None, 0, 1):
        attrs = {} if axis is None else {"axis": axis}
        node = helper.make_node("Compress", ["x", "c"], ["y"], **attrs)
        c = np.array([True, False, True], bool)
        _check(_model([node], {"x": x}, ["y"], {"c": c}), {"x": x})


def _if_model(cond: np.ndarray | None) -> onnx.ModelProto:
    """If(cond): then x * w (w an initializer of the branch), else x - outer_c; the
    result goes on through an Add of the enclosing graph."""
    w = numpy_helper.from_array(np.full((2,), 3.0, np.float32), "w")
    then = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"])], "then", [],
                             [helper.make_empty_tensor_value_info("t")], [w])
    other = helper.make_graph([helper.make_node("Sub", ["x", "outer_c"], ["e"])], "else", [],
                              [helper.make_empty_tensor_value_info("e")])
    nodes = [helper.make_node("If", ["cond"], ["r"], name="branch", then_branch=then,
                              else_branch=other),
             helper.make_node("Add", ["r", "x"], ["y"])]
    inits = {"outer_c": np.array([1.0, 2.0], np.float32)}
    inputs = {"x": np.zeros((2,), np.float32)}
    if cond is None:
        inputs["cond"] = np.array(True)
    else:
        inits["cond"] = cond
    return _model(nodes, inputs, ["y"], inits)


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_constant_condition_is_inlined(cond):
    m = _if_model(np.array(cond))
    x = np.array([1.5, -2.0], np.float32)
    _check(m, {"x": x}, build=cond)
    ops = {ik.ops.get_op(int(k)).name for k in from_onnx(m)["main"].kind.tolist()}
    assert ("multiply" in ops) == cond and ("subtract" in ops) != cond


def test_if_with_run_time_condition_is_named():
    with pytest.raises(NeedsConstant, match=r"'branch' \(If\): input 'cond'"):
        from_onnx(_if_model(None))


def test_unsupported_op_inside_a_branch_is_reported_up_front():
    from irkernel.frontend.onnx import OpNotImplemented

    m = _if_model(np.array(True))
    m.graph.node[0].attribute[0].g.node[0].op_type = "NotAnOp"
    with pytest.raises(OpNotImplemented) as err:
        from_onnx(m)
    assert err.value.unsupported == {"NotAnOp": 1}


# -- RoiAlign (against onnxruntime), GridSample ---------------------------------------------

def _rois(rng: np.random.Generator, count: int, h: int, w: int) -> np.ndarray:
    """Regions [x1, y1, x2, y2] partly outside the map, some degenerate."""
    lo = rng.uniform(-2, [w, h], (count, 2))
    size = rng.uniform(0, [w, h], (count, 2))
    size[0] = 0  # a zero-size region
    return np.concatenate([lo, lo + size], axis=1).astype(np.float32)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ratio,transform", [(0, "half_pixel"), (2, "output_half_pixel"),
                                             (0, "output_half_pixel")])
def test_roi_align_matches_onnxruntime(mode, ratio, transform):
    """sampling_ratio 0 needs constant regions (initializers); a fixed ratio takes them
    at run time."""
    from onnx_helpers import assert_close, run_ort

    rng = np.random.default_rng(ratio)
    x = _rand(rng, 2, 3, 7, 9)
    rois = _rois(rng, 5, 7 * 2, 9 * 2)
    batch = rng.integers(0, 2, 5).astype(np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], mode=mode,
                            output_height=3, output_width=2, sampling_ratio=ratio,
                            spatial_scale=0.5, coordinate_transformation_mode=transform)
    inputs, inits = {"x": x}, {"rois": rois, "batch": batch}
    if ratio:
        inputs, inits = {"x": x, "rois": rois, "batch": batch}, {}
    m = _model([node], inputs, ["y"], inits, opset=16)
    m.ir_version = 8
    mod = from_onnx(m)
    want = run_ort(m, inputs)
    assert_close(ik.interpret(mod, *inputs.values()), want)
    if ratio and mode == "avg":
        import runtime

        assert_close(runtime.build(mod)["main"](*inputs.values()), want)


def test_roi_align_adaptive_ratio_needs_constant_regions():
    x = np.zeros((1, 1, 4, 4), np.float32)
    inputs = {"x": x, "rois": np.zeros((1, 4), np.float32)}
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], name="roi")
    m = _model([node], inputs, ["y"], {"batch": np.zeros(1, np.int64)}, opset=16)
    with pytest.raises(NeedsConstant, match=r"'roi' \(RoiAlign\): input 'rois'"):
        from_onnx(m)


@given(st.data())
@settings(max_examples=15, deadline=None)
def test_grid_sample_random(data):
    """Every mode, padding and align_corners, 1-3 spatial axes, grids reaching past the
    borders, against onnx.reference."""
    dims = data.draw(st.integers(1, 3))
    spatial = [data.draw(st.integers(1, 4)) for _ in range(dims)]
    out = [data.draw(st.integers(1, 3)) for _ in range(dims)]
    mode = data.draw(st.sampled_from(["linear", "nearest", "cubic"]))
    padding = data.draw(st.sampled_from(["zeros", "border", "reflection"]))
    align = data.draw(st.integers(0, 1))
    # an axis of extent 1 has no room to reflect in with align_corners: the reference
    # divides by zero (here the coordinate is that one pixel)
    assume(not (align and padding == "reflection" and 1 in spatial))
    rng = np.random.default_rng(dims)
    x = _rand(rng, 2, 2, *spatial)
    grid = rng.uniform(-1.7, 1.7, (2, *out, dims)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                            padding_mode=padding, align_corners=align)
    inputs = {"x": x, "grid": grid}
    _check(_model([node], inputs, ["y"], opset=22), inputs)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_grid_sample_opset16_matches_onnxruntime(mode):
    """Opset 16's mode names (onnx.reference knows only opset 20's), built."""
    from onnx_helpers import check

    rng = np.random.default_rng(7)
    inputs = {"x": _rand(rng, 1, 2, 5, 6),
              "grid": rng.uniform(-1.2, 1.2, (1, 4, 3, 2)).astype(np.float32)}
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                            padding_mode="reflection")
    m = _model([node], inputs, ["y"], opset=16)
    m.ir_version = 8
    check(m, inputs)
