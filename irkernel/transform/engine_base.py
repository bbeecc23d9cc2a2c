"""The engine interface and what runs on a worker: errors, packing, ``call_task``, ``Engine``.

:class:`Engine` submits picklable tasks ``fn(*args)`` and yields their
results in task order with a bounded window of tasks in flight; subclasses
(``irkernel.transform.engines``) say how to submit, wait and cancel. Every
task runs inside :func:`call_task`, which catches the task's exception on the
worker with its traceback text. Tasks and results cross process boundaries
packed (:func:`pack`: pickle protocol 5, buffers out of band as uint8
arrays; through ``/dev/shm`` files for local pools, see ``shared_files``), so
that a value that fails to pickle or to load (a Function that does not
validate) is that task's :class:`TaskError` instead of a broken pool.
Imports the standard library, NumPy and ``shared_files``.
"""

from __future__ import annotations

import collections
import os
import pickle
import socket
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import BrokenExecutor
from typing import Any

import numpy as np

from irkernel.transform.shared_files import Shared, write_shared

#: Class names of the errors that mean "the worker died" (Dask, Ray), matched by name
#: because those packages are optional.
LOST_NAMES = frozenset({"KilledWorker", "WorkerCrashedError", "NodeDiedError",
                        "LocalRayletDiedError", "WorkerDiedError"})

# errors
# ---------------------------------------------------------------------------


class TaskError(RuntimeError):
    """A task failed; ``raise`` of it names the task and carries the worker's traceback.

    Attributes
    ----------
    label : str
        What failed, e.g. ``"task 3"`` or ``"module 3"``.
    index : int
        The task's (or module's) position in the input.
    exception : BaseException
        The exception raised on the worker (also ``__cause__``); a
        :class:`RemoteError` stands in for one that could not be pickled back.
    traceback : str
        The worker's formatted traceback ("" when the worker died).
    worker : str
        ``host:pid`` of the worker process (or the engine's name for a lost one).
    """

    def __init__(self, label: str, index: int, exception: BaseException, traceback: str = "",
                 worker: str = "") -> None:
        where = f" on {worker}" if worker else ""
        message = f"{label} failed{where}: {type(exception).__name__}: {exception}"
        if traceback:
            message += f"\n\nworker traceback:\n{traceback.rstrip()}"
        super().__init__(message)
        self.label = label
        self.index = index
        self.exception = exception
        self.traceback = traceback
        self.worker = worker
        self.__cause__ = exception

    def relabel(self, label: str, index: int) -> TaskError:
        """The same failure, named for the caller (a module index instead of a chunk's)."""
        return type(self)(label, index, self.exception, self.traceback, self.worker)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), (self.label, self.index, self.exception, self.traceback, self.worker))


class WorkerLostError(TaskError):
    """The worker running the task died (killed, out of memory, crashed) or the pool broke."""


class RemoteError(RuntimeError):
    """Stands in for a worker's exception that cannot be pickled; keeps its type name and text."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (RemoteError, (self.type_name, str(self).split(": ", 1)[-1]))


# ---------------------------------------------------------------------------
# what runs on the worker
# ---------------------------------------------------------------------------


def worker_name() -> str:
    """``host:pid`` of this process (names the worker in errors)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives a pickle round trip, else a :class:`RemoteError` naming it."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # NOTE: any failure to round-trip (a custom __init__, a lock inside)
        return RemoteError(type(exc).__name__, str(exc))
    return exc


class Packed:
    """A value pickled with protocol 5: a small header and its buffers as uint8 arrays.

    Tasks and results travel packed (:func:`pack`), so that loading them
    (which validates Functions) happens inside :func:`call_task` on the
    worker and inside :meth:`Engine.imap` on the caller, where a failure is
    that task's error. Left to the engine, a failed load kills a process
    pool's worker or its result thread and breaks the pool. The buffers stay
    out of band when the engine pickles with protocol 5 (Dask, Ray); a
    process pool copies them into its stream (protocol 4), as it would the
    unpacked value.
    """

    __slots__ = ("buffers", "header")

    def __init__(self, header: bytes, buffers: list[Any]) -> None:
        self.header, self.buffers = header, buffers

    @property
    def nbytes(self) -> int:
        """Bytes of the header and the buffers (what travels)."""
        return len(self.header) + sum(b.nbytes for b in self.buffers)


