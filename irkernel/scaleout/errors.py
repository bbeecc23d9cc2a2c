"""What a caller gets when a task fails: :class:`TaskError`, :class:`WorkerLostError`,
:class:`RemoteError`, and the helpers that make a worker's exception travel back.

Every engine reports failures with these types, whatever runs the task
(threads, local processes, Dask, Ray) and whoever asked (``map_modules``,
``runtime.build``). Imports the standard library only.
"""

from __future__ import annotations

import os
import pickle
import socket
from typing import Any

#: Class names of the errors that mean "the worker died" (Dask, Ray), matched by name
#: because those packages are optional.
LOST_NAMES = frozenset({"KilledWorker", "WorkerCrashedError", "NodeDiedError",
                        "LocalRayletDiedError", "WorkerDiedError"})


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


def check_on_error(on_error: object) -> None:
    """``on_error`` of ``run``/``map_modules``: ``"raise"`` or ``"return"``."""
    if on_error not in ("raise", "return"):
        raise ValueError(f"on_error must be 'raise' or 'return', got {on_error!r}")


__all__ = ["LOST_NAMES", "RemoteError", "TaskError", "WorkerLostError", "check_on_error",
           "portable", "worker_name"]
