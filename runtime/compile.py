"""Compiling a module's PrimFuncs to objects: keys, the cache, batches, background LLVM.

One kernel per *distinct* PrimFunc: the key of a PrimFunc (its structural
digest without the attributes that do not change code, the lowering
settings, the target and the code version) decides what is compiled; module
functions with equal keys share the compiled code.

Kernels are compiled in *batches*: many PrimFuncs lowered into one LLVM module,
optimized and emitted once (``runtime/lower.py::lower_batch``), so LLVM's
per-module costs (pass pipeline set-up, object emission, loading) are paid
per batch. While LLVM compiles one batch on a background thread (llvmlite
releases the GIL), the main thread runs the TIR lowering passes of the next,
so on two cores the two halves of the work overlap. The LLVM thread is a daemon:
an interrupted build abandons the batch in flight instead of waiting for it.

The on-disk cache holds one object per batch and one index entry per kernel:

* ``obj/<batch key>``: the batch's object file;
* ``index/<kernel key>``: ``"<batch key> <symbol>"``, where the kernel lives.

A symbol names its kernel and its batch (``<name>_<kernel key>_<batch key>``),
so objects of different batches never define the same symbol even when a
kernel was compiled twice by concurrent processes: any set of cached batches
links into one engine. A later build of a module reuses every kernel it
shares with earlier builds, loading each needed batch once.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from irkernel import transform
from irkernel.ir.module import IRModule
from irkernel.tir.analysis import trip_count
from irkernel.tir.function import Attrs, PrimFunc
from passes.tir import FAST_MATH
from passes.tir.unroll_loop import CONFIG_KEY as UNROLL_KEY
from passes.topi.vector import TARGET
from runtime.cache import DiskCache, digest
from runtime.interrupt import DaemonExecutor
from runtime.jit import TIERS, compile_ir
from runtime.lower import lower, lower_batch
from runtime.objfile import object_check
from runtime.target import Target, target_for

#: Attributes that do not change generated code (left out of a kernel's key).
_NEUTRAL_ATTRS = ("global_symbol", "op_name", "op_pattern", "generic_name")
#: Config: kernels made by graph lowering whose loops run at most this many innermost
#: iterations compile in the fast LLVM tier, shape-generic kernels in the lean one (0:
#: every kernel in full O3).
FAST_TIER_MAX_ELEMENTS = "runtime.fast_tier_max_elements"
transform.register_pass_config(
    FAST_TIER_MAX_ELEMENTS, int, 4096,
    description="graph-lowered kernels whose loops run at most this many innermost "
                "iterations compile with a short LLVM pipeline and fast instruction "
                "selection (0: never)",
    check=lambda v: "must be >= 0" if v < 0 else None)
#: A batch closes after this many kernels or this much TIR (statements + expressions), so a
#: batch is big enough to amortize LLVM's per-module cost and small enough to overlap.
BATCH_KERNELS = 64
BATCH_NODES = 20_000

Progress = Callable[[int, int], None]
#: The registered pipeline every PrimFunc is lowered by (``passes/pipelines.py``).
LOWERING_PIPELINE = "LowerTIR"


@dataclass(frozen=True)
class LoweringSettings:
    """What of a PassContext changes the code a PrimFunc compiles to: part of every
    kernel key, kept by an executable (and its pickle) to lower a kernel again for
    ``get_source``."""

    opt_level: int
    disabled: tuple[str, ...]
    fast_math: bool
    unroll: tuple[tuple[str, Any], ...]  # config tir.UnrollLoop, sorted items
    pipeline: str  # the text of the LowerTIR pipeline in this context
    cpu: str = "host"  # config ``target``: the CPU the code is generated for

    @classmethod
    def of(cls, ctx: transform.PassContext) -> LoweringSettings:
        return cls(ctx.opt_level, tuple(sorted(ctx.disabled_pass)),
                   bool(ctx.get_config(FAST_MATH)),
                   tuple(sorted(dict(ctx.get_config(UNROLL_KEY)).items())),
                   transform.pipeline_text_of(LOWERING_PIPELINE, ctx),
                   str(ctx.get_config(TARGET)))

    def context(self) -> transform.PassContext:
        """A context that lowers as the one these settings came from."""
        return transform.PassContext(
            opt_level=self.opt_level, disabled_pass=list(self.disabled),
            config={FAST_MATH: self.fast_math, UNROLL_KEY: dict(self.unroll),
                    transform.pipeline_config_key(LOWERING_PIPELINE): self.pipeline,
                    TARGET: self.cpu})


@dataclass
class Job:
    """One distinct PrimFunc to compile (or to find in the cache)."""

    key: str
    name: str  # the first module name with this key (messages, symbols)
    func: PrimFunc
    names: list[str] = field(default_factory=list)
    symbol: str = ""
    batch: str = ""  # the batch (object) key
    size: int = 0
    tier: str = "full"  # the LLVM optimization tier (runtime/jit.py)


_INDEX_ENTRY = re.compile(rb"[0-9a-f]+ [A-Za-z0-9_]+")


def _index_problem(payload: bytes) -> str | None:
    """An index entry is ``<batch key> <symbol>``; anything else is dropped by the cache."""
    if _INDEX_ENTRY.fullmatch(payload) is None:
        return "does not hold an object key and a symbol"
    return None


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:40] or "k"


def tier_of(func: PrimFunc, fast_max: int) -> str:
    """The LLVM tier of a kernel (``runtime/jit.py``): the attr ``llvm_tier`` when set (a
    template that knows better: a concat of many parts); ``lean`` for shape-generic
    kernels; ``fast`` for kernels of graph lowering (they carry ``op_name``) whose loop
    nests run at most ``fast_max`` innermost iterations; else ``full`` (user PrimFuncs
    always).

    Iterations, not buffer sizes: a matmul or conv of small tensors still runs ``M * N *
    K`` fma, and without the vectorizer of the full tier it ran 2-5x slower (a transformer
    layer's 2 x 16 x 64 @ 64 x 128 took 400 us instead of 20).
    """
    explicit = func.attrs.get("llvm_tier")
    if explicit in TIERS:
        return str(explicit)
    if not fast_max or "op_name" not in func.attrs:
        return "full"
    if "generic_name" in func.attrs:
        return "lean"
    count = trip_count(func.body)
    return "fast" if count is not None and count <= fast_max else "full"


def kernel_key(func: PrimFunc, settings: LoweringSettings, target: Target, version: str,
               tier: str) -> str:
    """The key of the code ``func`` compiles to under ``settings`` on ``target``."""
    attrs = {k: v for k, v in func.attrs.items() if k not in _NEUTRAL_ATTRS}
    neutral = func if len(attrs) == len(func.attrs) else func.replace(attrs=Attrs(attrs))
    return digest(neutral.structural_digest(), repr(settings), target.key, version, tier)


def lower_tir(name: str, func: PrimFunc) -> PrimFunc:
    """The ``LowerTIR`` pipeline of the current context, then verify.

    Shape-generic kernels (``passes.topi.generic``) are written in lowered form
    (flat buffers, serial loops) and skip the passes: lowering simple kernels
    directly is what makes a hundred of them cheap. Everything else that happens to a
    PrimFunc before LLVM is a pass of the pipeline (``passes/pipelines.py``), so the
    kernel key, which digests the pipeline's text, covers it.
    """
    if "generic_name" in func.attrs:
        func.verify(name)
        return func
    pipeline = transform.make_pipeline(LOWERING_PIPELINE)
    lowered = pipeline(IRModule({name: func}))[name]
    lowered.verify(name)
    return lowered


class Compiler:
    """Compiles the jobs of one build; ``objects`` and ``symbols`` are the result.

    Parameters
    ----------
    jobs : list of Job
        Distinct PrimFuncs (by key).
    fast_math : bool
    cache : DiskCache or None
    progress : callable, optional
        ``progress(done, total)`` after every batch (and once at the start).
    executor : optional
        Where LLVM compiles the batches: a ``concurrent.futures.Executor`` (a process
        pool) or a Dask client (anything whose ``submit(fn, *args)`` returns a future).
        None: one background thread of this process. Lowering stays here either way;
        only LLVM IR text travels, and object bytes come back.
    """

    def __init__(self, jobs: list[Job], fast_math: bool, cache: DiskCache | None,
                 progress: Progress | None, executor: Any = None, cpu: str = "host") -> None:
        self.jobs = jobs
        self.executor = executor  # anything with submit(fn, *args) -> future; None: a thread
        self.fast_math = fast_math
        self.cache = cache
        self.progress = progress
        self.cpu = cpu
        self.target = target_for(cpu)
        self.objects: dict[str, bytes] = {}  # batch key -> object
        self.cached_objects: set[str] = set()  # the batch keys of objects read from the cache
        self.stats = {"kernels": len(jobs), "cached": 0, "compiled": 0, "batches": 0,
                      "llvm_s": 0.0}
        self._done = 0

    # -- cache --------------------------------------------------------------
    def _from_cache(self) -> list[Job]:
        """Fill symbols and objects of cached jobs; the rest, still to compile."""
        if self.cache is None:
            return list(self.jobs)
        missing = []
        for job in self.jobs:
            entry = self.cache.get("index", job.key, _index_problem)
            parts = entry.decode().split() if entry else []
            if parts:
                batch, symbol = parts
                if batch not in self.objects:
                    # checked before native code sees it (runtime/objfile.py)
                    obj = self.cache.get("obj", batch, object_check(symbol, self.target.triple))
                    if obj is None:
                        missing.append(job)
                        continue
                    self.objects[batch] = obj
                    self.cached_objects.add(batch)
                job.batch, job.symbol = batch, symbol
                self.stats["cached"] += 1
            else:
                missing.append(job)
        return missing

    # -- batches --------------------------------------------------------------
    def _batches(self, jobs: list[Job]) -> Iterator[list[Job]]:
        """Runs of jobs of one tier, closed by kernel count or size."""
        for tier in TIERS:
            batch: list[Job] = []
            nodes = 0
            for job in jobs:
                if job.tier != tier:
                    continue
                batch.append(job)
                nodes += job.size
                if len(batch) >= BATCH_KERNELS or nodes >= BATCH_NODES:
                    yield batch
                    batch, nodes = [], 0
            if batch:
                yield batch

    def _name(self, batch: list[Job], version: str) -> str:
        """Give a batch its key (from its kernels' keys: known before lowering) and its
        kernels their symbols."""
        key = digest(*sorted(j.key for j in batch), self.target.key, version)
        for job in batch:
            job.batch = key
            job.symbol = f"{_sanitize(job.name)}_{job.key[:12]}_{key[:8]}"
        return key

    def _prepare(self, batch: list[Job]) -> str:
        """Lower one batch's PrimFuncs (TIR passes, then one LLVM module's IR text)."""
        items = [(lower_tir(job.name, job.func), job.symbol) for job in batch]
        return lower_batch(items, self.target, batch[0].batch, self.fast_math)

    def _submit(self, pool: Any, text: str, batch: list[Job]) -> Any:
        return pool.submit(compile_batch, text, batch[0].tier, self.target.key, self.cpu)

    def _culprit(self, batch: list[Job], exc: Exception) -> RuntimeError:
        """The first kernel of a failed batch that fails alone, named in an error."""
        for job in batch:
            try:
                compile_ir(lower(lower_tir(job.name, job.func), job.symbol, self.target,
                                 self.fast_math), job.tier, self.cpu)
            except Exception as alone:  # NOTE: naming the failing kernel is the point
                return RuntimeError(f"build: LLVM failed to compile kernel {job.name!r} "
                                    f"({', '.join(job.names)}): {alone}")
        names = ", ".join(j.name for j in batch)
        return RuntimeError(f"build: compiling the batch of kernels {names} failed: "
                            f"{type(exc).__name__}: {exc}")

    def _finished(self, future: Future[tuple[bytes, float]], key: str, batch: list[Job]) -> None:
        try:
            obj, seconds = future.result()
        except Exception as exc:  # NOTE: a failed batch or a lost worker: name the kernels
            raise self._culprit(batch, exc) from exc
        self.stats["llvm_s"] += seconds
        self.stats["compiled"] += len(batch)
        self.stats["batches"] += 1
        if self.cache is not None:
            self.cache.put("obj", key, obj)
        self._ready(key, obj, batch)

    def _ready(self, key: str, obj: bytes, batch: list[Job]) -> None:
        self.objects[key] = obj
        if self.cache is not None:
            for job in batch:
                self.cache.put("index", job.key, f"{key} {job.symbol}".encode())
        self._report(len(batch))

    def _report(self, count: int) -> None:
        self._done += count
        if self.progress is not None:
            self.progress(self._done, len(self.jobs))

    def run(self, version: str) -> None:
        """Compile every job that is not cached: lowering here, LLVM on a worker thread."""
        todo = self._from_cache()
        self._report(len(self.jobs) - len(todo))
        if not todo:
            return
        for job in todo:
            job.size = _size(job.func)
        pending: list[tuple[Future[tuple[bytes, float]], str, list[Job]]] = []
        # A daemon thread: an interrupted build does not wait for the batch LLVM is on
        # (runtime/interrupt.py), and neither does the interpreter's exit.
        own = None if self.executor is not None else DaemonExecutor("irkernel-llvm")
        pool = self.executor if own is None else own
        with own if own is not None else contextlib.nullcontext():
            try:
                for batch in self._batches(todo):
                    key = self._name(batch, version)
                    obj = self.cache.get("obj", key, object_check(
                        batch[0].symbol, self.target.triple)) if self.cache is not None else None
                    if obj is not None:  # the batch is cached, only its index was lost
                        self.cached_objects.add(key)
                        self.stats["cached"] += len(batch)
                        self._ready(key, obj, batch)
                        continue
                    text = self._prepare(batch)
                    pending.append((self._submit(pool, text, batch), key, batch))
                    while pending and pending[0][0].done():
                        self._finished(*pending.pop(0))
                for future, key, batch in pending:
                    self._finished(future, key, batch)
            except BaseException:
                for future, _, _ in pending:
                    future.cancel()
                raise


def compile_batch(ir_text: str, tier: str, target_key: str,
                  cpu: str = "host") -> tuple[bytes, float]:
    """One batch's object bytes and the seconds LLVM took, where this runs (the build's
    thread or an engine's worker). A worker whose target for ``cpu`` differs from the
    caller's would emit code for another machine: refused, naming both."""
    here = target_for(cpu).key
    if here != target_key:
        raise RuntimeError(f"this worker compiles for {here}, the build is for {target_key}; "
                           "use workers on machines of the caller's CPU")
    start = time.perf_counter()
    obj = compile_ir(ir_text, tier, cpu).obj
    return obj, time.perf_counter() - start


def _size(func: PrimFunc) -> int:
    """A cheap size estimate of a PrimFunc (its printed length), for batch sizing."""
    return max(1, len(repr(func.body)) // 40)


def tty_progress() -> Progress | None:
    """A tqdm bar on stderr when it is a terminal and tqdm is installed (shown only
    once a build has run for 2 s), else None."""
    if not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm  # optional dependency (irkernel[progress])
    except ImportError:
        return None
    start = time.perf_counter()
    state: dict[str, Any] = {"bar": None}

    def report(done: int, total: int) -> None:
        bar = state["bar"]
        if bar is None:
            if time.perf_counter() - start < 2.0 or done >= total:
                return
            bar = state["bar"] = tqdm(total=total, desc="irkernel build", unit="kernel",
                                      leave=False)
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return report


__all__ = ["BATCH_KERNELS", "BATCH_NODES", "FAST_TIER_MAX_ELEMENTS", "LOWERING_PIPELINE",
           "Compiler", "Job", "LoweringSettings", "kernel_key", "lower_tir", "tier_of",
           "tty_progress"]
