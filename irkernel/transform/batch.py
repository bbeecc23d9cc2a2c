"""``map_modules``: one pipeline over many modules, on an engine (processes, threads, Dask).

Function passes are independent per module, so a batch of modules (a search
over generated programs, a model zoo, a sweep) spreads over workers. What one
task carries (a :class:`Job` and a chunk of consecutive modules):

- the pipeline as text (:mod:`~irkernel.transform.pipeline_portable`); an
  in-process engine (``"serial"``, ``"thread"``) uses the Pass object itself;
- the current PassContext's opt_level, required and disabled passes and
  config; each task runs under a context made from them;
- the context's instruments, pickled: a *mergeable* one
  (``instrument_protocol.worker_copy``: PassTimingInstrument) travels as a
  fresh copy whose results come back and merge into the caller's, in module
  order; any other travels as a pickled copy whose effects stay on the
  worker (printing goes to the worker's stdout, a checking instrument's error
  fails that module). Counters reported with ``ctx.stat`` come back into the
  caller's context (:meth:`PassContext.merge_statistics`);
- the modules, pickled by the engine (protocol 5 with Dask: columns out of
  band). A module the pipeline left unchanged comes back as a marker and the
  caller keeps its own object (``out is inp`` still means "unchanged"); of a
  changed module, the functions that did not change stay the caller's too.

``"serial"`` is the plain loop in the calling thread under the current
context and its very instruments (no copies, nothing pickled).

Errors: a module's exception is caught on the worker with its traceback
text. ``on_error="raise"`` raises the first failure in module order as a
:class:`~irkernel.scaleout.TaskError` labelled ``module <i>``
(``.index``, ``.exception``, ``.traceback``, ``.worker``) and cancels the
rest; ``"return"`` puts that TaskError in the module's slot. A worker that
dies fails every module of its chunk with a WorkerLostError (a TaskError).
``irkernel.bisect_limit`` counts per task on workers; bisect with ``"serial"``.
Imports the transform layer below it and ``irkernel.scaleout`` (the engines).
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import math
import pickle
import traceback
from collections.abc import Iterable
from typing import Any

from irkernel.ir.module import IRModule
from irkernel.transform.context import PassContext
from irkernel.scaleout.engine import Engine
from irkernel.scaleout.errors import TaskError, check_on_error, portable, worker_name
from irkernel.scaleout.resolve import open_engine
from irkernel.transform.instrument_protocol import merge_from_worker, worker_copy
from irkernel.transform.pass_base import Pass
from irkernel.transform.pipeline_portable import portable_text, rebuild
from irkernel.transform.pipeline_text import parse_pipeline


class Job:
    """What every task of one ``map_modules`` call needs besides its modules (picklable)."""

    __slots__ = ("config", "disabled", "instruments", "merge_positions", "opt_level",
                 "pipeline", "remote", "required", "stop_on_error", "whole_text")

    def __init__(self, pipeline: Pass | str, whole_text: bool, ctx: PassContext,
                 instruments: bytes, merge_positions: tuple[int, ...], remote: bool,
                 stop_on_error: bool) -> None:
        self.pipeline = pipeline
        self.whole_text = whole_text  # str pipeline given by the user: parse it whole
        self.opt_level = ctx.opt_level
        self.required = list(ctx.required_pass)
        self.disabled = list(ctx.disabled_pass)
        self.config = dict(ctx.config)
        self.instruments = instruments  # pickled: every task unpickles its own copies
        self.merge_positions = merge_positions  # which of them go back to the caller
        self.remote = remote
        self.stop_on_error = stop_on_error

    def make_pass(self) -> Pass:
        if isinstance(self.pipeline, Pass):
            return self.pipeline
        return parse_pipeline(self.pipeline) if self.whole_text else rebuild(self.pipeline)


class Failed:
    """A module's failure on a worker: the exception, its traceback text, the worker."""

    __slots__ = ("exception", "traceback", "worker")

    def __init__(self, exception: BaseException, traceback: str, worker: str) -> None:
        self.exception, self.traceback, self.worker = exception, traceback, worker


class Changed:
    """A changed module from a worker: functions by name (None: the caller's own) and attrs."""

    __slots__ = ("attrs", "functions")

    def __init__(self, inp: IRModule, out: IRModule) -> None:
        old = inp.functions
        self.functions = {name: (None if old.get(name) is func else func)
                          for name, func in out.functions.items()}
        self.attrs = None if out.attrs is inp.attrs else dict(out.attrs)

    def module(self, inp: IRModule) -> IRModule:
        funcs = {name: inp.functions[name] if func is None else func
                 for name, func in self.functions.items()}
        return IRModule(funcs, inp.attrs if self.attrs is None else self.attrs)


