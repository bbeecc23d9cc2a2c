"""Local worker processes: the start method, private pools, and the warm pool of ``"local"``.

``engine="local"`` borrows one process pool per interpreter, kept warm across
calls (:func:`lease`), as loky's reusable executor is: starting processes,
importing irkernel and loading the Numba kernels in each costs more than a
``map_modules`` of 8 modules of 4e5 nodes saves over serial on 2 cores
(0.93 s against 0.36 s when each call started its own pool). The pool is
made again when a call asks for another size (``max_workers``) or finds it
broken (a worker died); a pool that is replaced while another thread still
runs tasks on it is closed when that thread's engine closes. :func:`shutdown`
closes it (a later call starts a new one), and so does interpreter exit
(``atexit``). :func:`local_executor` makes a private pool its caller owns.

This warm pool is module-level state (the style rules allow only registries
and the context stack): it is the point of ``"local"`` that calls share it.
It is guarded by a lock, and its size and health are checked at every lease.
Alternatives considered: loky's reusable executor itself (a dependency for
one function, and its own process start-up rather than forkserver with our
worker set-up); a pool per call (the 0.39x of serial above).

Start method (:func:`start_method`): ``forkserver`` where the platform has
it, else ``spawn``; never ``fork``. A forked child inherits the parent's
memory but only the forking thread: Numba's threading layer, LLVM (llvmlite)
and the runtime's kernel thread pool may hold locks in other threads at that
moment, which the child would then wait on forever. A forkserver child is
forked from a fresh single-threaded server process, so it is safe and starts
faster than ``spawn``. A higher layer can ask every worker to run a function
when it starts (:func:`on_worker_start`; ``transform`` loads the registered
passes once), so that this package needs nothing above it.
Imports the standard library only.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import multiprocessing
import os
import threading
from collections.abc import Callable

#: Functions every local worker runs once when it starts (module-level, so they pickle by
#: name); append-only, filled by higher layers at import (``transform``: load the passes).
_WORKER_SETUP: list[Callable[[], None]] = []


def on_worker_start(fn: Callable[[], None]) -> None:
    """Have every local worker process started from now on call ``fn()`` once at its start.

    ``fn`` must be a module-level function (workers import it by name).
    """
    if not callable(fn):
        raise TypeError(f"on_worker_start: fn must be callable, got {type(fn).__name__}")
    if fn not in _WORKER_SETUP:
        _WORKER_SETUP.append(fn)


def _start_worker(setup: tuple[Callable[[], None], ...]) -> None:
    """Initializer of local worker processes."""
    for fn in setup:
        fn()


def start_method() -> str:
    """``"forkserver"`` where available, else ``"spawn"``; never ``"fork"`` (module notes)."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def check_workers(max_workers: object) -> int | None:
    """``max_workers`` of every engine: None or an int >= 1."""
    if max_workers is None:
        return None
    if isinstance(max_workers, bool) or not isinstance(max_workers, int):
        raise TypeError(f"max_workers must be an int or None, got {type(max_workers).__name__}")
    if max_workers < 1:
        raise ValueError(f"max_workers must be >= 1, got {max_workers}")
    return max_workers


def local_executor(max_workers: int | None = None) -> cf.ProcessPoolExecutor:
    """A private process pool with the Numba/LLVM-safe start method; the caller shuts it down.

    ``engine="local"`` already reuses one warm pool across calls; a private
    pool is for a caller that wants its own workers (their lifetime, their
    size) and passes it as ``engine=``.

    Parameters
    ----------
    max_workers : int, optional
        Number of processes (default: the CPU count).
    """
    workers = check_workers(max_workers)
    return cf.ProcessPoolExecutor(max_workers=workers,
                                  mp_context=multiprocessing.get_context(start_method()),
                                  initializer=_start_worker, initargs=(tuple(_WORKER_SETUP),))


# ---------------------------------------------------------------------------
# the warm pool of engine="local"
# ---------------------------------------------------------------------------


class WarmPool:
    """The shared pool and who uses it: engines lease it and give it back when they close."""

    __slots__ = ("executor", "retired", "users", "workers")

    def __init__(self, workers: int) -> None:
        self.executor = local_executor(workers)
        self.workers = workers
        self.users = 0
        self.retired = False  # replaced or shut down: closed when its last user leaves

    @property
    def broken(self) -> bool:
        # NOTE: ProcessPoolExecutor keeps no public "broken" flag; these two private ones
        # are set when a worker died (BrokenProcessPool) and after shutdown().
        ex = self.executor
        return bool(getattr(ex, "_broken", False) or getattr(ex, "_shutdown_thread", False))


_LOCK = threading.Lock()
_warm: WarmPool | None = None
_exit_hook_set = False


def lease(max_workers: int | None = None) -> WarmPool:
    """The warm pool with ``max_workers`` processes (default: the CPU count), one more user.

    Give it back with :func:`release`. A pool of another size, or a broken
    one, is retired and a new one started.
    """
    global _warm, _exit_hook_set
    workers = check_workers(max_workers) or os.cpu_count() or 1
    with _LOCK:
        if _warm is not None and (_warm.workers != workers or _warm.broken):
            _retire(_warm)
            _warm = None
        if _warm is None:
            _warm = WarmPool(workers)
            if not _exit_hook_set:
                atexit.register(shutdown)
                _exit_hook_set = True
        _warm.users += 1
        return _warm


def release(pool: WarmPool) -> None:
    """One user less; a retired pool closes when its last user leaves."""
    with _LOCK:
        pool.users -= 1
        close = pool.retired and pool.users == 0
    if close:
        pool.executor.shutdown(wait=True, cancel_futures=True)


def _retire(pool: WarmPool) -> None:
    """(Under the lock.) Take ``pool`` out of service; close it now if nobody uses it."""
    pool.retired = True
    if pool.users == 0:
        pool.executor.shutdown(wait=False, cancel_futures=True)


def shutdown() -> None:
    """Close the warm pool of ``engine="local"``; the next ``"local"`` call starts a new one.

    A pool still in use by another thread's engine is closed when that engine
    closes. Also called at interpreter exit.
    """
    global _warm
    with _LOCK:
        pool, _warm = _warm, None
        if pool is None:
            return
        pool.retired = True
        idle = pool.users == 0
    if idle:
        pool.executor.shutdown(wait=True, cancel_futures=True)


def warm_pool() -> cf.ProcessPoolExecutor | None:
    """The executor of the current warm pool, or None when none is running (for inspection)."""
    with _LOCK:
        return None if _warm is None else _warm.executor


__all__ = ["WarmPool", "check_workers", "lease", "local_executor", "on_worker_start", "release",
           "shutdown", "start_method", "warm_pool"]
