"""PassInfo, the pass-config registry and PassContext (thread-local stack, instruments, caches).

Design note: PassContext ordering (mirrors TVM, see ``docs/pass_infra.md``).

- ``__enter__``: every instrument's ``enter_pass_ctx`` in list order, then the
  context is pushed on the thread's stack (so during the hooks ``current()``
  is still the outer context). If a hook raises, the instruments entered so
  far get ``exit_pass_ctx`` in *reverse* order (entering A, B, C where C fails
  exits B, then A, as TVM 0.27 does: an instrument may rely on one entered
  before it), the instruments are cleared, the context is *not* pushed and the
  exception propagates (TVM's rollback). A normal exit keeps list order, as TVM.
- ``__exit__``: the context is popped first (asserting it is the top), then
  ``exit_pass_ctx`` in list order; a raise clears the instruments and
  propagates, and the stack is already right. The body's exception, if any,
  is never swallowed.
- ``override_instruments``: exit the old instruments, install the new ones,
  enter them (with the same rollback), whether or not the context is active;
  this is how the default context gets instruments.
- The per-thread default context is created on first use and is one stable
  object per thread, so instruments installed on it last.

Hook dispatch: when instruments are set, the context builds one tuple of
bound methods per hook holding only the instruments that override it, so a
context without instruments costs one empty-tuple test per hook per pass.

Required-pass bookkeeping: the context remembers the last module a pass
produced (weakly when the module type allows it) and the names of the passes
whose result that module is. A required pass is skipped when the module it
would run on is that module and its name is in the set. Alternatives
considered: a dict keyed by every module seen (TVM-style analysis manager)
keeps every intermediate module of a pipeline alive when the module type has
no weakref slot, for a benefit only when a user interleaves two modules; one
entry gives the common case (a pipeline on one module) at O(1) memory.

Imports irkernel.ir.function/module types only (never ``passes`` or ``runtime``).
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import builtins
import logging
import numbers
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from irkernel.ir.module import IRModule
from irkernel.transform.config import check_config, config_default, list_configs
from irkernel.transform.instrument_protocol import is_instrument, overridden_hook
from irkernel.transform.pass_info import PassInfo, name_list

# Types of higher layers, named for the reader; this module never imports them.
Pass = Any  # irkernel.transform.pass_base.Pass
PassInstrument = Any  # irkernel.instrument.PassInstrument (see instrument_protocol)

logger = logging.getLogger("irkernel.transform")

# ---------------------------------------------------------------------------
# thread-local state: the context stack, the default context, running frames
# ---------------------------------------------------------------------------


class RunningFrame:
    """One running pass execution (pushed after should_run, popped after run_after_pass).

    ``elapsed`` is the time of the transformation alone (set before the after
    hooks run), so the timing instrument does not count other instruments' hooks.
    """

    __slots__ = ("elapsed", "info", "pass_", "stats")

    def __init__(self, pass_: Pass, info: PassInfo) -> None:
        self.pass_ = pass_
        self.info = info
        self.stats: dict[str, float] | None = None
        self.elapsed = 0.0


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.stack: list[PassContext] = []
        self.default: PassContext | None = None
        self.frames: list[RunningFrame] = []


STATE = _ThreadState()


def running_frame() -> RunningFrame | None:
    """The innermost pass execution running on this thread, if any."""
    frames = STATE.frames
    return frames[-1] if frames else None


class _StrongRef:
    """Stands in for a weakref when the module type has no ``__weakref__`` slot."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __call__(self) -> object:
        return self.obj


def _ref(obj: object) -> Callable[[], object]:
    try:
        return weakref.ref(obj)
    except TypeError:  # NOTE: IRModule has __slots__ without __weakref__ (so far)
        return _StrongRef(obj)


# ---------------------------------------------------------------------------
# PassContext
# ---------------------------------------------------------------------------

_Hooks = tuple[Callable[..., Any], ...]


