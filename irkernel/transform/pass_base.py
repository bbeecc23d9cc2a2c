"""Pass classes and the runner: ModulePass, FunctionPass, PrimFuncPass, Sequential, FixedPoint.

Design note: running one pass (``p(mod)`` or a Sequential step), in order:

1. (Sequential only) the enabling rule: disabled > required > opt_level.
2. ``required``: the names are resolved once per pass object, through the
   registry, into a DAG in topological order (transitively, de-duplicated;
   a cycle or an unknown name is a ValueError naming it). Each required pass
   runs (through the instruments) unless the context records that it produced
   the current module (change tracking makes that an identity test).
3. ``should_run`` of every instrument, ANDed (each is called), unless the
   pass is in the context's ``required_pass``; a veto returns the input.
4. ``irkernel.bisect_limit``: leaf passes count one execution each; past the
   limit the pass is skipped (logged) and gets no before/after hooks.
5. ``run_before_pass`` hooks, the transformation, ``run_after_pass`` hooks
   (with the output). An exception from any of them propagates unchanged.

Change tracking: a pass that changes nothing returns its input object.
FunctionPass calls ``IRModule.with_functions`` only with the functions that
came back as different objects, so an all-identity sweep returns the very
same module. Imports irkernel core types only; never ``passes``/``runtime``.
"""

from __future__ import annotations

# pyright: reportPrivateUsage=false, reportUnnecessaryIsInstance=false
# (the runner reads PassContext internals it shares a package with; public entry
# points validate their arguments at run time although the annotations say the same)
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

from irkernel.transform.context import STATE, PassContext, PassInfo, RunningFrame, logger
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule

ModuleFunc = Callable[[IRModule, PassContext], IRModule]
FunctionFunc = Callable[[Any, IRModule, PassContext], Any]


def is_prim_func(value: object) -> bool:
    """Whether ``value`` is a TIR PrimFunc.

    ``irkernel.tir.PrimFunc`` sets the class attribute ``_irkernel_prim_func =
    True``; checking the marker keeps this module free of a ``tir`` import.
    """
    return bool(getattr(type(value), "_irkernel_prim_func", False))


class Pass:
    """Base class of passes: ``pass_(mod)`` or ``pass_(mod, ctx)`` returns a new IRModule.

    A pass never mutates its input; when it changes nothing it returns the
    input object itself. Called directly, a pass always runs (the enabling
    rule is :class:`Sequential`'s); instruments of the context apply either way.
    """

    #: Leaf passes count toward ``irkernel.bisect_limit``; containers do not.
    _is_container = False

    def __init__(self, info: PassInfo) -> None:
        if not isinstance(info, PassInfo):
            raise TypeError(f"info must be a PassInfo, got {type(info).__name__}")
        self._info = info
        self._text: str | None = None  # set by get_pass: "Name{opt=value}"
        self._plan: tuple[Pass, ...] | None = None

    @property
    def info(self) -> PassInfo:
        """The pass metadata (opt_level, name, required)."""
        return self._info

    @property
    def _key(self) -> str:
        """Identity of the pass for required-pass bookkeeping: its pipeline text."""
        return self._text if self._text is not None else self._info.name

    def __call__(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        """Run the pass (its required passes first) under ``ctx`` (default: the current one).

        Parameters
        ----------
        mod : IRModule
            The input; never mutated.
        ctx : PassContext, optional
            Its instruments and config apply; defaults to ``PassContext.current()``.

        Returns
        -------
        IRModule
            The result; ``mod`` itself when nothing changed.
        """
        if ctx is None:
            ctx = PassContext.current()
        elif not isinstance(ctx, PassContext):
            raise TypeError(f"{self._info.name}: ctx must be a PassContext, "
                            f"got {type(ctx).__name__}")
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self._info.name}: expected an IRModule, got {type(mod).__name__}")
        return run_with_required(self, mod, ctx)

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """The transformation itself, without instruments or required passes."""
        raise NotImplementedError

    def _pipeline_item(self) -> str:
        """This pass as one element of a textual pipeline."""
        return str(self)

    def __str__(self) -> str:
        return self._text if self._text is not None else self._info.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._info.name} opt_level={self._info.opt_level}>"


class ModulePass(Pass):
    """A pass over the whole module: ``pass_func(mod, ctx) -> IRModule``.

    It may add or remove functions. Build one with :func:`module_pass`.
    """

    def __init__(self, pass_func: ModuleFunc, info: PassInfo) -> None:
        if not callable(pass_func):
            raise TypeError(f"{info.name}: pass_func must be callable")
        super().__init__(info)
        self._pass_func = pass_func

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self._pass_func(mod, ctx)


