"""The parallel-loop thread pool: every iteration once, thread-count changes, concurrent
launches, fork.

The kernels record which iterations ran (each writes its own index), so a
chunk run twice, skipped or run out of range shows up as a wrong array.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from test_threadpool_faults import wait_child

import runtime
from irkernel.tir import script as T
from runtime import threadpool


@pytest.fixture(autouse=True)
def _restore_threads():
    previous = runtime.get_num_threads()
    yield
    runtime.set_num_threads(previous)


def _iota(n: int):
    @T.prim_func(name=f"iota{n}")
    def iota(out: T.Buffer((n,), "int64"), hits: T.Buffer((n,), "int64")):
        for i in T.parallel(n):
            out[i] = T.cast("int64", i) * 3
            hits[i] = hits[i] + 1

    return runtime.build(iota, cache=False)[f"iota{n}"]


@pytest.mark.parametrize("n", [1, 2, 3, 15, 16, 17, 1001])
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_every_iteration_runs_exactly_once(n: int, threads: int) -> None:
    kernel = _iota(n)
    runtime.set_num_threads(threads)
    out = np.full(n, -1, np.int64)
    hits = np.zeros(n, np.int64)
    for _ in range(5):
        kernel(out, hits)
    np.testing.assert_array_equal(out, np.arange(n) * 3)
    np.testing.assert_array_equal(hits, 5)  # no chunk ran twice or was skipped


def test_workers_are_kept_when_the_count_shrinks() -> None:
    kernel = _iota(64)
    out, hits = np.zeros(64, np.int64), np.zeros(64, np.int64)
    runtime.set_num_threads(3)
    kernel(out, hits)
    made = threadpool.worker_count()
    assert made >= 2
    for n in (1, 2, 3, 2):
        runtime.set_num_threads(n)
        kernel(out, hits)
        assert threadpool.worker_count() == made  # shrinking never re-spawns workers
    runtime.set_num_threads(made + 2)  # more than it has: the next launch adds one
    kernel(out, hits)
    assert threadpool.worker_count() == made + 1
    np.testing.assert_array_equal(hits, 6)
    np.testing.assert_array_equal(out, np.arange(64) * 3)


def test_concurrent_launches_from_python_threads() -> None:
    """One launch uses the pool at a time; a concurrent one runs its loop on its own
    thread: every call still runs every iteration exactly once."""
    kernel = _iota(1001)
    runtime.set_num_threads(2)
    outs = [np.zeros(1001, np.int64) for _ in range(4)]
    hits = [np.zeros(1001, np.int64) for _ in range(4)]

    def work(k: int) -> None:
        for _ in range(50):
            kernel(outs[k], hits[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out, hit in zip(outs, hits, strict=True):
        np.testing.assert_array_equal(out, np.arange(1001) * 3)
        np.testing.assert_array_equal(hit, 50)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_workers() -> None:
    """The parent's workers do not exist in a fork's child: its launches must not wait
    for them (a hang) or count on them (skipped chunks)."""
    kernel = _iota(257)
    runtime.set_num_threads(2)
    out, hits = np.zeros(257, np.int64), np.zeros(257, np.int64)
    kernel(out, hits)  # the parent's pool has its worker
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only when the parallel loop ran completely
        code = 1
        try:
            o, h = np.zeros(257, np.int64), np.zeros(257, np.int64)
            for _ in range(20):
                kernel(o, h)
            ok = (o == np.arange(257) * 3).all() and (h == 20).all()
            code = 0 if ok and threadpool.worker_count() >= 1 else 1
        finally:
            os._exit(code)
    assert wait_child(pid, "in a parallel loop", 60) == 0
