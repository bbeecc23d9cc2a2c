"""Speed of compiled TIR kernels against NumPy, and compile time.

Run with::

    PYTHONPATH=. .venv/bin/python -m pytest bench/bench_runtime.py --benchmark-enable -q
    # a table: add --benchmark-json=runtime.json, then python bench/report.py runtime.json

The kernels are the scheduled TIR of ``bench/kernels.py`` (written with
``irkernel.tir.script``), built by ``runtime.build``. What is measured:

- elementwise ``add``, ``exp`` and fused ``a * b + c`` on 1e7 float32: the
  ratio of NumPy's time (``np.add(a, b, out=o)`` ..., the fastest NumPy form:
  no temporaries) to ours. Target >= 1.2x.
- the sum of 1e7 float32 against ``a.sum()``. Target >= 1.0x.
- matmul 1024x1024 float32 (tiled, packed, vectorized, parallel) against
  ``np.matmul`` (OpenBLAS, its default threads) with 2 threads: target
  >= 0.3x (stretch 0.5x); and our 2-thread speedup over 1 thread, >= 1.7x.
- compile time per kernel, cold (empty ``IRKERNEL_CACHE_DIR``, a fresh
  process) <= 30 ms and from the on-disk cache in another new process
  <= 3 ms (``runtime_compile_time.py``).

Timing is fair (``benchutil.fair``, the code ``irkernel demo`` uses): ours and
NumPy's each in blocks of their own (2 per side, order ours, NumPy, NumPy,
ours), 2 warm-up calls per block, a 0.3 s pause before every block (OpenBLAS's
threads spin ~0.1 s after a call), medians of the timed calls. Thread counts:
2 pool threads; NumPy's BLAS (matmul) limited to the same count through
threadpoolctl and recorded; elementwise NumPy runs on one thread. Inputs are
allocated, 64-byte aligned and touched before timing (first touch of fresh
memory is slow here). Figures go to ``extra_info``. A figure that misses its
target fails its test, unless ``IRKERNEL_BENCH_REPORT_ONLY=1``.
"""

from __future__ import annotations

import json
import os
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

import runtime

BENCH_DIR = Path(__file__).parent
sys.path.insert(0, str(BENCH_DIR))
import kernels  # noqa: E402
from benchutil import blas_threads, check, fair, limit_blas, pool_threads  # noqa: E402

from irkernel.testing.timing import compare  # noqa: E402

N_ELEMENTWISE = 10**7
N_MATMUL = 1024
THREADS = 2
ELEMENTWISE_TARGET = 1.2
SUM_TARGET = 1.0
MATMUL_TARGET = 0.3
MATMUL_STRETCH = 0.5
SPEEDUP_TARGET = 1.7
#: How long OpenBLAS's idle worker threads spin after a call (its THREAD_TIMEOUT default,
#: 2**28 cycles, ~0.1 s here), with margin: the pause before every timed block.
OPENBLAS_SPIN_S = 0.3
COLD_TARGET_S = 0.030
CACHED_TARGET_S = 0.003


@pytest.fixture(autouse=True)
def _threads():
    """Every benchmark runs with THREADS pool threads unless it says otherwise."""
    with pool_threads(THREADS):
        yield


def _aligned(shape: tuple[int, ...] | int, seed: int) -> np.ndarray:
    out = runtime.empty(shape, np.float32, align=64)
    out[...] = np.random.default_rng(seed).random(out.shape, dtype=np.float32)
    return out


@cache
def _vectors() -> tuple[np.ndarray, ...]:
    """a, b, c in [0, 1) and two outputs (ours, NumPy's), all touched."""
    a, b, c = (_aligned(N_ELEMENTWISE, s) for s in (1, 2, 3))
    return a, b, c, _aligned(N_ELEMENTWISE, 4), _aligned(N_ELEMENTWISE, 5)


@cache
def _built(what: str):
    if what == "vsum":
        return runtime.build(kernels.vsum(N_ELEMENTWISE))["vsum"]
    if what == "matmul":
        return runtime.build(kernels.matmul(N_MATMUL, N_MATMUL, N_MATMUL))["matmul"]
    return runtime.build(kernels.elementwise(what))[f"ew_{what}"]


def _fair(ours: Callable[[], object], ref: Callable[[], object],
          repeat: int) -> tuple[float, float, float]:
    p = fair(ours, ref, repeat, pause=OPENBLAS_SPIN_S)
    return p.ours_s, p.ref_s, p.ratio


def _record(benchmark, fn: Callable[[], object], rounds: int) -> None:
    """pytest-benchmark's own statistics of ``fn`` (the table's median column)."""
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)


