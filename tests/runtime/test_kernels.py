"""Compiled kernels against NumPy, for every dtype and kernel kind.

Kinds: elementwise arithmetic, math intrinsics, reductions, select and casts,
parallel and vectorized loops. Float math goes through libm/libmvec, so it is
compared within a few ulps; everything else must be exact. Sizes are small
(CI runs on 2 cores); every kernel is compiled once per module (cached).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest

import runtime
from irkernel import tir
from irkernel.tir import script as T
from irkernel.tir.testing import random_arguments

DTYPES = ("bool", "int32", "int64", "float32", "float64")
NUMERIC = DTYPES[1:]
FLOATS = ("float32", "float64")
N = 37  # not a multiple of any vector width: exercises loop tails


def _inputs(dtype: str, n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    a = tir.Buffer("a", (n,), dtype)
    b = tir.Buffer("b", (n,), dtype)
    func = tir.PrimFunc((a, b), tir.SeqStmt(()))
    x, y = random_arguments(func, seed)
    if dtype in FLOATS:  # finite values: NaN/inf rules are tested against the interpreter
        x, y = np.nan_to_num(x, posinf=3.0, neginf=-3.0), np.nan_to_num(y, posinf=2, neginf=-2)
    return x, y


@functools.cache
def _elementwise(dtype: str, kind: str) -> runtime.Kernel:
    @T.prim_func(name=f"ew_{dtype}_{kind}")
    def f(a: T.Buffer((N,), dtype), b: T.Buffer((N,), dtype), out: T.Buffer((N,), dtype)):
        loop = {"serial": T.serial, "parallel": T.parallel, "vectorized": T.vectorized}[kind]
        for i in loop(N):
            if dtype == "bool":
                out[i] = (a[i] & b[i]) | ~a[i] | T.ne(a[i], b[i])
            elif dtype in FLOATS:
                out[i] = a[i] * b[i] + a[i] / b[i] - T.max(a[i], b[i]) + a[i] // b[i] \
                    + a[i] % b[i] - T.min(a[i], 0.5)
            else:
                out[i] = a[i] * b[i] + a[i] - T.max(a[i], b[i]) + a[i] // b[i] + a[i] % b[i] \
                    - T.min(a[i], 3)

    return runtime.build(f, cache=False)[f.attrs["global_symbol"]]


def _elementwise_numpy(dtype: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if dtype == "bool":
        return (a & b) | ~a | (a != b)
    with np.errstate(all="ignore"):
        low = np.minimum(a, a.dtype.type(0.5 if dtype in FLOATS else 3))
        second = a / b if dtype in FLOATS else a
        return (a * b + second - np.maximum(a, b) + a // b + a % b - low).astype(dtype)


@pytest.mark.parametrize("kind", ["serial", "parallel", "vectorized"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise(dtype: str, kind: str) -> None:
    a, b = _inputs(dtype)
    if dtype not in FLOATS and dtype != "bool":
        b[::5] = 0  # division by zero is 0, as NumPy's integer // and %
    out = np.empty(N, dtype)
    _elementwise(dtype, kind)(a, b, out)
    np.testing.assert_array_equal(out, _elementwise_numpy(dtype, a, b))


MATH: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "fabs": np.abs,
    "pow": np.power, "floor": np.floor, "sin": np.sin, "exp2": np.exp2, "log2": np.log2,
}


@functools.cache
def _math_kernel(dtype: str, op: str, vector: bool) -> runtime.Kernel:
    fn = getattr(T, op)

    @T.prim_func(name=f"math_{op}_{dtype}_{vector}")
    def f(a: T.Buffer((64,), dtype), b: T.Buffer((64,), dtype), out: T.Buffer((64,), dtype)):
        for i in (T.vectorized if vector else T.serial)(64):
            out[i] = fn(a[i], b[i]) if op == "pow" else fn(a[i])

    return runtime.build(f, cache=False)[f.attrs["global_symbol"]]


@pytest.mark.parametrize("vector", [False, True], ids=["scalar", "vector"])
@pytest.mark.parametrize("op", sorted(MATH))
@pytest.mark.parametrize("dtype", FLOATS)
def test_math_intrinsics(dtype: str, op: str, vector: bool) -> None:
    rng = np.random.default_rng(1)
    a = rng.uniform(0.1, 4.0, 64).astype(dtype)  # in every op's domain
    a[:8] *= -1 if op in ("fabs", "floor", "sin", "exp", "tanh", "exp2") else 1
    b = rng.uniform(-2.0, 2.0, 64).astype(dtype)
    out = np.empty(64, dtype)
    _math_kernel(dtype, op, vector)(a, b, out)
    expected = MATH[op](a, b) if op == "pow" else MATH[op](a)
    np.testing.assert_allclose(out, expected, rtol=4 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_abs(dtype: str) -> None:
    @T.prim_func(name=f"iabs_{dtype}")
    def f(a: T.Buffer((8,), dtype), out: T.Buffer((8,), dtype)):
        for i in T.vectorized(8):
            out[i] = T.abs(a[i])

    lo = np.iinfo(dtype).min
    a = np.array([0, 1, -1, 7, -9, lo, lo + 1, 100], dtype)
    out = np.empty(8, dtype)
    runtime.build(f, cache=False)[f"iabs_{dtype}"](a, out)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, np.abs(a))  # abs(MIN) wraps to MIN in both


@functools.cache
def _reduction(dtype: str) -> runtime.Kernel:
    acc = "int64" if dtype == "bool" else dtype

    @T.prim_func(name=f"reduce_{dtype}")
    def f(a: T.Buffer((6, 50), dtype), total: T.Buffer((6,), acc), top: T.Buffer((6,), dtype)):
        for r in T.parallel(6):
            total[r] = T.cast(acc, a[r, 0])
            top[r] = a[r, 0]
            for c in T.serial(1, 50):
                total[r] = total[r] + T.cast(acc, a[r, c])
                top[r] = (top[r] | a[r, c]) if dtype == "bool" else T.max(top[r], a[r, c])

    return runtime.build(f, cache=False)[f"reduce_{dtype}"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions(dtype: str) -> None:
    a = np.stack([_inputs(dtype, 50, seed)[0] for seed in range(6)])
    acc = "int64" if dtype == "bool" else dtype
    total, top = np.empty(6, acc), np.empty(6, dtype)
    _reduction(dtype)(a, total, top)
    np.testing.assert_array_equal(top, a.max(axis=1))
    if dtype in FLOATS:  # sequential order, as the kernel: exact
        expected = np.zeros(6, dtype)
        for c in range(50):
            expected = (expected + a[:, c]).astype(dtype)
        np.testing.assert_array_equal(total, expected)
    else:
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(total, a.astype(acc).sum(axis=1, dtype=acc))


@pytest.mark.parametrize("src", DTYPES)
def test_select_and_casts_to_every_dtype(src: str) -> None:
    """Against the interpreter (saturating float->int, != 0 for bool) and NumPy where equal."""
    outs = {d: tir.Buffer(f"o_{d}", (N,), d) for d in DTYPES}
    a, b = tir.Buffer("a", (N,), src), tir.Buffer("b", (N,), src)
    i = tir.Var("i")
    cond = tir.ne(a[i], b[i]) if src == "bool" else a[i] > b[i]
    chosen = tir.select(cond, a[i], b[i])
    body = tir.For(i, 0, N, "vectorized", tir.seq(*(
        tir.BufferStore(o, tir.cast(d, chosen), (i,)) for d, o in outs.items())))
    func = tir.PrimFunc((a, b, *outs.values()), body, {"global_symbol": f"casts_{src}"})
    x, y = random_arguments(func, 3)[:2]  # with NaN, inf, extremes
    got = [np.zeros(N, d) for d in DTYPES]
    want = [np.zeros(N, d) for d in DTYPES]
    runtime.build(func, cache=False)[f"casts_{src}"](x, y, *got)
    tir.interpret(func, x, y, *want)
    for d, g, w in zip(DTYPES, got, want, strict=True):
        np.testing.assert_array_equal(g, w, err_msg=f"{src} -> {d}")
    picked = np.where((x != y) if src == "bool" else (x > y), x, y)
    finite = np.isfinite(picked) if src in FLOATS else np.ones(N, bool)
    for d, g in zip(DTYPES, got, strict=True):
        if d in FLOATS or src not in FLOATS:
            with np.errstate(all="ignore"):
                np.testing.assert_array_equal(g[finite], picked[finite].astype(d))


def test_parallel_loops_use_the_pool_and_agree_with_numpy() -> None:
    @T.prim_func
    def par(a: T.Buffer((1000, 8), "float32"), out: T.Buffer((1000, 8), "float32")):
        for i in T.parallel(1000):
            for j in T.vectorized(8):
                out[i, j] = a[i, j] * 3.0 + T.cast("float32", i)

    a = np.random.default_rng(0).random((1000, 8), dtype=np.float32)
    expected = a * np.float32(3) + np.arange(1000, dtype=np.float32)[:, None]
    kernel = runtime.build(par)["par"]
    previous = runtime.get_num_threads()
    try:
        for threads in (1, 2, 3):
            runtime.set_num_threads(threads)
            out = np.zeros_like(a)
            kernel(a, out)
            np.testing.assert_array_equal(out, expected)
    finally:
        runtime.set_num_threads(previous)
