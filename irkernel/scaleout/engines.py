"""The engines: serial, a ``concurrent.futures`` Executor (threads, local processes), Dask, Ray.

Each says how to submit a task, wait for it and cancel it (:class:`Engine`
holds the rest). A Dask engine keeps up to ``window`` tasks in flight and
fetches finished results in batches (``client.gather``): one blocking
``Future.result()`` per task costs a round trip each. When the worker itself
dies (killed, out of memory, segfault) the engine's own error
(``BrokenProcessPool``, Dask's ``KilledWorker``, Ray's ``WorkerCrashedError``)
becomes a :class:`WorkerLostError`. Dask and Ray retry a task whose worker
died before they give up (Dask's ``distributed.scheduler.allowed-failures``,
Ray's ``max_retries``); a process pool cannot, and every task still pending
in a broken pool fails with WorkerLostError. Imports ``engine``, ``local``,
``shared_files`` and the standard library (Dask only through a Client the
caller made).
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from irkernel.scaleout.engine import Engine
from irkernel.scaleout.errors import TaskError
from irkernel.scaleout.local import WarmPool, release
from irkernel.scaleout.shared_files import ram_directory, remove_directory
from irkernel.scaleout.task import call_task


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

    def _done(self, handle: Any) -> bool:
        return True  # collecting runs the task now: nothing to wait for


class ExecutorEngine(Engine):
    """A ``concurrent.futures.Executor``: threads, the warm local pool or the user's own.

    ``owned``: the engine shuts the executor down when it closes (a thread
    pool it started). ``lease``: the executor is the warm pool's, given back
    (not shut down) when the engine closes. Otherwise it is the caller's.
    """

    def __init__(self, executor: cf.Executor, name: str, owned: bool,
                 max_workers: int | None, lease: WarmPool | None = None) -> None:
        workers = max_workers or getattr(executor, "_max_workers", None) or os.cpu_count() or 1
        super().__init__(workers)
        self.executor = executor
        self.name = name
        self.in_process = isinstance(executor, cf.ThreadPoolExecutor)
        self._owned = owned
        self._lease = lease
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
        if self._lease is not None:
            release(self._lease)
            self._lease = None
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

    def _done(self, handle: Any) -> bool:
        ready, _ = self.ray.wait([handle], timeout=0)
        return bool(ready)

    def _cancel(self, handles: Sequence[Any]) -> None:
        for ref in handles:
            self.ray.cancel(ref)


__all__ = ["DaskEngine", "ExecutorEngine", "RayEngine", "SerialEngine"]
