"""ik.interpret of the ops of issue 26 (the ops real exports use) against hand-written
Python: the trigonometric and hyperbolic functions (Python's ``math``, per element), the
scans cumsum/cumprod (Python loops) and scatter_nd's reductions.

Expected values are Python's own per-element code, never the op table's references.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from interp_helpers import FLOATS, check, run, sample

from irkernel import ops

COVERED = {*ops.TRIG_OPS, "cumsum", "cumprod"}


def _each(fn, x, dtype):
    def safe(v):
        try:
            return fn(v)
        except (ValueError, OverflowError):  # math raises where libm gives NaN or inf
            return math.nan if not math.isinf(v) or fn in (math.sin, math.cos, math.tan) \
                else _limit(fn, v)
    return np.array([safe(v) for v in x.ravel().tolist()], np.float64).astype(dtype) \
        .reshape(x.shape)


def _limit(fn, v):
    """libm's value at an infinite argument where Python's math raises."""
    if fn in (math.sinh,):
        return v
    if fn in (math.cosh,):
        return math.inf
    return math.nan


MATH = {"sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin,
        "acos": math.acos, "atan": math.atan, "sinh": math.sinh, "cosh": math.cosh,
        "asinh": math.asinh, "acosh": math.acosh, "atanh": math.atanh}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ops.TRIG_OPS)
def test_trig_is_libm(name, dtype):
    x = sample(dtype, (64,), 3)
    if name in ("asin", "acos", "atanh"):  # mostly inside the domain
        x = (x / 8).astype(dtype)
    with np.errstate(all="ignore"):
        out = run(name, x)
    expected = _each(MATH[name], x.astype(np.float64), dtype)
    check(out, expected, dtype, exact=False)


def test_trig_domain_edges():
    x = np.array([1.0, -1.0, 2.0, np.nan], np.float64)
    assert run("atanh", x)[:2].tolist() == [math.inf, -math.inf]
    assert np.isnan(run("atanh", x)[2:]).all()
    assert np.isnan(run("acosh", np.array([0.5])))[0]
    assert run("asin", np.array([-0.0]))[0] == 0.0 and np.signbit(run("asin", np.array([-0.0])))
    assert run("cosh", np.array([np.inf, -np.inf], np.float32)).tolist() == [math.inf] * 2


def _scan_1d(values, is_sum, exclusive, reverse, dtype):
    seq = list(reversed(values)) if reverse else list(values)
    out, acc = [], np.array(0 if is_sum else 1, dtype)
    with np.errstate(all="ignore"):
        for v in seq:
            if exclusive:
                out.append(acc)
            acc = (acc + np.array(v, dtype)) if is_sum else (acc * np.array(v, dtype))
            if not exclusive:
                out.append(acc)
    return list(reversed(out)) if reverse else out


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize(("exclusive", "reverse"), [(False, False), (True, False),
                                                    (False, True), (True, True)])
def test_scans_run_in_order(name, dtype, exclusive, reverse):
    x = sample(dtype, (3, 5), 4)
    out = run(name, x, axis=1, exclusive=exclusive, reverse=reverse)
    expected = np.array([_scan_1d(row, name == "cumsum", exclusive, reverse, dtype)
                         for row in x], dtype)
    check(out, expected, dtype)


def test_int_scans_wrap():
    x = np.array([2**30, 2**30, 2**30], np.int32)
    assert run("cumsum", x).tolist() == [2**30, -(2**31), -(2**30)]
    assert run("cumprod", np.array([2**16, 2**16, 3], np.int32)).tolist() == [2**16, 0, 0]


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_reductions_combine_in_row_order(reduction):
    data = np.array([1.0, 2.0, 3.0, 4.0])
    idx = np.array([[1], [3], [1], [-1]])
    upd = np.array([10.0, -5.0, 0.5, np.nan])
    out = run("scatter_nd", data, idx, upd, reduction=reduction)
    fn = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b,
          "max": lambda a, b: a if (a != a or a > b) else b,
          "min": lambda a, b: a if (a != a or a < b) else b}[reduction]
    want = data.tolist()
    for (i,), u in zip(idx.tolist(), upd.tolist(), strict=True):
        want[i % 4] = fn(want[i % 4], u)
    check(out, np.array(want), "float64")
