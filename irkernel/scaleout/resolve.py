"""``open_engine``: the one way to name an engine, for ``map_modules`` and ``runtime.build``.

============================  ==============================================  =========
``engine``                    runs tasks on                                   pickles
============================  ==============================================  =========
``"serial"``                  the calling thread, one after the other         no
``"thread"``                  a ``ThreadPoolExecutor`` (Numba kernels release  no
                              the GIL)
``"local"``                   the warm local process pool (``local``)         yes
any ``concurrent.futures``    that executor (not shut down here)              yes [1]
``Executor``
a ``dask.distributed.Client``  the Dask cluster                                yes
``"tcp://host:8786"``         a Client to that scheduler (closed at the end)  yes
the ``ray`` module            Ray tasks (after ``ray.init()``)                yes
============================  ==============================================  =========

[1] except a ``ThreadPoolExecutor``, which runs in process.

A bad name is one ValueError (listing the names), an object of another kind
one TypeError, a bad ``max_workers`` a ValueError or TypeError naming it.
Dask is imported only when a scheduler address is given (a Client object,
like the ``ray`` module, means its user imported the package already): the
core imports without either. Imports ``engines``, ``local`` and the
standard library.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import concurrent.futures as cf
import os
import sys
from typing import Any

from irkernel.scaleout.engine import Engine
from irkernel.scaleout.engines import DaskEngine, ExecutorEngine, RayEngine, SerialEngine
from irkernel.scaleout.local import check_workers, lease

#: The engine names ``open_engine`` accepts as strings (besides scheduler addresses).
ENGINE_NAMES = ("serial", "thread", "local")
_SCHEDULER_SCHEMES = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")


def open_engine(engine: Any = "local", max_workers: int | None = None) -> Engine:
    """The :class:`Engine` for ``engine=`` (see the module docstring); use it in ``with``.

    Closing the engine closes what it started (a thread pool, a Client to an
    address), gives the warm local pool back, and leaves what the caller
    passed alone.

    Parameters
    ----------
    engine : str, Executor, dask Client or the ray module
        ``"serial"``, ``"thread"``, ``"local"``, a scheduler address
        (``"tcp://host:8786"``), a ``concurrent.futures.Executor``, a
        ``dask.distributed.Client`` or ``ray``.
    max_workers : int, optional
        Size of the pool of ``"thread"`` and of the warm pool of ``"local"``
        (default: the CPU count; another size than the warm pool's starts a new
        one); for an existing executor, client or Ray, the number of tasks kept
        in flight is twice this (default: their worker count).

    Raises
    ------
    ValueError
        For an unknown engine name (listing the known ones), a bad ``max_workers``.
    TypeError
        For an object that is none of the above.
    ImportError
        For a scheduler address when Dask is not installed (naming the extra).
    """
    workers = check_workers(max_workers)
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
        warm = lease(workers)
        return ExecutorEngine(warm.executor, "local", owned=False, max_workers=warm.workers,
                              lease=warm)
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


__all__ = ["ENGINE_NAMES", "open_engine"]
