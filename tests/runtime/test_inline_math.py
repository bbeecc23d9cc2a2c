"""float32 ``exp`` as inline IR (``runtime/inline_math.py``) against float64 NumPy.

Checked in a scalar loop and in an explicitly vectorized one (8 and 16 lanes, so the
libmvec path is not what runs), built for each x86-64 level the host runs (its
multiply-adds fuse where the level has FMA): within 2 ulp over the normal range,
correctly rounded special values, subnormal results within one subnormal step, and NaN
passing through.
"""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from irkernel import transform
from irkernel.target import host_target
from irkernel.tir import script as T

N = 4096
ISAS = ("sse4.2", "avx2", "avx512")
LEVELS = [isa for isa in ISAS if ISAS.index(isa) <= ISAS.index(host_target().isa)]


def _kernel(lanes: int, level: str):
    if lanes == 1:
        @T.prim_func(name="exp_scalar")
        def f(x: T.Buffer((N,), "float32"), out: T.Buffer((N,), "float32")):
            for i in T.serial(N):
                out[i] = T.exp(x[i])
        func, name = f, "exp_scalar"
    else:
        @T.prim_func(name=f"exp_v{lanes}")
        def g(x: T.Buffer((N,), "float32"), out: T.Buffer((N,), "float32")):
            for io in T.serial(N // lanes):
                for ii in T.vectorized(lanes):
                    out[io * lanes + ii] = T.exp(x[io * lanes + ii])
        func, name = g, f"exp_v{lanes}"
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
