"""ik.interpret of the reductions and movement ops of issue 15 (min, prod, argmax, argmin,
strided_slice, take, pad, scatter_nd) against hand-written NumPy/Python, and their type
rules' errors.

Expected values are written here (slicing, Python loops), never the op table's references.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from interp_helpers import FLOATS, NUMERIC, check, run, sample

import irkernel as ik
from irkernel.ir.errors import TypeInferenceError

COVERED = {"min", "prod", "argmax", "argmin", "strided_slice", "take", "pad", "scatter_nd"}


# -- reductions -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize(("axis", "keepdims"), [(None, False), (1, True), ((0, 2), False),
                                                 (-1, False)])
def test_min_and_prod(dtype, axis, keepdims):
    x = sample(dtype, (2, 3, 4), 7, special=False)
    if dtype.startswith("int"):
        x = (x % 5).astype(dtype)
    ax = axis if axis is None or isinstance(axis, tuple) else (axis,)
    check(run("min", x, axis=axis, keepdims=keepdims),
          np.min(x, axis=ax, keepdims=keepdims), dtype)
    expected = np.prod(x, axis=ax, keepdims=keepdims, dtype=x.dtype)  # ints wrap
    check(run("prod", x, axis=axis, keepdims=keepdims), expected, dtype,
          exact=dtype.startswith("int"))


def test_min_propagates_nan_and_rejects_empty_axes():
    x = np.array([[1.0, np.nan, -3.0], [2.0, 0.5, 4.0]], np.float32)
    out = run("min", x, axis=1)
    assert np.isnan(out[0])
    assert out[1] == 0.5
    bb = ik.GraphBuilder("main")
    with pytest.raises(ValueError, match=r"reduction over an empty axis of shape \(0, 3\)"):
        bb.min(bb.param("e", (0, 3), "float32"), axis=0)


def test_int_prod_wraps():
    x = np.array([2**20, 2**20, 3], np.int32)
    check(run("prod", x), (2**40 * 3 + 2**31) % 2**32 - 2**31, "int32")


def _argbest(values, is_max, last):
    """The index of the max (min) of a Python list: NaN beats everything, ties by ``last``."""
    nans = [k for k, v in enumerate(values) if v != v]
    if nans:
        return nans[-1] if last else nans[0]
    best = max(values) if is_max else min(values)
    hits = [k for k, v in enumerate(values) if v == best]
    return hits[-1] if last else hits[0]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize(("axis", "keepdims", "last"), [(0, False, False), (-1, True, True),
                                                        (1, False, True)])
def test_arg_reductions(op, dtype, axis, keepdims, last):
    x = sample(dtype, (3, 4, 5), 8)
    x = (x % 3).astype(dtype) if dtype.startswith("int") else np.round(x)  # plenty of ties
    out = run(op, x, axis=axis, keepdims=keepdims, select_last_index=last)
    moved = np.moveaxis(x, axis, -1)
    expected = np.array([_argbest(row.tolist(), op == "argmax", last)
                         for row in moved.reshape(-1, moved.shape[-1])]).reshape(moved.shape[:-1])
    if keepdims:
        expected = np.expand_dims(expected, axis)
    check(out, expected, "int64")


def test_arg_reductions_count_nan_as_the_extreme():
    x = np.array([1.0, np.nan, 5.0, np.nan, -np.inf], np.float64)
    for op in ("argmax", "argmin"):
        assert run(op, x).tolist() == 1
        assert run(op, x, select_last_index=True).tolist() == 3


# -- strided_slice ----------------------------------------------------------------

@given(st.lists(st.integers(1, 5), min_size=1, max_size=3).flatmap(
    lambda shape: st.tuples(
        st.just(tuple(shape)),
        st.tuples(*[st.tuples(st.integers(-8, 8), st.integers(-8, 8),
                              st.sampled_from([1, 2, 3, -1, -2, -4])) for _ in shape]))))
def test_strided_slice_is_numpy_slicing(case):
    shape, triples = case
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    begin, end, strides = zip(*triples, strict=True)
    out = run("strided_slice", x, begin=begin, end=end, strides=strides)
    check(out, x[tuple(slice(b, e, s) for b, e, s in triples)], "int32")


def test_strided_slice_clamps_huge_bounds():
    x = np.arange(6, dtype=np.float32)
    big = 2**63 - 1
    check(run("strided_slice", x, begin=(1,), end=(big,), strides=(2,)), [1.0, 3.0, 5.0],
          "float32")
    check(run("strided_slice", x, begin=(big,), end=(-big - 1,), strides=(-1,)), x[::-1])


# -- take -------------------------------------------------------------------------

@pytest.mark.parametrize("idtype", ["int32", "int64"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_wraps_and_clamps(idtype, axis):
    data = np.arange(12, dtype=np.float64).reshape(3, 4)
    d = data.shape[axis]
    idx = np.array([[0, -1, d - 1], [-d, d, -d - 5], [2**31 - 1, -(2**31), 1]], idtype)
    out = run("take", data, idx, axis=axis)
    fixed = [[(i + d if -d <= i < 0 else min(max(i, 0), d - 1)) for i in row]
             for row in idx.tolist()]
    moved = np.moveaxis(data, axis, 0)
    expected = np.stack([np.stack([moved[j] for j in row]) for row in fixed])
    # result axes: data.shape[:axis] + idx.shape + data.shape[axis+1:]
    ax = axis % 2
    expected = np.moveaxis(expected, (0, 1), (ax, ax + 1))
    check(out, expected, "float64")


def test_take_scalar_indices_drop_the_axis():
    data = np.array([[1, 2], [3, 4]], np.int64)
    check(run("take", data, np.array(-1, np.int64), axis=0), [3, 4], "int64")


# -- pad --------------------------------------------------------------------------

def _pad_index(s, d, mode):
    if 0 <= s < d:
        return s
    if mode == "edge":
        return min(max(s, 0), d - 1)
    if mode == "wrap":  # the axis repeated periodically
        return s % d
    if d == 1:
        return 0
    while not 0 <= s < d:  # reflect about the end elements, as often as needed
        s = -s if s < 0 else 2 * (d - 1) - s
    return s


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize(("shape", "widths"), [((3, 4), (1, 0, 2, 3)), ((4,), (7, 9)),
                                               ((1, 2), (2, 3, 0, 4)), ((2, 3), (0, 0, 0, 0))])
def test_pad_modes(mode, dtype, shape, widths):
    x = sample(dtype, shape, 9, special=False)
    value = np.array(True if dtype == "bool" else 7, dtype)
    out = run("pad", x, value, pad_width=widths, mode=mode)
    rank = len(shape)
    out_shape = tuple(d + widths[k] + widths[rank + k] for k, d in enumerate(shape))
    expected = np.empty(out_shape, dtype)
    for pos in itertools.product(*map(range, out_shape)):
        src = [p - widths[k] for k, p in enumerate(pos)]
        if mode == "constant" and any(not 0 <= s < d for s, d in zip(src, shape, strict=True)):
            expected[pos] = value
        else:
            expected[pos] = x[tuple(_pad_index(s, d, mode) for s, d in zip(src, shape,
                                                                          strict=True))]
    check(out, expected, dtype)
    if mode != "constant":
        np.testing.assert_array_equal(out, np.pad(x, [(widths[k], widths[rank + k])
                                                      for k in range(rank)], mode=mode))


def test_pad_of_an_empty_axis_in_constant_mode_is_all_value():
    x = np.zeros((0, 2), np.float32)
    check(run("pad", x, np.array(1.5, np.float32), pad_width=(1, 1, 1, 0)),
          np.full((2, 3), 1.5, np.float32))


# -- scatter_nd -------------------------------------------------------------------

@given(st.data())
def test_scatter_nd_last_update_wins_and_indices_clamp(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    k = data.draw(st.integers(0, len(shape)))
    batch = tuple(data.draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    idx = np.array(data.draw(st.lists(st.integers(-6, 6), min_size=int(np.prod(batch)) * k,
                                      max_size=int(np.prod(batch)) * k)),
                   np.int64).reshape((*batch, k))
    base = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    updates = -1.0 - np.arange(int(np.prod(batch + shape[k:])),
                               dtype=np.float64).reshape(batch + shape[k:])
    out = run("scatter_nd", base, idx, updates)
    expected = base.copy()
    for row in itertools.product(*map(range, batch)):
        target = tuple((i + d if -d <= i < 0 else min(max(i, 0), d - 1))
                       for i, d in zip(idx[row].tolist(), shape, strict=False))
        expected[target] = updates[row]
    check(out, expected, "float64")


# -- type rules -------------------------------------------------------------------

def _bad(op, shapes_dtypes, match, **attrs):
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"p{k}", s, d) for k, (s, d) in enumerate(shapes_dtypes)]
    with pytest.raises(ValueError, match=match):
        bb.call(op, *xs, **attrs)


def test_rules_reject_bad_operands_naming_them():
    f32 = "float32"
    _bad("argmax", [((), f32)], r"axis 0 out of range for rank 0")
    _bad("argmax", [((2, 0), f32)], r"empty axis 1 of shape \(2, 0\)", axis=1)
    _bad("argmin", [((2,), "bool")], r"dtype bool not supported")
    _bad("strided_slice", [((2, 3), f32)], r"one begin, end and stride per axis, got 1, 2 "
         r"and 2", begin=(0,), end=(1, 1), strides=(1, 1))
    _bad("strided_slice", [((2,), f32)], r"strides \(0,\) contain 0", begin=(0,), end=(1,),
         strides=(0,))
    _bad("take", [((2, 3), f32), ((2,), f32)], "indices must be int32 or int64, got float32")
    _bad("take", [((), f32), ((2,), "int64")], r"data must have rank >= 1")
    _bad("take", [((0, 3), f32), ((2,), "int64")], r"axis 0 of data shape \(0, 3\) is empty")
    _bad("pad", [((2,), f32), ((1,), f32)], r"0-d float32 tensor, got float32\[1\]",
         pad_width=(1, 1))
    _bad("pad", [((2,), f32), ((), "float64")], r"0-d float32 tensor, got float64\[\]",
         pad_width=(1, 1))
    _bad("pad", [((2, 2), f32), ((), f32)], r"must hold 4 values", pad_width=(1, 1))
    _bad("pad", [((2,), f32), ((), f32)], r"negative entry", pad_width=(-1, 1))
    _bad("pad", [((2,), f32), ((), f32)], r"unknown mode .circular.", pad_width=(1, 1),
         mode="circular")
    _bad("pad", [((0,), f32), ((), f32)], r"cannot pad the empty axis 0", pad_width=(1, 1),
         mode="edge")
    _bad("scatter_nd", [((4,), f32), ((2, 1), "float32"), ((2,), f32)], "must be int64")
    _bad("scatter_nd", [((4,), f32), ((2, 2), "int64"), ((2,), f32)],
         r"indices shape \(2, 2\) must be \[..., k\] with k <= rank 1")
    _bad("scatter_nd", [((4, 3), f32), ((2, 1), "int64"), ((2, 4), f32)],
         r"updates shape \(2, 4\) must be \(2, 3\)")
    _bad("scatter_nd", [((4,), f32), ((2, 1), "int64"), ((2,), "float64")],
         "updates dtype float64 differs")


@pytest.mark.parametrize("dtype", FLOATS)
def test_movement_ops_keep_dtype_and_patterns(dtype):
    ops = ik.ops
    for name in ("strided_slice", "take", "pad"):
        assert ops.get_op(name).pattern == ops.INJECTIVE
    assert ops.get_op("scatter_nd").pattern == ops.OPAQUE
    for name in ("min", "prod", "argmax", "argmin"):
        assert ops.get_op(name).pattern == ops.REDUCE
    with pytest.raises(TypeInferenceError):
        ops.get_op("take").infer([(ik.ids.dtype_code(dtype), (2,)), (ik.ids.BOOL, (1,))],
                                 {"axis": 0})
