"""Throughput, memory and latency of the graph passes.

Run with::

    PYTHONPATH=. .venv/bin/python -m pytest bench/bench_passes.py --benchmark-enable -q
    # a table: add --benchmark-json=passes.json, then python bench/report.py passes.json

What is measured (medians; the machine is a noisy 2-core VM, so every figure
comes after a warm-up call on the same graph, which also pays the first touch
of fresh memory):

- nodes/s of each pass at 1e4 / 1e6 / 1e7 random scalar nodes
  (``irkernel.testing.random_function``, default op mix), called through the
  pass manager (``passes.FoldConstant()(mod)``). The first call's time (cached
  kernel loading plus first touch) is reported as ``first_call_s``.
  Targets at 1e7: DCE and FoldConstant >= 40 M nodes/s, CSE >= 15 M nodes/s.
- the O2 pipeline end to end at 1e7 (target <= 1.0 s), with each pass's time
  from PassTimingInstrument.
- each O2 pass's nodes/s and O2's total at 1e6 and 1e7 on 1 and 2 Numba
  threads (``test_passes_on_threads``; targets on 2 threads at 1e7: O2 <= 0.5 s,
  FoldConstant and DCE >= 100 M nodes/s).
- the ratio to the pure-Python object-per-node DCE and fold of
  ``pure_python_baseline.py`` on the same 1e6-node graph, in the same run
  (target >= 100x).
- peak memory of each pass at 1e7 in a fresh process (``peak_memory.py``;
  target <= 3x the graph's own arrays; O2's, which also holds the
  intermediate modules, is recorded without a target).
- first-call latency of all graph-pass kernels in a fresh process with an
  empty Numba cache (compilation) and in a second process with the same cache
  (``jit_latency.py``; target for the second <= 0.5 s).
- optional: Apache TVM Relax's passes on the same graphs (skipped without tvm).

Figures go to ``extra_info``. A figure that misses its target fails its test,
unless ``IRKERNEL_BENCH_REPORT_ONLY=1`` (then it is only recorded).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
import passes
from irkernel import instrument, transform
from irkernel.testing import random_function

BENCH_DIR = Path(__file__).parent
sys.path.insert(0, str(BENCH_DIR))
import pure_python_baseline as baseline  # noqa: E402
from benchutil import check  # noqa: E402

SIZES = {"1e4": 10**4, "1e6": 10**6, "1e7": 10**7}
ROUNDS = {10**4: 30, 10**6: 9, 10**7: 5}
PASSES = ("DeadCodeElimination", "FoldConstant", "EliminateCommonSubexpr", "SimplifyArith")
TARGET_NODES_PER_S = {"DeadCodeElimination": 40e6, "FoldConstant": 40e6,
                      "EliminateCommonSubexpr": 15e6}
O2_TARGET_S = 1.0
RATIO_TARGET = 100.0
MEMORY_TARGET = 3.0
CACHED_LATENCY_TARGET_S = 0.5
PREFAULT_BYTES = 3 << 30


@pytest.fixture(scope="module", autouse=True)
def _touch_fresh_memory() -> None:
    """Touch (and free) a few GiB once: on this VM the first touch of memory the guest
    never used is several times slower than later ones, and it would land in the
    first rounds of whichever benchmark runs first."""
    block = np.ones(PREFAULT_BYTES // 8)  # written, so every page is touched
    del block


@cache
def _module(n_nodes: int) -> ik.IRModule:
    return ik.IRModule({"main": random_function(n_nodes, seed=0)})


class _Rounds:
    """Wraps a callable to record the process CPU time (user, system) of every call."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.user: list[float] = []
        self.sys: list[float] = []

    def __call__(self) -> object:
        before = resource.getrusage(resource.RUSAGE_SELF)
        out = self.fn()
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.user.append(after.ru_utime - before.ru_utime)
        self.sys.append(after.ru_stime - before.ru_stime)
        return out


