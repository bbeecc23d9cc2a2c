"""The thread pool that runs parallel loops: ``irkernel_parallel_launch`` for compiled code.

Compiled kernels call ``irkernel_parallel_launch(body, closure, n)`` (a
ctypes callback whose address is registered with LLVM's symbol table, so
objects, cached or fresh, link to it when loaded). The launcher splits
``[0, n)`` into one contiguous chunk per thread, runs the first chunk on the
calling thread and the others on a ``concurrent.futures`` pool; each chunk is
a ctypes call of the outlined body, which releases the GIL, so the chunks run
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
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import llvmlite.binding as llvm

from .lower import LAUNCH_SYMBOL

BODY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
LAUNCH_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)

_LOCK = threading.Lock()
_LOCAL = threading.local()
_state: dict[str, object] = {"pool": None, "threads": None}
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

    Raises
    ------
    ValueError
        When ``n`` is not a positive int.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads: n must be a positive int, got {n!r}")
    with _LOCK:
        old = _state["pool"]
        _state["threads"] = n
        _state["pool"] = None
    if isinstance(old, ThreadPoolExecutor):
        old.shutdown(wait=True)


def _pool(threads: int) -> ThreadPoolExecutor:
    with _LOCK:
        pool = _state["pool"]
        if not isinstance(pool, ThreadPoolExecutor):
            pool = ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="irkernel",
                                      initializer=_mark_worker)
            _state["pool"] = pool
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


def _launch(body_address: int, closure: int, n: int) -> None:
    try:
        body = _body(body_address)
        threads = get_num_threads()
        k = min(threads, n)
        if n <= 0:
            return
        if k <= 1 or getattr(_LOCAL, "worker", False):
            body(0, n, closure)  # type: ignore[operator]
            return
        ranges = chunks(n, k)
        pool = _pool(threads)
        futures: list[Future[None]] = [pool.submit(body, b, e, closure)  # type: ignore[arg-type]
                                       for b, e in ranges[1:]]
        body(*ranges[0], closure)  # type: ignore[operator]
        for f in futures:
            f.result()
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

__all__ = ["LAUNCH_ADDRESS", "chunks", "get_num_threads", "set_num_threads", "take_error"]
