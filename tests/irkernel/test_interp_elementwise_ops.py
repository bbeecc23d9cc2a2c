"""ik.interpret of the elementwise ops of issue 15 (erf, floor, ceil, round, the logical
ops, floor_mod, fmod) against hand-written Python, and their type rules.

Expected values are Python's own ``math``/operators per element, never the op
table's references.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from interp_helpers import FLOATS, INTS, NUMERIC, check, run, sample

import irkernel as ik
from irkernel import ops
from irkernel.ir.errors import TypeInferenceError

COVERED = {"erf", "floor", "ceil", "round", "logical_not", "logical_and", "logical_or",
           "logical_xor", "floor_mod", "fmod"}


def _each(fn, *arrays, dtype):
    arrays = np.broadcast_arrays(*arrays)
    flat = [a.ravel().tolist() for a in arrays]
    return np.array([fn(*v) for v in zip(*flat, strict=True)], dtype).reshape(arrays[0].shape)


@pytest.mark.parametrize("dtype", FLOATS)
def test_erf_is_libm_erf(dtype):
    x = sample(dtype, (64,), 1)
    expected = _each(math.erf, x, dtype=np.float64).astype(dtype)
    check(run("erf", x), expected, dtype, exact=False)


def test_erf_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 6.0, -6.0, 1e-30], np.float64)
    out = run("erf", x)
    assert out[0] == 0.0
    assert not np.signbit(out[0])
    assert out[1] == 0.0
    assert np.signbit(out[1])
    assert list(out[2:4]) == [1.0, -1.0]
    assert np.isnan(out[4])
    assert list(out[5:7]) == [1.0, -1.0]
    assert out[7] == pytest.approx(1e-30 * 2 / math.sqrt(math.pi))


def _round_half_even(v: float) -> float:
    if not math.isfinite(v):
        return v
    r = float(round(v))  # Python rounds half to even
    return math.copysign(r, v) if r == 0 else r  # keep the sign of -0.4 -> -0.0


ROUNDINGS = {"floor": lambda v: v if not math.isfinite(v) else math.copysign(math.floor(v), v)
             if math.floor(v) == 0 else float(math.floor(v)),
             "ceil": lambda v: v if not math.isfinite(v) else math.copysign(math.ceil(v), v)
             if math.ceil(v) == 0 else float(math.ceil(v)),
             "round": _round_half_even}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(ROUNDINGS))
def test_rounding_ops(op, dtype):
    x = np.concatenate([sample(dtype, (40,), 2),
                        np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.4, 0.4, 1e20, -1e-20,
                                  2.0**52 + 1], dtype)])
    out = run(op, x)
    expected = _each(ROUNDINGS[op], x, dtype=dtype)
    check(out, expected, dtype)
    assert np.array_equal(np.signbit(out), np.signbit(expected))


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -2.5], np.float32)
    check(run("round", x), [0.0, 2.0, 2.0, 4.0, -0.0, -2.0], "float32")


LOGICAL = {"logical_and": lambda a, b: a and b, "logical_or": lambda a, b: a or b,
           "logical_xor": lambda a, b: a != b}


@pytest.mark.parametrize("shapes", [((4,), (4,)), ((2, 1), (3,)), ((), (2, 2)), ((), ())])
@pytest.mark.parametrize("op", list(LOGICAL))
def test_logical_binary(op, shapes):
    x = sample("bool", shapes[0], 3)
    y = sample("bool", shapes[1], 4)
    check(run(op, x, y), _each(LOGICAL[op], x, y, dtype=bool), "bool")


def test_logical_not():
    check(run("logical_not", np.array([True, False])), [False, True], "bool")


def _py_floor_mod(a, b):
    if isinstance(a, int):
        return 0 if b == 0 else a % b
    if b == 0 or math.isnan(a) or math.isnan(b) or math.isinf(a):
        return math.nan
    r = math.fmod(a, b)
    if r == 0:
        return math.copysign(0.0, b)
    return r + b if (r < 0) != (b < 0) else r


def _py_fmod(a, b):
    if isinstance(a, int):
        if b == 0:
            return 0
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    if b == 0 or math.isnan(a) or math.isnan(b) or math.isinf(a):
        return math.nan
    return math.fmod(a, b)


def _wrap(v, dtype):
    return np.array(v).astype(dtype) if not isinstance(v, int) else np.array(
        (v + 2**63) % 2**64 - 2**63).astype(np.int64).astype(dtype)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize(("op", "fn"), [("floor_mod", _py_floor_mod), ("fmod", _py_fmod)])
def test_remainders(op, fn, dtype):
    x = sample(dtype, (60,), 5)
    y = sample(dtype, (60,), 6)
    y[:4] = 0
    if dtype in INTS:
        info = np.iinfo(dtype)
        x[4:8] = [info.min, info.min, -7, 7]
        y[4:8] = [-1, 3, 2, -2]
    out = run(op, x, y)
    expected = np.array([fn(a, b) for a, b in zip(x.tolist(), y.tolist(), strict=True)],
                        np.float64 if dtype in FLOATS else object)
    expected = expected.astype(dtype) if dtype in FLOATS else np.array(
        [_wrap(v, dtype) for v in expected], dtype)
    check(out, expected, dtype)
    if dtype in FLOATS:
        assert np.array_equal(np.signbit(out[~np.isnan(out)]),
                              np.signbit(expected[~np.isnan(expected)]))


def test_remainder_signs_follow_the_contract():
    x = np.array([7.0, -7.0, 7.0, -7.0, -0.0, 4.0, -1.0, 3.0])
    y = np.array([2.0, 2.0, -2.0, -2.0, 2.0, -2.0, np.inf, -np.inf])
    assert run("floor_mod", x, y).tolist()[:4] == [1.0, 1.0, -1.0, -1.0]   # sign of y
    assert run("fmod", x, y).tolist()[:4] == [1.0, -1.0, 1.0, -1.0]       # sign of x
    fm, cm = run("floor_mod", x, y), run("fmod", x, y)
    assert list(np.signbit(fm[4:6])) == [False, True]   # zero: sign of y
    assert list(np.signbit(cm[4:6])) == [True, False]   # zero: sign of x
    assert list(fm[6:8]) == [np.inf, -np.inf]           # np.mod(-1, inf) = inf
    assert list(cm[6:8]) == [-1.0, 3.0]                 # fmod(x, inf) = x


@given(st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=20),
       st.lists(st.integers(-5, 5), min_size=1, max_size=20))
def test_int_remainders_match_python(xs, ys):
    n = min(len(xs), len(ys))
    x, y = np.array(xs[:n], np.int32), np.array(ys[:n], np.int32)
    pairs = list(zip(xs[:n], ys[:n], strict=True))
    check(run("floor_mod", x, y), [_py_floor_mod(a, b) for a, b in pairs], "int32")
    check(run("fmod", x, y), [_py_fmod(a, b) for a, b in pairs], "int32")


# -- type rules ---------------------------------------------------------------

def _infer(name, types):
    op = ops.get_op(name)
    return op.infer(types, dict(op.normalize_attrs({})))


@pytest.mark.parametrize("op", ["erf", "floor", "ceil", "round"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_float_only_ops_reject_other_dtypes(op, dtype):
    with pytest.raises(TypeInferenceError, match=f"operand dtype {dtype} not supported"):
        _infer(op, [(ik.ids.dtype_code(dtype), (2,))])


@pytest.mark.parametrize("op", ["logical_not", "logical_and", "logical_or", "logical_xor"])
def test_logical_ops_take_bools_only(op):
    n = ops.get_op(op).arity
    with pytest.raises(TypeInferenceError, match="operand dtype float32 not supported"):
        _infer(op, [(ik.ids.FLOAT32, (2,))] * n)
    assert _infer(op, [(ik.ids.BOOL, (2, 1))] + [(ik.ids.BOOL, (3,))] * (n - 1)) == (
        ik.ids.BOOL, (2, 1) if n == 1 else (2, 3))


@pytest.mark.parametrize("op", ["floor_mod", "fmod"])
def test_remainders_reject_bools_and_mixed_dtypes(op):
    with pytest.raises(TypeInferenceError, match="bool not supported"):
        _infer(op, [(ik.ids.BOOL, (2,)), (ik.ids.BOOL, (2,))])
    with pytest.raises(TypeInferenceError, match="operand dtypes differ"):
        _infer(op, [(ik.ids.INT32, (2,)), (ik.ids.INT64, (2,))])
    with pytest.raises(TypeInferenceError, match=r"shapes \(2,\), \(3,\) do not broadcast"):
        _infer(op, [(ik.ids.INT32, (2,)), (ik.ids.INT32, (3,))])


def test_patterns_and_flags():
    for name in ("erf", "floor", "ceil", "round", "logical_not"):
        assert ops.get_op(name).pattern == ops.ELEMWISE
    for name in ("logical_and", "logical_or", "logical_xor", "floor_mod", "fmod"):
        assert ops.get_op(name).pattern == ops.BROADCAST
    assert {o.name for o in ops.all_ops() if o.commutative} >= {
        "logical_and", "logical_or", "logical_xor"}
    assert not ops.get_op("floor_mod").commutative
    assert not ops.get_op("fmod").commutative
