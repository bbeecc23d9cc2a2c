"""PassInfo: a pass's name, optimization level and required passes.

Its printed form is TVM 0.27's, field for field (tvm-ffi's reflection repr:
strings in double quotes, the required names as a tuple), because users grep
``PrintBeforeAll`` output for it. irkernel has no traceable passes, so it prints
``traceable=False`` as TVM does for an ordinary pass. Imports nothing from irkernel.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast


def name_list(arg: str, value: object, allow_set: bool) -> tuple[str, ...]:
    """A tuple of pass names from a list/tuple (or set); TypeError naming ``arg``."""
    if value is None:
        return ()
    kinds: tuple[type, ...] = (list, tuple, set, frozenset) if allow_set else (list, tuple)
    if not isinstance(value, kinds):
        want = "list/tuple/set" if allow_set else "list/tuple"
        raise TypeError(f"{arg} must be a {want} of pass names, got {type(value).__name__}")
    seq = cast("Iterable[Any]", value)
    items: list[Any] = sorted(seq) if isinstance(value, (set, frozenset)) else list(seq)
    for item in items:
        if not isinstance(item, str) or not item:
            raise TypeError(f"{arg} must hold non-empty str pass names, got {item!r}")
    return tuple(items)


@dataclass(frozen=True, repr=False)
class PassInfo:
    """Metadata of a pass: optimization level, name and required passes.

    Parameters
    ----------
    opt_level : int
        The pass runs inside a :class:`Sequential` when ``opt_level <= ctx.opt_level``.
    name : str
        The pass name (the registry key for built-in passes).
    required : list or tuple of str, optional
        Names of passes (looked up in the registry) that must run before this one.

    Examples
    --------
    >>> PassInfo(1, "MyPass", ["FoldConstant"]).required
    ('FoldConstant',)
    >>> print(PassInfo(1, "MyPass", ["FoldConstant"]))
    transform.PassInfo(opt_level=1, name="MyPass", required=("FoldConstant",), traceable=False)
    """

    opt_level: int
    name: str
    required: tuple[str, ...] = field(default=())

    def __init__(self, opt_level: int, name: str,
                 required: list[str] | tuple[str, ...] | None = None) -> None:
        if not isinstance(opt_level, int) or isinstance(opt_level, bool):
            raise TypeError(f"opt_level must be an int, got {type(opt_level).__name__}")
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty str, got {name!r}")
        object.__setattr__(self, "opt_level", opt_level)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "required", name_list("required", required, False))

    def __str__(self) -> str:
        # NOTE: tvm-ffi prints strings between double quotes without escaping and a
        # one-element array with a trailing comma, like a Python tuple; so do we.
        names = ", ".join(f'"{name}"' for name in self.required)
        if len(self.required) == 1:
            names += ","
        return (f'transform.PassInfo(opt_level={self.opt_level}, name="{self.name}", '
                f"required=({names}), traceable=False)")

    __repr__ = __str__  # TVM's str() and repr() of an object are the same text