def _median_seconds(benchmark, fn: Callable[[], object], rounds: int) -> float:
    """Median wall time of ``fn`` (pytest-benchmark's when it is enabled, else our own loop).

    Also records the median user and system CPU time per call in ``extra_info``:
    on this VM the system time (page faults on fresh memory) is most of the noise.
    """
    timed = _Rounds(fn)
    if not benchmark.disabled:
        benchmark.pedantic(timed, rounds=rounds, iterations=1, warmup_rounds=0)
        median = float(benchmark.stats.stats.median)
    else:
        times = []
        for r in range(rounds):
            start = time.perf_counter()
            benchmark(timed) if r == 0 else timed()  # disabled: runs it once, no stats
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
    benchmark.extra_info["user_s"] = statistics.median(timed.user)
    benchmark.extra_info["sys_s"] = statistics.median(timed.sys)
    return median


def _first_call(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ---------------------------------------------------------------------------
# throughput
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("name", PASSES)
def test_pass_throughput(benchmark, name: str, size: str) -> None:
    n = SIZES[size]
    mod = _module(n)
    the_pass = transform.get_pass(name)
    first = _first_call(lambda: the_pass(mod))
    out = the_pass(mod)  # warm-up: the first touch of fresh memory is slow on this VM
    median = _median_seconds(benchmark, lambda: the_pass(mod), ROUNDS[n])
    rate = n / median
    benchmark.extra_info.update({
        "n_nodes": n, "nodes_after": out["main"].num_nodes, "first_call_s": first,
        "median_s": median, "M_nodes_per_s": rate / 1e6,
        "M_nodes_per_user_s": n / max(benchmark.extra_info["user_s"], 1e-9) / 1e6})
    target = TARGET_NODES_PER_S.get(name)
    if target is not None and n == 10**7:
        benchmark.extra_info["target_M_nodes_per_s"] = target / 1e6
        check(rate >= target, f"{name} at 1e7: {rate / 1e6:.1f} M nodes/s "
                               f"(target {target / 1e6:.0f} M nodes/s)")


def test_o2_end_to_end_at_1e7(benchmark) -> None:
    n = 10**7
    mod = _module(n)
    o2 = passes.O2()
    first = _first_call(lambda: o2(mod))
    out = o2(mod)
    median = _median_seconds(benchmark, lambda: o2(mod), 5)
    timing = instrument.PassTimingInstrument()
    with transform.PassContext(instruments=[timing]):
        for _ in range(3):
            o2(mod)
    per_pass = {f"{name}_s": total / 3 for name, total in timing.totals().items()
                if name != "O2"}
    benchmark.extra_info.update({
        "n_nodes": n, "nodes_after": out["main"].num_nodes, "first_call_s": first,
        "median_s": median, "target_s": O2_TARGET_S, **per_pass})
    check(median <= O2_TARGET_S, f"O2 at 1e7: {median:.2f} s (target {O2_TARGET_S} s)")


# ---------------------------------------------------------------------------
# threads: each pass and O2 at 1 and 2 Numba threads
# ---------------------------------------------------------------------------

THREAD_SIZES = {"1e6": 10**6, "1e7": 10**7}
#: Targets on 2 threads at 1e7 (issue 27): O2 <= 0.5 s; FoldConstant and DCE >= 100 M nodes/s.
THREADS_O2_TARGET_S = 0.5
THREADS_TARGET_NODES_PER_S = {"DeadCodeElimination": 100e6, "FoldConstant": 100e6}


@pytest.mark.parametrize("size", list(THREAD_SIZES))
@pytest.mark.parametrize("threads", [1, 2])
def test_passes_on_threads(benchmark, threads: int, size: str) -> None:
    """nodes/s of each O2 pass and O2's total, with ``numba.set_num_threads(threads)``
    (the split sweeps: rebuild's compaction, FoldConstant's chunks, CSE's table)."""
    import numba

    n = THREAD_SIZES[size]
    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip(f"Numba has {numba.config.NUMBA_NUM_THREADS} threads")
    mod = _module(n)
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        o2 = transform.get_pass("O2")
        o2(mod)  # warm-up: cached kernels loaded, fresh memory touched
        rounds = ROUNDS[n]
        rates = {}
        for name in PASSES:
            the_pass = transform.get_pass(name)
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                the_pass(mod)
                times.append(time.perf_counter() - start)
            rates[name] = n / statistics.median(times)
        o2_s = _median_seconds(benchmark, lambda: o2(mod), rounds)
    finally:
        numba.set_num_threads(before)
    benchmark.extra_info.update({
        "n_nodes": n, "threads": threads, "O2_s": o2_s,
        **{f"{name}_M_nodes_per_s": rate / 1e6 for name, rate in rates.items()}})
    if threads == 2 and n == 10**7:
        check(o2_s <= THREADS_O2_TARGET_S,
              f"O2 at 1e7 on 2 threads: {o2_s:.2f} s (target {THREADS_O2_TARGET_S} s)")
        for name, target in THREADS_TARGET_NODES_PER_S.items():
            check(rates[name] >= target, f"{name} at 1e7 on 2 threads: "
                                         f"{rates[name] / 1e6:.0f} M nodes/s "
                                         f"(target {target / 1e6:.0f})")


# ---------------------------------------------------------------------------
# ratio to the pure-Python object-per-node baseline
# ---------------------------------------------------------------------------

@cache
def _baseline_graph() -> ik.Function:
    return baseline.scalar_float_graph(10**6, seed=0)


def _median(fn: Callable[[], object], rounds: int,
            setup: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(rounds):
        arg = setup() if setup is not None else None
        start = time.perf_counter()
        fn() if setup is None else fn(arg)  # type: ignore[call-arg]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@pytest.mark.parametrize("which", ["DeadCodeElimination", "FoldConstant"])
def test_ratio_to_pure_python_at_1e6(benchmark, which: str) -> None:
    func = _baseline_graph()
    mod = ik.IRModule({"main": func})
    the_pass = transform.get_pass(which)
    the_pass(mod)
    the_pass(mod)
    if which == "DeadCodeElimination":
        nodes, outputs = baseline.to_objects(func)
        python_s = _median(lambda: baseline.dce(nodes, outputs), 3)
    else:
        # fold rewrites its objects in place: a fresh object graph per round (not timed)
        python_s = _median(lambda graph: baseline.fold(graph[0]), 3,
                           setup=lambda: baseline.to_objects(func))
    ours = _median_seconds(benchmark, lambda: the_pass(mod), 9)
    ratio = python_s / ours
    benchmark.extra_info.update({"n_nodes": func.num_nodes, "pure_python_s": python_s,
                                 "irkernel_s": ours, "ratio": ratio,
                                 "pure_python_M_nodes_per_s": func.num_nodes / python_s / 1e6,
                                 "target_ratio": RATIO_TARGET})
    check(ratio >= RATIO_TARGET, f"{which} at 1e6: {ratio:.0f}x the pure-Python baseline "
                                  f"({python_s * 1e3:.0f} ms vs {ours * 1e3:.1f} ms; "
                                  f"target {RATIO_TARGET:.0f}x)")


# ---------------------------------------------------------------------------
# peak memory and first-call latency (fresh processes)
# ---------------------------------------------------------------------------

def _run_script(script: str, *args: str, env: dict[str, str] | None = None) -> dict:
    full_env = {**os.environ, "PYTHONPATH": str(BENCH_DIR.parent), **(env or {})}
    done = subprocess.run([sys.executable, str(BENCH_DIR / script), *args], env=full_env,
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode:
        raise RuntimeError(f"{script} {' '.join(args)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", [*PASSES, "O2"])
def test_peak_memory_at_1e7(benchmark, name: str) -> None:
    result = _run_script("peak_memory.py", name, str(10**7))
    benchmark.extra_info.update(result)
    benchmark.extra_info["target_ratio"] = MEMORY_TARGET
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are in extra_info
    # The budget is per pass. O2 is recorded for information: its peak also holds the
    # intermediate modules (the input of each pass is the previous pass's output).
    check(name == "O2" or result["ratio"] <= MEMORY_TARGET,
           f"{name} at 1e7: peak {result['tracemalloc_peak'] / 1e6:.0f} MB = "
           f"{result['ratio']:.2f}x the graph's {result['graph_nbytes'] / 1e6:.0f} MB "
           f"(target {MEMORY_TARGET}x)")


def test_first_call_latency(benchmark) -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        env = {"NUMBA_CACHE_DIR": cache_dir}
        cold = _run_script("jit_latency.py", env=env)
        warm = [_run_script("jit_latency.py", env=env) for _ in range(3)]
    cached = statistics.median(w["all_passes"] for w in warm)
    benchmark.extra_info.update({
        "compile_s": cold["all_passes"], "cached_s": cached,
        **{f"compile_{k}_s": v for k, v in cold.items() if k in PASSES},
        **{f"cached_{k}_s": statistics.median(w[k] for w in warm) for k in PASSES},
        "target_cached_s": CACHED_LATENCY_TARGET_S})
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are in extra_info
    check(cached <= CACHED_LATENCY_TARGET_S,
           f"second-process first call of all graph passes: {cached:.2f} s "
           f"(target {CACHED_LATENCY_TARGET_S} s)")


# ---------------------------------------------------------------------------
# optional: Apache TVM Relax
# ---------------------------------------------------------------------------

#: 1e5 is left out: TVM's pipeline takes ~25 s at 1e4 and grows ~10x per decade
#: (its FoldConstant builds and runs each foldable op), so one 1e5 call would take minutes.
@pytest.mark.parametrize("n_nodes", [10**3, 10**4])
def test_tvm_relax_ratio(benchmark, n_nodes: int) -> None:
    """The same scalar float32 graphs through TVM Relax's FoldConstant,
    EliminateCommonSubexpr and DeadCodeElimination (apache-tvm 0.27, where a tensor's
    annotation is ``relax.TensorType``); ratio = TVM's time / ours. Needs
    ``pip install apache-tvm`` in the bench environment; never a dependency."""
    tvm = pytest.importorskip("tvm")
    relax = pytest.importorskip("tvm.relax")
    func = random_function(n_nodes, seed=0, dtypes=("float32",),
                           ops=("add", "subtract", "multiply", "negative", "exp"))
    names = [func.op(i).name for i in range(func.num_nodes)]
    bb = relax.BlockBuilder()
    params = [relax.Var(n, relax.TensorType((), "float32")) for n in func.param_names]
    with bb.function("main", params):
        with bb.dataflow():
            values: list[object] = []
            for i, name in enumerate(names):
                if name == "param":
                    values.append(params[int(func.a0[i])])
                elif name == "const":
                    values.append(relax.const(func.const_value(i), "float32"))
                else:
                    args = [values[v] for v in func.operands(i)]
                    values.append(bb.emit(getattr(relax.op, name)(*args)))
            out = bb.emit_output(values[int(func.outputs[0])])
        bb.emit_func_output(out)
    tvm_mod = bb.get()
    seq = tvm.transform.Sequential([relax.transform.FoldConstant(),
                                    relax.transform.EliminateCommonSubexpr(),
                                    relax.transform.DeadCodeElimination()])
    tvm_s = _median(lambda: seq(tvm_mod), 3)
    mod = ik.IRModule({"main": func})
    ours_pipeline = transform.parse_pipeline(
        "FoldConstant,EliminateCommonSubexpr,DeadCodeElimination")
    ours_pipeline(mod)
    ours = _median_seconds(benchmark, lambda: ours_pipeline(mod), 9)
    benchmark.extra_info.update({"n_nodes": n_nodes, "tvm_s": tvm_s, "irkernel_s": ours,
                                 "ratio": tvm_s / ours})
