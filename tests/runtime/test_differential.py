"""Compiled code equals the reference interpreter bit for bit on random PrimFuncs.

``prim_funcs(exact=True)`` draws loop nests of every kind over all five
dtypes with ops NumPy and LLVM both compute exactly (no libm calls), and the
inputs include NaN, inf, -0.0 and integer extremes; only NaN payloads may
differ. This is what found the sign of ``0.0 % -x`` (NumPy: ``-0.0``) and of
``max(0.0, -0.0)`` (LLVM orders signed zeros; the interpreter now does too).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import runtime
from irkernel import tir
from irkernel.tir.testing import prim_funcs, random_arguments, same_values


def _run_both(func: tir.PrimFunc, seed: int) -> None:
    args = random_arguments(func, seed)
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    tir.interpret(func, *expected)
    runtime.build(func, cache=False)["random_func"](*got)
    for param, e, g in zip(func.params, expected, got, strict=True):
        if isinstance(e, np.ndarray):
            assert same_values(e, g), f"{param.name}:\n{e}\n{g}\n{func.script()}"


@given(func=prim_funcs(exact=True), seed=st.integers(0, 2**16))
def test_random_kernels_match_the_interpreter(func: tir.PrimFunc, seed: int) -> None:
    _run_both(func, seed)


def test_seeded_random_kernels_match_the_interpreter() -> None:
    from irkernel.tir.testing import random_prim_func

    for seed in range(20):
        _run_both(random_prim_func(seed, exact=True), seed)


def test_float_remainder_zero_takes_the_divisor_sign() -> None:
    a = tir.Buffer("a", (4,), "float64")
    b = tir.Buffer("b", (4,), "float64")
    out = tir.Buffer("out", (4,), "float64")
    i = tir.Var("i")
    func = tir.PrimFunc((a, b, out), tir.For(i, 0, 4, "vectorized", tir.BufferStore(
        out, a[i] % b[i], (i,))), {"global_symbol": "rem"})
    x = np.array([0.0, -4.0, 4.0, np.nan])
    y = np.array([-3.0, 2.0, -2.0, 1.0])
    got = np.empty(4)
    runtime.build(func, cache=False)["rem"](x, y, got)
    expected = np.remainder(x, y)
    assert same_values(got, expected) and list(np.signbit(got[:3])) == [True, False, True]


def test_min_max_order_signed_zeros_like_the_interpreter() -> None:
    a, b = tir.Buffer("a", (4,), "float32"), tir.Buffer("b", (4,), "float32")
    lo, hi = tir.Buffer("lo", (4,), "float32"), tir.Buffer("hi", (4,), "float32")
    i = tir.Var("i")
    body = tir.For(i, 0, 4, "serial", tir.seq(tir.BufferStore(lo, tir.Min(a[i], b[i]), (i,)),
                                              tir.BufferStore(hi, tir.Max(a[i], b[i]), (i,))))
    func = tir.PrimFunc((a, b, lo, hi), body, {"global_symbol": "minmax"})
    x = np.array([0.0, -0.0, np.nan, 1.0], np.float32)
    y = np.array([-0.0, 0.0, 1.0, np.nan], np.float32)
    got = [np.empty(4, np.float32) for _ in range(2)]
    want = [np.empty(4, np.float32) for _ in range(2)]
    runtime.build(func, cache=False)["minmax"](x, y, *got)
    tir.interpret(func, x, y, *want)
    assert all(same_values(g, w) for g, w in zip(got, want, strict=True))
    assert list(np.signbit(got[0][:2])) == [True, True]
    assert list(np.signbit(got[1][:2])) == [False, False]


def test_random_kernels_never_read_scratch_before_writing_it() -> None:
    """Regression: the let of a staged nest read the scratch buffer it was computing, so
    the result depended on whatever the stack held (a failure that came and went with
    the stack contents left by earlier calls)."""
    from irkernel.tir.testing import random_prim_func

    for seed in range(400):
        func = random_prim_func(seed)
        for alloc in tir.post_order(func.body):
            if not isinstance(alloc, tir.Allocate):
                continue
            first = alloc.body.stmts[0] if isinstance(alloc.body, tir.SeqStmt) else alloc.body
            reads = [ld for ld in tir.post_order(first)
                     if isinstance(ld, tir.BufferLoad) and ld.buffer.name == alloc.buffer.name]
            assert not reads, f"seed {seed} reads {alloc.buffer.name} while computing it"
