"""Scale-out layer: where independent tasks run (serial, threads, local processes, Executors,
Dask, Ray), how they travel, and how their failures come back.

One engine layer serves every batch job: ``transform.map_modules`` (modules
through a pipeline) and ``runtime.build(engine=)`` (LLVM IR text in, object
bytes out). Modules, bottom up: ``errors`` (TaskError, WorkerLostError,
RemoteError), ``shared_files`` (the /dev/shm transport of local pools),
``task`` (packing, ``call_task`` on the worker), ``engine`` (the interface:
``imap``/``run``/``submit``), ``local`` (start method, private pools, the
warm pool of ``"local"``), ``engines`` (serial, Executor, Dask, Ray) and
``resolve`` (``open_engine``: the one way to name an engine). Knows nothing
of passes or IR: imports the standard library and NumPy only, so ``transform``
and ``runtime`` both build on it. See docs/scale_out.md.
"""

from __future__ import annotations

from irkernel.scaleout.engine import Engine, TaskFuture
from irkernel.scaleout.engines import DaskEngine, ExecutorEngine, RayEngine, SerialEngine
from irkernel.scaleout.errors import RemoteError, TaskError, WorkerLostError
from irkernel.scaleout.local import (
    local_executor,
    on_worker_start,
    shutdown,
    start_method,
    warm_pool,
)
from irkernel.scaleout.resolve import ENGINE_NAMES, open_engine
from irkernel.scaleout.task import call_task, pack, unpack

__all__ = [
    "ENGINE_NAMES",
    "DaskEngine",
    "Engine",
    "ExecutorEngine",
    "RayEngine",
    "RemoteError",
    "SerialEngine",
    "TaskError",
    "TaskFuture",
    "WorkerLostError",
    "call_task",
    "local_executor",
    "on_worker_start",
    "open_engine",
    "pack",
    "shutdown",
    "start_method",
    "unpack",
    "warm_pool",
]
