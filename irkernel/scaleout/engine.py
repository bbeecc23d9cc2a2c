"""The engine interface: :class:`Engine` runs picklable tasks somewhere, one way for every caller.

:meth:`Engine.imap` submits tasks ``fn(*args)`` and yields their results in
task order with a bounded window of tasks in flight (``map_modules``);
:meth:`Engine.submit` sends one task and returns a :class:`TaskFuture`, for a
caller that keeps its own queue (``runtime.build``'s kernel compiler, which
lowers the next batch while workers compile the last). Both report a failed
task the same way: a :class:`TaskError` with the worker's traceback, a
:class:`WorkerLostError` when the worker died. Subclasses (``engines``) say
how to submit, wait and cancel. Every task runs inside :func:`call_task`.

Alternatives considered: a home-made scheduler over ``multiprocessing``
(retries, worker death detection and remote machines are what Dask already
does well); ``Executor.map`` (no per-task error capture, no bounded window
for Dask). Imports the standard library, ``errors``, ``task`` and
``shared_files``.
"""

from __future__ import annotations

# pyright: reportPrivateUsage=false
# (TaskFuture collects through its engine's _collect/_done/_cancel: one class's parts)
import collections
import os
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import BrokenExecutor
from typing import Any

from irkernel.scaleout.errors import LOST_NAMES, TaskError, WorkerLostError, check_on_error
from irkernel.scaleout.shared_files import Shared, write_shared
from irkernel.scaleout.task import Packed, call_task, pack, unpack


