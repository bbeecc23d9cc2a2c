"""Ctrl-C within a second: long work runs where a signal can stop it.

CPython handles a signal on the main thread, between bytecodes. A Numba sweep over
millions of nodes, a NumPy call or an LLVM pipeline is one C call: a SIGINT that
arrives during it waits until it returns (seconds on a large graph), and a dispatcher
that returns after the handler ran inside it reports ``SystemError: ... returned a
result with an exception set`` instead of the ``KeyboardInterrupt``. Three tools:

* :func:`run_on_worker` runs a whole build on a daemon thread while the main thread
  waits on an event, which a signal interrupts at once: the ``KeyboardInterrupt``
  is raised on the main thread within milliseconds whatever the build is doing. The
  worker sees the same PassContext (a copy that shares its instruments and config)
  plus a :class:`StopCheck` instrument, so the abandoned build stops at its next pass
  boundary (:class:`Cancelled`) instead of running to the end behind the user's back.
  Every phase of ``runtime.build`` runs as passes, so this covers the graph passes,
  lowering, LLVM, linking and memory planning with no code in any of them.
* :class:`DaemonExecutor`: the build's LLVM thread. A ``ThreadPoolExecutor`` thread is
  joined at interpreter exit, so an interrupted build would still wait for the batch
  LLVM is compiling; a daemon thread is abandoned.
* :func:`call_kernel` and :func:`run_chunked`, for sweeps that run on the main thread
  (``plan_memory`` called directly): the sweep is split into index ranges with its
  state in arrays carried between calls, so the signal is handled between chunks, and
  a ``SystemError`` caused by a ``KeyboardInterrupt`` is raised as the interrupt.

Off the main thread (no signal can arrive there) :func:`run_on_worker` calls the work
directly.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, TypeVar

from irkernel import transform
from irkernel.instrument import PassInstrument

_T = TypeVar("_T")


class Cancelled(BaseException):
    """Raised on an abandoned worker at its next pass boundary (the caller has already
    raised KeyboardInterrupt); a BaseException so no ``except Exception`` keeps it going."""


class StopCheck(PassInstrument):
    """Raises :class:`Cancelled` before any pass once ``stop`` is set."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def run_before_pass(self, mod: Any, info: Any) -> None:
        if self.stop.is_set():
            raise Cancelled(f"build abandoned before {info.name} (interrupted)")


def reraise_interrupt(exc: BaseException) -> BaseException:
    """``exc``, or the KeyboardInterrupt that caused it when ``exc`` is the SystemError a
    C function (a Numba dispatcher) reports when it returned with the interrupt set."""
    if isinstance(exc, SystemError):
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, KeyboardInterrupt):
            return cause
    return exc


def call_kernel(kernel: Callable[..., _T], *args: Any) -> _T:
    """``kernel(*args)``; a KeyboardInterrupt that arrived during the call is raised as
    such, never as the dispatcher's SystemError."""
    try:
        return kernel(*args)
    except SystemError as exc:
        real = reraise_interrupt(exc)
        if real is exc:
            raise
        raise real from None


def run_chunked(kernel: Callable[..., Any], n: int, chunk: int, *args: Any) -> None:
    """``kernel(*args, start, stop)`` over ``[0, n)`` in ranges of ``chunk``.

    The kernel keeps its state in arrays among ``args`` (updated in place, carried from
    one range to the next), so the whole sweep equals one call over ``[0, n)``; between
    calls the interpreter handles a pending signal.
    """
    if chunk < 1:
        raise ValueError(f"run_chunked: chunk must be >= 1, got {chunk}")
    for start in range(0, n, chunk):
        call_kernel(kernel, *args, start, min(start + chunk, n))


class DaemonExecutor:
    """``submit(fn, *args) -> Future`` on one daemon thread, in order.

    ``shutdown()`` lets the thread finish the running call and drop the rest; it
    never waits (an interrupted build must not), and interpreter exit does not join it.
    """

    def __init__(self, name: str) -> None:
        self._queue: SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] \
            = SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        future: Future[_T] = Future()
        self._queue.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        self._queue.put(None)

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # NOTE: handed to the waiting caller, not lost
                future.set_exception(exc)

    def __enter__(self) -> DaemonExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


def _run_in_copy(ctx: transform.PassContext, stop: threading.Event,
                 work: Callable[[], _T]) -> tuple[_T, Any]:
    """``work()`` in a context with ``ctx``'s options and config, its instruments (not
    entered again: the caller's context entered them) and a :class:`StopCheck`; the
    result and the copy's statistics."""
    copy = ctx.derive()
    with copy:
        # NOTE: private on purpose, as in runtime.build.build_context: no enter/exit hooks.
        copy._set_instruments((*ctx.instruments, StopCheck(stop)))
        try:
            result = work()
        finally:
            copy._set_instruments(())
    return result, copy.statistics


#: Workers whose caller was interrupted and that may still be running.
_ABANDONED: list[threading.Thread] = []


def _exit_past_abandoned() -> None:
    """At interpreter exit, with an abandoned worker still inside a C call: Python 3.11
    ends a daemon thread that wakes during finalization with ``pthread_exit``, which
    aborts the process inside C++ frames (NumPy, Numba: "terminate called without an
    active exception"). When the exit is the uncaught KeyboardInterrupt's, die by
    SIGINT now, as CPython would after finalizing; otherwise wait for the worker, which
    stops at its next pass."""
    alive = [t for t in _ABANDONED if t.is_alive()]
    if not alive:
        return
    if isinstance(getattr(sys, "last_value", None), KeyboardInterrupt) and hasattr(os, "kill"):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # NOTE: a closed stream must not stop the exit
                stream.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    for thread in alive:
        thread.join()


atexit.register(_exit_past_abandoned)

#: How often the waiting main thread looks for a pending signal.
POLL_SECONDS = 0.02


def _signals_blocked(body: Callable[[], None]) -> Callable[[], None]:
    """``body`` with SIGINT blocked on its thread (and the threads it starts), so the
    kernel delivers the signal to the main thread, whose wait it interrupts."""
    def run() -> None:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        body()

    return run


def run_on_worker(work: Callable[[], _T]) -> _T:
    """``work()`` on a daemon thread under a copy of the current PassContext, the main
    thread waiting so that Ctrl-C raises KeyboardInterrupt at once (and stops the
    worker at its next pass). Pass statistics land in the current context as if the
    work had run here. Off the main thread, ``work()`` runs directly."""
    if threading.current_thread() is not threading.main_thread():
        return work()
    caller = transform.PassContext.current()
    stop = threading.Event()
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            outcome["result"], outcome["statistics"] = _run_in_copy(caller, stop, work)
        except BaseException as exc:  # NOTE: handed to the waiting caller, not lost
            outcome["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=_signals_blocked(body), name="irkernel-build",
                              daemon=True)
    worker.start()
    try:
        # Short waits: the wait returns to the interpreter, which handles a signal even
        # when the kernel delivered it to another thread and the wait was not woken.
        while not done.wait(POLL_SECONDS):
            pass
    except BaseException:  # KeyboardInterrupt or a handler's exception: abandon the work
        stop.set()
        _ABANDONED.append(worker)
        raise
    if "error" in outcome:
        raise outcome.pop("error")
    caller.merge_statistics(outcome["statistics"])
    return outcome["result"]  # type: ignore[no-any-return]


__all__ = ["Cancelled", "DaemonExecutor", "StopCheck", "call_kernel", "reraise_interrupt",
           "run_chunked", "run_on_worker"]
