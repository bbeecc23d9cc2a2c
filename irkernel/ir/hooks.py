"""Hooks: how a lower layer calls into a higher one without importing it.

Imports point one way (``ir <- text, tir <- transform <- instrument``), yet a
few conveniences of a lower layer need a higher one: ``Function.script()``
prints with ``irkernel.text``, the graph interpreter runs ``call_tir`` callees
with the TIR interpreter, ``PrimFunc.script()`` prints with ``tir.printer``.
The lower layer declares a :class:`Hook` next to the code that calls it; the
higher layer installs its function when it is imported. Importing any part of
``irkernel`` imports the package facade first, which imports every layer, so
in practice a hook is always installed before it is called; an uninstalled
hook raises a RuntimeError naming the module that provides it.

Alternatives considered: a deferred ``import`` inside the method is shorter
but is an import edge all the same (the layering check counts it); passing
the printer as an argument would put it in every caller's signature.
Imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Hook:
    """One function slot filled by a higher layer (installed once, at its import).

    Parameters
    ----------
    name : str
        What the hook does, for the error message (``"print a graph Function"``).
    provider : str
        The module that installs it (``"irkernel.text.printer"``).
    """

    __slots__ = ("_fn", "name", "provider")

    def __init__(self, name: str, provider: str) -> None:
        self.name = name
        self.provider = provider
        self._fn: Callable[..., Any] | None = None

    def install(self, fn: Callable[..., Any]) -> None:
        """Fill the slot; installing again replaces the function (module reloads)."""
        if not callable(fn):
            raise TypeError(f"hook {self.name!r}: expected a callable, got {type(fn).__name__}")
        self._fn = fn

    @property
    def installed(self) -> bool:
        return self._fn is not None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = self._fn
        if fn is None:
            raise RuntimeError(f"cannot {self.name}: import {self.provider} first")
        return fn(*args, **kwargs)

    def __repr__(self) -> str:
        state = "installed" if self._fn is not None else "empty"
        return f"<Hook {self.name!r} from {self.provider} ({state})>"