class FunctionPass(Pass):
    """A pass applied to each graph Function: ``pass_func(func, mod, ctx) -> Function``.

    Skips functions whose attr ``SkipOptimization`` is true and values that are
    not graph Functions (PrimFuncs). It cannot add or remove functions;
    returning anything but a Function is a TypeError naming the pass. When
    every call returns its input, the pass returns the input module itself.
    Build one with :func:`function_pass`.
    """

    _kind = "Function"

    def __init__(self, pass_func: FunctionFunc, info: PassInfo) -> None:
        if not callable(pass_func):
            raise TypeError(f"{info.name}: pass_func must be callable")
        super().__init__(info)
        self._pass_func = pass_func

    def _accepts(self, value: object) -> bool:
        return isinstance(value, Function)

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        pass_func = self._pass_func
        accepts = self._accepts
        changed: dict[str, Any] | None = None
        for name, value in mod.functions.items():
            if not accepts(value):
                continue
            attrs = getattr(value, "attrs", None)
            if attrs is not None and attrs.get("SkipOptimization", False):
                continue
            out = pass_func(value, mod, ctx)
            if out is value:
                continue
            if not accepts(out):
                raise TypeError(
                    f"pass {self._info.name!r} returned {type(out).__name__} for function "
                    f"{name!r}; a {type(self).__name__} must return a {self._kind} "
                    f"(use a module_pass to add or remove functions)")
            if changed is None:
                changed = {}
            changed[name] = out
        return mod if changed is None else mod.with_functions(changed)


class PrimFuncPass(FunctionPass):
    """A pass applied to each TIR PrimFunc: ``pass_func(prim_func, mod, ctx) -> PrimFunc``.

    Same rules as :class:`FunctionPass` for PrimFuncs (values whose class sets
    ``_irkernel_prim_func = True``). Build one with :func:`prim_func_pass`.
    """

    _kind = "PrimFunc"

    def _accepts(self, value: object) -> bool:
        return is_prim_func(value)


class Sequential(Pass):
    """Runs passes in order, applying the context's enabling rule to each.

    A pass in ``disabled_pass`` is skipped; else one in ``required_pass`` runs;
    else it runs when ``info.opt_level <= ctx.opt_level``. The Sequential is a
    pass itself: instruments see it around its inner passes.

    Parameters
    ----------
    passes : list or tuple of Pass, optional
    opt_level : int
        Its own level when nested in another Sequential (default 0: always).
    name : str
    required : list or tuple of str, optional

    Examples
    --------
    >>> seq = Sequential([get_pass("FoldConstant"), get_pass("DeadCodeElimination")])
    ... # doctest: +SKIP
    """

    _is_container = True

    def __init__(self, passes: Sequence[Pass] | None = None, opt_level: int = 0,
                 name: str = "sequential", required: Sequence[str] | None = None) -> None:
        super().__init__(PassInfo(opt_level, name, _as_list(required)))
        self.passes: tuple[Pass, ...] = _check_passes(passes, name)

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        disabled = ctx._disabled_set
        required = ctx._required_set
        level = ctx.opt_level
        for p in self.passes:
            info = p._info
            if info.name in disabled:
                continue
            if info.name not in required and info.opt_level > level:
                continue
            mod = run_with_required(p, mod, ctx)
        return mod

    def _inner_text(self) -> str:
        return ",".join(p._pipeline_item() for p in self.passes)

    def _pipeline_item(self) -> str:
        if self._text is not None:
            return self._text
        return f"{self._info.name}({self._inner_text()})"

    def __str__(self) -> str:
        """The textual pipeline (``parse_pipeline`` reads it back for registered passes)."""
        return self._text if self._text is not None else self._inner_text()

    def __repr__(self) -> str:
        return f"<Sequential {self._info.name}: {self._inner_text()}>"


