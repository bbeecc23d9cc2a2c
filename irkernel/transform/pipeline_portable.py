"""A pipeline as text a worker can rebuild: :func:`portable_text` and :func:`rebuild`.

Passes hold closures (a factory's options live in its inner function), so
they do not pickle, and pickling the user's closures would tie workers to
the caller's code. A worker rebuilds the pipeline from text instead, with
the same registry (passes come from the ``irkernel.passes`` entry points or
from modules the worker imports). The text of a pass is exact when it was
made by ``get_pass`` or ``parse_pipeline`` (they record the options). A pass
made by calling its factory directly (``passes.FoldConstant()``) has no
recorded options: it travels by its registered name only when it provably
equals the default pass of that name (same code, equal captured values);
otherwise :func:`portable_text` refuses with a TypeError saying how to spell
it, rather than letting workers run different options silently. After the
text is made, it is parsed back here and the tree of pass kinds and
PassInfos compared, so a worker never runs a pipeline the caller did not.
Imports the pass classes and the pipeline parser.
"""

from __future__ import annotations

# pyright: reportPrivateUsage=false
# (reads the recorded text and pass function of passes of its own package)
import functools
from typing import Any

from irkernel.transform.pass_base import Pass, get_pass
from irkernel.transform.pass_kinds import FixedPoint, Sequential
from irkernel.transform.pipeline_text import PipelineParseError, parse_pipeline
from irkernel.transform.registry import registered


def portable_text(pipeline: Pass) -> str:
    """One pipeline item (``parse_pipeline(text).passes[0]`` rebuilds ``pipeline``).

    Raises
    ------
    TypeError
        When the pass cannot be spelled exactly (not registered, or made by a
        factory call with options), naming it and the ways to fix it.
    """
    text = _item(pipeline)
    try:
        rebuilt = rebuild(text)
    except (PipelineParseError, TypeError, ValueError) as exc:
        raise _unportable(pipeline, f"its text {text!r} does not parse back ({exc})") from None
    if _shape(rebuilt) != _shape(pipeline):
        raise _unportable(pipeline, f"its text {text!r} rebuilds a different pipeline (a "
                          "Sequential's opt_level or required passes have no spelling)")
    return text


def rebuild(text: str) -> Pass:
    """The pass :func:`portable_text` spelled (on a worker)."""
    return parse_pipeline(text).passes[0]


def _item(p: Pass) -> str:
    if p._text is not None:
        return p._text
    if isinstance(p, FixedPoint):
        opts = "" if p.max_iterations is None else f"{{max_iterations={p.max_iterations}}}"
        return f"fixpoint{opts}({','.join(_item(q) for q in p.passes)})"
    if isinstance(p, Sequential):
        return f"{p.info.name}({','.join(_item(q) for q in p.passes)})"
    name = p.info.name
    if not registered(name):
        raise _unportable(p, "it is not a registered pass (a worker finds passes by name)")
    if not _equals_default(p, name):
        raise _unportable(p, "it was made by calling its factory, so its options are not "
                          "known")
    return name


def _equals_default(p: Pass, name: str) -> bool:
    """Whether ``p`` does what ``get_pass(name)`` does: same kind, info, code and captures."""
    try:
        ref = get_pass(name)
    except (TypeError, ValueError):
        return False
    if type(ref) is not type(p) or ref.info != p.info:
        return False
    return _same_callable(getattr(p, "_pass_func", None), getattr(ref, "_pass_func", None))


def _same_callable(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, functools.partial) and isinstance(b, functools.partial):
        return (_same_callable(a.func, b.func) and _equal(a.args, b.args)
                and _equal(a.keywords, b.keywords))
    code_a, code_b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if code_a is None or code_a is not code_b:
        return a is b
    cells_a = [c.cell_contents for c in a.__closure__ or ()]
    cells_b = [c.cell_contents for c in b.__closure__ or ()]
    if len(cells_a) != len(cells_b):
        return False
    return all(_same_callable(x, y) if callable(x) else _equal(x, y)
               for x, y in zip(cells_a, cells_b, strict=True))


def _equal(x: Any, y: Any) -> bool:
    try:
        return bool(x == y)
    except Exception:  # NOTE: arrays and odd objects: not provably equal
        return False


def _shape(p: Pass) -> tuple[Any, ...]:
    """Kinds, infos and options of a pass tree, for the round-trip check."""
    if isinstance(p, Sequential):
        limit = p.max_iterations if isinstance(p, FixedPoint) else None
        return (type(p).__name__, p.info, limit, tuple(_shape(q) for q in p.passes))
    return (type(p).__name__, p.info)


def _unportable(p: Pass, why: str) -> TypeError:
    return TypeError(
        f"pass {p.info.name!r} cannot travel to worker processes: {why}. Give the pipeline as "
        f"text (e.g. \"{p.info.name}{{option=value}}\"), make the pass with "
        f"transform.get_pass(name, **options), register it with transform.register_pass in a "
        f"module the workers import, or use engine='serial' or 'thread'")


__all__ = ["portable_text", "rebuild"]
