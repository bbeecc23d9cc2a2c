"""The pass registry: name -> factory, append-only and lock-guarded.

One of the three pieces of module-level mutable state allowed (STYLE 9.5),
like the config and op registries. ``irkernel.transform.get_pass`` turns a
name into a Pass through it.

Finding the built-in passes: the graph and TIR passes live in the ``passes``
package, a higher layer that this one must not import. They are found the
way plugins are: ``passes`` declares itself under the entry-point group
``irkernel.passes`` (``pyproject.toml``), and the first lookup of a name that
is not registered yet loads every module of that group once. So
``get_pass("O2")`` works right after ``import irkernel``, a third-party
package can ship passes the same way, and no import edge points up.
Alternatives considered: importing ``passes`` from here (an upward edge, even
when deferred) and keeping the old silent behaviour (O2 was an empty pipeline
until ``passes`` had been imported by someone).
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import importlib.metadata
import threading
from collections.abc import Callable
from typing import Any

from irkernel.transform.pass_text import NAME_RE

PassFactory = Callable[..., Any]

#: The entry-point group that provides passes (loaded on the first unknown name).
ENTRY_POINT_GROUP = "irkernel.passes"

_REGISTRY: dict[str, PassFactory] = {}
_LOCK = threading.RLock()
_RESERVED = {"fixpoint"}
_discovered = threading.Event()


def register_pass(name: str, factory: PassFactory) -> PassFactory:
    """Register a pass factory under ``name`` (the factory's ``info.name``).

    Parameters
    ----------
    name : str
        A pipeline name: letters, digits, ``_``, ``.``, ``-``, not starting with a digit.
    factory : callable
        ``factory(**options) -> Pass``; options come from ``get_pass`` keywords
        or from ``Name{key=value}`` in a textual pipeline.

    Returns
    -------
    callable
        ``factory``, so this also works as ``register_pass("X", X)`` after a def.

    Raises
    ------
    ValueError
        On a duplicate or reserved name, or one that cannot appear in a pipeline.
    """
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        raise ValueError(f"register_pass: {name!r} is not a valid pass name "
                         f"(letters, digits, '_', '.', '-'; not starting with a digit)")
    if name in _RESERVED:
        raise ValueError(f"register_pass: {name!r} is reserved by the pipeline syntax")
    if not callable(factory):
        raise TypeError(f"register_pass: factory for {name!r} must be callable")
    with _LOCK:
        if name in _REGISTRY:
            raise ValueError(f"pass {name!r} is already registered")
        _REGISTRY[name] = factory
    return factory


def discover() -> None:
    """Load every module of the ``irkernel.passes`` entry-point group, once per process.

    A provider that fails to import raises its ImportError (once: the group is
    not loaded again), so a broken install is reported, not hidden.
    """
    if _discovered.is_set():
        return
    with _LOCK:
        if _discovered.is_set():
            return
        _discovered.set()  # before loading: a provider's own lookups must not recurse
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            entry.load()  # a broken provider raises here, naming its module


def lookup(name: str) -> PassFactory | None:
    """The factory registered as ``name``, discovering the providers on a miss."""
    factory = _REGISTRY.get(name)
    if factory is None and not _discovered.is_set():
        discover()
        factory = _REGISTRY.get(name)
    return factory


def registered(name: str) -> bool:
    """Whether a pass is registered under ``name`` (after discovering the providers)."""
    return lookup(name) is not None


def list_passes() -> tuple[str, ...]:
    """Names of every registered pass and pipeline, in registration order."""
    discover()
    return tuple(_REGISTRY)
