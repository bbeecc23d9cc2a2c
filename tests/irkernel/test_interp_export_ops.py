"""ik.interpret of the ops of issue 26 (the ops real exports use) against hand-written
Python: the trigonometric and hyperbolic functions (Python's ``math``, per element).

Expected values are Python's own per-element code, never the op table's references.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from interp_helpers import FLOATS, check, run, sample

from irkernel import ops

COVERED = set(ops.TRIG_OPS)


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
