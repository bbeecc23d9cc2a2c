"""``runtime.build(mod)``: compile a module into an :class:`Executable`.

The phases, each a pass under the current ``PassContext`` (so instruments,
``disabled_pass`` and config apply, and ``PassTimingInstrument`` /
``--time-passes`` show where build time goes):

1. ``GraphLowering`` (graph modules only): the Sequential of
   :data:`GRAPH_PIPELINE`: graph simplification, ``LegalizeOps`` (graph ops ->
   ``call_tir``; small tensors call shape-generic kernels), ``FuseOps`` +
   ``FuseTIR`` (fused PrimFuncs) and ``DeadCodeElimination`` (drops unused
   PrimFuncs).
2. ``CompileKernels``: every distinct PrimFunc (by kernel key, see
   ``runtime/compile.py``) is found in the on-disk cache or lowered
   (``LowerTIR``: the TIR passes of ``passes.tir.LOWERING``, nested here) and
   compiled to machine code in batches, LLVM running on a worker thread while
   the next batch is lowered. Reports ``kernels``, ``cached``, ``compiled``,
   ``batches`` and ``llvm_s``.
3. ``Link``: the batch objects are loaded into one JIT engine.
4. ``GraphExecutors``: a memory plan and a launch table per graph function.

``build(mod, opt_level=N)`` runs all of it in a context derived from the
current one with only ``opt_level`` replaced (see :func:`build_context`).
``progress(done, total)`` is called as kernels are compiled; without it, a
build that runs longer than 2 s on a terminal shows a tqdm bar when tqdm is
installed.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import irkernel
from irkernel import transform
from irkernel.ir.module import IRModule
from irkernel.tir.function import PrimFunc
from passes.tir import FAST_MATH
from passes.tir.unroll_loop import CONFIG_KEY as UNROLL_KEY

from runtime import threadpool  # noqa: F401  (registers irkernel_parallel_launch with LLVM)
from runtime.abi import AbiMismatch, CallingConvention
from runtime.cache import DiskCache
from runtime.compile import (
    FAST_TIER_MAX_ELEMENTS,
    Compiler,
    Job,
    Progress,
    kernel_key,
    lower_tir,
    tier_of,
    tty_progress,
)
from runtime.executable import Executable, Kernel
from runtime.executor import GraphExecutor, make_kernels
from runtime.jit import Engine, assembly, optimized_ir
from runtime.lower import lower
from runtime.objfile import object_problem
from runtime.target import host

_SOURCE_DIRS = ("runtime", "passes/tir", "irkernel/tir")
_LOG = logging.getLogger("runtime.build")

#: The default lowering pipeline of graph modules (registered pass names, in order).
GRAPH_PIPELINE = ("FoldConstant", "FoldBatchNorm", "SimplifyArith", "EliminateCommonSubexpr",
                  "DeadCodeElimination", "SplitConcat", "LegalizeOps", "FuseOps", "FuseTIR",
                  "DeadCodeElimination")


@functools.cache
def code_version() -> str:
    """A digest of the code that turns TIR into objects (part of every kernel key)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.blake2b(digest_size=16)
    h.update(irkernel.__version__.encode())
    for sub in _SOURCE_DIRS:
        for path in sorted((root / sub).glob("*.py")):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _settings(ctx: transform.PassContext) -> tuple[Any, ...]:
    """What of the context changes lowering (part of the key; replayed for sources)."""
    unroll = ctx.get_config(UNROLL_KEY)
    return (ctx.opt_level, tuple(sorted(ctx.disabled_pass)),
            bool(ctx.get_config(FAST_MATH)), tuple(sorted(dict(unroll).items())))


