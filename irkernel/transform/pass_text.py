"""How a pass with options is spelled in a textual pipeline: ``Name{key=value,...}``.

``str(pass_)`` of a pass made by ``get_pass`` and the pipeline parser both use
this spelling, so printed pipelines parse back. Imports nothing from irkernel.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
KEYWORDS = {"true": True, "false": False, "none": None}


def format_value(value: Any) -> str:
    """One option value in pipeline syntax (the parser reads it back to an equal value)."""
    if value is None or isinstance(value, bool):
        return {None: "none", True: "true", False: "false"}[value]
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"option value {number!r} has no pipeline spelling")
        return repr(number)
    if isinstance(value, str):
        if (NAME_RE.fullmatch(value) and value not in KEYWORDS):
            return value
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, (list, tuple)):
        items = cast("Sequence[Any]", value)
        return "[" + ",".join(format_value(v) for v in items) + "]"
    raise TypeError(f"option value of type {type(value).__name__} has no pipeline spelling")


def format_pass_text(name: str, options: Mapping[str, Any]) -> str:
    """``Name`` or ``Name{key=value,...}``."""
    if not options:
        return name
    body = ",".join(f"{key}={format_value(value)}" for key, value in options.items())
    return f"{name}{{{body}}}"
