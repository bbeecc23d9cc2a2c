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
Tasks and results cross process boundaries packed (protocol 5, buffers out
of band; see ``engine_base``, which holds the interface and what runs on the
worker). A local pool moves the buffers through ``/dev/shm`` files instead of
its pipes (``shared_files``). A Dask engine keeps up to ``window`` tasks in
flight and fetches finished results in batches (``client.gather``): one
blocking ``Future.result()`` per task costs a round trip each.
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

Dask is imported only when a scheduler address is given (a Client object,
like the ``ray`` module, means its user imported the package already): the
core imports without either. Install ``irkernel[dask]`` or ``irkernel[ray]``.

For other batch jobs (the distributed build): ``with open_engine(engine,
max_workers) as eng: objects = eng.run(compile_batch, [(ir_text,), ...],
label="batch")`` with ``compile_batch`` a module-level function of its
arguments (IR text in, object bytes out).

Alternatives considered: a home-made scheduler over ``multiprocessing``
(retries, worker death detection and remote machines are what Dask already
does well); ``Executor.map`` (no per-task error capture, no bounded window
for Dask). Imports ``engine_base``, ``shared_files``, the registry and the
standard library (Dask lazily).
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import concurrent.futures as cf
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from irkernel.transform.engine_base import (
    Engine,
    RemoteError,
    TaskError,
    WorkerLostError,
    call_task,
    check_on_error,
)
from irkernel.transform.registry import discover
from irkernel.transform.shared_files import ram_directory, remove_directory

#: The engine names ``open_engine`` accepts as strings (besides scheduler addresses).
ENGINE_NAMES = ("serial", "thread", "local")
_SCHEDULER_SCHEMES = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")

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


class _Done:
    """A Dask future's outcome, fetched by ``as_completed`` (value or the exception)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _future_error(future: Any) -> BaseException:
    try:
        return future.exception()
    except BaseException as exc:  # NOTE: a cancelled future raises CancelledError here
        return exc


class DaskEngine(Engine):
    """A ``dask.distributed.Client``; tasks are submitted with ``pure=False``.

    Task arguments travel with the task: Dask pickles them with protocol 5
    and sends NumPy buffers as separate frames, without copies on either end.
    When the next result in task order is needed, every finished future is
    fetched in one ``client.gather`` (one round trip per worker, not per task).
    """

    name = "dask"

    def __init__(self, client: Any, owned: bool, max_workers: int | None) -> None:
        if max_workers is None:
            info = client.scheduler_info()
            max_workers = sum(int(w.get("nthreads", 1)) for w in info["workers"].values()) or 1
        super().__init__(max_workers)
        self.client = client
        self._owned = owned

    def imap(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]],
             label: str = "task") -> Iterator[Any]:
        distributed = sys.modules["distributed"]  # imported: a Client exists
        waiting: dict[int, Any] = {}  # task index -> future
        ready: dict[int, Any] = {}
        submitted = 0
        try:
            for index in range(len(tasks)):
                batch: dict[int, Any] = {}
                while submitted < len(tasks) and submitted - index < self.window:
                    payload = self._payload(fn, tasks[submitted], submitted, label)
                    if isinstance(payload, TaskError):
                        ready[submitted] = payload
                    else:
                        batch[submitted] = payload
                    submitted += 1
                if batch:  # one client.map: a graph message per batch, not per task
                    futures = self.client.map(call_task, list(batch.values()),
                                              [True] * len(batch), pure=False)
                    waiting.update(zip(batch, futures, strict=True))
                if index not in ready:
                    distributed.wait([waiting[index]])
                    self._fetch_done(waiting, ready)
                yield self._collect(ready.pop(index), index, label)
        finally:
            if waiting:
                self._cancel(list(waiting.values()))

    def _fetch_done(self, waiting: dict[int, Any], ready: dict[int, Any]) -> None:
        """Move every finished future to ``ready``, fetching the results in one gather."""
        done = [i for i, future in waiting.items() if future.done()]
        good = [i for i in done if waiting[i].status == "finished"]
        for i, value in zip(good, self.client.gather([waiting[i] for i in good]), strict=True):
            ready[i] = _Done(value)
        for i in done:
            future = waiting.pop(i)
            if i not in ready:  # an error (e.g. KilledWorker) or a cancellation
                ready[i] = _Done(_future_error(future))

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def _result(self, handle: Any) -> Any:
        if isinstance(handle, _Done):
            if isinstance(handle.value, BaseException):
                raise handle.value
            return handle.value
        return handle.result()

    def _cancel(self, handles: Sequence[Any]) -> None:
        self.client.cancel(list(handles))

    def close(self) -> None:
        if self._owned:
            self.client.close()


class RayEngine(Engine):
    """Ray tasks through the ``ray`` module (``ray.init()`` already called).

    Ray retries a task whose worker died (``max_retries``, 3 by default) before
    it raises WorkerCrashedError, which becomes a WorkerLostError.
    """

    name = "ray"

    def __init__(self, ray: Any, max_workers: int | None) -> None:
        if not ray.is_initialized():
            raise ValueError("engine=ray: call ray.init() first")
        workers = max_workers or int(ray.available_resources().get("CPU", 1)) or 1
        super().__init__(workers)
        self.ray = ray
        self._remote: dict[Any, Any] = {}  # task function -> its ray.remote wrapper

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self.ray.remote(fn)
        return remote.remote(*args)

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


__all__ = [
    "ENGINE_NAMES",
    "DaskEngine",
    "Engine",
    "ExecutorEngine",
    "RayEngine",
    "RemoteError",
    "SerialEngine",
    "TaskError",
    "WorkerLostError",
    "call_task",
    "check_on_error",
    "local_executor",
    "open_engine",
    "start_method",
]
