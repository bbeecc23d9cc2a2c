"""The pass-config registry: ``register_pass_config(name, type, default)``.

``PassContext(config=...)`` checks and coerces its values here; an unknown
key is a ValueError listing the registered ones. Values convert as in TVM:
a bool option takes integers (``{"tir.disable_vectorize": 1}``), an int option
takes bools, a float option takes both. Append-only and lock-guarded, like the
pass registry. Imports nothing from irkernel.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import builtins
import numbers
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class _ConfigOption:
    name: str
    type: type
    default: Any
    description: str
    check: Callable[[Any], str | None] | None


_CONFIGS: dict[str, _ConfigOption] = {}
_CONFIG_LOCK = threading.Lock()


# What each scalar type accepts, TVM's conversions (tvm-ffi's bool/int/float casts):
# a bool key takes integers (C truthiness: nonzero is True), an int key takes bools
# (True is 1), a float key takes both. Strings and floats never become bools or ints:
# "0" or 1.5 for a flag is a mistake worth an error, and TVM rejects them too.
_ACCEPTS: dict[type, tuple[type, ...]] = {
    bool: (bool, np.bool_, numbers.Integral),
    int: (numbers.Integral, np.bool_),
    float: (numbers.Real, np.bool_),
}


def _coerce(option: _ConfigOption, value: Any) -> Any:
    """``value`` as the option's type; TypeError/ValueError naming the key."""
    typ = option.type
    accepted = _ACCEPTS.get(typ, (typ,))
    if not isinstance(value, accepted):
        raise TypeError(f"pass config {option.name!r} expects {typ.__name__}, "
                        f"got {type(value).__name__} ({value!r})")
    if typ in _ACCEPTS:
        value = typ(value)  # a real bool/int/float, never the NumPy scalar or the other kind
    if option.check is not None:
        problem = option.check(value)
        if problem:
            raise ValueError(f"pass config {option.name!r}: {problem} (got {value!r})")
    return value


def register_pass_config(name: str, type: type, default: Any, *,  # TVM's parameter names
                         description: str = "",
                         check: Callable[[Any], str | None] | None = None) -> None:
    """Register a config option accepted by ``PassContext(config=...)``.

    Parameters
    ----------
    name : str
        The key, by convention ``"<pass or package>.<option>"``.
    type : type
        The value type (``int``, ``float``, ``bool``, ``str`` or any class).
        Values convert as in TVM: ``bool`` accepts integers (nonzero is True),
        ``int`` accepts bools (True is 1), ``float`` accepts ints and bools;
        the stored value always has type ``type``.
    default : object
        The value ``ctx.get_config(name)`` returns when the context does not set it.
    description : str, optional
        One line shown by :meth:`PassContext.list_configs`.
    check : callable, optional
        ``check(value)`` returns an error message for a bad value, or None.

    Raises
    ------
    ValueError
        When ``name`` is already registered, or ``default`` fails ``check``.
    TypeError
        When ``default`` does not have type ``type``.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_pass_config: name must be a non-empty str, got {name!r}")
    if not isinstance(type, builtins.type):
        raise TypeError(f"register_pass_config: type must be a class, got {type!r}")
    option = _ConfigOption(name, type, default, description, check)
    option = _ConfigOption(name, type, _coerce(option, default), description, check)
    with _CONFIG_LOCK:
        if name in _CONFIGS:
            raise ValueError(f"pass config {name!r} is already registered")
        _CONFIGS[name] = option


def check_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping, got {builtins.type(config).__name__}")
    out: dict[str, Any] = {}
    for key, value in config.items():
        out[key] = _coerce(_option(key), value)
    return out


def _option(key: str) -> _ConfigOption:
    option = _CONFIGS.get(key)
    if option is None:
        known = ", ".join(sorted(_CONFIGS)) or "none"
        raise ValueError(f"unknown pass config key {key!r}; registered keys: {known}")
    return option


def config_default(key: str) -> Any:
    """The registered default of ``key``; ValueError listing the keys when unknown."""
    return _option(key).default


def list_configs() -> dict[str, dict[str, Any]]:
    """Every registered config option: ``{name: {"type", "default", "description"}}``."""
    return {name: {"type": opt.type.__name__, "default": opt.default,
                   "description": opt.description}
            for name, opt in sorted(_CONFIGS.items())}


def _at_least(low: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return f"must be >= {low}" if value < low else None
    return check


register_pass_config("irkernel.bisect_limit", int, -1, check=_at_least(-1),
                     description="run only the first N pass executions (-1: no limit)")
register_pass_config("irkernel.fixpoint_max_iterations", int, 10, check=_at_least(1),
                     description="bound on the rounds of a fixpoint(...) pipeline")
