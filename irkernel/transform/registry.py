"""The pass registry (name -> factory) and the named pipelines O0..O3.

Append-only and lock-guarded, like the config registry (STYLE 9.5); it is
one of the three pieces of module-level mutable state allowed. ``get_pass``
never imports ``passes``: importing that package is what registers the
built-in graph passes.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import threading
from collections.abc import Callable
from typing import Any

from irkernel.transform.pass_base import FixedPoint, Pass, Sequential
from irkernel.transform.pipeline_text import NAME_RE, format_pass_text

PassFactory = Callable[..., Pass]

_REGISTRY: dict[str, PassFactory] = {}
_LOCK = threading.Lock()
_RESERVED = {"fixpoint"}


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


def registered(name: str) -> bool:
    """Whether a pass is registered under ``name``."""
    return name in _REGISTRY


def list_passes() -> tuple[str, ...]:
    """Names of every registered pass and pipeline, in registration order."""
    return tuple(_REGISTRY)


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
    factory = _REGISTRY.get(name)
    if factory is None:
        known = ", ".join(_REGISTRY) or "none"
        raise ValueError(f"unknown pass {name!r}; registered passes: {known}")
    made = factory(**options)
    if not isinstance(made, Pass):
        raise TypeError(f"the factory registered as {name!r} returned "
                        f"{type(made).__name__}, not a Pass")
    made._text = format_pass_text(name, options)  # pyright: ignore[reportPrivateUsage]
    return made


# ---------------------------------------------------------------------------
# named pipelines
# ---------------------------------------------------------------------------

#: Pass names of each named pipeline; names not registered when the pipeline
#: is built (``get_pass("O2")``) are left out, so these fill in as the
#: ``passes`` package registers its passes. O3 is O2 repeated to a fixed point.
PIPELINES: dict[str, tuple[str, ...]] = {
    "O0": (),
    "O1": ("FoldConstant", "DeadCodeElimination"),
    "O2": ("FoldConstant", "SimplifyArith", "EliminateCommonSubexpr", "DeadCodeElimination"),
    "O3": ("FoldConstant", "SimplifyArith", "EliminateCommonSubexpr", "DeadCodeElimination"),
}


def _named_pipeline(level: str) -> PassFactory:
    def factory() -> Pass:
        passes = [get_pass(name) for name in PIPELINES[level] if name in _REGISTRY]
        if level == "O3":
            passes = [FixedPoint(passes)]
        return Sequential(passes, opt_level=0, name=level)

    factory.__name__ = factory.__qualname__ = level
    factory.__doc__ = (f"The {level} pipeline: "
                       f"{', '.join(PIPELINES[level]) or 'no passes'}"
                       f"{' (to a fixed point)' if level == 'O3' else ''}.")
    return factory


for _level in PIPELINES:
    register_pass(_level, _named_pipeline(_level))