def _source(job: Job, settings: tuple[Any, ...]) -> Callable[[str], str]:
    """``source("tir" | "llvm" | "asm")`` of one kernel (optimized LLVM IR and assembly in
    its tier), lowered again on demand: builds keep no lowered TIR or IR text (most never
    ask, and a large build would hold megabytes)."""
    memo: dict[str, str] = {}

    def source(kind: str) -> str:
        if not memo:
            opt_level, disabled, fast_math, unroll = settings
            with transform.PassContext(opt_level=opt_level, disabled_pass=list(disabled),
                                       config={FAST_MATH: fast_math, UNROLL_KEY: dict(unroll)}):
                lowered = lower_tir(job.name, job.func)
            memo["tir"] = lowered.script(job.name)
            memo["ir"] = lower(lowered, job.symbol, host(), fast_math)
        if kind not in memo:
            make = optimized_ir if kind == "llvm" else assembly
            memo[kind] = make(memo["ir"], job.tier)
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
    """:data:`GRAPH_PIPELINE` as one Sequential; unregistered passes are skipped (logged).

    LegalizeOps gets ``generic_max_elements`` from the context's config
    ``runtime.generic_max_elements``: small tensors are not worth a kernel of
    their own (a build of 1e5 small ops would compile thousands), large ones are.
    """
    ctx = ctx if ctx is not None else transform.PassContext.current()
    known = set(transform.list_passes())
    missing = [name for name in GRAPH_PIPELINE if name not in known]
    if missing:
        _LOG.warning("runtime.build: passes %s are not registered; the graph lowering "
                     "pipeline runs without them", ", ".join(dict.fromkeys(missing)))
    options = {"LegalizeOps": {"generic_max_elements": int(ctx.get_config(GENERIC_MAX_ELEMENTS))}}
    return transform.Sequential([transform.get_pass(n, **options.get(n, {}))
                                 for n in GRAPH_PIPELINE if n in known], name="GraphLowering")


@contextmanager
def build_context(opt_level: int | None) -> Iterator[transform.PassContext]:
    """The current PassContext, or one derived from it with ``opt_level`` replaced.

    The derived context keeps required/disabled passes and config, and the
    *same* instrument objects. They are installed without calling their
    ``enter_pass_ctx``/``exit_pass_ctx`` again: the user's context already
    entered them, and re-entering would reset state such as a
    PassTimingInstrument's profile. Pass statistics of the build land in the
    derived context.
    """
    ctx = transform.PassContext.current()
    if opt_level is None or opt_level == ctx.opt_level:
        yield ctx
        return
    derived = transform.PassContext(opt_level=opt_level, required_pass=ctx.required_pass,
                                    disabled_pass=ctx.disabled_pass, config=dict(ctx.config))
    with derived:
        # NOTE: private on purpose; see the docstring (no enter/exit hook calls).
        derived._set_instruments(ctx.instruments)
        try:
            yield derived
        finally:
            derived._set_instruments(())


