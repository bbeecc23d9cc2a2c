"""Fair timing of two implementations: each side in a block of its own.

Used by ``irkernel demo`` and by ``bench/`` (through ``bench/benchutil.py``), so
the demo's figures are measured exactly as the benchmarks measure them.

Why blocks, not alternating calls: on a shared machine, timing A and B call
by call measures their interference, not either of them. Right after a NumPy
matmul, OpenBLAS's worker threads keep spinning for ~0.1 s and share the CPUs
with whatever runs next (an irkernel MLP timed right after one took 3.9 ms
instead of 2.6 ms); our pool's threads after a parallel kernel do the same to
NumPy. So :func:`compare` runs each side as a block: ``warmups`` untimed calls
(caches, page faults, thread wake-ups), then ``repeat`` timed calls, with a
``pause`` before each block so the other side's threads have gone to sleep.
The blocks run ``ours, ref, ref, ours, ...`` (``rounds`` blocks per side, the
order mirrored each round) so that a slow drift of the machine's load hits
both sides alike; each side's figure is the median of all its timed calls.

Thread counts are part of every figure: :func:`blas_threads` and
:func:`limit_blas` read and set NumPy's BLAS threads through ``threadpoolctl``
(a dependency of irkernel, so a plain install compares at equal thread counts;
``None`` only when it finds no BLAS library loaded). The irkernel pool's
threads are set by the caller (``runtime.set_num_threads``): this layer may
not import ``runtime``. Imports the standard library and threadpoolctl only.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import threadpoolctl

#: Seconds to wait before each block: OpenBLAS's idle threads busy-wait ~0.1 s
#: (its THREAD_TIMEOUT default) after a call; 0.3 s leaves a margin.
DEFAULT_PAUSE_S = 0.3


@dataclass(frozen=True)
class Samples:
    """The timed calls of one side, in seconds."""

    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def best(self) -> float:
        return min(self.seconds)


@dataclass(frozen=True)
class Comparison:
    """Two sides timed in blocks; ``ratio`` = ref / ours (> 1: ours is faster)."""

    ours: Samples
    ref: Samples

    @property
    def ratio(self) -> float:
        return self.ref.median / self.ours.median

    @property
    def best_ratio(self) -> float:
        """Fastest call of ref over fastest call of ours (what a quiet machine allows)."""
        return self.ref.best / self.ours.best


def time_block(fn: Callable[[], object], repeat: int, warmups: int = 2) -> list[float]:
    """``warmups`` untimed calls of ``fn``, then ``repeat`` timed ones (seconds each)."""
    if repeat < 1 or warmups < 0:
        raise ValueError(f"time_block: repeat must be >= 1 and warmups >= 0, got {repeat}, "
                         f"{warmups}")
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def compare(ours: Callable[[], object], ref: Callable[[], object], repeat: int = 9,
            warmups: int = 2, pause: float = DEFAULT_PAUSE_S, rounds: int = 2) -> Comparison:
    """Time ``ours`` and ``ref`` in blocks of their own (see the module docstring).

    Parameters
    ----------
    ours, ref : callable
        The two sides; called with no arguments.
    repeat : int
        Timed calls per block.
    warmups : int
        Untimed calls at the start of every block.
    pause : float
        Seconds of sleep before every block.
    rounds : int
        Blocks per side, in the order ours, ref, ref, ours, ours, ref, ...

    Returns
    -------
    Comparison
        The medians, best calls and their ratio.
    """
    if rounds < 1:
        raise ValueError(f"compare: rounds must be >= 1, got {rounds}")
    if pause < 0:
        raise ValueError(f"compare: pause must be >= 0, got {pause}")
    times: dict[str, list[float]] = {"ours": [], "ref": []}
    sides = {"ours": ours, "ref": ref}
    for r in range(rounds):
        for name in (("ours", "ref") if r % 2 == 0 else ("ref", "ours")):
            time.sleep(pause)
            times[name].extend(time_block(sides[name], repeat, warmups))
    return Comparison(Samples(tuple(times["ours"])), Samples(tuple(times["ref"])))


def blas_threads() -> int | None:
    """Threads of NumPy's BLAS (the largest among loaded BLAS libraries), or None when
    ``threadpoolctl`` finds no BLAS library loaded."""
    counts = [info["num_threads"] for info in threadpoolctl.threadpool_info()
              if info.get("user_api") == "blas"]
    return max(counts) if counts else None


@contextmanager
def limit_blas(threads: int) -> Iterator[bool]:
    """Limit NumPy's BLAS to ``threads`` inside the block; yields whether a BLAS library
    was found to limit (False: none is loaded, nothing to limit)."""
    if threads < 1:
        raise ValueError(f"limit_blas: threads must be >= 1, got {threads}")
    with threadpoolctl.threadpool_limits(limits=threads, user_api="blas"):
        yield blas_threads() is not None


__all__ = ["DEFAULT_PAUSE_S", "Comparison", "Samples", "blas_threads", "compare", "limit_blas",
           "time_block"]