def optimize_chunk(job: Job, modules: list[IRModule]) -> tuple[list[Any], list[Any],
                                                                dict[str, dict[str, float]]]:
    """The task (runs on a worker): ``(outcomes, mergeable instruments, statistics)``.

    An outcome is None (unchanged), a :class:`Changed` (remote), an IRModule
    (in process) or a :class:`Failed`.
    """
    pipeline = job.make_pass()
    instruments = pickle.loads(job.instruments)
    outcomes: list[Any] = []
    with PassContext(opt_level=job.opt_level, required_pass=job.required,
                     disabled_pass=job.disabled, instruments=instruments,
                     config=job.config) as ctx:
        for mod in modules:
            try:
                out = pipeline(mod)
            except Exception as exc:  # NOTE: a module's failure is data for the caller
                text = traceback.format_exc()
                outcomes.append(Failed(portable(exc) if job.remote else exc, text,
                                       worker_name()))
                if job.stop_on_error:
                    break
                continue
            if out is mod:
                outcomes.append(None)
            else:
                outcomes.append(Changed(mod, out) if job.remote else out)
    return outcomes, [instruments[i] for i in job.merge_positions], ctx.statistics


def map_modules(pipeline: Pass | str, modules: Iterable[IRModule], *, engine: Any = "local",
                max_workers: int | None = None, on_error: str = "raise",
                chunksize: int | None = None) -> list[Any]:
    """Run ``pipeline`` on every module, spread over ``engine``; results in input order.

    Parameters
    ----------
    pipeline : Pass or str
        A Pass, or a textual pipeline (``"O2"``, ``"FoldConstant,DeadCodeElimination"``).
        Workers rebuild it from text (see :mod:`~irkernel.transform.pipeline_portable`).
    modules : iterable of IRModule
    engine : str, Executor, dask Client or ray
        ``"serial"``, ``"thread"``, ``"local"`` (default: the warm process pool,
        kept across calls; ``irkernel.scaleout.shutdown()`` closes it), a
        scheduler address, a ``concurrent.futures.Executor`` (e.g. a private
        :func:`~irkernel.transform.local_executor`), a
        ``dask.distributed.Client`` or the ``ray`` module
        (:func:`~irkernel.scaleout.open_engine`).
    max_workers : int, optional
        Pool size of ``"thread"``/``"local"`` (default: CPU count).
    on_error : {"raise", "return"}
        Raise the first failure (in module order) as a ``TaskError`` naming
        ``module <i>`` with the worker's traceback, or put it in the slot.
    chunksize : int, optional
        Modules per task. Default: 1 in process, else about four tasks per worker.

    Returns
    -------
    list
        The optimized modules in input order (the input object itself where the
        pipeline changed nothing); with ``on_error="return"``, a TaskError in
        the slot of a module that failed.

    Raises
    ------
    TaskError
        With ``on_error="raise"``, for the first module that failed
        (a WorkerLostError when its worker died).
    TypeError, ValueError
        For bad arguments, a pipeline or instrument that cannot travel to workers
        (naming it), or an unknown engine.

    Examples
    --------
    >>> outs = transform.map_modules("O2", mods, engine="local", max_workers=2)  # doctest: +SKIP
    """
    if not isinstance(pipeline, (Pass, str)):
        raise TypeError(f"map_modules: pipeline must be a Pass or a textual pipeline, got "
                        f"{type(pipeline).__name__}")
    mods = _check_modules(modules)
    check_on_error(on_error)
    size = _check_chunksize(chunksize)
    if isinstance(pipeline, str):
        parse_pipeline(pipeline)  # a bad pipeline fails here, before any worker starts
    ctx = PassContext.current()
    if isinstance(engine, str) and engine == "serial":
        return _map_serial(pipeline, mods, on_error)
    with open_engine(engine, max_workers) as eng:
        job, merge_into = _make_job(pipeline, ctx, eng, on_error)
        if size is None:
            size = 1 if eng.in_process else max(1, math.ceil(len(mods) / (4 * eng.workers)))
        tasks = [(job, mods[i:i + size]) for i in range(0, len(mods), size)]
        return _collect(eng, tasks, mods, size, on_error, ctx, merge_into)


