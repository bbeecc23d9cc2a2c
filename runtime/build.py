"""``runtime.build(mod)``: compile a module into an :class:`Executable`.

The phases, each a pass under the current ``PassContext`` (so instruments,
``disabled_pass`` and config apply, and ``PassTimingInstrument`` /
``--time-passes`` show where build time goes):

1. ``GraphLowering`` (graph modules only): the registered pipeline of that
   name (``passes/pipelines.py``; :func:`graph_pipeline`): graph simplification,
   ``LegalizeOps`` (graph ops -> ``call_tir``; small tensors call shape-generic
   kernels), ``FuseOps`` + ``FuseTIR`` (fused PrimFuncs) and
   ``DeadCodeElimination`` (drops unused PrimFuncs).
2. ``CompileKernels``: every distinct PrimFunc (by kernel key, see
   ``runtime/compile.py``) is found in the on-disk cache or lowered (the
   registered ``LowerTIR`` pipeline, nested here) and compiled to machine code
   in batches, LLVM running on a worker thread while the next batch is
   lowered. Reports ``kernels``, ``cached``, ``compiled``, ``batches`` and
   ``llvm_s``. Its record: :class:`CompiledKernels`.
3. ``Link``: the batch objects are loaded into one JIT engine
   (:class:`LinkedKernels`).
4. ``GraphExecutors``: a memory plan and a launch table per graph function.

Both pipelines are text a context can replace (config ``pipeline.GraphLowering``,
``pipeline.LowerTIR``); the kernel key digests the LowerTIR text in use and the
source of what lowering imports (``runtime/code_digest.py``).

``build(mod, opt_level=N)`` runs all of it in a context derived from the
current one with only ``opt_level`` replaced (see :func:`build_context`).
``progress(done, total)`` is called as kernels are compiled; without it, a
build that runs longer than 2 s on a terminal shows a tqdm bar when tqdm is
installed.

The build runs on a worker thread while the calling (main) thread waits, so Ctrl-C
raises KeyboardInterrupt within milliseconds in every phase (``runtime/interrupt.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import irkernel
from irkernel import scaleout, transform
from irkernel.ir.module import IRModule
from irkernel.tir.function import PrimFunc
from passes.tir import FAST_MATH

from runtime import code_digest
from runtime import threadpool  # noqa: F401  (registers irkernel_parallel_launch with LLVM)
from runtime.abi import AbiMismatch, CallingConvention
from runtime.cache import DiskCache
from runtime.compile import (
    FAST_TIER_MAX_ELEMENTS,
    LOWERING_PIPELINE,
    Compiler,
    Job,
    LoweringSettings,
    Progress,
    kernel_key,
    lower_tir,
    tier_of,
    tty_progress,
)
from runtime.executable import (
    Executable,
    Kernel,
    KernelSymbol,
    SavedExecutable,
    SavedObject,
)
from runtime.executor import GraphExecutor, make_kernels
from runtime.interrupt import run_on_worker
from runtime.jit import Engine, assembly, optimized_ir
from runtime.lower import lower
from runtime.objfile import object_problem
from runtime.target import host, target_for
from runtime.tuned_store import tuned_config

#: The registered pipeline graph modules are lowered by (``passes/pipelines.py``).
GRAPH_PIPELINE = "GraphLowering"
_T = TypeVar("_T")


def code_version(pipeline_text: str | None = None) -> str:
    """A digest of the code that turns TIR into objects with the given LowerTIR text
    (default: the current context's), part of every kernel key: the text and the
    source of every module lowering imports (``runtime/code_digest.py``)."""
    if pipeline_text is None:
        pipeline_text = transform.pipeline_text_of(LOWERING_PIPELINE)
    return code_digest.code_version(pipeline_text)


def _source(job: Job, settings: LoweringSettings) -> Callable[[str], str]:
    """``source("tir" | "llvm" | "asm")`` of one kernel (optimized LLVM IR and assembly in
    its tier), lowered again on demand: builds keep no lowered TIR or IR text (most never
    ask, and a large build would hold megabytes)."""
    memo: dict[str, str] = {}

    def source(kind: str) -> str:
        if not memo:
            with settings.context():
                lowered = lower_tir(job.name, job.func)
            memo["tir"] = lowered.script(job.name)
            memo["ir"] = lower(lowered, job.symbol, target_for(settings.cpu),
                               settings.fast_math)
        if kind not in memo:
            make = optimized_ir if kind == "llvm" else assembly
            memo[kind] = make(memo["ir"], job.tier, settings.cpu)
        return memo[kind]

    return source


#: Config: graph ops whose tensors all have at most this many elements run on shape-generic
#: kernels (``LegalizeOps{generic_max_elements=...}``; 0: specialize and fuse everything).
GENERIC_MAX_ELEMENTS = "runtime.generic_max_elements"
transform.register_pass_config(
    GENERIC_MAX_ELEMENTS, int, 4096,
    description="graph ops on tensors of at most this many elements run on shape-generic "
                "kernels, compiled once per op and dtypes (0: specialize and fuse every op)",
    check=lambda v: "must be >= 0" if v < 0 else None)


def graph_pipeline(ctx: transform.PassContext | None = None) -> transform.Sequential:
    """The :data:`GRAPH_PIPELINE` of ``ctx`` (its config ``pipeline.GraphLowering`` or
    the registered text) as one Sequential.

    A bare ``LegalizeOps`` in the text gets ``generic_max_elements`` from the
    context's config ``runtime.generic_max_elements``: small tensors are not worth
    a kernel of their own (a build of 1e5 small ops would compile thousands),
    large ones are.
    """
    ctx = ctx if ctx is not None else transform.PassContext.current()
    options = {"LegalizeOps": {"generic_max_elements": int(ctx.get_config(GENERIC_MAX_ELEMENTS))}}
    return transform.make_pipeline(GRAPH_PIPELINE, ctx, options)


@contextmanager
def build_context(opt_level: int | None, config: Mapping[str, Any] | None = None
                  ) -> Iterator[transform.PassContext]:
    """The current PassContext, or one derived from it with ``opt_level`` replaced and
    ``config`` added.

    The derived context keeps required/disabled passes and config, and the
    *same* instrument objects. They are installed without calling their
    ``enter_pass_ctx``/``exit_pass_ctx`` again: the user's context already
    entered them, and re-entering would reset state such as a
    PassTimingInstrument's profile. Pass statistics of the build land in the
    derived context.
    """
    ctx = transform.PassContext.current()
    changes: dict[str, Any] = {}
    if opt_level is not None and opt_level != ctx.opt_level:
        changes["opt_level"] = opt_level
    if config:
        changes["config"] = {**ctx.config, **config}
    if not changes:
        yield ctx
        return
    derived = ctx.derive(**changes)
    with derived:
        # NOTE: private on purpose; see the docstring (no enter/exit hook calls).
        derived._set_instruments(ctx.instruments)
        try:
            yield derived
        finally:
            derived._set_instruments(())


@dataclass(frozen=True)
class CompiledKernels:
    """What ``CompileKernels`` hands to ``Link``: one job per distinct PrimFunc, the job
    of each module name, the object bytes by batch key, and the batch keys read from
    the cache (loaded under the cache's crash markers)."""

    jobs: tuple[Job, ...]
    of_name: Mapping[str, Job]
    objects: Mapping[str, bytes]
    cached: tuple[str, ...]


@dataclass(frozen=True)
class LinkedKernels:
    """What ``Link`` makes: the JIT engine, a callable Kernel per module name, and each
    kernel's ``source(kind)`` (lowered again on demand)."""

    engine: Engine
    kernels: Mapping[str, Kernel]
    sources: Mapping[str, Callable[[str], str]]


def _phase(name: str, mod: IRModule, ctx: transform.PassContext,
           step: Callable[[IRModule, transform.PassContext], _T]) -> _T:
    """Run a build step as a pass that returns its module unchanged (so instruments see
    and time it); the step's record is the result."""
    made: list[_T] = []

    def run(m: IRModule, c: transform.PassContext) -> IRModule:
        made.append(step(m, c))
        return m

    transform.ModulePass(run, transform.PassInfo(0, name))(mod, ctx)
    return made[0]


def _refuse_symbolic(mod: IRModule) -> None:
    """Modules with shape variables are not compiled yet (one executable for every
    binding is the next step of symbolic dims): a clear error before any pass runs."""
    for name, func in mod.functions.items():
        symbols = getattr(getattr(func, "shapes", None), "symbols", None)
        if symbols:
            raise NotImplementedError(
                f"build: function {name!r} has symbolic dims ({', '.join(symbols.var_names)}); "
                "modules with shape variables are not built yet: run them with "
                "irkernel.interpret, or fix every dim (e.g. frontend shape_dict) and build that")


def build(mod: IRModule | PrimFunc, opt_level: int | None = None, *,
          cache: bool | DiskCache = True, progress: Progress | None = None,
          engine: Any = None) -> Executable:
    """Compile ``mod`` for the host CPU: its PrimFuncs, and its graph Functions if any.

    Parameters
    ----------
    mod : IRModule or PrimFunc
        A lone PrimFunc is built under its ``global_symbol`` (or ``"main"``).
        Graph Functions are lowered by :func:`graph_pipeline` first.
    opt_level : int, optional
        Overrides the current context's opt_level for this build only
        (:func:`build_context`); None keeps it.
    cache : bool or DiskCache
        Use the on-disk cache (default: ``$IRKERNEL_CACHE_DIR`` or
        ``~/.cache/irkernel``), a given one, or none.
    progress : callable, optional
        ``progress(done, total)``: kernels ready out of all distinct kernels,
        called as batches finish. Default: a tqdm bar on a terminal for builds
        longer than 2 s (when tqdm is installed).
    engine : optional
        Where LLVM compiles the kernel batches. None: a background thread of this
        process (lowering here overlaps LLVM there). ``"local"``: a process pool
        started for this build (``transform.local_executor()``); any
        ``concurrent.futures.Executor`` (keep one to reuse warm workers); a Dask
        ``Client`` or a scheduler address ``"tcp://host:8786"`` (``irkernel[dask]``).
        The cache is consulted first; only LLVM IR text travels, object bytes come
        back and link here. A failed or lost worker is a RuntimeError naming the
        kernels of its batch.

    Returns
    -------
    Executable
        ``ex["name"](*arrays)`` runs a kernel (destination passing) or a graph
        function (``-> list[np.ndarray]``); ``ex.get_source("llvm" | "asm" | "tir")``;
        ``ex.memory_plan("main")``.

    Raises
    ------
    irkernel.IRError
        When a function does not verify, or a lowered graph node cannot run.
    ValueError
        When two PrimFuncs share a symbol.
    NotImplementedError
        When a graph Function has symbolic dims (shape variables): such modules run
        in ``ik.interpret`` but are not built yet.

    Examples
    --------
    >>> import numpy as np, runtime
    >>> from irkernel.tir import script as T
    >>> @T.prim_func
    ... def double(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
    ...     for i in T.serial(4):
    ...         b[i] = a[i] * 2.0
    >>> ex = runtime.build(double)
    >>> out = np.empty(4, np.float32)
    >>> ex["double"](np.arange(4, dtype=np.float32), out)
    >>> out.tolist()
    [0.0, 2.0, 4.0, 6.0]
    """
    if isinstance(mod, PrimFunc):
        mod = IRModule({str(mod.attrs.get("global_symbol", "main")): mod})
    if not isinstance(mod, IRModule):
        raise TypeError(f"build: expected an IRModule or PrimFunc, got {type(mod).__name__}")
    if progress is not None and not callable(progress):
        raise TypeError(f"build: progress must be callable(done, total), got {progress!r}")
    _refuse_symbolic(mod)
    disk = cache if isinstance(cache, DiskCache) else (DiskCache() if cache else None)
    module = mod

    def work() -> Executable:
        with contextlib.ExitStack() as stack, \
                build_context(opt_level, tuned_config(disk)) as ctx:
            executor = _open_engine(engine, stack)
            lowered = module
            has_graphs = any(not transform.is_prim_func(f) for f in lowered.functions.values())
            if has_graphs:
                irkernel.verify(lowered)
                lowered = graph_pipeline(ctx)(lowered, ctx)
            return _build_lowered(lowered, ctx, disk, has_graphs,
                                  progress if progress is not None else tty_progress(), executor)

    # On a worker thread, the main thread waiting: Ctrl-C raises KeyboardInterrupt at once
    # in any phase, and the abandoned build stops at its next pass (runtime/interrupt.py).
    return run_on_worker(work)


def _open_engine(engine: Any, stack: contextlib.ExitStack) -> Any:
    """The engine of ``build(engine=...)``: None (LLVM on a thread of this process), or
    ``scaleout.open_engine(engine)`` (its ``submit`` feeds the compiler; its errors are
    TaskError/WorkerLostError), closed with ``stack``."""
    if engine is None:
        return None
    return stack.enter_context(scaleout.open_engine(engine))


def _jobs(mod: IRModule, ctx: transform.PassContext) -> tuple[list[Job], dict[str, Job]]:
    """One job per distinct PrimFunc of ``mod`` (verified), and each name's job."""
    settings = LoweringSettings.of(ctx)
    target, version = target_for(settings.cpu), code_version(settings.pipeline)
    fast_max = int(ctx.get_config(FAST_TIER_MAX_ELEMENTS))
    by_key: dict[str, Job] = {}
    of_name: dict[str, Job] = {}
    symbols: dict[str, str] = {}
    for name, func in mod.functions.items():
        if not transform.is_prim_func(func):
            continue
        func.verify(name)
        symbol = str(func.attrs.get("global_symbol", name))
        if symbol in symbols:
            raise ValueError(f"build: functions {symbols[symbol]!r} and {name!r} both compile "
                             f"to the symbol {symbol!r}; give one another global_symbol")
        symbols[symbol] = name
        tier = tier_of(func, fast_max)
        key = kernel_key(func, settings, target, version, tier)
        job = by_key.get(key)
        if job is None:
            job = by_key[key] = Job(key, name, func, tier=tier)
        job.names.append(name)
        of_name[name] = job
    return list(by_key.values()), of_name


def _build_lowered(mod: IRModule, ctx: transform.PassContext, disk: DiskCache | None,
                   has_graphs: bool, progress: Progress | None, executor: Any) -> Executable:
    settings = LoweringSettings.of(ctx)

    def compile_kernels(m: IRModule, c: transform.PassContext) -> CompiledKernels:
        jobs, of_name = _jobs(m, c)
        compiler = Compiler(jobs, settings.fast_math, disk, progress, executor,
                            settings.cpu)
        compiler.run(code_version(settings.pipeline))
        for key, value in compiler.stats.items():
            c.stat(key, value)
        return CompiledKernels(tuple(jobs), of_name, compiler.objects,
                               tuple(sorted(compiler.cached_objects)))

    compiled = _phase("CompileKernels", mod, ctx, compile_kernels)

    def link(m: IRModule, c: transform.PassContext) -> LinkedKernels:
        # Markers around loading cached objects: a process that dies in the JIT linker
        # leaves them, and the next one quarantines those entries instead of dying too.
        loading = disk.loading("obj", *compiled.cached) if disk is not None and compiled.cached \
            else contextlib.nullcontext()
        with loading:
            engine = _engine_of(compiled.objects.values())
        return LinkedKernels(engine, _kernels(m, compiled.of_name, engine),
                             {n: _source(j, settings) for n, j in compiled.of_name.items()})

    for attempt in range(2):
        try:
            linked = _phase("Link", mod, ctx, link)
            break
        except AbiMismatch as exc:  # a cached kernel bound to other code: drop, rebuild once
            job = next((j for j in compiled.jobs if j.symbol == exc.symbol), None)
            if attempt or disk is None or job is None or job.batch not in compiled.cached:
                raise
            disk.discard("index", job.key, str(exc))
            disk.discard("obj", job.batch, str(exc))
            compiled = _phase("CompileKernels", mod, ctx, compile_kernels)
    graphs = _phase("GraphExecutors", mod, ctx,
                    lambda m, c: _graph_executors(m, linked.kernels)) if has_graphs else {}
    jobs = compiled.of_name
    defines = {j.batch: j.symbol for j in jobs.values()}  # one symbol each object defines
    saved = SavedExecutable(
        mod, {n: KernelSymbol(j.symbol, j.tier) for n, j in jobs.items()},
        tuple(SavedObject(obj, defines[key]) for key, obj in compiled.objects.items()
              if key in defines),
        settings, has_graphs, host().key)
    return Executable(dict(linked.kernels), dict(linked.sources), linked.engine, graphs,
                      mod if has_graphs else None, saved=saved, loader=load_executable)


def _engine_of(objects: Iterable[bytes]) -> Engine:
    engine = Engine()
    engine.add_objects(list(objects))
    return engine


def _kernels(m: IRModule, jobs: Mapping[str, Job], engine: Engine) -> dict[str, Kernel]:
    """Each kernel bound to its code, whose ABI record must be the kernel's (AbiMismatch)."""
    kernels = {}
    for name, job in jobs.items():
        convention = CallingConvention(m.functions[name], name)
        convention.check_record(engine.abi_record(job.symbol), job.symbol)
        kernels[name] = Kernel(name, convention, engine.address(job.symbol), engine)
    return kernels


def _graph_executors(m: IRModule, kernels: Mapping[str, Kernel]) -> dict[str, GraphExecutor]:
    graphs: dict[str, GraphExecutor] = {}
    native = make_kernels(kernels)
    for name, func in m.functions.items():
        if not transform.is_prim_func(func):
            graphs[name] = GraphExecutor(name, func, native, graphs)
    return graphs


def load_executable(saved: SavedExecutable) -> Executable:
    """Rebuild a pickled Executable: its lowered module and object bytes, linked here.

    Raises
    ------
    RuntimeError
        When the objects were compiled for another CPU than this process's, or one is
        not a loadable object for this target (checked before the JIT linker sees it).
    """
    if not isinstance(saved, SavedExecutable):
        raise TypeError(f"load_executable: expected a SavedExecutable, got "
                        f"{type(saved).__name__} (a pickle of an older irkernel: build again)")
    target = host()
    if saved.target_key != target.key:
        raise RuntimeError(f"unpickled Executable was compiled for {saved.target_key}; this "
                           f"process runs on {target.key}: build the module again here")
    mod = saved.module
    jobs: dict[str, Job] = {}
    for name, where in saved.kernels.items():
        func = mod.functions.get(name)
        if not transform.is_prim_func(func):
            raise RuntimeError(f"unpickled Executable: {name!r} is not a PrimFunc of its module")
        jobs[name] = Job("", name, func, symbol=where.symbol, tier=where.tier)
    for k, saved_obj in enumerate(saved.objects):
        problem = object_problem(saved_obj.obj, saved_obj.symbol, target.triple)
        if problem is not None:
            raise RuntimeError(f"unpickled Executable: object {k} is not loadable here: "
                               f"{problem}")
    engine = _engine_of(o.obj for o in saved.objects)
    kernels = _kernels(mod, jobs, engine)
    graphs = _graph_executors(mod, kernels) if saved.has_graphs else {}
    return Executable(kernels, {n: _source(j, saved.settings) for n, j in jobs.items()},
                      engine, graphs, mod if saved.has_graphs else None, saved=saved,
                      loader=load_executable)


__all__ = ["GENERIC_MAX_ELEMENTS", "GRAPH_PIPELINE", "CompiledKernels", "LinkedKernels", "build",
           "build_context", "code_version", "graph_pipeline", "load_executable"]
