"""The kinds of pass: ModulePass, FunctionPass, PrimFuncPass, Sequential, FixedPoint.

Change tracking: a pass that changes nothing returns its input object.
FunctionPass calls ``IRModule.with_functions`` only with the functions that
came back as different objects, so an all-identity sweep returns the very
same module. Sequential applies the context's enabling rule to each pass it
holds (the order of one run is in ``pass_base``). Imports ``irkernel.ir``
and the pass base; never ``passes``/``runtime``.
"""

from __future__ import annotations

# pyright: reportPrivateUsage=false, reportUnnecessaryIsInstance=false
# (Sequential reads PassContext internals it shares a package with; public entry
# points validate their arguments at run time although the annotations say the same)
from collections.abc import Callable, Sequence
from typing import Any

from irkernel.ir.function import Function
from irkernel.ir.module import IRModule, is_prim_func
from irkernel.transform.context import PassContext, logger
from irkernel.transform.pass_base import Pass, run_with_required
from irkernel.transform.pass_info import PassInfo

ModuleFunc = Callable[[IRModule, PassContext], IRModule]
FunctionFunc = Callable[[Any, IRModule, PassContext], Any]


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
