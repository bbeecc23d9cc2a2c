"""Engines: where independent tasks run, behind one small interface.

``open_engine(engine, max_workers)`` turns what a user passes as ``engine=``
into an :class:`Engine`:

============================  ==============================================  =========
``engine``                    runs tasks on                                   pickles
============================  ==============================================  =========
``"serial"``                  the calling thread, one after the other         no
``"thread"``                  a ``ThreadPoolExecutor`` (Numba kernels release  no
                              the GIL)
``"local"``                   a ``ProcessPoolExecutor`` (:func:`local_executor`) yes
any ``concurrent.futures``    that executor (not shut down here)              yes [1]
``Executor``
a ``dask.distributed.Client``  the Dask cluster                                yes
``"tcp://host:8786"``         a Client to that scheduler (closed at the end)  yes
the ``ray`` module            Ray tasks (after ``ray.init()``)                yes
============================  ==============================================  =========

[1] except a ``ThreadPoolExecutor``, which runs in process.

:meth:`Engine.imap` submits picklable tasks ``fn(*args)`` (``fn`` a
module-level function) and yields their results *in task order*, keeping at
most ``window`` tasks in flight (so a million tasks do not all sit pickled in
memory at once); :meth:`Engine.run` collects them in a list. Every task runs
inside :func:`call_task`, which catches the task's exception on the worker
and sends it back with the worker's traceback text; the caller receives a
:class:`TaskError` (``index``, ``exception``, ``traceback``, ``worker``).
Tasks and results cross process boundaries packed (:func:`pack`: pickle
protocol 5, buffers out of band as uint8 arrays), so that a value that fails to
pickle or to load (a Function that does not validate) is that task's
TaskError instead of a broken pool.
When the worker itself dies (killed, out of memory, segfault) the engine's
own error (``BrokenProcessPool``, Dask's ``KilledWorker``, Ray's
``WorkerCrashedError``) becomes a :class:`WorkerLostError`, a TaskError: the
caller gets an error, never a hang. Dask and Ray retry a task whose worker
died before they give up (Dask's ``distributed.scheduler.allowed-failures``,
Ray's ``max_retries``); a process pool cannot, and every task still pending
in a broken pool fails with WorkerLostError.

Start method of local processes (:func:`start_method`): ``forkserver`` where
the platform has it, else ``spawn``; never ``fork``. A forked child inherits
the parent's memory but only the forking thread: Numba's threading layer,
LLVM (llvmlite) and the runtime's kernel thread pool may hold locks in other
threads at that moment, which the child would then wait on forever. A
forkserver child is forked from a fresh single-threaded server process, so
it is safe and starts faster than ``spawn``. Each worker loads the
registered passes once when it starts (:func:`warm_worker`).

Dask and Ray are imported lazily, only when a Client address string or a
Ray handle is given (a Client object means its user imported Dask already):
the core imports without them. Install the extra with ``pip install
'irkernel[dask]'``.

Alternatives considered: a home-made scheduler over ``multiprocessing``
(retries, worker death detection and remote machines are what Dask already
does well); ``Executor.map`` (no per-task error capture, no bounded window
for Dask). Imports the standard library only (Dask and Ray lazily).
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import collections
import concurrent.futures as cf
import multiprocessing
import os
import pickle
import socket
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from irkernel.transform.registry import discover
from irkernel.transform.shared_files import (
    Shared,
    ram_directory,
    remove_directory,
    write_shared,
)

#: The engine names ``open_engine`` accepts as strings (besides scheduler addresses).
ENGINE_NAMES = ("serial", "thread", "local")
_SCHEDULER_SCHEMES = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")
_LOST_NAMES = frozenset({"KilledWorker", "WorkerCrashedError", "NodeDiedError",
                         "LocalRayletDiedError", "WorkerDiedError"})


# ---------------------------------------------------------------------------
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


def warm_worker() -> None:
    """Initializer of local worker processes: load the registered passes once."""
    discover()


# ---------------------------------------------------------------------------
# local processes
# ---------------------------------------------------------------------------


def start_method() -> str:
    """``"forkserver"`` where available, else ``"spawn"``; never ``"fork"`` (module notes)."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def local_executor(max_workers: int | None = None) -> cf.ProcessPoolExecutor:
    """A process pool with the Numba/LLVM-safe start method whose workers load the passes.

    Keep one and pass it as ``engine=`` to reuse warm workers across calls
    (``engine="local"`` starts and stops a pool per call).

    Parameters
    ----------
    max_workers : int, optional
        Number of processes (default: the CPU count).
    """
    workers = _check_workers(max_workers)
    return cf.ProcessPoolExecutor(max_workers=workers,
                                  mp_context=multiprocessing.get_context(start_method()),
                                  initializer=warm_worker)


