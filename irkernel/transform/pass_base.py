"""The ``Pass`` base class, the runner that executes one pass, and ``get_pass``.

Design note: running one pass (``p(mod)`` or a Sequential step), in order:

1. (Sequential only) the enabling rule: disabled > required > opt_level.
2. ``required``: the names are resolved once per pass object, through the
   registry, into a DAG in topological order (transitively, de-duplicated;
   a cycle or an unknown name is a ValueError naming it). Each required pass
   runs (through the instruments) unless the context records that it produced
   the current module (change tracking makes that an identity test).
3. ``should_run`` of every instrument, ANDed (each is called), unless the
   pass is in the context's ``required_pass``; a veto returns the input. A
   verdict must be a bool or an integer (TVM's conversion); ``None`` or any
   other object is a TypeError naming the instrument, so an instrument that
   forgot its ``return`` cannot silently switch passes off.
4. ``irkernel.bisect_limit``: leaf passes count one execution each; past the
   limit the pass is skipped (logged) and gets no before/after hooks.
5. ``run_before_pass`` hooks, the transformation, ``run_after_pass`` hooks
   (with the output). An exception from any of them propagates unchanged.

Leaf passes validate their input right before the transformation and their
output after the ``run_after_pass`` hooks (``irkernel.ir.validate``: an
IRError naming the pass, the function, the node and the column; once per
Function, then a set lookup).

``get_pass`` lives here, beside the runner, because resolving ``required``
names makes passes from the registry (which itself holds only factories).
The kinds of pass are in ``pass_kinds``. Imports ``irkernel.ir`` and the
lower transform modules; never ``passes``/``runtime``.
"""

from __future__ import annotations

# pyright: reportPrivateUsage=false, reportUnnecessaryIsInstance=false
# (the runner reads PassContext internals it shares a package with; public entry
# points validate their arguments at run time although the annotations say the same)
from time import perf_counter
from typing import Any

from irkernel.ir.module import IRModule
from irkernel.ir.validate import validate_module
from irkernel.transform.context import STATE, PassContext, RunningFrame
from irkernel.transform.instrument_protocol import should_run_verdict
from irkernel.transform.pass_info import PassInfo
from irkernel.transform.pass_text import format_pass_text
from irkernel.transform.registry import list_passes, lookup
from irkernel.transform.reproducer import write_reproducer


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

# ---------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------


def execute(p: Pass, mod: IRModule, ctx: PassContext) -> IRModule:
    """Steps 3-5 of the module docstring: should_run, bisection, hooks, the pass.

    A leaf pass's input is validated right before its transformation and its
    output right after the ``run_after_pass`` hooks (``irkernel.ir.validate``: once
    per Function, then a set lookup), so no pass kernel sees a malformed Function
    and a pass that produces one is named in the IRError. The hooks come first so
    that an instrument such as VerifyEach reports in its own words.
    """
    info = p._info
    if ctx._should_run_hooks and info.name not in ctx._required_set:
        run = True
        for hook in ctx._should_run_hooks:
            verdict = hook(mod, info)
            if type(verdict) is not bool:  # NOTE: the common case costs one type test
                verdict = should_run_verdict(hook, verdict, info.name)
            run = verdict and run  # every hook is called, as in TVM
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
        leaf = not p._is_container
        if leaf:
            validate_module(mod, info.name)
        start = perf_counter()
        out = p.transform(mod, ctx)
        frame.elapsed = perf_counter() - start
        if not isinstance(out, IRModule):
            raise TypeError(f"pass {info.name!r} returned {type(out).__name__}, "
                            f"expected an IRModule")
        ctx._note_result(out, p._key)
        for hook in ctx._after_hooks:
            hook(out, info)
        if leaf and out is not mod:
            validate_module(out, f"output of {info.name}")
    except Exception as exc:
        if ctx.reproducer_dir is not None and not p._is_container:
            _reproduce(p, mod, ctx, exc)
        raise
    finally:
        frames.pop()
    return out


def _reproduce(p: Pass, mod: IRModule, ctx: PassContext, exc: Exception) -> None:
    """Write the reproducer of the innermost failing leaf pass (once per exception)."""
    if getattr(exc, "irkernel_reproducer", None) is None:
        outer = STATE.frames[0].pass_ if STATE.frames else p
        exc.irkernel_reproducer = write_reproducer(  # type: ignore[attr-defined]
            ctx.reproducer_dir, str(p), str(outer), ctx, mod, exc)


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
    order: list[Pass] = []
    done: set[str] = set()
    path: list[str] = [p._info.name]

    def visit(name: str) -> None:
        if name in done:
            return
        if name in path:
            cycle = [*path[path.index(name):], name]
            raise ValueError(f"cycle in required passes: {' -> '.join(cycle)}")
        if lookup(name) is None:
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


def get_pass(name: str, /, **options: Any) -> Pass:
    """A new pass from the factory registered as ``name``.

    Parameters
    ----------
    name : str
        The registered name, e.g. ``"FoldConstant"`` or ``"O2"``.
    **options
        Keyword arguments for the factory (``FoldConstant{max_elements=1024}``
        in a textual pipeline).

    Returns
    -------
    Pass
        ``str()`` of it is its pipeline text, e.g. ``FoldConstant{max_elements=1024}``.

    Raises
    ------
    ValueError
        When ``name`` is not registered (listing the registered names).
    TypeError
        When the factory does not return a Pass (or rejects the options).
    """
    factory = lookup(name)
    if factory is None:
        known = ", ".join(list_passes()) or "none"
        raise ValueError(f"unknown pass {name!r}; registered passes: {known}")
    made = factory(**options)
    if not isinstance(made, Pass):
        raise TypeError(f"the factory registered as {name!r} returned "
                        f"{type(made).__name__}, not a Pass")
    made._text = format_pass_text(name, options)  # pyright: ignore[reportPrivateUsage]
    return made