def _phase(name: str, step: Callable[[IRModule, transform.PassContext], None]
           ) -> transform.ModulePass:
    """A build step as a pass that returns its module unchanged (so instruments time it)."""
    def run(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        step(mod, ctx)
        return mod

    return transform.ModulePass(run, transform.PassInfo(0, name))


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
    disk = cache if isinstance(cache, DiskCache) else (DiskCache() if cache else None)
    with contextlib.ExitStack() as stack, build_context(opt_level) as ctx:
        executor = _open_engine(engine, stack)
        has_graphs = any(not transform.is_prim_func(f) for f in mod.functions.values())
        if has_graphs:
            irkernel.verify(mod)
            mod = graph_pipeline(ctx)(mod, ctx)
        return _build_lowered(mod, ctx, disk, has_graphs,
                              progress if progress is not None else tty_progress(), executor)


def _open_engine(engine: Any, stack: contextlib.ExitStack) -> Any:
    """The executor of ``build(engine=...)``: None, or an object with ``submit``; one the
    build starts (``"local"``, an address) is closed with ``stack``."""
    if engine is None or hasattr(engine, "submit"):
        return engine
    if engine == "local":
        return stack.enter_context(transform.local_executor())
    if isinstance(engine, str) and "://" in engine:
        try:
            from distributed import Client
        except ImportError:
            raise ImportError(f"build: engine {engine!r} needs Dask: pip install "
                              "'irkernel[dask]'") from None
        return stack.enter_context(Client(engine))
    raise TypeError(f"build: engine must be None, 'local', a scheduler address, an Executor "
                    f"or a Dask Client, got {engine!r}")


def _jobs(mod: IRModule, ctx: transform.PassContext) -> tuple[list[Job], dict[str, Job]]:
    """One job per distinct PrimFunc of ``mod`` (verified), and each name's job."""
    settings = _settings(ctx)
    target, version = host(), code_version()
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
    state: dict[str, Any] = {}

    def compile_kernels(m: IRModule, c: transform.PassContext) -> None:
        jobs, of_name = _jobs(m, c)
        compiler = Compiler(jobs, bool(c.get_config(FAST_MATH)), disk, progress, executor)
        compiler.run(code_version())
        for key, value in compiler.stats.items():
            c.stat(key, value)
        state.update(jobs=jobs, of_name=of_name, objects=compiler.objects,
                     cached=sorted(compiler.cached_objects))

    def link(m: IRModule, c: transform.PassContext) -> None:
        # Markers around loading cached objects: a process that dies in the JIT linker
        # leaves them, and the next one quarantines those entries instead of dying too.
        loading = disk.loading("obj", *state["cached"]) if disk is not None and state["cached"] \
            else contextlib.nullcontext()
        with loading:
            engine = _engine_of(state["objects"].values())
        jobs = state["of_name"]
        state.update(engine=engine, kernels=_kernels(m, jobs, engine),
                     sources={n: _source(j, _settings(c)) for n, j in jobs.items()})

    def executors(m: IRModule, c: transform.PassContext) -> None:
        state["graphs"] = _graph_executors(m, state["kernels"])

    steps = [_phase("CompileKernels", compile_kernels), _phase("Link", link)]
    if has_graphs:
        steps.append(_phase("GraphExecutors", executors))
    for attempt in range(2):
        try:
            for step in steps:
                step(mod, ctx)
            break
        except AbiMismatch as exc:  # a cached kernel bound to other code: drop, rebuild once
            job = next((j for j in state["jobs"] if j.symbol == exc.symbol), None)
            if attempt or disk is None or job is None or job.batch not in state["cached"]:
                raise
            disk.discard("index", job.key, str(exc))
            disk.discard("obj", job.batch, str(exc))
    jobs = state["of_name"]
    defines = {j.batch: j.symbol for j in jobs.values()}  # one symbol each object defines
    saved = (mod, {n: (j.symbol, j.tier) for n, j in jobs.items()},
             [(obj, defines[key]) for key, obj in state["objects"].items() if key in defines],
             _settings(ctx), has_graphs, host().key)
    return Executable(state["kernels"], state["sources"], state["engine"],
                      state.get("graphs", {}), mod if has_graphs else None,
                      pickled=(load_executable, saved))


def _engine_of(objects: Iterable[bytes]) -> Engine:
    engine = Engine()
    engine.add_objects(list(objects))
    return engine


def _kernels(m: IRModule, jobs: dict[str, Job], engine: Engine) -> dict[str, Kernel]:
    """Each kernel bound to its code, whose ABI record must be the kernel's (AbiMismatch)."""
    kernels = {}
    for name, job in jobs.items():
        convention = CallingConvention(m.functions[name], name)
        convention.check_record(engine.abi_record(job.symbol), job.symbol)
        kernels[name] = Kernel(name, convention, engine.address(job.symbol), engine)
    return kernels


def _graph_executors(m: IRModule, kernels: dict[str, Kernel]) -> dict[str, GraphExecutor]:
    graphs: dict[str, GraphExecutor] = {}
    native = make_kernels(kernels)
    for name, func in m.functions.items():
        if not transform.is_prim_func(func):
            graphs[name] = GraphExecutor(name, func, native, graphs)
    return graphs


def load_executable(mod: IRModule, symbols: dict[str, tuple[str, str]],
                    objects: list[tuple[bytes, str]],
                    settings: tuple[Any, ...], has_graphs: bool, target_key: str) -> Executable:
    """Rebuild a pickled Executable: its lowered module and object bytes, linked here.

    Raises
    ------
    RuntimeError
        When the objects were compiled for another CPU than this process's, or one is
        not a loadable object for this target (checked before the JIT linker sees it).
    """
    target = host()
    if target_key != target.key:
        raise RuntimeError(f"unpickled Executable was compiled for {target_key}; this process "
                           f"runs on {target.key}: build the module again here")
    jobs: dict[str, Job] = {}
    for name, (symbol, tier) in symbols.items():
        func = mod.functions.get(name)
        if not transform.is_prim_func(func):
            raise RuntimeError(f"unpickled Executable: {name!r} is not a PrimFunc of its module")
        jobs[name] = Job("", name, func, symbol=symbol, tier=tier)
    for k, (obj, symbol) in enumerate(objects):
        problem = object_problem(obj, symbol, target.triple)
        if problem is not None:
            raise RuntimeError(f"unpickled Executable: object {k} is not loadable here: "
                               f"{problem}")
    engine = _engine_of(obj for obj, _ in objects)
    kernels = _kernels(mod, jobs, engine)
    graphs = _graph_executors(mod, kernels) if has_graphs else {}
    saved = (mod, symbols, objects, settings, has_graphs, target_key)
    return Executable(kernels, {n: _source(j, settings) for n, j in jobs.items()}, engine,
                      graphs, mod if has_graphs else None, pickled=(load_executable, saved))

__all__ = ["GENERIC_MAX_ELEMENTS", "GRAPH_PIPELINE", "build", "build_context", "code_version",
           "graph_pipeline", "load_executable"]