# ---------------------------------------------------------------------------
# elementwise and reduction (memory bound)
# ---------------------------------------------------------------------------

_NUMPY = {
    "add": lambda a, b, c, o: np.add(a, b, out=o),
    "exp": lambda a, b, c, o: np.exp(a, out=o),
    "fma": lambda a, b, c, o: np.add(np.multiply(a, b, out=o), c, out=o),
}


@pytest.mark.parametrize("op", ["add", "exp", "fma"])
def test_elementwise_1e7(benchmark, op: str) -> None:
    a, b, c, out, ref_out = _vectors()
    kernel = _built(op)
    args = (a, b, c)[:kernels.ARITY[op]]
    kernel(*args, out)
    _NUMPY[op](a, b, c, ref_out)
    np.testing.assert_allclose(out, ref_out, rtol=2e-6)
    ours, numpy_s, ratio = _fair(lambda: kernel(*args, out),
                                 lambda: _NUMPY[op](a, b, c, ref_out), 11)
    nbytes = (len(args) + 1) * a.nbytes  # what the loop must read and write
    benchmark.extra_info.update({
        "n": N_ELEMENTWISE, "threads": THREADS, "ours_s": ours, "numpy_s": numpy_s,
        "ours_GB_per_s": nbytes / ours / 1e9, "numpy_GB_per_s": nbytes / numpy_s / 1e9,
        "ratio": ratio, "target_ratio": ELEMENTWISE_TARGET})
    _record(benchmark, lambda: kernel(*args, out), 15)
    check(ratio >= ELEMENTWISE_TARGET,
           f"{op} on 1e7 float32: {ratio:.2f}x NumPy ({ours * 1e3:.2f} ms vs "
           f"{numpy_s * 1e3:.2f} ms; target {ELEMENTWISE_TARGET}x)")


def test_sum_1e7(benchmark) -> None:
    a = _vectors()[0]
    kernel = _built("vsum")
    out = np.zeros(1, np.float32)
    kernel(a, out)
    exact = float(a.sum(dtype=np.float64))
    assert abs(float(out[0]) - exact) <= 1e-5 * exact
    ours, numpy_s, ratio = _fair(lambda: kernel(a, out), a.sum, 15)
    benchmark.extra_info.update({
        "n": N_ELEMENTWISE, "threads": THREADS, "ours_s": ours, "numpy_s": numpy_s,
        "ours_GB_per_s": a.nbytes / ours / 1e9, "numpy_GB_per_s": a.nbytes / numpy_s / 1e9,
        "rel_error": abs(float(out[0]) - exact) / exact,
        "numpy_rel_error": abs(float(a.sum()) - exact) / exact,
        "ratio": ratio, "target_ratio": SUM_TARGET})
    _record(benchmark, lambda: kernel(a, out), 21)
    check(ratio >= SUM_TARGET, f"sum of 1e7 float32: {ratio:.2f}x NumPy ({ours * 1e3:.2f} ms "
                                f"vs {numpy_s * 1e3:.2f} ms; target {SUM_TARGET}x)")


# ---------------------------------------------------------------------------
# matmul (compute bound)
# ---------------------------------------------------------------------------

@cache
def _matrices() -> tuple[np.ndarray, ...]:
    shape = (N_MATMUL, N_MATMUL)
    return _aligned(shape, 6), _aligned(shape, 7), _aligned(shape, 8), _aligned(shape, 9)


def test_matmul_1024(benchmark) -> None:
    A, B, C, C_ref = _matrices()
    kernel = _built("matmul")
    kernel(A, B, C)
    np.matmul(A, B, out=C_ref)
    np.testing.assert_allclose(C, C_ref, rtol=1e-4)
    flops = 2 * N_MATMUL**3
    with limit_blas(THREADS):
        blas = blas_threads()
        ours, blas_s, ratio = _fair(lambda: kernel(A, B, C), lambda: np.matmul(A, B, out=C_ref), 9)
    benchmark.extra_info.update({
        "n": N_MATMUL, "threads": THREADS, "openblas_threads": blas, "ours_s": ours,
        "openblas_s": blas_s,
        "ours_GFLOPs": flops / ours / 1e9, "openblas_GFLOPs": flops / blas_s / 1e9,
        "ratio": ratio, "target_ratio": MATMUL_TARGET, "stretch_ratio": MATMUL_STRETCH})
    _record(benchmark, lambda: kernel(A, B, C), 11)
    check(ratio >= MATMUL_TARGET,
           f"matmul 1024: {ratio:.2f}x OpenBLAS ({flops / ours / 1e9:.0f} vs "
           f"{flops / blas_s / 1e9:.0f} GFLOP/s; target {MATMUL_TARGET}x)")


