"""Every TIR pass preserves results: the interpreter before and after agree bit for bit.

On hand-written kernels and on hypothesis-generated PrimFuncs (all five
dtypes, every loop kind, branches, lets, NaN/inf/extreme inputs). Each pass is
also run as a registered pass through the pass manager, so CheckImmutable (the
suite's instrument) sees it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import irkernel as ik
import passes.tir as pt
from irkernel import tir, transform
from irkernel.tir import script as T
from irkernel.tir.testing import prim_funcs, random_arguments, same_values

PASSES = ("Simplify", "FlattenBuffer", "UnrollLoop", "VectorizeLoop", "LowerParallel")
AUTO_UNROLL = {"auto_max_step": 16, "auto_max_extent": 3}


def _run(func: tir.PrimFunc, args: list[object]) -> list[object]:
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    tir.interpret(func, *copies)
    return copies


def assert_same_results(before: tir.PrimFunc, after: tir.PrimFunc, args: list[object]) -> None:
    after.verify("after")
    expected, got = _run(before, args), _run(after, args)
    for param, e, g in zip(before.params, expected, got, strict=True):
        if isinstance(e, np.ndarray):
            assert same_values(e, g), f"buffer {param.name}: {e} != {g}\n{after.script()}"


def _apply(name: str, func: tir.PrimFunc, config: dict[str, object] | None = None
           ) -> tir.PrimFunc:
    with transform.PassContext(config=config or {}):
        return transform.get_pass(name)(ik.IRModule({"f": func}))["f"]


def _lowered(func: tir.PrimFunc) -> tir.PrimFunc:
    with transform.PassContext(config={"tir.UnrollLoop": AUTO_UNROLL}):
        pipeline = transform.get_pass("LowerTIR")
        return pipeline(ik.IRModule({"f": func}))["f"]


# -- hand-written kernels ------------------------------------------------------

@T.prim_func
def stencil(a: T.Buffer((6, 8), "float32"), out: T.Buffer((6, 8), "float32")):
    for i in T.parallel(6):
        for j in T.vectorized(8):
            out[i, j] = (a[i, j] + a[i, (j + 1) % 8]) * 0.5 - a[T.max(i - 1, 0), j]


@T.prim_func
def reduce_rows(a: T.Buffer((4, 16), "int32"), out: T.Buffer((4,), "int64")):
    for i in T.serial(4):
        out[i] = T.int64(0)
        for jo in T.serial(4):
            for ji in T.unroll(4):
                out[i] = out[i] + T.cast("int64", a[i, jo * 4 + ji] // 3)


@T.prim_func
def branches(a: T.Buffer((10,), "float64"), m: T.Buffer((10,), "bool"),
             out: T.Buffer((10,), "float64")):
    for i in T.serial(10):
        v = T.let(T.sqrt(T.fabs(a[i])))
        with T.If(m[i] & (i < 7)):
            out[i] = T.select(v > 1.0, v, -v)
        with T.Else():
            out[i] = T.floor(a[i] / 3.0) + T.cast("float64", i % 3)


@T.prim_func
def scratch(a: T.Buffer((8,), "int32"), out: T.Buffer((8,), "int32")):
    tmp = T.alloc_buffer((2, 8), "int32")
    for j in T.vectorized(8):
        tmp[0, j] = a[j] * 3
        tmp[1, j] = T.min(a[j], 5)
    for j in T.serial(8):
        out[j] = tmp[0, 7 - j] + tmp[1, j // 2 * 2]


@T.prim_func
def strided(a: T.Buffer((4, 4), "float32", strides=(8, 1)), out: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        out[i, j] = a[j, i] + 1.0


HAND_WRITTEN = {f.attrs["global_symbol"]: f
                for f in (stencil, reduce_rows, branches, scratch)}


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
@pytest.mark.parametrize("pass_name", [*PASSES, "LOWERING"])
def test_hand_written_kernels(name: str, pass_name: str) -> None:
    func = HAND_WRITTEN[name]
    after = _lowered(func) if pass_name == "LOWERING" else _apply(pass_name, func, {
        "tir.UnrollLoop": AUTO_UNROLL})
    for seed in range(3):
        assert_same_results(func, after, random_arguments(func, seed))


def test_flatten_honours_declared_strides() -> None:
    base = np.arange(32, dtype=np.float32).reshape(4, 8)
    view = base[:, :4]  # element strides (8, 1)
    out, flat_out = np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32)
    tir.interpret(strided, view, out)
    np.testing.assert_array_equal(out, view.T + 1)
    flat = pt.flatten_buffer(strided)
    tir.interpret(flat, view, flat_out)
    np.testing.assert_array_equal(flat_out, out)
    loads = [n for n in tir.post_order(flat.body) if isinstance(n, tir.BufferLoad)]
    assert loads[0].indices == (tir.Var("j") * 8 + tir.Var("i"),)


# -- random kernels ------------------------------------------------------------

STEPS: dict[str, Callable[[tir.PrimFunc], tir.PrimFunc]] = {
    "Simplify": pt.simplify,
    "FlattenBuffer": pt.flatten_buffer,
    "UnrollLoop": lambda f: pt.unroll_loop(f, AUTO_UNROLL),
    "UnrollLoop(explicit_unroll=False)": lambda f: pt.unroll_loop(
        f, {**AUTO_UNROLL, "explicit_unroll": False}),
    "VectorizeLoop": pt.vectorize_loop,
    "VectorizeLoop(flat)": lambda f: pt.vectorize_loop(pt.flatten_buffer(f)),
    "LowerParallel": pt.lower_parallel,
    "LOWERING": _lowered,
}


@pytest.mark.parametrize("step", sorted(STEPS))
@given(func=prim_funcs(), seed=st.integers(0, 2**16))
def test_random_kernels(step: str, func: tir.PrimFunc, seed: int) -> None:
    assert_same_results(func, STEPS[step](func), random_arguments(func, seed))


@given(func=prim_funcs())
def test_passes_are_idempotent_and_return_their_input_when_done(func: tir.PrimFunc) -> None:
    lowered = _lowered(func)
    assert pt.simplify(lowered) is lowered
    assert pt.lower_parallel(lowered) is lowered
    assert pt.vectorize_loop(lowered) is lowered
    flat = pt.flatten_buffer(func)
    assert pt.flatten_buffer(flat) is flat
    assert pt.unroll_loop(lowered, AUTO_UNROLL) is lowered
