"""The parallel-loop thread pool: chunking, dynamic scheduling, thread-count changes.

The kernels record which iterations ran (each writes its own index), so a
chunk run twice, skipped or run out of range shows up as a wrong array.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

import runtime
from irkernel.tir import script as T
from runtime import threadpool


@pytest.fixture(autouse=True)
def _restore_threads():
    previous = runtime.get_num_threads()
    yield
    runtime.set_num_threads(previous)


@pytest.mark.parametrize(("n", "k"), [(0, 3), (1, 4), (7, 3), (16, 16), (1000, 24), (5, 8)])
def test_chunks_partition_the_range(n: int, k: int) -> None:
    ranges = threadpool.chunks(n, k)
    assert len(ranges) == k
    assert ranges[0][0] == 0
    assert ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    sizes = [e - b for b, e in ranges]
    assert max(sizes) - min(sizes) <= 1
    assert min(sizes) >= 0


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


def test_changing_the_thread_count_keeps_the_pool() -> None:
    kernel = _iota(64)
    out, hits = np.zeros(64, np.int64), np.zeros(64, np.int64)
    runtime.set_num_threads(3)
    kernel(out, hits)
    pool = threadpool._state["pool"]
    for n in (1, 2, 3, 2):
        runtime.set_num_threads(n)
        kernel(out, hits)
        assert threadpool._state["pool"] is pool  # shrinking never re-spawns workers
    runtime.set_num_threads(int(threadpool._state["workers"]) + 2)  # more than it has
    kernel(out, hits)
    assert threadpool._state["pool"] is not pool  # growing replaces it
    np.testing.assert_array_equal(hits, 6)


def test_a_late_worker_is_not_waited_for() -> None:
    """The launcher returns once all chunks ran, even if a worker has not started yet."""
    kernel = _iota(64)
    out, hits = np.zeros(64, np.int64), np.zeros(64, np.int64)
    runtime.set_num_threads(2)
    kernel(out, hits)  # the pool exists
    pool = threadpool._state["pool"]
    release = threading.Event()
    blocker = pool.submit(release.wait)  # occupies the only worker
    returned = threading.Event()

    def call() -> None:
        kernel(out, hits)  # the launch's worker task queues behind the blocker
        returned.set()

    caller = threading.Thread(target=call)
    caller.start()
    ok = returned.wait(timeout=5.0)  # an implementation that waits for the worker hangs here
    release.set()
    caller.join()
    blocker.result()
    assert ok, "the launch waited for a worker that had not started"
    np.testing.assert_array_equal(hits, 2)
