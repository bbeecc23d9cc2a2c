"""float32 ``exp`` and ``erf`` as inline IR (``runtime/inline_math.py``) against float64.

Checked in a scalar loop and in an explicitly vectorized one (8 and 16 lanes, so the
libmvec path is not what runs), built for each x86-64 level the host runs (its
multiply-adds fuse where the level has FMA). ``exp``: within 2 ulp over the normal range,
correctly rounded special values, subnormal results within one subnormal step, and NaN
passing through. ``erf``: within 2 ulp of float64 ``math.erf`` on every binade (random
bit patterns) and densely around the hand-over at 0.921875 and the saturation at 3.92,
and its special values exact (``erf(-0) = -0``, +-1 at +-inf, NaN through).
(``bench/erf_ulp.py`` measures every float32 input.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import runtime
from irkernel import transform
from irkernel.target import host_target
from irkernel.tir import script as T

N = 4096
ISAS = ("sse4.2", "avx2", "avx512")
LEVELS = [isa for isa in ISAS if ISAS.index(isa) <= ISAS.index(host_target().isa)]


def _kernel(lanes: int, level: str, op: str = "exp", n: int = N):
    """``out[i] = op(x[i])`` over ``n`` float32s, in a scalar loop or ``lanes`` at a time."""
    fn = getattr(T, op)
    if lanes == 1:
        @T.prim_func(name=f"{op}_scalar")
        def f(x: T.Buffer((n,), "float32"), out: T.Buffer((n,), "float32")):
            for i in T.serial(n):
                out[i] = fn(x[i])
        func, name = f, f"{op}_scalar"
    else:
        @T.prim_func(name=f"{op}_v{lanes}")
        def g(x: T.Buffer((n,), "float32"), out: T.Buffer((n,), "float32")):
            for io in T.serial(n // lanes):
                for ii in T.vectorized(lanes):
                    out[io * lanes + ii] = fn(x[io * lanes + ii])
        func, name = g, f"{op}_v{lanes}"
    with transform.PassContext(config={"target": level}):
        return runtime.build(func, cache=False)[name]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("lanes", [1, 8, 16])
def test_exp_float32_is_within_two_ulp(lanes: int, level: str) -> None:
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 88.73, 89.5, -87.3,
                        -103.9, -104.5, 1e-30, -1e-30, 0.5, -0.5, 1.0], np.float32)
    rng = np.random.default_rng(0)
    x = np.concatenate([special, np.linspace(-105, 90, N // 2, dtype=np.float32),
                        rng.uniform(-20, 20, N - N // 2 - len(special)).astype(np.float32)])
    out = np.empty_like(x)
    _kernel(lanes, level)(x, out)
    with np.errstate(over="ignore", under="ignore"):
        want64 = np.exp(x.astype(np.float64))
        want = want64.astype(np.float32)
    assert np.isnan(out[0])
    assert out[1] == np.inf
    assert out[2] == 0.0
    assert out[3] == out[4] == 1.0
    normal = np.isfinite(want) & (want >= np.finfo(np.float32).tiny)
    ulp = np.abs(out[normal].astype(np.float64) - want64[normal]) / np.spacing(want[normal])
    assert ulp.max() <= 2.0
    assert np.array_equal(np.isinf(out), np.isinf(want))  # overflow exactly where it must
    sub = ~normal & np.isfinite(want)
    step = float(np.finfo(np.float32).smallest_subnormal)
    assert np.all(np.abs(out[sub].astype(np.float64) - want64[sub]) <= step)


def _erf_inputs(n: int) -> np.ndarray:
    """Special values, then random bit patterns of every binade up to 8 (both signs), then
    dense runs around the hand-over (0.921875) and the saturation (3.92)."""
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 4.0, -4.0, 3.92, 1e30, -1e30,
                        1e-45, -1e-45, 1e-38, 0.921875, -0.921875], np.float32)
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 0x41000000, n // 2, dtype=np.uint32)  # |x| < 8
    bits |= rng.integers(0, 2, n // 2, dtype=np.uint32) << 31
    edges = [(np.float32(e).view(np.uint32) + np.arange(-(n // 16), n // 16)).astype(np.uint32)
             for e in (0.921875, 3.92)]
    rest = n - len(special) - n // 2 - 2 * (n // 8)
    x = np.concatenate([special, bits.view(np.float32), *(e.view(np.float32) for e in edges),
                        rng.uniform(-5, 5, rest).astype(np.float32)])
    assert len(x) == n
    return x


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("lanes", [1, 8, 16])
def test_erf_float32_is_within_two_ulp(lanes: int, level: str) -> None:
    n = 1 << 16
    x = _erf_inputs(n)
    out = np.empty_like(x)
    _kernel(lanes, level, "erf", n)(x, out)
    assert np.isnan(out[0])
    assert (out[1], out[2]) == (1.0, -1.0)
    assert out[3] == 0 and not np.signbit(out[3]) and out[4] == 0 and np.signbit(out[4])
    assert tuple(out[5:10]) == (1.0, -1.0, 1.0, 1.0, -1.0)  # saturated from 3.92 on
    want64 = np.array([math.erf(v) for v in x[1:].astype(np.float64)])
    ulp = np.ldexp(1.0, np.maximum(np.frexp(want64)[1] - 24, -149))  # the true value's binade
    err = np.abs(out[1:].astype(np.float64) - want64) / ulp
    assert err.max() <= 2.0, f"{err.max():.3f} ulp at x = {x[1:][err.argmax()]!r}"
    assert np.array_equal(np.signbit(out), np.signbit(x))  # odd, NaN aside