class Engine:
    """Runs picklable tasks somewhere and returns their results in order.

    Attributes
    ----------
    name : str
        ``"serial"``, ``"thread"``, ``"local"``, ``"executor"``, ``"dask"`` or ``"ray"``.
    workers : int
        How many tasks can run at once (a hint for chunking).
    in_process : bool
        Tasks run in this process and see the caller's objects (no pickling).
    window : int
        At most this many tasks are submitted and not yet collected by :meth:`imap`.
    """

    name = "engine"
    in_process = False

    def __init__(self, workers: int, window: int | None = None) -> None:
        self.workers = max(1, int(workers))
        self.window = window if window is not None else max(2 * self.workers, 2)
        self._ram_dir: str | None = None  # set by engines whose workers share this machine
        self._sent = 0

    # -- what each engine provides ---------------------------------------------
    def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        raise NotImplementedError

    def _result(self, handle: Any) -> Any:
        raise NotImplementedError

    def _done(self, handle: Any) -> bool:
        """Whether collecting ``handle`` would not wait (a future's ``done()``)."""
        return bool(handle.done())

    def _cancel(self, handles: Sequence[Any]) -> None:
        del handles

    def _lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` (raised while collecting a result) means the worker died."""
        return isinstance(exc, BrokenExecutor) or type(exc).__name__ in LOST_NAMES

    def close(self) -> None:
        """Release what the engine holds (pools, clients); never what the user passed."""

    # -- the interface ------------------------------------------------------------
    def imap(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]],
             label: str = "task") -> Iterator[Any]:
        """Run ``fn(*args)`` for every ``args`` in ``tasks``; yield results in task order.

        A failed task yields a :class:`TaskError` (a :class:`WorkerLostError`
        when its worker died) in its place; nothing is raised for it. Closing
        the iterator early cancels the tasks not yet started.
        """
        pending: collections.deque[Any] = collections.deque()
        submitted = 0
        try:
            for index in range(len(tasks)):
                while submitted < len(tasks) and submitted - index < self.window:
                    pending.append(self._send(fn, tasks[submitted], submitted, label))
                    submitted += 1
                yield self._collect(pending.popleft(), index, label)
        finally:
            live = [h for h in pending if not isinstance(h, TaskError)]
            if live:
                self._cancel(live)

    def run(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], *,
            on_error: str = "raise", label: str = "task") -> list[Any]:
        """The results of :meth:`imap` as a list.

        ``on_error="raise"`` raises the first :class:`TaskError` (in task order)
        and cancels the rest; ``"return"`` leaves it in the task's slot.
        """
        check_on_error(on_error)
        out = []
        results = self.imap(fn, tasks, label)
        try:
            for value in results:
                if on_error == "raise" and isinstance(value, TaskError):
                    raise value
                out.append(value)
        finally:
            results.close()
        return out

    def submit(self, fn: Callable[..., Any], *args: Any) -> TaskFuture:
        """Send one task ``fn(*args)`` now; its :class:`TaskFuture` holds the outcome.

        The task is numbered in the order of ``submit`` calls on this engine
        (``task <i>`` in errors). No window applies: the caller decides how
        many futures it keeps.
        """
        index = self._sent
        return TaskFuture(self, self._send(fn, args, index, "task"), index, "task")

    def _send(self, fn: Callable[..., Any], args: tuple[Any, ...], index: int,
              label: str) -> Any:
        payload = self._payload(fn, args, index, label)
        if isinstance(payload, TaskError):
            return payload
        return self._submit(call_task, payload, not self.in_process)

    def _payload(self, fn: Callable[..., Any], args: tuple[Any, ...], index: int,
                 label: str) -> Any:
        """What :func:`call_task` receives: ``(fn, args)``, packed for another process."""
        self._sent += 1
        if self.in_process:
            return (fn, args)
        try:
            payload: Packed | Shared = pack((fn, args))
        except Exception as exc:  # NOTE: a task that cannot be pickled fails alone
            return TaskError(f"{label} {index}", index, exc, traceback.format_exc(),
                             "the caller (pickling the task)")
        if self._ram_dir is not None:
            path = os.path.join(self._ram_dir, f"task{self._sent}")
            payload = write_shared(payload.header, payload.buffers, path) or payload
        return payload

    def _collect(self, handle: Any, index: int, label: str) -> Any:
        what = f"{label} {index}"
        if isinstance(handle, TaskError):
            return handle
        try:
            ok, payload = self._result(handle)
        except Exception as exc:  # NOTE: the engine's own failure, classified below
            if self._lost(exc):
                return WorkerLostError(what, index, exc, "", self.name)
            return TaskError(what, index, exc, "", self.name)
        if not ok:
            exc, text, worker = payload
            return TaskError(what, index, exc, text, worker)
        if self.in_process:
            return payload
        try:
            return unpack(payload)
        except Exception as exc:  # NOTE: e.g. a returned Function that does not validate
            return TaskError(what, index, exc, traceback.format_exc(),
                             "the caller (loading the result)")

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Engine {self.name}: {self.workers} workers>"


class TaskFuture:
    """One task of :meth:`Engine.submit`: ``done()``, ``result()``, ``cancel()``.

    ``result()`` returns the task's value or raises its :class:`TaskError`
    (a :class:`WorkerLostError` when the worker died), the errors
    :meth:`Engine.run` raises; it collects once and remembers the outcome.
    """

    __slots__ = ("_engine", "_handle", "_outcome", "index", "label")

    def __init__(self, engine: Engine, handle: Any, index: int, label: str) -> None:
        self._engine, self._handle = engine, handle
        self.index, self.label = index, label
        self._outcome: tuple[Any] | None = None

    def done(self) -> bool:
        if self._outcome is not None or isinstance(self._handle, TaskError):
            return True
        return self._engine._done(self._handle)

    def result(self) -> Any:
        if self._outcome is None:
            self._outcome = (self._engine._collect(self._handle, self.index, self.label),)
        value = self._outcome[0]
        if isinstance(value, TaskError):
            raise value
        return value

    def cancel(self) -> bool:
        """Cancel the task if it has not started (best effort, as the engine allows); False
        once its outcome was collected."""
        if self._outcome is None and not isinstance(self._handle, TaskError):
            self._engine._cancel([self._handle])
        return self._outcome is None

    def __repr__(self) -> str:
        return f"<TaskFuture {self.label} {self.index} on {self._engine.name}>"


__all__ = ["Engine", "TaskFuture"]
