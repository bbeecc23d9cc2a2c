"""Converters of issue 26 (the ops real exports use) against onnxruntime: Resize (every
mode the lowering distinguishes, opset 10 and Upsample included), GatherElements,
ScatterElements, GatherND and CumSum. The graph ops' own semantics are tested with the
op table; what is tested here is the lowering at import."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper
from onnx_helpers import check, model

RNG = np.random.default_rng(26)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _resize(x, attrs, scales=None, sizes=None, opset=19, roi=None, build=False):
    inits = {"roi": np.asarray(roi if roi is not None else [], np.float32),
             "scales": np.asarray(scales if scales is not None else [], np.float32)}
    names = ["x", "roi", "scales"]
    if sizes is not None:
        inits["sizes"] = np.asarray(sizes, np.int64)
        names.append("sizes")
    m = model([helper.make_node("Resize", names, ["y"], **attrs)], {"x": x}, ["y"], inits,
              opset=opset)
    check(m, {"x": x}, build=build)


@pytest.mark.parametrize("transform", ["half_pixel", "pytorch_half_pixel", "align_corners",
                                       "asymmetric", "half_pixel_symmetric"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 2.0, 1.5], [1, 1, 0.6, 0.5]])
def test_resize_modes(transform, mode, scales):
    _resize(_f32(1, 2, 5, 6), {"mode": mode, "coordinate_transformation_mode": transform},
            scales=scales)


@pytest.mark.parametrize("nearest", ["round_prefer_floor", "round_prefer_ceil", "floor",
                                     "ceil"])
def test_resize_nearest_modes_by_sizes(nearest):
    _resize(_f32(2, 3, 7), {"mode": "nearest", "nearest_mode": nearest}, sizes=[2, 3, 11])


def test_resize_nearest_of_ints_is_exact_and_compiles():
    x = RNG.integers(-9, 9, (1, 1, 3, 4)).astype(np.int32)
    _resize(x, {"mode": "nearest"}, scales=[1, 1, 2.0, 0.5], build=True)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_exclude_outside_and_axes(mode):
    _resize(_f32(1, 2, 9, 8), {"mode": mode, "antialias": 1, "axes": [3, 2],
                               "exclude_outside": 1}, sizes=[3, 4], build=True)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_keep_aspect_ratio(policy):
    _resize(_f32(1, 1, 4, 6), {"mode": "linear", "keep_aspect_ratio_policy": policy,
                               "axes": [2, 3]}, sizes=[7, 7])


def test_resize_tf_crop_and_resize_extrapolates():
    _resize(_f32(1, 1, 4, 4), {"mode": "linear",
                               "coordinate_transformation_mode": "tf_crop_and_resize",
                               "extrapolation_value": 3.0},
            sizes=[1, 1, 3, 3], roi=[0, 0, -0.2, 0.4, 1, 1, 0.6, 1.3])


@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.7]])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_opset_10(mode, scales):
    x = _f32(1, 1, 4, 5)
    m = model([helper.make_node("Resize", ["x", "scales"], ["y"], mode=mode)], {"x": x},
              ["y"], {"scales": np.asarray(scales, np.float32)}, opset=10)
    check(m, {"x": x}, build=False)


def test_gather_elements_negative_indices():
    x = _f32(3, 4, 2)
    i = RNG.integers(-4, 4, (3, 5, 2))
    m = model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)], {"x": x, "i": i},
              ["y"])
    check(m, {"x": x, "i": i})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements(reduction):
    x, u = _f32(4, 3), _f32(2, 3)
    i = np.array([[1, -1, 2], [3, 0, 0]], np.int64) if reduction == "none" else \
        np.array([[1, 1, 2], [1, 0, 2]], np.int64)
    m = model([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0,
                                reduction=reduction)], {"x": x, "u": u}, ["y"], {"i": i},
              opset=18)
    check(m, {"x": x, "u": u})


@pytest.mark.parametrize(("data", "index", "batch_dims"), [
    ((3, 4, 2), [[1, 2], [-1, 0]], 0), ((2, 3, 4), [[1], [2]], 1), ((2, 3, 4), [[[0, 1]], [[2, 3]]], 1),
    ((5, 2), [[], []], 0)])
def test_gather_nd(data, index, batch_dims):
    x = _f32(*data)
    i = np.asarray(index, np.int64).reshape(np.asarray(index).shape or (0,))
    if i.ndim == 1:
        i = i.reshape(-1, 0)
    m = model([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)],
              {"x": x}, ["y"], {"i": i})
    check(m, {"x": x})


@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(exclusive, reverse):
    x = _f32(3, 5)
    m = model([helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive,
                                reverse=reverse)], {"x": x}, ["y"],
              {"axis": np.array(-1, np.int32)})
    check(m, {"x": x})


@pytest.mark.parametrize(("equation", "shapes"), [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]), ("ii->i", [(4, 4)]), ("ii", [(3, 3)]),
    ("ij->", [(3, 4)]), ("i,i", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]), ("ba,ac", [(3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (2, 5, 4, 2)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4)] * 2),
    ("ij,ij->ij", [(2, 3), (2, 3)]), ("i j , j->i", [(3, 4), (4,)]), ("iij,jk->ik", [(3, 3, 2), (2, 4)])])
def test_einsum(equation, shapes):
    xs = {f"x{k}": _f32(*s) for k, s in enumerate(shapes)}
    m = model([helper.make_node("Einsum", list(xs), ["y"], equation=equation)], xs, ["y"])
    check(m, xs, build=equation == "abc,cd,de->abe")
