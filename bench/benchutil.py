"""What every benchmark suite shares: target checks, paired timing, the pool's thread count.

Ratios on this noisy 2-core VM are only meaningful when both sides see the same
load, so :func:`paired` alternates the two callables round by round (who goes
first alternates too) and reports medians and the median of per-pair ratios.
Targets fail their test through :func:`check` unless ``IRKERNEL_BENCH_REPORT_ONLY=1``.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

REPORT_ONLY = os.environ.get("IRKERNEL_BENCH_REPORT_ONLY", "") not in ("", "0")


def check(ok: bool, message: str) -> None:
    """Fail the benchmark on a missed target (only record it in report-only mode)."""
    if not ok and not REPORT_ONLY:
        pytest.fail(message)


@dataclass(frozen=True)
class Paired:
    """Medians of alternating rounds; ``ratio`` = ref / ours (> 1: we are faster)."""

    ours_s: float
    ref_s: float
    ratio: float
    best_ratio: float


def paired(ours: Callable[[], object], ref: Callable[[], object], rounds: int,
           settle: float = 0.0) -> Paired:
    """Time ``ours`` and ``ref`` in alternating rounds after one warm-up pair.

    ``settle`` seconds of sleep before every timed call: OpenBLAS's worker threads
    busy-wait for a while (~0.1 s) after each call, and a kernel timed right after
    one shares its CPUs with them (measured: 183 GFLOP/s right after ``np.matmul``,
    271 after a 0.3 s pause, same kernel, 2 threads).
    """
    ours()
    ref()
    mine, theirs, ratios = [], [], []
    for r in range(rounds):
        first, second = (ours, ref) if r % 2 == 0 else (ref, ours)
        times = []
        for fn in (first, second):
            time.sleep(settle)
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        t_ours, t_ref = times if r % 2 == 0 else times[::-1]
        mine.append(t_ours)
        theirs.append(t_ref)
        ratios.append(t_ref / t_ours)
    return Paired(statistics.median(mine), statistics.median(theirs),
                  statistics.median(ratios), min(theirs) / min(mine))


@contextmanager
def pool_threads(n: int) -> Iterator[None]:
    """Run the body with ``n`` runtime pool threads, then restore the previous count."""
    import runtime

    previous = runtime.get_num_threads()
    runtime.set_num_threads(n)
    try:
        yield
    finally:
        runtime.set_num_threads(previous)