def test_matmul_parallel_speedup(benchmark) -> None:
    """Our matmul with 1 thread against 2 threads, each in blocks of its own.

    Also recorded: how many CPUs the 2-thread rounds actually got (process CPU
    time / wall time; 2.0 when both threads ran all the time), the best-case
    speedup (fastest 1-thread round over the fastest 2-thread round), the
    single-thread GFLOP/s from the thread's CPU time (what the kernel does when
    it has a core) and the load average: when another job holds a core, two
    threads get about one CPU between them and can not be 2x faster than one.
    """
    A, B, C, _ = _matrices()
    kernel = _built("matmul")
    flops = 2 * N_MATMUL**3
    one_cpu = []

    def one() -> None:
        runtime.set_num_threads(1)
        start = time.thread_time()
        kernel(A, B, C)
        one_cpu.append(time.thread_time() - start)

    two_cpus = []

    def two() -> None:
        runtime.set_num_threads(THREADS)
        cpu, wall = time.process_time(), time.perf_counter()
        kernel(A, B, C)
        two_cpus.append((time.process_time() - cpu) / (time.perf_counter() - wall))

    # 2 threads as "ours", 1 thread as the reference: the ratio is the speedup
    cmp = compare(two, one, repeat=9, pause=OPENBLAS_SPIN_S)
    ones, twos = cmp.ref.seconds, cmp.ours.seconds
    speedup = cmp.ratio
    benchmark.extra_info.update({
        "n": N_MATMUL, "one_thread_s": statistics.median(ones),
        "two_threads_s": statistics.median(twos),
        "one_thread_GFLOPs": flops / statistics.median(ones) / 1e9,
        "two_threads_GFLOPs": flops / statistics.median(twos) / 1e9,
        "one_thread_cpu_GFLOPs": flops / statistics.median(one_cpu[1:]) / 1e9,
        "speedup": speedup, "best_speedup": cmp.best_ratio,
        "two_threads_cpus_received": statistics.median(two_cpus[1:]),
        "loadavg_1min": os.getloadavg()[0], "target_speedup": SPEEDUP_TARGET})
    runtime.set_num_threads(THREADS)
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are in extra_info
    check(speedup >= SPEEDUP_TARGET,
           f"matmul 1024: 2-thread speedup {speedup:.2f}x (target {SPEEDUP_TARGET}x); the "
           f"2-thread rounds got {statistics.median(two_cpus[1:]):.2f} CPUs (process CPU / "
           f"wall), 1-min load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


# ---------------------------------------------------------------------------
# compile time (fresh processes)
# ---------------------------------------------------------------------------

def _run_script(script: str, env: dict[str, str]) -> dict:
    full_env = {**os.environ, "PYTHONPATH": str(BENCH_DIR.parent), **env}
    done = subprocess.run([sys.executable, str(BENCH_DIR / script)], env=full_env,
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode:
        raise RuntimeError(f"{script} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_compile_time(benchmark) -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        env = {"IRKERNEL_CACHE_DIR": cache_dir}
        cold = _run_script("runtime_compile_time.py", env)
        warm = [_run_script("runtime_compile_time.py", env) for _ in range(3)]
    names = [k for k in cold if k not in ("init", "max", "median", "hits")]
    cached = {k: statistics.median(w[k] for w in warm) for k in names}
    benchmark.extra_info.update({
        "cold_max_s": cold["max"], "cold_median_s": cold["median"], "cold_init_s": cold["init"],
        "cached_max_s": max(cached.values()), "cached_init_s":
            statistics.median(w["init"] for w in warm),
        "cached_hits": min(w["hits"] for w in warm),
        **{f"cold_{k}_s": cold[k] for k in names}, **{f"cached_{k}_s": cached[k] for k in names},
        "target_cold_s": COLD_TARGET_S, "target_cached_s": CACHED_TARGET_S})
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are in extra_info
    assert min(w["hits"] for w in warm) == len(names), "the second process missed the cache"
    slow = {k: round(v * 1e3, 1) for k, v in cold.items() if k in names and v > COLD_TARGET_S}
    check(not slow, f"cold compile over {COLD_TARGET_S * 1e3:.0f} ms (ms): {slow}")
    slow = {k: round(v * 1e3, 2) for k, v in cached.items() if v > CACHED_TARGET_S}
    check(not slow, f"cached build over {CACHED_TARGET_S * 1e3:.0f} ms (ms): {slow}")