class FixedPoint(Sequential):
    """Repeats its passes until a round returns the module unchanged (identity).

    Bounded by ``max_iterations``, else by the config
    ``irkernel.fixpoint_max_iterations``; hitting the bound logs a warning and
    returns the last module. Reports the stat ``iterations``. Written
    ``fixpoint(A,B)`` in a textual pipeline.

    Parameters
    ----------
    passes : list or tuple of Pass
    max_iterations : int, optional
    name : str
    """

    def __init__(self, passes: Sequence[Pass] | None = None,
                 max_iterations: int | None = None, name: str = "fixpoint") -> None:
        if max_iterations is not None and (not isinstance(max_iterations, int)
                                           or isinstance(max_iterations, bool)
                                           or max_iterations < 1):
            raise ValueError(f"max_iterations must be an int >= 1, got {max_iterations!r}")
        super().__init__(passes, 0, name)
        self.max_iterations = max_iterations

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        limit = self.max_iterations
        if limit is None:
            limit = int(ctx.get_config("irkernel.fixpoint_max_iterations"))
        for rounds in range(1, limit + 1):
            out = Sequential.transform(self, mod, ctx)
            if out is mod:
                ctx.stat("iterations", rounds)
                return out
            mod = out
        ctx.stat("iterations", limit)
        logger.warning("%s: no fixed point after %d iterations; keeping the last module",
                       self._info.name, limit)
        return mod

    def _pipeline_item(self) -> str:
        if self._text is not None:
            return self._text
        opts = "" if self.max_iterations is None else f"{{max_iterations={self.max_iterations}}}"
        return f"fixpoint{opts}({self._inner_text()})"

    def __str__(self) -> str:
        return self._pipeline_item()


# ---------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------


def execute(p: Pass, mod: IRModule, ctx: PassContext) -> IRModule:
    """Steps 3-5 of the module docstring: should_run, bisection, hooks, the pass."""
    info = p._info
    if ctx._should_run_hooks and info.name not in ctx._required_set:
        run = True
        for hook in ctx._should_run_hooks:
            run = bool(hook(mod, info)) and run  # every hook is called, as in TVM
        if not run:
            return mod
    if ctx._bisect_limit >= 0 and not p._is_container and not ctx._bisect_step(info.name):
        return mod
    frames = STATE.frames
    frame = RunningFrame(p, info)
    frames.append(frame)
    try:
        for hook in ctx._before_hooks:
            hook(mod, info)
        start = perf_counter()
        out = p.transform(mod, ctx)
        frame.elapsed = perf_counter() - start
        if not isinstance(out, IRModule):
            raise TypeError(f"pass {info.name!r} returned {type(out).__name__}, "
                            f"expected an IRModule")
        ctx._note_result(out, p._key)
        for hook in ctx._after_hooks:
            hook(out, info)
    finally:
        frames.pop()
    return out


def run_with_required(p: Pass, mod: IRModule, ctx: PassContext) -> IRModule:
    """Run the required passes of ``p`` that are not satisfied, then ``p``."""
    plan = p._plan
    if plan is None:
        plan = p._plan = resolve_required(p)
    for req in plan:
        if not ctx._satisfied(mod, req._key):
            mod = execute(req, mod, ctx)
    return execute(p, mod, ctx)


def resolve_required(p: Pass) -> tuple[Pass, ...]:
    """The transitive required passes of ``p``, dependencies first, each once.

    Raises
    ------
    ValueError
        On a cycle (naming it, e.g. ``A -> B -> A``) or an unknown pass name
        (naming the pass that requires it).
    """
    if not p._info.required:
        return ()
    from irkernel.transform.registry import get_pass, registered

    order: list[Pass] = []
    done: set[str] = set()
    path: list[str] = [p._info.name]

    def visit(name: str) -> None:
        if name in done:
            return
        if name in path:
            cycle = [*path[path.index(name):], name]
            raise ValueError(f"cycle in required passes: {' -> '.join(cycle)}")
        if not registered(name):
            raise ValueError(f"pass {path[-1]!r} requires {name!r}, which is not a registered "
                             f"pass")
        req = get_pass(name)
        path.append(name)
        for sub in req._info.required:
            visit(sub)
        path.pop()
        done.add(name)
        order.append(req)

    for name in p._info.required:
        visit(name)
    return tuple(order)


def _as_list(required: Sequence[str] | None) -> list[str] | None:
    if required is None or isinstance(required, list):
        return required
    if isinstance(required, tuple):
        return list(required)
    raise TypeError(f"required must be a list or tuple of pass names, "
                    f"got {type(required).__name__}")


def _check_passes(passes: Sequence[Pass] | None, name: str) -> tuple[Pass, ...]:
    if passes is None:
        return ()
    if not isinstance(passes, (list, tuple)):
        raise TypeError(f"{name}: passes must be a list or tuple of Pass objects, "
                        f"got {type(passes).__name__}")
    for pos, item in enumerate(passes):
        if not isinstance(item, Pass):
            raise TypeError(f"{name}: passes[{pos}] must be a Pass, got {type(item).__name__}")
    return tuple(passes)