def _check_workers(max_workers: object) -> int | None:
    if max_workers is None:
        return None
    if isinstance(max_workers, bool) or not isinstance(max_workers, int):
        raise TypeError(f"max_workers must be an int or None, got {type(max_workers).__name__}")
    if max_workers < 1:
        raise ValueError(f"max_workers must be >= 1, got {max_workers}")
    return max_workers


# ---------------------------------------------------------------------------
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
        return isinstance(exc, cf.BrokenExecutor) or type(exc).__name__ in _LOST_NAMES

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
        if self.in_process:
            return self._submit(call_task, (fn, args), False)
        try:
            payload: Packed | Shared = pack((fn, args))
        except Exception as exc:  # NOTE: a task that cannot be pickled fails alone
            return TaskError(f"{label} {index}", index, exc, traceback.format_exc(),
                             "the caller (pickling the task)")
        if self._ram_dir is not None:
            self._sent += 1
            path = os.path.join(self._ram_dir, f"task{self._sent}")
            payload = write_shared(payload.header, payload.buffers, path) or payload
        return self._submit(call_task, payload, True)

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


class _Deferred:
    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args


class SerialEngine(Engine):
    """Runs each task in the calling thread when its result is collected."""

    name = "serial"
    in_process = True

    def __init__(self) -> None:
        super().__init__(1, window=1)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return _Deferred(fn, args)

    def _result(self, handle: Any) -> Any:
        return handle.fn(*handle.args)


class ExecutorEngine(Engine):
    """A ``concurrent.futures.Executor``: threads, local processes or the user's own."""

    def __init__(self, executor: cf.Executor, name: str, owned: bool,
                 max_workers: int | None) -> None:
        workers = max_workers or getattr(executor, "_max_workers", None) or os.cpu_count() or 1
        super().__init__(workers)
        self.executor = executor
        self.name = name
        self.in_process = isinstance(executor, cf.ThreadPoolExecutor)
        self._owned = owned
        if isinstance(executor, cf.ProcessPoolExecutor):
            self._ram_dir = ram_directory()

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.executor.submit(fn, *args)

    def _result(self, handle: Any) -> Any:
        return handle.result()

    def _cancel(self, handles: Sequence[Any]) -> None:
        for future in handles:
            future.cancel()

    def close(self) -> None:
        if self._owned:
            self.executor.shutdown(wait=True, cancel_futures=True)
        if self._ram_dir is not None:
            remove_directory(self._ram_dir)
            self._ram_dir = None


class DaskEngine(Engine):
    """A ``dask.distributed.Client``; tasks are submitted with ``pure=False``.

    Task arguments travel with the task: Dask pickles them with protocol 5
    and sends NumPy buffers as separate frames, without copies on either end.
    """

    name = "dask"

    def __init__(self, client: Any, owned: bool, max_workers: int | None) -> None:
        if max_workers is None:
            info = client.scheduler_info()
            max_workers = sum(int(w.get("nthreads", 1)) for w in info["workers"].values()) or 1
        super().__init__(max_workers)
        self.client = client
        self._owned = owned

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def _result(self, handle: Any) -> Any:
        return handle.result()

    def _cancel(self, handles: Sequence[Any]) -> None:
        self.client.cancel(list(handles))

    def close(self) -> None:
        if self._owned:
            self.client.close()


