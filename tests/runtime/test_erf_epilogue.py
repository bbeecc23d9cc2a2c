"""A matmul with an exact-GELU epilogue (``x * 0.5 * (1 + erf(x / sqrt(2)))``, as PyTorch
exports ``nn.GELU``): the erf is inline IR in the fused kernel, not a libm call per lane.

Checked against ``ik.interpret`` (libm's ``erff``) within the matmul tolerance of the other
matmul tests, and more tightly against the GELU of the build's own matmul computed in
float64 with ``math.erf``: what is left there is the epilogue's float32 roundings and the
inline erf's error (an ulp of 1 in ``1 + erf``, which is large relative to a GELU of a very
negative ``x``, hence the absolute term in ``|x| * 2^-23``). float64 keeps libm's ``erf``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import irkernel as ik
import runtime
from irkernel import transform


def _module(m: int, w: np.ndarray, gelu: bool) -> ik.IRModule:
    """``main(a) = gelu(a @ W)`` in the exported form, or ``a @ W`` without ``gelu``."""
    dtype = str(w.dtype)
    bb = ik.GraphBuilder("main")
    a = bb.param("a", (m, w.shape[0]), dtype)
    y = bb.matmul(a, bb.const(w))
    if gelu:
        scalar = lambda v: bb.const(np.array(v, dtype))  # noqa: E731
        t = bb.call("erf", bb.call("divide", y, scalar(math.sqrt(2))))
        y = bb.call("multiply", bb.call("multiply", y, bb.call("add", t, scalar(1.0))),
                    scalar(0.5))
    return ik.IRModule({"main": bb.finish([y])})


@pytest.mark.parametrize("m,k,n", [(64, 96, 80), (5, 33, 131)])
def test_gelu_epilogue_matmul_matches_the_interpreter_and_float64_gelu(m, k, n) -> None:
    rng = np.random.default_rng(m * 1000 + n)
    w = (rng.standard_normal((k, n)) * 0.6).astype(np.float32)
    a = rng.standard_normal((m, k)).astype(np.float32)
    a[0, :] = 40.0  # rows of large +- values: erf saturated on both sides
    a[-1, :] = np.where(w[:, 0] > 0, -1.0, 1.0)
    mod = _module(m, w, gelu=True)
    config = {"runtime.generic_max_elements": 0}
    with transform.PassContext(config=config):
        ex = runtime.build(mod, cache=False)
        plain = runtime.build(_module(m, w, gelu=False), cache=False)["main"](a)[0]
    got = ex["main"](a)[0]
    assert "erf" in ex.get_source("tir")
    assert "erff" not in ex.get_source("llvm")  # inline, not a libm call per lane
    want = ik.interpret(mod, a)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * k)
    x = plain.astype(np.float64)
    gelu64 = x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    tol = 4 * np.spacing(np.abs(gelu64).astype(np.float32)) + np.abs(x) * 2.0 ** -23
    assert np.all(np.abs(got - gelu64) <= tol), np.abs(got - gelu64).max()
    big = np.abs(plain[0]) > 6  # erf(x / sqrt(2)) saturated: GELU(x) = relu(x) exactly
    assert big.sum() > n // 2
    assert np.array_equal(got[0][big], np.where(plain[0] > 0, plain[0], 0)[big])


def test_float64_erf_stays_libm() -> None:
    w = np.random.default_rng(0).standard_normal((8, 8))
    mod = _module(4, w, gelu=True)
    ex = runtime.build(mod, cache=False)
    a = np.linspace(-3, 3, 32).reshape(4, 8)
    np.testing.assert_allclose(ex["main"](a)[0], ik.interpret(mod, a)[0], rtol=1e-12, atol=1e-12)
    assert "@erf(" in ex.get_source("llvm")
