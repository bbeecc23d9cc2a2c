"""Build machinery at scale: kernels of any arity, concat trees, batches, progress, phases.

Timing is never asserted here (bench/bench_compile_scale.py measures it); these
tests check that the mechanisms are used and give the interpreter's results.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import passes
import runtime
from irkernel import instrument, ops, transform
from irkernel.testing import functions_with_inputs
from runtime import compile as compile_module


def _concat_module(n: int, axis: int = 0) -> tuple[ik.IRModule, list[np.ndarray]]:
    bb = ik.GraphBuilder("main")
    shapes = [(2, k % 3 + 1) if axis else (k % 3 + 1, 2) for k in range(n)]
    xs = [bb.param(f"x{k}", s, "float32") for k, s in enumerate(shapes)]
    mod = ik.IRModule({"main": bb.finish([bb.concat(*xs, axis=axis)])})
    args = [np.full(s, k, np.float32) for k, s in enumerate(shapes)]
    return mod, args


def test_concat_of_5000_inputs_builds_and_runs() -> None:
    """Regression: the concat became one kernel of 5,001 arguments, which ctypes refused
    (more than 1,024). Kernels now take one array of argument slots, and SplitConcat makes
    the concat a tree of small concats."""
    mod, args = _concat_module(5000)
    ex = runtime.build(mod, cache=False)
    np.testing.assert_array_equal(ex["main"](*args)[0], np.concatenate(args))


def test_a_kernel_of_thousands_of_buffers_is_callable_directly() -> None:
    mod, args = _concat_module(1500, axis=1)
    legal = passes.LegalizeOps()(mod)  # no SplitConcat: one PrimFunc of 1,501 buffers
    (name,) = [n for n in legal.functions if n != "main"]
    prim = legal[name]
    assert len(prim.params) == 1501
    kernel = runtime.build(prim.with_attr("global_symbol", "wide"), cache=False)["wide"]
    out = np.empty((2, sum(a.shape[1] for a in args)), np.float32)
    kernel(*args, out)
    np.testing.assert_array_equal(out, np.concatenate(args, axis=1))
    inside = out.reshape(-1)[:args[-1].size].reshape(args[-1].shape)  # contiguous, in out
    with pytest.raises(ValueError, match="overlap"):
        kernel(*args[:-1], inside, out)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 70), fan_in=st.integers(2, 9), axis=st.integers(0, 1))
def test_split_concat_keeps_values_and_bounds_the_fan_in(n, fan_in, axis) -> None:
    mod, args = _concat_module(n, axis)
    out = passes.SplitConcat(max_operands=fan_in)(mod)
    ik.verify(out)
    main = out["main"]
    concats = np.nonzero(main.kind == ops.OP_CONCAT)[0]
    assert int(main.a1[concats].max()) <= max(fan_in, 1)
    assert (out is mod) == (n <= fan_in)
    np.testing.assert_array_equal(ik.interpret(out, *args)[0], np.concatenate(args, axis=axis))


@settings(max_examples=30, deadline=None)
@given(parts=st.lists(st.integers(1, 4), min_size=2, max_size=30), fan_in=st.integers(2, 9),
       data=st.data())
def test_split_concat_renumbers_every_operand(parts, fan_in, data) -> None:
    """Regression (DenseNet, LSTM): nodes after an inserted tree read the right operands.
    Unary and binary ops before, between and after two large concats, one of them reading
    a node from before the first concat."""
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"x{k}", (n,), "float32") for k, n in enumerate(parts)]
    ys = [bb.exp(bb.negative(x)) if k % 2 else bb.multiply(x, x) for k, x in enumerate(xs)]
    first = bb.concat(*ys, axis=0)
    mid = bb.add(bb.exp(first), first)
    order = data.draw(st.permutations(range(len(xs))))
    second = bb.concat(*[ys[k] for k in order], axis=0)
    tail = bb.multiply(bb.subtract(second, mid), bb.sum(ys[0]))
    mod = ik.IRModule({"main": bb.finish([tail, bb.negative(ys[-1])])})
    args = [np.linspace(-1, 1, n, dtype=np.float32) + k for k, n in enumerate(parts)]
    out = passes.SplitConcat(max_operands=fan_in)(mod)
    ik.verify(out)
    for a, b in zip(ik.interpret(out, *args), ik.interpret(mod, *args), strict=True):
        np.testing.assert_array_equal(a, b)


def test_split_concat_rejects_a_bad_fan_in() -> None:
    with pytest.raises(ValueError, match="max_operands"):
        passes.SplitConcat(max_operands=1)


@settings(max_examples=10, deadline=None)
@given(case=functions_with_inputs(module=True, shapes="small"),
       batch=st.sampled_from([1, 2, 5]))
def test_batched_builds_equal_kernel_by_kernel_builds(case, batch) -> None:
    """Batch size changes how kernels are grouped into LLVM modules, never their results."""
    mod, inputs = case
    previous = compile_module.BATCH_KERNELS
    results = []
    try:
        for size in (batch, 1000):
            compile_module.BATCH_KERNELS = size
            results.append(runtime.build(mod, cache=False)["main"](*inputs))
    finally:
        compile_module.BATCH_KERNELS = previous
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)


def test_progress_reports_every_kernel_and_phases_are_passes() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3, 4), "float32")
    y = bb.call("sum", bb.exp(bb.add(x, x)), axis=1)
    mod = ik.IRModule({"main": bb.finish([bb.concat(y, y)])})
    calls: list[tuple[int, int]] = []
    timing = instrument.PassTimingInstrument()
    with transform.PassContext(instruments=[timing]):
        ex = runtime.build(mod, cache=False, progress=lambda done, total: calls.append(
            (done, total)))
    total = calls[-1][1]
    assert total >= 2 and calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    table = timing.render()
    for phase in ("GraphLowering", "SplitConcat", "LegalizeOps", "CompileKernels", "Link",
                  "GraphExecutors"):
        assert phase in table, table
    assert "compiled=" in table and "batches=" in table
    x_in = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(ex["main"](x_in)[0], ik.interpret(mod, x_in)[0], rtol=1e-6)
    with pytest.raises(TypeError, match="progress"):
        runtime.build(mod, progress=42)


def test_identical_prim_funcs_compile_once() -> None:
    """Kernels are keyed by content: two names for one PrimFunc share one compiled kernel."""
    from irkernel.tir import script as T

    @T.prim_func(private=True)
    def double(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
        for i in T.serial(8):
            b[i] = a[i] * 2.0

    mod = ik.IRModule({"one": double.with_attr("global_symbol", "one"),
                       "two": double.with_attr("global_symbol", "two")})
    stats: dict[str, float] = {}

    class Stats(instrument.PassInstrument):
        def run_after_pass(self, m, info) -> None:
            stats.update(transform.PassContext.current().statistics.get(info.name, {}))

    with transform.PassContext(instruments=[Stats()]):
        ex = runtime.build(mod, cache=False)
    assert stats["kernels"] == 1 and stats["compiled"] == 1
    for name in ("one", "two"):
        out = np.empty(8, np.float32)
        ex[name](np.arange(8, dtype=np.float32), out)
        np.testing.assert_array_equal(out, np.arange(8) * 2)
