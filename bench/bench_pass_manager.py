"""Benchmarks of the pass manager's own overhead (no graph work).

Run with ``pytest bench/bench_pass_manager.py --benchmark-enable``. Budgets
checked in every run (also with ``--benchmark-disable``) by a
best-of-5 timing loop measured in the same process, so the ratio compares
like with like:

- one pass invocation, no instruments: <= 20 µs;
- an empty FunctionPass over a module of 1000 functions: <= 5 ms;
- the same with PassTimingInstrument on: <= 2x the uninstrumented time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

import irkernel as ik
from irkernel import instrument, transform
from irkernel.transform import PassContext

N_FUNCTIONS = 1000


def _function(name: str) -> ik.Function:
    bb = ik.GraphBuilder(name)
    x = bb.param("x", (4,), "float32")
    return bb.finish([bb.add(bb.exp(x), bb.const(np.arange(4, dtype=np.float32)))])


def _best_per_call(fn: Callable[[], object], calls: int, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


@pytest.fixture(scope="module")
def one_function() -> ik.IRModule:
    return ik.IRModule({"main": _function("main")})


@pytest.fixture(scope="module")
def many_functions() -> ik.IRModule:
    func = _function("f")  # one object under 1000 names: the driver visits each entry
    return ik.IRModule({f"f{i}": func for i in range(N_FUNCTIONS)})


NOOP = transform.module_pass(lambda mod, ctx: mod, opt_level=0, name="Noop")
EMPTY = transform.function_pass(lambda func, mod, ctx: func, opt_level=0, name="Empty")


def test_one_pass_invocation_overhead(benchmark, one_function: ik.IRModule) -> None:
    with PassContext():
        per_call = _best_per_call(lambda: NOOP(one_function), 5000)
        benchmark.extra_info["best_us"] = per_call * 1e6
        benchmark(NOOP, one_function)
    assert per_call <= 20e-6, f"one pass invocation took {per_call * 1e6:.2f} µs (budget 20 µs)"


def test_empty_function_pass_over_1000_functions(benchmark,
                                                 many_functions: ik.IRModule) -> None:
    with PassContext():
        per_call = _best_per_call(lambda: EMPTY(many_functions), 50)
        benchmark.extra_info["best_ms"] = per_call * 1e3
        assert benchmark(EMPTY, many_functions) is many_functions
    assert per_call <= 5e-3, f"empty FunctionPass took {per_call * 1e3:.2f} ms (budget 5 ms)"


def test_timing_instrument_overhead_ratio(benchmark, many_functions: ik.IRModule) -> None:
    with PassContext():
        plain = _best_per_call(lambda: EMPTY(many_functions), 50)
    timing = instrument.PassTimingInstrument()
    with PassContext(instruments=[timing]):
        timed = _best_per_call(lambda: EMPTY(many_functions), 50)
        benchmark(EMPTY, many_functions)
    ratio = timed / plain
    benchmark.extra_info["ratio"] = ratio
    assert "Empty" in timing.render()
    assert timed <= 5e-3 * 2
    assert ratio <= 2.0, (
        f"with PassTimingInstrument: {timed * 1e3:.3f} ms vs {plain * 1e3:.3f} ms "
        f"(ratio {ratio:.2f}, budget 2x)")


def test_sequential_of_ten_passes_with_timing(benchmark, one_function: ik.IRModule) -> None:
    seq = transform.Sequential([NOOP] * 10)
    with PassContext(instruments=[instrument.PassTimingInstrument()]):
        per_call = _best_per_call(lambda: seq(one_function), 1000)
        benchmark.extra_info["best_us"] = per_call * 1e6
        benchmark(seq, one_function)
    assert per_call <= 11 * 20e-6 * 2
