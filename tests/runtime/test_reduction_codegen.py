"""Accumulations in graph-lowered kernels reassociate (vector lanes); user PrimFuncs keep
the sequential order, bit for bit.

A graph reduction's ``out[i] = out[i] + x[...]`` is emitted as an ``fadd reassoc`` so
LLVM's loop vectorizer splits it into lanes (documented: float reductions of graph ops
agree with the interpreter within rounding). A hand-written PrimFunc is the user's exact
program: no flag, and the sum equals the sequential float32 sum exactly.
"""

from __future__ import annotations

import numpy as np

import irkernel as ik
import runtime
from irkernel.tir import script as T


def test_graph_reduction_reassociates_and_stays_close() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 24, 37, 41), "float32")
    mod = ik.IRModule({"main": bb.finish([bb.call("mean", x, axis=[2, 3], keepdims=True)])})
    ex = runtime.build(mod)
    assert "fadd reassoc" in ex.get_source("llvm")
    a = np.random.default_rng(0).standard_normal((1, 24, 37, 41)).astype(np.float32)
    got = ex["main"](a)[0]
    np.testing.assert_allclose(got, a.astype(np.float64).mean(axis=(2, 3), keepdims=True),
                               rtol=1e-5, atol=1e-6)


def test_user_prim_func_sums_in_order() -> None:
    n = 1000

    @T.prim_func(name="seqsum")
    def seqsum(x: T.Buffer((n,), "float32"), out: T.Buffer((1,), "float32")):
        out[0] = 0.0
        for i in T.serial(n):
            out[0] = out[0] + x[i]

    ex = runtime.build(seqsum, cache=False)
    assert "reassoc" not in ex.get_source("llvm")
    a = (np.random.default_rng(1).standard_normal(n) * 1e3).astype(np.float32)
    out = np.zeros(1, np.float32)
    ex["seqsum"](a, out)
    want = np.float32(0)
    for v in a:  # the sequential float32 sum
        want = np.float32(want + v)
    assert out[0] == want
