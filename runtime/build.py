"""``runtime.build(mod)``: compile every PrimFunc of a module into an :class:`Executable`.

Per PrimFunc, under the current ``PassContext``:

1. ``verify`` it, and derive its calling convention from the *unlowered*
   parameters (``runtime/abi.py``);
2. look up the cache index by the TIR key (structural digest, symbol,
   lowering config, target, code version); on a hit load the object and stop;
3. otherwise run the lowering passes (``passes.tir.LOWERING`` as a
   ``Sequential``, so instruments and ``disabled_pass`` apply), verify the
   result, generate LLVM IR (``runtime/lower.py``), look up the object by the
   hash of that IR (another PrimFunc may lower to the same code), else
   optimize and emit it (``runtime/jit.py``), and store both entries.

All objects of one build are linked into one JIT engine.

A module with graph Functions first goes through :data:`GRAPH_PIPELINE` as one
``transform.Sequential`` ("GraphLowering") under the current PassContext, so
instruments see every graph pass and, nested inside the build, every TIR
lowering pass: graph simplification, ``LegalizeOps`` (graph ops ->
``call_tir``), ``FuseOps`` + ``FuseTIR`` (fused PrimFuncs) and
``DeadCodeElimination`` (drops unused PrimFuncs). A pass not registered is
skipped with a logged warning. Then every PrimFunc compiles as above and each
graph Function gets a :class:`~runtime.executor.GraphExecutor` (memory plan +
launch list). ``build(mod, opt_level=N)`` runs all of it in a context derived
from the current one with only ``opt_level`` replaced (see
:func:`build_context`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import irkernel
from irkernel import transform
from irkernel.ir.module import IRModule
from irkernel.tir.function import PrimFunc
from passes.tir import FAST_MATH, LOWERING
from passes.tir.unroll_loop import CONFIG_KEY as UNROLL_KEY
from runtime import threadpool  # noqa: F401  (registers irkernel_parallel_launch with LLVM)
from runtime.abi import CallingConvention
from runtime.cache import DiskCache, digest
from runtime.executable import Executable, Kernel
from runtime.executor import GraphExecutor, make_kernels
from runtime.jit import Engine, compile_ir
from runtime.lower import lower
from runtime.objfile import object_check
from runtime.target import Target, host

_SOURCE_DIRS = ("runtime", "passes/tir", "irkernel/tir")
_LOG = logging.getLogger("runtime.build")

#: The default lowering pipeline of graph modules (registered pass names, in order).
GRAPH_PIPELINE = ("FoldConstant", "SimplifyArith", "EliminateCommonSubexpr",
                  "DeadCodeElimination", "LegalizeOps", "FuseOps", "FuseTIR",
                  "DeadCodeElimination")


@functools.cache
def code_version() -> str:
    """A digest of the code that turns TIR into objects (part of the cache index key)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.blake2b(digest_size=16)
    h.update(irkernel.__version__.encode())
    for sub in _SOURCE_DIRS:
        for path in sorted((root / sub).glob("*.py")):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _symbol(name: str, func: PrimFunc) -> str:
    symbol = str(func.attrs.get("global_symbol", name))
    return re.sub(r"[^A-Za-z0-9_]", "_", symbol) or "main"


def _settings(ctx: transform.PassContext) -> tuple[Any, ...]:
    """What of the context changes lowering (part of the cache key; replayed for sources)."""
    unroll = ctx.get_config(UNROLL_KEY)
    return (ctx.opt_level, tuple(sorted(ctx.disabled_pass)),
            bool(ctx.get_config(FAST_MATH)), tuple(sorted(dict(unroll).items())))


def _lower_tir(name: str, func: PrimFunc) -> PrimFunc:
    pipeline = transform.Sequential([transform.get_pass(p) for p in LOWERING],
                                     name="LowerTIR")
    lowered = pipeline(IRModule({name: func}))[name]
    lowered.verify(name)
    return lowered


class _Compiled:
    """One kernel's object and a way to regenerate its sources."""

    def __init__(self, name: str, func: PrimFunc, symbol: str, settings: tuple[Any, ...],
                 obj: bytes, target: Target) -> None:
        self.name, self.func, self.symbol, self.obj = name, func, symbol, obj
        self.settings = settings
        self.target = target
        self.cache_key: str | None = None  # the obj entry this object is stored under
        self._ir: str | None = None
        self._lowered: PrimFunc | None = None

    def remember(self, lowered: PrimFunc, ir_text: str) -> None:
        """Keep the lowered PrimFunc (printed only when asked: printing is not free, and
        most builds never ask) and its LLVM IR text."""
        self._lowered, self._ir = lowered, ir_text

    def source(self, kind: str) -> str:
        """``"tir"`` or unoptimized ``"llvm"`` text, re-lowered if it came from the cache."""
        if self._ir is None or self._lowered is None:
            opt_level, disabled, fast_math, unroll = self.settings
            with transform.PassContext(opt_level=opt_level, disabled_pass=list(disabled),
                                       config={FAST_MATH: fast_math, UNROLL_KEY: dict(unroll)}):
                lowered = _lower_tir(self.name, self.func)
            self.remember(lowered, lower(lowered, self.symbol, self.target, fast_math))
        if kind == "tir":
            return self._lowered.script(self.name)  # type: ignore[union-attr]
        return self._ir  # type: ignore[return-value]