def pack(value: Any) -> Packed:
    """``value`` pickled with protocol 5, its buffers out of band (no copy)."""
    raw: list[pickle.PickleBuffer] = []
    header = pickle.dumps(value, protocol=5, buffer_callback=raw.append)
    return Packed(header, [np.frombuffer(b.raw(), np.uint8) for b in raw])


def unpack(packed: Packed | Shared) -> Any:
    """The value of :func:`pack` (its arrays wrap the buffers, also when shared)."""
    if isinstance(packed, Shared):
        return pickle.loads(packed.header, buffers=packed.buffers())
    return pickle.loads(packed.header, buffers=packed.buffers)


def _reply(value: Any, payload: Any) -> Packed | Shared:
    """The packed result; in a file beside the task's when the task came in one."""
    packed = pack(value)
    if isinstance(payload, Shared):
        shared = write_shared(packed.header, packed.buffers, payload.path + ".out")
        if shared is not None:
            return shared
    return packed


def call_task(payload: Any, remote: bool) -> tuple[bool, Any]:
    """Run a task on the worker: ``(True, result)`` or ``(False, (exc, tb, worker))``.

    ``payload`` is ``(fn, args)``, packed when ``remote`` (and the result is
    packed back, shared through ``/dev/shm`` when the task was, see
    :mod:`~irkernel.transform.shared_files`). Exceptions are caught here so
    that every engine reports them the same way, with the worker's traceback
    text; ``remote`` makes them picklable.
    """
    try:
        fn, args = unpack(payload) if remote else payload
        value = fn(*args)
        return True, (_reply(value, payload) if remote else value)
    except Exception as exc:  # NOTE: the task's failure is data for the caller
        text = traceback.format_exc()
        return False, (portable(exc) if remote else exc, text, worker_name())


# the interface
# ---------------------------------------------------------------------------


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
        At most this many tasks are submitted and not yet collected.
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

    def _cancel(self, handles: Sequence[Any]) -> None:
        del handles

    def _lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` (raised while collecting a result) means the worker died."""
        return isinstance(exc, BrokenExecutor) or type(exc).__name__ in LOST_NAMES

    def close(self) -> None:
        """Release what the engine created (pools, clients); never what the user passed."""

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

    def _send(self, fn: Callable[..., Any], args: tuple[Any, ...], index: int,
              label: str) -> Any:
        payload = self._payload(fn, args, index, label)
        if isinstance(payload, TaskError):
            return payload
        return self._submit(call_task, payload, not self.in_process)

    def _payload(self, fn: Callable[..., Any], args: tuple[Any, ...], index: int,
                 label: str) -> Any:
        """What :func:`call_task` receives: ``(fn, args)``, packed for another process."""
        if self.in_process:
            return (fn, args)
        try:
            payload: Packed | Shared = pack((fn, args))
        except Exception as exc:  # NOTE: a task that cannot be pickled fails alone
            return TaskError(f"{label} {index}", index, exc, traceback.format_exc(),
                             "the caller (pickling the task)")
        if self._ram_dir is not None:
            self._sent += 1
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


def check_on_error(on_error: object) -> None:
    if on_error not in ("raise", "return"):
        raise ValueError(f"on_error must be 'raise' or 'return', got {on_error!r}")


__all__ = ["LOST_NAMES", "Engine", "Packed", "RemoteError", "TaskError", "WorkerLostError",
           "call_task", "check_on_error", "pack", "portable", "unpack", "worker_name"]
