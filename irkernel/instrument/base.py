"""The ``PassInstrument`` base class and the ``@pass_instrument`` class decorator.

The pass context (a layer below) recognizes instruments and their no-op
hooks by the markers of :mod:`irkernel.transform.instrument_protocol`, which
this class sets. Imports the transform layer only.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
from typing import Any, TypeVar

from irkernel.ir.module import IRModule
from irkernel.transform.instrument_protocol import noop_hook
from irkernel.transform.pass_info import PassInfo

_T = TypeVar("_T")


class PassInstrument:
    """Base class of pass instruments: every hook is an optional no-op.

    A subclass overrides the hooks it needs. A :class:`~irkernel.transform.PassContext`
    calls only the hooks an instrument overrides (it builds one call list per
    hook when its instruments are set), so an instrument that only times
    passes costs nothing on ``should_run``.

    Hooks, with the rules of TVM's pass instrument:

    - ``enter_pass_ctx()``: when the context is entered (or when
      ``override_instruments`` installs the instrument). If one raises, the
      instruments entered before it are exited in reverse order, the context's
      instruments are cleared and the exception propagates.
    - ``exit_pass_ctx()``: when the context exits. If one raises, the context's
      instruments are cleared and the exception propagates.
    - ``should_run(mod, info) -> bool``: ANDed over instruments (each is
      called); a pass vetoed by any gets no ``run_before_pass`` /
      ``run_after_pass`` and returns its input. Not consulted for passes named
      in the context's ``required_pass``. It must return a bool (an integer
      converts); ``None`` (a forgotten ``return``) or another object is a
      TypeError naming the instrument, and the context still exits.
    - ``run_before_pass(mod, info)``: before the pass, with its input.
    - ``run_after_pass(mod, info)``: after the pass, with its *output*.

    Examples
    --------
    >>> class CountPasses(PassInstrument):
    ...     def __init__(self) -> None:
    ...         self.count = 0
    ...     @noop_hook
    def run_after_pass(self, mod, info):
    ...         self.count += 1
    """

    _irkernel_pass_instrument = True  # the marker the pass context checks

    @noop_hook
    def enter_pass_ctx(self) -> None:
        """Called when the owning context is entered."""

    @noop_hook
    def exit_pass_ctx(self) -> None:
        """Called when the owning context exits."""

    @noop_hook
    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        """Whether the pass described by ``info`` may run on ``mod``."""
        del mod, info
        return True

    @noop_hook
    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called before a pass runs, with its input module."""

    @noop_hook
    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called after a pass ran, with its output module."""


def pass_instrument(pi_cls: type[_T] | None = None) -> Any:
    """Decorate a plain class into a :class:`PassInstrument` subclass.

    The class defines any of the hooks (``enter_pass_ctx``, ``exit_pass_ctx``,
    ``should_run``, ``run_before_pass``, ``run_after_pass``); the ones it leaves
    out are the base class's no-ops and are never called.

    Parameters
    ----------
    pi_cls : type, optional
        The class. Without it, returns the decorator.

    Returns
    -------
    type
        A subclass of ``pi_cls`` and :class:`PassInstrument` with the same name.

    Raises
    ------
    TypeError
        When ``pi_cls`` is not a class.

    Examples
    --------
    >>> @pass_instrument
    ... class Names:
    ...     def __init__(self):
    ...         self.names = []
    ...     @noop_hook
    def run_before_pass(self, mod, info):
    ...         self.names.append(info.name)
    """

    def create(cls: type[Any]) -> type[Any]:
        if not isinstance(cls, type):
            raise TypeError(f"pass_instrument: expected a class, got {type(cls).__name__}")
        if issubclass(cls, PassInstrument):
            bases: tuple[type[Any], ...] = (cls,)
        else:
            bases = (cls, PassInstrument)
        wrapped = type(cls.__name__, bases, {"__doc__": cls.__doc__,
                                             "__module__": cls.__module__})
        wrapped.__qualname__ = cls.__qualname__
        return wrapped

    if pi_cls is None:
        return create
    return create(pi_cls)