def _compile(name: str, func: PrimFunc, symbol: str, ctx: transform.PassContext,
             cache: DiskCache | None) -> _Compiled:
    target = host()
    settings = _settings(ctx)
    tir_key = digest(func.structural_digest(), symbol, repr(settings), target.key,
                     code_version())
    check = object_check(symbol, target.triple)  # before native code sees a cached object
    if cache is not None:
        index = cache.get("index", tir_key)
        obj = cache.get("obj", index.decode(), check) if index else None
        if obj is not None:
            hit = _Compiled(name, func, symbol, settings, obj, target)
            hit.cache_key = index.decode()  # type: ignore[union-attr]
            return hit
    lowered = _lower_tir(name, func)
    ir_text = lower(lowered, symbol, target, fast_math=settings[2])
    obj_key = digest(ir_text, target.key, irkernel.__version__)
    obj = cache.get("obj", obj_key, check) if cache is not None else None
    if obj is None:
        obj = compile_ir(ir_text).obj
        if cache is not None:
            cache.put("obj", obj_key, obj)
    if cache is not None:
        cache.put("index", tir_key, obj_key.encode())
    compiled = _Compiled(name, func, symbol, settings, obj, target)
    compiled.remember(lowered, ir_text)
    compiled.cache_key = obj_key if cache is not None else None
    return compiled


def graph_pipeline() -> transform.Sequential:
    """:data:`GRAPH_PIPELINE` as one Sequential; unregistered passes are skipped (logged)."""
    known = set(transform.list_passes())
    missing = [name for name in GRAPH_PIPELINE if name not in known]
    if missing:
        _LOG.warning("runtime.build: passes %s are not registered; the graph lowering "
                     "pipeline runs without them", ", ".join(dict.fromkeys(missing)))
    return transform.Sequential([transform.get_pass(n) for n in GRAPH_PIPELINE if n in known],
                                name="GraphLowering")


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


def _lower_graphs(mod: IRModule) -> IRModule:
    irkernel.verify(mod)
    return graph_pipeline()(mod)


def build(mod: IRModule | PrimFunc, opt_level: int | None = None, *,
          cache: bool | DiskCache = True) -> Executable:
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
    disk = cache if isinstance(cache, DiskCache) else (DiskCache() if cache else None)
    with build_context(opt_level) as ctx:
        has_graphs = any(not transform.is_prim_func(f) for f in mod.functions.values())
        lowered = _lower_graphs(mod) if has_graphs else mod
        return _build_lowered(lowered, ctx, disk, has_graphs)


def _build_lowered(mod: IRModule, ctx: transform.PassContext, disk: DiskCache | None,
                   has_graphs: bool) -> Executable:
    compiled: dict[str, _Compiled] = {}
    owners: dict[str, str] = {}
    for name, func in mod.functions.items():
        if not transform.is_prim_func(func):
            continue
        func.verify(name)
        symbol = _symbol(name, func)
        if symbol in owners:
            raise ValueError(f"build: functions {owners[symbol]!r} and {name!r} both compile "
                             f"to the symbol {symbol!r}; give one another global_symbol")
        owners[symbol] = name
        compiled[name] = _compile(name, func, symbol, ctx, disk)
    engine = Engine()
    cached = [c.cache_key for c in compiled.values() if c.cache_key is not None]
    # Markers around the load: a process that dies in the JIT linker leaves them, and
    # the next one quarantines those entries instead of dying too (runtime/cache.py).
    with disk.loading("obj", *cached) if disk is not None else contextlib.nullcontext():
        engine.add_objects([c.obj for c in compiled.values()])
    kernels = {name: Kernel(name, CallingConvention(c.func, name), engine.address(c.symbol),
                            engine) for name, c in compiled.items()}
    sources: dict[str, Callable[[str], str]] = {n: c.source for n, c in compiled.items()}
    graphs: dict[str, GraphExecutor] = {}
    if has_graphs:
        native = make_kernels(kernels)
        for name, func in mod.functions.items():
            if not transform.is_prim_func(func):
                graphs[name] = GraphExecutor(name, func, native, graphs)
    return Executable(kernels, sources, engine, graphs, mod if has_graphs else None)


__all__ = ["GRAPH_PIPELINE", "build", "build_context", "code_version", "graph_pipeline"]