class PassContext:
    """The settings and instruments passes run under; a ``with`` block makes it current.

    Parameters
    ----------
    opt_level : int
        Passes inside a :class:`Sequential` run when ``info.opt_level <= opt_level``.
    required_pass : list/tuple/set of str, optional
        Passes that run inside a Sequential whatever their opt level; ``should_run``
        is not consulted for them.
    disabled_pass : list/tuple/set of str, optional
        Passes that a Sequential never runs (this wins over ``required_pass``).
    instruments : list or tuple of PassInstrument, optional
        Called around every pass (see :class:`irkernel.instrument.PassInstrument`).
    config : mapping, optional
        Values of registered config options (``register_pass_config``).
    reproducer_dir : str or path, optional
        When a pass raises (or an instrument's check fails after it), one file
        with its input module, the pass, the pipeline, opt level, config and
        instruments is written here (``irkernel.transform.reproducer``; replay with
        ``irkernel opt --run-reproducer FILE``); the exception gets its path as
        ``exc.irkernel_reproducer`` and propagates unchanged.

    Raises
    ------
    ValueError
        For an unknown config key (the message lists the registered keys), or a
        negative ``opt_level``.
    TypeError
        For a wrong-typed argument or config value (naming it).

    Examples
    --------
    >>> with PassContext(opt_level=3, disabled_pass=["EliminateCommonSubexpr"]) as ctx:
    ...     assert PassContext.current() is ctx
    """

    def __init__(self, opt_level: int = 2,
                 required_pass: Iterable[str] | None = None,
                 disabled_pass: Iterable[str] | None = None,
                 instruments: Iterable[PassInstrument] | None = None,
                 config: Mapping[str, Any] | None = None,
                 reproducer_dir: str | os.PathLike[str] | None = None) -> None:
        if not isinstance(opt_level, int) or isinstance(opt_level, bool):
            raise TypeError(f"opt_level must be an int, got {builtins.type(opt_level).__name__}")
        if opt_level < 0:
            raise ValueError(f"opt_level must be >= 0, got {opt_level}")
        self.opt_level = opt_level
        self.required_pass = name_list("required_pass", required_pass, True)
        self.disabled_pass = name_list("disabled_pass", disabled_pass, True)
        self._required_set = frozenset(self.required_pass)
        self._disabled_set = frozenset(self.disabled_pass)
        if reproducer_dir is not None and not isinstance(reproducer_dir, (str, os.PathLike)):
            raise TypeError(f"reproducer_dir must be a path, got "
                            f"{builtins.type(reproducer_dir).__name__}")
        #: Where a failing pass writes its reproducer (``transform.reproducer``); None: nowhere.
        self.reproducer_dir = None if reproducer_dir is None else os.fspath(reproducer_dir)
        self._config = check_config(config)
        self.config: Mapping[str, Any] = MappingProxyType(self._config)
        self._bisect_limit: int = self.get_config("irkernel.bisect_limit")
        self._executions = 0
        self._bisect_log: list[str] = []
        self._sat_ref: Callable[[], object] | None = None
        self._sat_names: set[str] = set()
        self._totals: dict[str, dict[str, float]] = {}
        self._set_instruments(_check_instruments(instruments))

    # -- instruments --------------------------------------------------------
    def _set_instruments(self, instruments: tuple[PassInstrument, ...]) -> None:
        self._instruments = instruments

        def hooks(name: str) -> _Hooks:
            found = (overridden_hook(inst, name) for inst in instruments)
            return tuple(h for h in found if h is not None)

        self._exit_hooks = hooks("exit_pass_ctx")
        self._should_run_hooks = hooks("should_run")
        self._before_hooks = hooks("run_before_pass")
        self._after_hooks = hooks("run_after_pass")

    @property
    def instruments(self) -> tuple[PassInstrument, ...]:
        """The instruments, in call order."""
        return self._instruments

    def _enter_instruments(self) -> None:
        entered: list[PassInstrument] = []
        for inst in self._instruments:
            hook = overridden_hook(inst, "enter_pass_ctx")
            try:
                if hook is not None:
                    hook()
            except BaseException:
                # The one broad except (STYLE 9.9): TVM's rollback, then re-raise.
                self._set_instruments(())
                for done in reversed(entered):  # TVM 0.27: last entered, first exited
                    exit_hook = overridden_hook(done, "exit_pass_ctx")
                    if exit_hook is not None:
                        exit_hook()
                raise
            entered.append(inst)

    def _exit_instruments(self) -> None:
        try:
            for hook in self._exit_hooks:
                hook()
        except BaseException:
            self._set_instruments(())
            raise

    def derive(self, **changes: Any) -> PassContext:
        """A new context with this one's options (opt_level, required and disabled passes,
        config, reproducer_dir), ``changes`` replacing some; no instruments. The one way
        to copy a context, so an option added later travels everywhere a context is
        copied (a build's worker thread, a bisection step)."""
        options: dict[str, Any] = {
            "opt_level": self.opt_level, "required_pass": self.required_pass,
            "disabled_pass": self.disabled_pass, "config": dict(self.config),
            "reproducer_dir": self.reproducer_dir}
        options.update(changes)
        return PassContext(**options)

    def override_instruments(self, instruments: Iterable[PassInstrument] | None) -> None:
        """Exit the current instruments, then install and enter ``instruments``.

        Works on any context, including the thread's default one (the usual way
        to instrument code that does not open a ``with PassContext``).

        Parameters
        ----------
        instruments : list or tuple of PassInstrument, or None
            The new instruments (None or empty: none).
        """
        new = _check_instruments(instruments)
        self._exit_instruments()
        self._set_instruments(new)
        self._enter_instruments()

    # -- with ---------------------------------------------------------------
    def __enter__(self) -> PassContext:
        self._enter_instruments()
        STATE.stack.append(self)
        self._executions = 0
        self._bisect_log = []
        return self

    def __exit__(self, *exc_info: object) -> None:
        stack = STATE.stack
        if not stack or stack[-1] is not self:
            raise RuntimeError("PassContext exited out of order (or on another thread)")
        stack.pop()
        self._sat_ref = None  # releases the last module
        self._sat_names = set()
        self._exit_instruments()

    @staticmethod
    def current() -> PassContext:
        """The innermost active context of this thread, else the thread's default context."""
        state = STATE
        if state.stack:
            return state.stack[-1]
        default = state.default
        if default is None:
            default = state.default = PassContext()
        return default

    # -- config -------------------------------------------------------------
    def get_config(self, key: str) -> Any:
        """The value of config ``key`` in this context, else its registered default.

        Raises
        ------
        ValueError
            When ``key`` is not a registered config option.
        """
        if key in self._config:
            return self._config[key]
        return config_default(key)

    @staticmethod
    def list_configs() -> dict[str, dict[str, Any]]:
        """Every registered config option: ``{name: {"type", "default", "description"}}``."""
        return list_configs()

    # -- enabling rule --------------------------------------------------------
    def pass_enabled(self, info: PassInfo) -> bool:
        """TVM's rule: disabled > required > ``info.opt_level <= self.opt_level``."""
        if info.name in self._disabled_set:
            return False
        if info.name in self._required_set:
            return True
        return info.opt_level <= self.opt_level

    # -- statistics -----------------------------------------------------------
    def stat(self, name: str, value: float = 1) -> None:
        """Add ``value`` to the counter ``name`` of the pass that is running.

        Counters add up over calls (a function pass may report per function).
        :class:`~irkernel.instrument.PassTimingInstrument` shows them beside the
        pass's time; :attr:`statistics` holds the totals of this context.

        Parameters
        ----------
        name : str
            Counter name, e.g. ``"nodes_folded"``.
        value : int or float
            Amount to add (default 1).
        """
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(f"stat {name!r}: value must be a number, got {value!r}")
        frame = running_frame()
        owner = frame.info.name if frame is not None else "<outside a pass>"
        if frame is not None:
            if frame.stats is None:
                frame.stats = {}
            frame.stats[name] = frame.stats.get(name, 0) + value
        totals = self._totals.setdefault(owner, {})
        totals[name] = totals.get(name, 0) + value

    @property
    def statistics(self) -> dict[str, dict[str, float]]:
        """Counter totals reported through :meth:`stat`: ``{pass name: {counter: total}}``."""
        return {k: dict(v) for k, v in self._totals.items()}

    def merge_statistics(self, statistics: Mapping[str, Mapping[str, float]]) -> None:
        """Add counter totals (another context's :attr:`statistics`, e.g. a worker's) to these."""
        for owner, counters in statistics.items():
            totals = self._totals.setdefault(owner, {})
            for name, value in counters.items():
                totals[name] = totals.get(name, 0) + value

    # -- bisection ------------------------------------------------------------
    def _bisect_step(self, name: str) -> bool:
        """Count one pass execution; False when it is past ``irkernel.bisect_limit``."""
        self._executions += 1
        number = self._executions
        self._bisect_log.append(name)
        if number <= self._bisect_limit:
            logger.debug("BISECT: running pass (%d) %s", number, name)
            return True
        logger.info("BISECT: NOT running pass (%d) %s", number, name)
        return False

    # -- required-pass bookkeeping ------------------------------------------
    def _note_result(self, out: IRModule, key: str) -> None:
        """Record that ``out`` is the result of the pass ``key`` (so ``key`` holds for it)."""
        ref = self._sat_ref
        if ref is not None and ref() is out:
            self._sat_names.add(key)
        else:
            self._sat_ref = _ref(out)
            self._sat_names = {key}

    def _satisfied(self, mod: IRModule, key: str) -> bool:
        """Whether pass ``key`` produced ``mod`` (or ran on it without changing it) here."""
        ref = self._sat_ref
        return ref is not None and ref() is mod and key in self._sat_names

    def __repr__(self) -> str:
        names = ", ".join(type(i).__name__ for i in self._instruments)
        return (f"<PassContext opt_level={self.opt_level} required={list(self.required_pass)} "
                f"disabled={list(self.disabled_pass)} instruments=[{names}] "
                f"reproducer_dir={self.reproducer_dir!r} "
                f"config={dict(self._config)}>")


def _check_instruments(instruments: Iterable[PassInstrument] | None) -> tuple[PassInstrument, ...]:
    if instruments is None:
        return ()
    if not isinstance(instruments, (list, tuple)):
        raise TypeError(f"instruments must be a list or tuple of PassInstrument, "
                        f"got {builtins.type(instruments).__name__}")
    items: tuple[Any, ...] = tuple(instruments)
    for pos, inst in enumerate(items):
        if not is_instrument(inst):
            raise TypeError(f"instruments[{pos}] must be a PassInstrument (subclass it or use "
                            f"@pass_instrument), got {builtins.type(inst).__name__}")
    return items
