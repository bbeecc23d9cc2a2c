"""The thread pool that runs parallel loops: ``irkernel_parallel_launch`` for compiled code.

Compiled kernels call ``irkernel_parallel_launch(body, closure, n)`` (a
ctypes callback whose address is registered with LLVM's symbol table, so
objects, cached or fresh, link to it when loaded). The launcher splits
``[0, n)`` into ``CHUNKS_PER_THREAD`` contiguous chunks per thread; the
calling thread and ``threads - 1`` workers of a ``concurrent.futures`` pool
take chunks in order until none is left (dynamic scheduling: on a shared
machine a preempted or late thread does not hold the others back, and the
caller waits for the chunks, not for workers that never started); each chunk is a
ctypes call of the outlined body, which releases the GIL, so the chunks run
truly in parallel. Nothing here is a scheduler beyond that (DESIGN.md).

* The thread count defaults to ``IRKERNEL_NUM_THREADS`` or the CPU count,
  read when the pool is first needed; :func:`set_num_threads` changes it.
* A launch from a pool worker runs serially (no nested parallelism, and
  no deadlock when a kernel runs inside a parallel region).
* An exception inside the callback can not unwind through compiled code:
  it is stored per thread and re-raised by ``Kernel.__call__`` after the
  kernel returns (:func:`take_error`), so a failed launch is never silent.

Module-level state (the pool, the callback, the body cache keyed by code
address) is a process resource, created lazily and guarded by a lock.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm

from runtime.lower import LAUNCH_SYMBOL

BODY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
LAUNCH_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)

#: Chunks per thread of a parallel loop. Threads take chunks in order from a shared
#: counter, so a thread the OS preempts (this runs on shared machines) or wakes late does
#: not hold the whole loop back: the others take its remaining chunks, and the imbalance
#: at the end is at most one chunk (1/8 of a thread's share). The per-chunk ctypes call
#: (a few us) is negligible for any loop worth running in parallel.
CHUNKS_PER_THREAD = 8

_LOCK = threading.Lock()
_LOCAL = threading.local()
_state: dict[str, object] = {"pool": None, "threads": None, "workers": 0}
_bodies: dict[int, object] = {}


def _default_threads() -> int:
    env = os.environ.get("IRKERNEL_NUM_THREADS", "")
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"IRKERNEL_NUM_THREADS must be a positive integer, got {env!r}")
        return int(env)
    return os.cpu_count() or 1


def get_num_threads() -> int:
    """The number of threads parallel loops use."""
    with _LOCK:
        if _state["threads"] is None:
            _state["threads"] = _default_threads()
        return int(_state["threads"])  # type: ignore[call-overload]


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for parallel loops from now on (1 runs them serially).

    Cheap: the pool keeps its workers when ``n`` shrinks (a launch only submits
    ``n - 1`` tasks) and grows when ``n`` exceeds them, so switching back and
    forth (as a benchmark comparing thread counts does) never re-spawns threads.

    Raises
    ------
    ValueError
        When ``n`` is not a positive int.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads: n must be a positive int, got {n!r}")
    with _LOCK:
        _state["threads"] = n


def _pool(threads: int) -> ThreadPoolExecutor:
    """A pool with at least ``threads - 1`` workers (a smaller one is replaced)."""
    old = None
    with _LOCK:
        pool = _state["pool"]
        workers = int(_state["workers"])  # type: ignore[call-overload]
        if not isinstance(pool, ThreadPoolExecutor) or workers < threads - 1:
            old = pool
            pool = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="irkernel",
                                      initializer=_mark_worker)
            _state["pool"], _state["workers"] = pool, threads - 1
    if isinstance(old, ThreadPoolExecutor):
        old.shutdown(wait=False)  # its queued tasks still run; idle workers exit
    return pool


def _mark_worker() -> None:
    _LOCAL.worker = True


def _body(address: int) -> object:
    fn = _bodies.get(address)
    if fn is None:
        fn = _bodies[address] = BODY_TYPE(address)
    return fn


def chunks(n: int, k: int) -> list[tuple[int, int]]:
    """``[0, n)`` split into ``k`` contiguous ranges of nearly equal size."""
    base, extra = divmod(n, k)
    out, start = [], 0
    for i in range(k):
        stop = start + base + (1 if i < extra else 0)
        out.append((start, stop))
        start = stop
    return out


class _Loop:
    """One launch's chunks: taken in order by whoever runs :meth:`run`; done when all ran.

    The launching thread waits for the *chunks*, not for the workers: a worker the OS
    has not scheduled yet when the caller ran out of chunks finds none left when it
    starts and returns, and nobody waits for it (on a loaded machine that wait was a
    scheduler time slice, several ms, per launch). So a late worker never touches the
    closure (it lives on the kernel's stack, gone once the launch returns).
    """

    def __init__(self, body: object, closure: int, ranges: list[tuple[int, int]]) -> None:
        self.body, self.closure, self.ranges = body, closure, ranges
        self.taken = itertools.count()  # next() on it is atomic under the GIL
        self.left = len(ranges)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        for i in self.taken:
            if i >= len(self.ranges):
                return
            try:
                self.body(*self.ranges[i], self.closure)  # type: ignore[operator]
            except BaseException as exc:  # a ctypes failure: report it to the launcher
                self.error = exc
            finally:
                with self.lock:
                    self.left -= 1
                    if self.left == 0:
                        self.done.set()


def _launch(body_address: int, closure: int, n: int) -> None:
    try:
        if n <= 0:
            return
        body = _body(body_address)
        threads = get_num_threads()
        k = min(threads, n)
        if k <= 1 or getattr(_LOCAL, "worker", False):
            body(0, n, closure)  # type: ignore[operator]
            return
        loop = _Loop(body, closure, chunks(n, min(n, k * CHUNKS_PER_THREAD)))
        pool = _pool(threads)
        for _ in range(k - 1):
            pool.submit(loop.run)
        loop.run()
        loop.done.wait()
        if loop.error is not None:
            raise loop.error
    except BaseException as exc:
        _LOCAL.error = exc


def take_error() -> BaseException | None:
    """The exception a parallel launch on this thread hit since the last call (then cleared)."""
    exc = getattr(_LOCAL, "error", None)
    _LOCAL.error = None
    return exc


_LAUNCH = LAUNCH_TYPE(_launch)  # kept alive for the life of the process
LAUNCH_ADDRESS = ctypes.cast(_LAUNCH, ctypes.c_void_p).value
llvm.add_symbol(LAUNCH_SYMBOL, LAUNCH_ADDRESS)

__all__ = ["CHUNKS_PER_THREAD", "LAUNCH_ADDRESS", "chunks", "get_num_threads",
           "set_num_threads", "take_error"]