class RayEngine(Engine):
    """Ray tasks through the ``ray`` module (``ray.init()`` already called)."""

    name = "ray"

    def __init__(self, ray: Any, max_workers: int | None) -> None:
        if not ray.is_initialized():
            raise ValueError("engine=ray: call ray.init() first")
        workers = max_workers or int(ray.available_resources().get("CPU", 1)) or 1
        super().__init__(workers)
        self.ray = ray
        self._remote = ray.remote(call_task)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._remote.remote(fn, *args)

    def _result(self, handle: Any) -> Any:
        return self.ray.get(handle)

    def _cancel(self, handles: Sequence[Any]) -> None:
        for ref in handles:
            self.ray.cancel(ref)


# ---------------------------------------------------------------------------
# resolving engine=
# ---------------------------------------------------------------------------


def open_engine(engine: Any = "local", max_workers: int | None = None) -> Engine:
    """The :class:`Engine` for ``engine=`` (see the module docstring); use it in ``with``.

    Parameters
    ----------
    engine : str, Executor, dask Client or the ray module
        ``"serial"``, ``"thread"``, ``"local"``, a scheduler address
        (``"tcp://host:8786"``), a ``concurrent.futures.Executor``, a
        ``dask.distributed.Client`` or ``ray``.
    max_workers : int, optional
        Size of the pool ``"thread"``/``"local"`` start (default: the CPU
        count); for an existing executor, client or Ray, the number of tasks
        kept in flight is twice this (default: their worker count).

    Raises
    ------
    ValueError
        For an unknown engine name (listing the known ones), a bad ``max_workers``.
    TypeError
        For an object that is none of the above.
    ImportError
        For a scheduler address when Dask is not installed (naming the extra).
    """
    workers = _check_workers(max_workers)
    if isinstance(engine, str):
        return _named_engine(engine, workers)
    if isinstance(engine, cf.Executor):
        name = "thread" if isinstance(engine, cf.ThreadPoolExecutor) else "executor"
        return ExecutorEngine(engine, name, owned=False, max_workers=workers)
    distributed = sys.modules.get("distributed")
    if distributed is not None and isinstance(engine, distributed.Client):
        return DaskEngine(engine, owned=False, max_workers=workers)
    if getattr(engine, "__name__", None) == "ray" and hasattr(engine, "remote"):
        return RayEngine(engine, workers)
    raise TypeError(f"engine must be one of {', '.join(map(repr, ENGINE_NAMES))}, a scheduler "
                    f"address, a concurrent.futures.Executor, a dask.distributed.Client or the "
                    f"ray module; got {type(engine).__name__}")


def _named_engine(engine: str, workers: int | None) -> Engine:
    if engine == "serial":
        return SerialEngine()
    if engine == "thread":
        pool = cf.ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1,
                                     thread_name_prefix="irkernel-engine")
        return ExecutorEngine(pool, "thread", owned=True, max_workers=workers)
    if engine == "local":
        return ExecutorEngine(local_executor(workers), "local", owned=True, max_workers=workers)
    if engine.startswith(_SCHEDULER_SCHEMES):
        try:
            import distributed  # optional dependency, loaded on demand
        except ImportError as exc:
            raise ImportError(f"engine {engine!r} needs Dask: pip install 'irkernel[dask]'"
                              ) from exc
        client = distributed.Client(engine)
        return DaskEngine(client, owned=True, max_workers=workers)
    raise ValueError(f"unknown engine {engine!r}; use one of "
                     f"{', '.join(map(repr, ENGINE_NAMES))}, a scheduler address "
                     f"('tcp://host:8786'), an Executor, a dask Client or ray")


__all__ = ["ENGINE_NAMES", "Engine", "RemoteError", "TaskError", "WorkerLostError",
           "call_task", "local_executor", "open_engine", "start_method"]
