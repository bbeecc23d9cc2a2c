"""Textual pipelines: ``parse_pipeline(text)`` (the spelling of one pass is ``pass_text``).

Grammar (whitespace between tokens is ignored)::

    pipeline := [item ("," item)*]
    item     := NAME [options] ["(" pipeline ")"]
    options  := "{" [NAME "=" value ("," NAME "=" value)*] "}"
    value    := INT | FLOAT | true | false | none | WORD | STRING | "[" [value ("," value)*] "]"

``NAME{k=v}`` is ``get_pass(NAME, k=v)``; ``fixpoint(...)`` (options:
``max_iterations``) repeats its passes until nothing changes; any other
unregistered ``NAME(...)`` is a nested Sequential of that name. ``str()`` of a
pipeline prints the canonical text (no spaces), which parses back to the same
text. Imports the pass classes, ``get_pass`` and the registry.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import re
from typing import Any

from irkernel.transform.pass_base import get_pass
from irkernel.transform.pass_kinds import FixedPoint, Sequential
from irkernel.transform.pass_text import KEYWORDS, NAME_RE
from irkernel.transform.registry import list_passes, registered

_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_MAX_DEPTH = 64


class PipelineParseError(ValueError):
    """A textual pipeline that does not parse; ``position`` is the 0-based offset."""

    def __init__(self, message: str, text: str, position: int) -> None:
        super().__init__(f"{message} at position {position}\n  {text}\n  {' ' * position}^")
        self.message = message
        self.text = text
        self.position = position


# ---------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str, position: int | None = None) -> PipelineParseError:
        return PipelineParseError(message, self.text, self.pos if position is None else position)

    def peek(self) -> str:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos].isspace():
            pos += 1
        self.pos = pos
        return text[pos] if pos < len(text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            found = repr(self.peek()) if self.peek() else "end of text"
            raise self.error(f"expected {char!r}, found {found}")
        self.pos += 1

    def name(self, what: str) -> str:
        self.peek()
        match = NAME_RE.match(self.text, self.pos)
        if match is None:
            found = repr(self.peek()) if self.peek() else "end of text"
            raise self.error(f"expected {what}, found {found}")
        self.pos = match.end()
        return match.group()

    def pipeline(self, depth: int) -> list[Any]:
        if depth > _MAX_DEPTH:
            raise self.error(f"pipeline nested deeper than {_MAX_DEPTH} levels")
        items: list[Any] = []
        if self.peek() in ("", ")"):
            return items
        while True:
            items.append(self.item(depth))
            if self.peek() != ",":
                return items
            self.pos += 1

    def item(self, depth: int) -> Any:
        self.peek()
        start = self.pos
        name = self.name("a pass name")
        options: dict[str, Any] = {}
        options_at = self.pos
        if self.peek() == "{":
            options_at = self.pos
            options = self.options()
        if self.peek() == "(":
            self.pos += 1
            inner = self.pipeline(depth + 1)
            self.expect(")")
            return self.group(name, options, inner, start, options_at)
        return self.single(name, options, start, options_at)

    def options(self) -> dict[str, Any]:
        self.expect("{")
        options: dict[str, Any] = {}
        if self.peek() == "}":
            self.pos += 1
            return options
        while True:
            key_at = self.pos
            key = self.name("an option name")
            if key in options:
                raise self.error(f"option {key!r} given twice", key_at)
            self.expect("=")
            options[key] = self.value(0)
            if self.peek() == "}":
                self.pos += 1
                return options
            self.expect(",")

    def value(self, depth: int) -> Any:
        char = self.peek()
        if depth > _MAX_DEPTH:
            raise self.error("option value nested too deeply")
        if char in ('"', "'"):
            return self.string(char)
        if char == "[":
            self.pos += 1
            items: list[Any] = []
            if self.peek() == "]":
                self.pos += 1
                return items
            while True:
                items.append(self.value(depth + 1))
                if self.peek() == "]":
                    self.pos += 1
                    return items
                self.expect(",")
        number = _NUMBER_RE.match(self.text, self.pos)
        if number is not None:
            self.pos = number.end()
            token = number.group()
            is_float = any(c in token for c in ".eE")
            return float(token) if is_float else int(token)
        word = self.name("an option value")
        return KEYWORDS.get(word, word)

    def string(self, quote: str) -> str:
        start = self.pos
        self.pos += 1
        out: list[str] = []
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\\" and self.pos + 1 < len(text):
                out.append(text[self.pos + 1])
                self.pos += 2
                continue
            self.pos += 1
            if char == quote:
                return "".join(out)
            out.append(char)
        raise self.error("unterminated string", start)

    def single(self, name: str, options: dict[str, Any], start: int, options_at: int) -> Any:
        if name == "fixpoint":
            raise self.error("fixpoint needs a parenthesized pipeline: fixpoint(A,B)", start)
        if not registered(name):
            raise self.error(f"unknown pass {name!r} (registered: "
                             f"{', '.join(sorted(list_passes())) or 'none'})", start)
        try:
            return get_pass(name, **options)
        except (TypeError, ValueError) as exc:
            raise self.error(f"bad options for {name}: {exc}", options_at) from exc

    def group(self, name: str, options: dict[str, Any], inner: list[Any], start: int,
              options_at: int) -> Any:
        if name == "fixpoint":
            unknown = sorted(set(options) - {"max_iterations"})
            if unknown:
                raise self.error(f"fixpoint has no option {unknown[0]!r} "
                                 f"(options: max_iterations)", options_at)
            try:
                return FixedPoint(inner, **options)
            except (TypeError, ValueError) as exc:
                raise self.error(f"bad options for fixpoint: {exc}", options_at) from exc
        if registered(name):
            raise self.error(f"pass {name!r} does not take a nested pipeline", start)
        if options:
            raise self.error(f"a nested pipeline {name}(...) takes no options", options_at)
        return Sequential(inner, name=name)


def parse_pipeline(text: str) -> Any:
    """Parse a textual pipeline into a :class:`~irkernel.transform.Sequential`.

    Parameters
    ----------
    text : str
        E.g. ``"FoldConstant{max_elements=1024},fixpoint(EliminateCommonSubexpr,SimplifyArith)"``.

    Returns
    -------
    Sequential
        Named ``"pipeline"``, opt level 0; ``str()`` of it gives the canonical text.

    Raises
    ------
    PipelineParseError
        (a ValueError) naming the problem and its position, for bad syntax, an
        unknown pass, or options its factory rejects.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_pipeline: text must be a str, got {type(text).__name__}")
    parser = _Parser(text)
    passes = parser.pipeline(0)
    if parser.peek():
        raise parser.error(f"unexpected {parser.peek()!r}")
    return Sequential(passes, name="pipeline")
