"""FuseTIR's parallel outer loops (``passes.tir.parallelize``) and the packed matmul schedule.

Checked: a large fused chain gets a parallel outer loop and a small one stays
serial; the independence proof rejects nests whose iterations interact; the
parallel kernels and every tile/packing variant of the scheduled matmul
compute what NumPy computes when run on 2 threads.
"""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import passes
import runtime
from irkernel import tir
from irkernel.target import cpu_target
from irkernel.tir import script as T
from passes.tir.parallelize import PARALLEL_MIN_WORK, independent_outer, parallelize, work
from passes.topi.matmul import matmul_with_epilogue, scheduled_matmul, short_k


def _chain(shape: tuple[int, ...]) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    a = bb.param("a", shape, "float32")
    b = bb.param("b", shape[-1:], "float32")  # broadcast along the last axis
    t = bb.call("multiply", bb.call("add", a, b), a)
    return ik.IRModule({"main": bb.finish([bb.call("sqrt", bb.call("abs", t))])})


def _fused(mod: ik.IRModule) -> tir.PrimFunc:
    out = passes.FuseTIR()(passes.FuseOps()(passes.LegalizeOps()(mod)))
    (pf,) = [f for f in out.functions.values() if isinstance(f, tir.PrimFunc)
             and str(f.attrs.get("op_name", "")).startswith("fused_")]
    return pf


def test_large_chain_gets_a_parallel_outer_loop_small_stays_serial() -> None:
    big = _fused(_chain((256, 1024)))
    assert isinstance(big.body, tir.For)
    assert big.body.kind == "parallel"
    assert big.body.body.kind == "serial"  # the inner loop is left to the vectorizer
    small = _fused(_chain((4, 16)))
    assert all(n.kind == "serial" for n in tir.post_order(small.body) if isinstance(n, tir.For))


def test_a_batch_of_one_parallelizes_its_first_longer_axis() -> None:
    """The batch axis of a one-image CNN has extent 1: the channel axis below it is the
    one split (regression: no elementwise kernel of a batch-1 model ran in parallel)."""
    pf = _fused(_chain((1, 1, 64, 1024)))
    loops = [n for n in tir.post_order(pf.body) if isinstance(n, tir.For)]
    kinds = {int(n.extent.value): n.kind for n in loops}
    assert kinds[64] == "parallel" and kinds[1] == "serial" and kinds[1024] == "serial"
    mod = _chain((1, 1, 300, 1000))
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1, 1, 300, 1000)).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    previous = runtime.get_num_threads()
    runtime.set_num_threads(2)
    try:
        (got,) = runtime.build(mod)["main"](a, b)
    finally:
        runtime.set_num_threads(previous)
    np.testing.assert_array_equal(got, ik.interpret(mod, a, b)[0])


def test_parallel_chain_runs_correctly_on_two_threads() -> None:
    mod = _chain((300, 1000))  # 300 rows do not split evenly into the pool's chunks
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 1000)).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    previous = runtime.get_num_threads()
    runtime.set_num_threads(2)
    try:
        ex = runtime.build(mod)
        assert "T.parallel" in ex.get_source("tir")
        (got,) = ex["main"](a, b)
    finally:
        runtime.set_num_threads(previous)
    np.testing.assert_array_equal(got, ik.interpret(mod, a, b)[0])


def _nest(store_index: str, read_other: bool = False) -> tir.Stmt:
    n = 1 << 18

    @T.prim_func
    def f(a: T.Buffer((n,), "float32"), out: T.Buffer((n,), "float32")):
        for i in T.serial(n):
            if store_index == "i":
                if read_other:
                    out[i] = out[n - 1 - i] + a[i]
                else:
                    out[i] = a[i] * 2.0
            else:
                out[0] = out[0] + a[i]

    return f.body


def test_independence_proof() -> None:
    assert independent_outer(_nest("i"))
    assert not independent_outer(_nest("0"))                  # a reduction into out[0]
    assert not independent_outer(_nest("i", read_other=True))  # reads another iteration's slot
    assert parallelize(_nest("0")).kind == "serial"
    assert parallelize(_nest("i")).kind == "parallel"
    assert parallelize(_nest("i"), min_work=10 * PARALLEL_MIN_WORK).kind == "serial"
    assert work(_nest("i")) == 1 << 18