def _collect(eng: Engine, tasks: list[tuple[Job, list[IRModule]]], mods: list[IRModule],
             size: int, on_error: str, ctx: PassContext, merge_into: list[Any]) -> list[Any]:
    results: list[Any] = [None] * len(mods)
    stream = eng.imap(optimize_chunk, tasks, label="chunk")
    try:
        for k, value in enumerate(stream):
            start = k * size
            if isinstance(value, TaskError):  # the whole chunk failed (e.g. its worker died)
                outcomes: list[Any] = [value] * len(tasks[k][1])
            else:
                outcomes, copies, statistics = value
                for inst, copy in zip(merge_into, copies, strict=True):
                    merge_from_worker(inst, copy)
                ctx.merge_statistics(statistics)
            for j, outcome in enumerate(outcomes):
                i = start + j
                result = _result(mods[i], outcome, i)
                if on_error == "raise" and isinstance(result, TaskError):
                    raise result
                results[i] = result
    finally:
        stream.close()
    return results


def _result(inp: IRModule, outcome: Any, index: int) -> Any:
    if outcome is None:
        return inp
    if isinstance(outcome, TaskError):
        return outcome.relabel(f"module {index}", index)
    if isinstance(outcome, Failed):
        return TaskError(f"module {index}", index, outcome.exception, outcome.traceback,
                         outcome.worker)
    if isinstance(outcome, Changed):
        return outcome.module(inp)
    return outcome


def _map_serial(pipeline: Pass | str, mods: list[IRModule], on_error: str) -> list[Any]:
    """The plain loop, in this thread, under the current context and its instruments."""
    p = parse_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    results: list[Any] = []
    for index, mod in enumerate(mods):
        try:
            results.append(p(mod))
        except Exception as exc:  # NOTE: reported like a worker's failure
            error = TaskError(f"module {index}", index, exc, traceback.format_exc(),
                              worker_name())
            if on_error == "raise":
                raise error from exc
            results.append(error)
    return results


def _make_job(pipeline: Pass | str, ctx: PassContext, eng: Engine,
              on_error: str) -> tuple[Job, list[Any]]:
    """The Job of every task, and the caller's instruments that get worker results merged."""
    if isinstance(pipeline, str):
        spec: Pass | str = pipeline
    else:
        spec = pipeline if eng.in_process else portable_text(pipeline)
    travelling: list[Any] = []
    merge_into: list[Any] = []
    positions: list[int] = []
    for inst in ctx.instruments:
        copy = worker_copy(inst)
        if copy is not None:
            positions.append(len(travelling))
            merge_into.append(inst)
        travelling.append(inst if copy is None else copy)
    blob = _pickle_instruments(travelling)
    job = Job(spec, isinstance(pipeline, str), ctx, blob, tuple(positions), not eng.in_process,
              on_error == "raise")
    if not eng.in_process:
        try:
            pickle.dumps(job)
        except Exception as exc:  # NOTE: said once, before any task is submitted
            raise TypeError(f"map_modules: the PassContext cannot travel to workers "
                            f"(config {dict(ctx.config)!r}): {exc}") from exc
    return job, merge_into


def _pickle_instruments(instruments: list[Any]) -> bytes:
    for inst in instruments:
        try:
            pickle.dumps(inst)
        except Exception as exc:  # NOTE: name the instrument, whatever pickle raised
            raise TypeError(
                f"map_modules: instrument {type(inst).__name__} cannot travel to workers (it "
                f"does not pickle: {exc}); drop it, give it no open file (e.g. file=None), or "
                f"use engine='serial'") from exc
    return pickle.dumps(instruments, protocol=pickle.HIGHEST_PROTOCOL)


def _check_modules(modules: Iterable[IRModule]) -> list[IRModule]:
    if isinstance(modules, (IRModule, str, bytes)) or not isinstance(modules, Iterable):
        raise TypeError(f"map_modules: modules must be an iterable of IRModule, got "
                        f"{type(modules).__name__}")
    mods = list(modules)
    for index, mod in enumerate(mods):
        if not isinstance(mod, IRModule):
            raise TypeError(f"map_modules: modules[{index}] is {type(mod).__name__}, "
                            f"not an IRModule")
    return mods


def _check_chunksize(chunksize: object) -> int | None:
    if chunksize is None:
        return None
    if isinstance(chunksize, bool) or not isinstance(chunksize, int):
        raise TypeError(f"map_modules: chunksize must be an int or None, got "
                        f"{type(chunksize).__name__}")
    if chunksize < 1:
        raise ValueError(f"map_modules: chunksize must be >= 1, got {chunksize}")
    return chunksize


__all__ = ["map_modules"]