@pytest.mark.parametrize(("m", "n", "k", "dtype", "bits", "tile"), [
    # 32 vector registers (AVX-512): up to 24 accumulators, 6 x 4 vectors
    (16, 128, 64, "float32", 512, (6, 64)),   # two 6-row blocks and a 4-row tail, packed
    (4, 64, 32, "float32", 512, (4, 64)),     # one row block: unpacked
    (48, 96, 40, "float32", 512, (6, 64)),    # a 32-column tail, zero-padded packed panel
    (24, 96, 40, "float32", 512, (8, 32)),    # 4 row blocks of 2 panels: 3 narrower panels
    (6, 48, 16, "float32", 512, (6, 48)),     # three vectors wide
    (8, 64, 24, "float64", 512, (8, 24)),    # 8 rows: one tile of 3 vectors, not 6 + 2
    (16, 64, 8192, "float32", 512, (8, 32)),  # K too deep for the wide panel to stay in L2
    (1, 200, 64, "float32", 512, (1, 192)),   # GEMV: 12 chains; a tail of 8 (wider N streams B)
    (6, 37, 24, "float32", 512, (6, 32)),     # tail of 5 columns, unpacked
    # 16 vector registers (AVX2, SSE): twelve accumulators, row tails
    (16, 128, 64, "float32", 256, (6, 16)),   # two 6-row blocks and a 4-row tail
    (4, 64, 32, "float32", 256, (4, 24)),     # few rows: a wider tile, a 16-column tail
    (1, 100, 64, "float32", 256, (1, 96)),    # a GEMV row: 12 vectors, tail of 4
    (5, 20, 48, "float32", 256, (5, 16)),     # tail of 4 columns
    (7, 8, 96, "float64", 256, (6, 8)),       # a 1-row tail
    (13, 10, 40, "float32", 256, (6, 10)),    # a vector and a part: the whole row, 6 rows
    (3, 9, 160, "float32", 128, (3, 8)),      # SSE: 4 lanes
])
def test_scheduled_matmul_variants(m: int, n: int, k: int, dtype: str, bits: int,
                                   tile: tuple[int, int]) -> None:
    pf = scheduled_matmul(m, n, k, dtype, bits)
    assert pf is not None
    acc = [b for b in tir.post_order(pf.body) if isinstance(b, tir.Allocate)
           and b.buffer.name == "acc"]
    assert tuple(int(s.value) for s in acc[0].buffer.shape) == tile
    packed = any(isinstance(b, tir.Allocate) and b.buffer.name == "panel"
                 for b in tir.post_order(pf.body))
    # several row blocks pack B per task, unless K is short or B's rows narrow (read in place)
    short = short_k(k, n, np.dtype(dtype).itemsize, cpu_target("host").with_vector_bits(bits))
    assert packed == (-(-m // tile[0]) > 1 and not short)
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    out = np.empty((m, n), dtype)
    previous = runtime.get_num_threads()
    runtime.set_num_threads(2)
    try:
        runtime.build(pf)[pf.attrs.get("global_symbol", "main")](a, b, out)
    finally:
        runtime.set_num_threads(previous)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(out, a @ b, rtol=tol, atol=tol * k)


def test_packed_matmul_keeps_the_fused_epilogue() -> None:
    bias = tir.Buffer("bias", (128,), "float32")
    f = matmul_with_epilogue(16, 128, 64, "float32", (bias,),
                             lambda acc, i, j: T.max(acc + bias[j], 0.0))
    assert f is not None
    assert [p.name for p in f.params] == ["x0", "x1", "bias", "out"]
    rng = np.random.default_rng(3)
    a, w = (rng.standard_normal(s).astype(np.float32) for s in ((16, 64), (64, 128)))
    bv = rng.standard_normal(128).astype(np.float32)
    out = np.empty((16, 128), np.float32)
    runtime.build(f)[f.attrs.get("global_symbol", "main")](a, w, bv, out)
    np.testing.assert_allclose(out, np.maximum(a @ w + bv, 0), rtol=1e-4, atol=1e-4)


def test_reductions_and_scratch_nests_run_parallel_and_correctly() -> None:
    """Softmax rows, then a column sum: reductions parallel over their output axis, the
    scratch buffer of a row reduction shared by two parallel nests of one kernel."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (512, 1024), "float32")
    e = bb.exp(bb.subtract(x, bb.call("max", x, axis=1, keepdims=True)))
    y = bb.divide(e, bb.call("sum", e, axis=1, keepdims=True))
    mod = ik.IRModule({"main": bb.finish([y, bb.call("sum", bb.multiply(y, y), axis=0)])})
    previous = runtime.get_num_threads()
    runtime.set_num_threads(2)
    try:
        ex = runtime.build(mod)
        assert ex.get_source("tir").count("T.parallel") >= 4
        xv = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)
        got = ex["main"](xv)
    finally:
        runtime.set_num_threads(previous)
    for g, w in zip(got, ik.interpret(mod, xv), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
