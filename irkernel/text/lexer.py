"""Lexer of the text format: tokens with exact columns, and the values they spell.

Used by :mod:`irkernel.text.parser` for every line that is not in the printer's
fast form, so that each error is a :class:`~irkernel.ir.errors.ParseError` with a
1-based line and column. Holds the literal rules (ints, floats, ``nan``,
``inf``, ``nan:0x<bits>``, bools), attribute values and types; the grammar of
functions and nodes is the parser's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from irkernel.ir import narrow
from irkernel.ir.errors import ParseError, TypeInferenceError
from irkernel.ir.ids import (
    BFLOAT16,
    BOOL,
    DTYPE_NAMES,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    FLOAT_DTYPES,
    NARROW_FLOAT_DTYPES,
    INT_DTYPES,
    numpy_dtype,
    shape_problem,
)

Token = tuple[str, str, int]  # (kind, text, 1-based column)
DimOf = Callable[[str], Any]  # a shape variable's name -> its symbolic dim, or None

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<comment>\#.*)
  | (?P<var>%\w+)
  | (?P<glob>@(?:[^\W\d][\w.]*|"(?:[^"\\]|\\.)*"))
  | (?P<nanbits>nan:0x[0-9A-Fa-f]+(?![\w.]))
  | (?P<number>(?:-inf|-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)(?![\w.]))
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<ident>[^\W\d]\w*)
  | (?P<punct>//|[=,:\[\]{}()+*-])
  | (?P<bad>[^\s=,:\[\]{}()\#"]+)
""", re.VERBOSE)

INT_LITERAL = re.compile(r"-?[0-9]+\Z")
NUMBER_START = frozenset("-.0123456789")
# Smallest magnitude that rounds to inf in each float dtype (round half to even at the top).
OVERFLOW = {FLOAT32: float.fromhex("0x1.ffffffp+127"), FLOAT64: math.inf}
_DIM_OPS = ("+", "-", "*", "//")
KEYWORD_VALUES = {"true": True, "false": False, "none": None, "nan": math.nan, "inf": math.inf}


def describe(tok: Token) -> str:
    return "end of line" if tok[0] == "eol" else repr(tok[1])


def tokenize(line: str, lineno: int) -> list[Token]:
    """Tokens of one line (comments and blanks dropped), ending with an ``eol`` token."""
    toks: list[Token] = []
    pos, end = 0, len(line)
    match = _TOKEN.match
    while pos < end:
        m = match(line, pos)
        if m is None:
            what = ("unterminated string literal" if line[pos] == '"'
                    else f"unexpected character {line[pos]!r}")
            raise ParseError(what, lineno, pos + 1)
        kind = m.lastgroup
        if kind == "comment":
            break
        if kind == "bad":
            text = m.group()
            what = ("expected a name after '%'" if text == "%" else
                    "expected a function name after '@'" if text == "@" else
                    f"invalid token {text!r}")
            raise ParseError(what, lineno, pos + 1)
        if kind != "ws":
            toks.append((kind, m.group(), pos + 1))  # type: ignore[arg-type]
        pos = m.end()
    toks.append(("eol", "", len(line) + 1))
    return toks


class Cursor:
    """Recursive-descent helpers over the tokens of one line."""

    __slots__ = ("line", "lineno", "pos", "toks")

    def __init__(self, line: str, lineno: int) -> None:
        self.line = line
        self.lineno = lineno
        self.toks = tokenize(line, lineno)
        self.pos = 0

    def peek(self) -> Token:
        return self.toks[self.pos]

    def take(self) -> Token:
        tok = self.toks[self.pos]
        if tok[0] != "eol":
            self.pos += 1
        return tok

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        return ParseError(message, self.lineno, (tok or self.peek())[2])

    def accept(self, text: str) -> Token | None:
        tok = self.peek()
        if tok[0] in ("punct", "ident") and tok[1] == text:
            return self.take()
        return None

    def expect(self, text: str, context: str = "") -> Token:
        tok = self.accept(text)
        if tok is None:
            where = f" {context}" if context else ""
            raise self.error(f"expected {text!r}{where}, got {describe(self.peek())}")
        return tok

    def expect_kind(self, kind: str | tuple[str, ...], what: str) -> Token:
        tok = self.peek()
        if tok[0] not in ((kind,) if isinstance(kind, str) else kind):
            raise self.error(f"expected {what}, got {describe(tok)}")
        return self.take()

    def expect_end(self) -> None:
        if self.peek()[0] != "eol":
            raise self.error(f"unexpected {describe(self.peek())} at end of statement")

    def slice_from(self, tok: Token) -> str:
        """Source text from ``tok`` to the last taken token (a cache key)."""
        last = self.toks[self.pos - 1]
        return self.line[tok[2] - 1: last[2] - 1 + len(last[1])]


# ---------------------------------------------------------------------------
# values, attributes, types
# ---------------------------------------------------------------------------

def string_value(cur: Cursor, tok: Token) -> str:
    try:
        return json.loads(tok[1])
    except ValueError:
        raise cur.error(f"bad string literal {tok[1]}", tok) from None


def scalar_value(cur: Cursor, bare_strings: bool) -> Any:
    """One attribute scalar: number, string, keyword or (node attrs) a bare dtype name."""
    tok = cur.take()
    kind, text = tok[0], tok[1]
    if kind == "number":
        if not INT_LITERAL.match(text):
            return float(text)
        if len(text) > 1000:  # int() refuses very long decimals; nothing needs them
            raise cur.error(f"integer literal of {len(text)} digits is too long", tok)
        return int(text)
    if kind == "string":
        return string_value(cur, tok)
    if kind == "ident" and text in KEYWORD_VALUES:
        return KEYWORD_VALUES[text]
    if kind == "ident" and bare_strings:
        return text
    raise cur.error(f"bad attribute value {describe(tok)}", tok)


def attr_value(cur: Cursor, bare_strings: bool, dim_of: DimOf | None = None) -> Any:
    """A scalar or a flat list; with ``dim_of``, list items may be dim expressions (the
    symbolic dims of a reshape target: ``[batch, seq, 8, 64]``)."""
    if cur.accept("[") is None:
        return scalar_value(cur, bare_strings)
    items = []
    if cur.accept("]") is None:
        while True:
            tok, nxt = cur.peek(), cur.toks[cur.pos + 1]
            if tok[1] == "[" and tok[0] == "punct":
                raise cur.error("nested lists are not supported in attributes")
            if dim_of is not None and (
                    (tok[0] == "ident" and tok[1] not in KEYWORD_VALUES)
                    or tok[:2] == ("punct", "(")
                    or (tok[0] == "number" and nxt[0] == "punct" and nxt[1] in _DIM_OPS)):
                items.append(parse_dim_sum(cur, dim_of))
            else:
                items.append(scalar_value(cur, bare_strings))
            if cur.accept("]") is not None:
                break
            cur.expect(",", "or ']' in list")
    return tuple(items)


def attr_dict(cur: Cursor, node_attrs: bool, dim_of: DimOf | None = None) -> dict[str, Any]:
    """``{key = value, ...}`` (the ``{`` already taken); keys unique. ``dim_of``: see
    :func:`attr_value`."""
    out: dict[str, Any] = {}
    if cur.accept("}") is not None:
        return out
    while True:
        tok = cur.peek()
        if tok[0] == "ident":
            key = cur.take()[1]
        elif tok[0] == "string" and not node_attrs:
            key = string_value(cur, cur.take())
        else:
            raise cur.error(f"expected an attribute name, got {describe(tok)}")
        if key in out:
            raise cur.error(f"duplicate attribute {key!r}", tok)
        cur.expect("=", f"after attribute {key!r}")
        out[key] = attr_value(cur, node_attrs, dim_of)
        if cur.accept("}") is not None:
            return out
        cur.expect(",", "or '}' in attributes")


def parse_type(cur: Cursor, dim_of: DimOf | None = None) -> tuple[int, tuple[Any, ...], Token]:
    """``dtype[d0, ...]`` -> (dtype code, shape, first token).

    With ``dim_of`` (a variable's name -> its symbolic dim, or None when undeclared) a
    dim may also be an expression of shape variables (:func:`parse_dim`).
    """
    tok = cur.peek()
    if tok[0] != "ident":
        raise cur.error(f"expected a type like float32[4], got {describe(tok)}")
    cur.take()
    if tok[1] not in DTYPE_NAMES:
        raise cur.error(f"unknown dtype {tok[1]!r} (expected one of "
                        f"{', '.join(DTYPE_NAMES)})", tok)
    cur.expect("[", f"after dtype {tok[1]!r} (scalars are {tok[1]}[])")
    dims: list[Any] = []
    if cur.accept("]") is None:
        while True:
            dim = cur.peek()
            if dim_of is not None and (dim[0] != "number" or cur.toks[cur.pos + 1][1] not in
                                       (",", "]")):
                dims.append(parse_dim(cur, dim_of))
            else:
                if dim[0] != "number" or not INT_LITERAL.match(dim[1]) or dim[1][0] == "-":
                    raise cur.error(f"bad dimension {describe(dim)} in type "
                                    "(expected a non-negative integer)")
                if len(dim[1]) > 18:
                    raise cur.error(f"dimension {dim[1]} is too large")
                dims.append(int(cur.take()[1]))
            if cur.accept("]") is not None:
                break
            cur.expect(",", "or ']' in type")
    problem = shape_problem(tuple(d for d in dims if isinstance(d, int)))  # rank, count
    if problem is not None:
        shown = ", ".join(map(str, dims)) if len(dims) <= 8 else f"... {len(dims)} dims"
        raise cur.error(f"type {tok[1]}[{shown}]: {problem}", tok)
    return DTYPE_NAMES.index(tok[1]), tuple(dims), tok


def parse_dim(cur: Cursor, dim_of: DimOf) -> Any:
    """A dim expression: ``term (('+' | '-') term)*``, a term ``factor ('*' factor |
    '//' INT)*``, a factor an int, a declared variable, ``-factor`` or ``(expr)``.
    The value is an int or a symbolic dim (``irkernel.ir.symdim``); a dim outside the
    algebra (``a * b``) or a negative constant dim is an error at its column."""
    start = cur.peek()
    value = parse_dim_sum(cur, dim_of)
    if isinstance(value, int) and value < 0:
        raise cur.error(f"dimension {value} is negative", start)
    return value


def _dim_op(cur: Cursor, tok: Token, a: Any, b: Any, op: str) -> Any:
    try:
        return a + b if op == "+" else a - b if op == "-" else a * b if op == "*" else a // b
    except (TypeInferenceError, ValueError) as exc:
        raise cur.error(str(exc), tok) from None


def _dim_term(cur: Cursor, dim_of: DimOf) -> Any:
    value = _dim_factor(cur, dim_of)
    while True:
        tok = cur.peek()
        if tok[:2] == ("punct", "*"):
            cur.take()
            value = _dim_op(cur, tok, value, _dim_factor(cur, dim_of), "*")
        elif tok[:2] == ("punct", "//"):
            cur.take()
            k = cur.peek()
            if k[0] != "number" or not INT_LITERAL.match(k[1]) or int(k[1]) < 1:
                raise cur.error(f"expected a constant divisor >= 1 after '//', got "
                                f"{describe(k)}")
            value = _dim_op(cur, tok, value, int(cur.take()[1]), "//")
        else:
            return value


def _dim_factor(cur: Cursor, dim_of: DimOf) -> Any:
    tok = cur.peek()
    if tok[0] == "number" and INT_LITERAL.match(tok[1]) and len(tok[1]) <= 19:
        return int(cur.take()[1])
    if tok[0] == "ident":
        dim = dim_of(tok[1])
        if dim is None:
            raise cur.error(f"unknown dim variable {tok[1]!r} (declare it first: "
                            f"'dim {tok[1]} in [1, inf]')", tok)
        cur.take()
        return dim
    if tok[:2] == ("punct", "-"):
        cur.take()
        return _dim_op(cur, tok, 0, _dim_factor(cur, dim_of), "-")
    if cur.accept("(") is not None:
        value = parse_dim_sum(cur, dim_of)
        cur.expect(")", "to close the dim expression")
        return value
    raise cur.error(f"expected a dim (an integer, a dim variable or an expression of them), "
                    f"got {describe(tok)}")


def parse_dim_sum(cur: Cursor, dim_of: DimOf) -> Any:
    """:func:`parse_dim` without the check that a constant result is non-negative."""
    value = _dim_term(cur, dim_of)
    while True:
        tok = cur.peek()
        if tok[0] == "punct" and tok[1] in "+-":
            cur.take()
            value = _dim_op(cur, tok, value, _dim_term(cur, dim_of), tok[1])
        elif tok[0] == "number" and INT_LITERAL.match(tok[1]) and tok[1][0] == "-":
            value = _dim_op(cur, tok, value, _dim_term(cur, dim_of), "+")
        else:
            return value


def operand_tokens(cur: Cursor) -> list[Token]:
    """Zero or more ``%name`` separated by commas."""
    if cur.peek()[0] != "var":
        return []
    out = [cur.take()]
    while cur.accept(",") is not None:
        out.append(cur.expect_kind("var", "an operand like %0"))
    return out


# ---------------------------------------------------------------------------
# constants
# ---------------------------------------------------------------------------

#: Mantissa bits of each float dtype.
MANTISSA_BITS = {FLOAT32: 23, FLOAT64: 52, FLOAT16: 10, BFLOAT16: 7}


def nan_from_bits(text: str, code: int, lineno: int, col: int) -> int:
    bits = int(text[len("nan:0x"):], 16)
    width = numpy_dtype(code).itemsize * 8
    mant = MANTISSA_BITS[code]
    exp_mask = ((1 << (width - 1 - mant)) - 1) << mant
    if bits >= 1 << width or (bits & exp_mask) != exp_mask or not bits & ((1 << mant) - 1):
        raise ParseError(f"{text} is not a {DTYPE_NAMES[code]} NaN bit pattern", lineno, col)
    return bits


def literal(text: str, code: int, lineno: int, col: int) -> Any:
    """The Python value of one constant literal (a number, keyword or ident token's text)."""
    if code == BOOL:
        if text in ("true", "false"):
            return text == "true"
    elif code in INT_DTYPES:
        if INT_LITERAL.match(text):
            value = int(text) if len(text) <= 21 else math.inf
            info = np.iinfo(numpy_dtype(code))
            if not info.min <= value <= info.max:
                raise ParseError(f"integer {text} out of range for {DTYPE_NAMES[code]}",
                                 lineno, col)
            return value
    elif text in ("nan", "inf") or text[:1] in NUMBER_START:  # number tokens and -inf
        value = float(text)
        if code in NARROW_FLOAT_DTYPES:  # rounded as the builder will (through float32)
            with np.errstate(over="ignore"):
                overflows = bool(np.isinf(narrow.widen(narrow.narrow(np.array(value), code),
                                                       code)))
        else:
            overflows = abs(value) >= OVERFLOW[code]
        if overflows and text not in ("inf", "-inf"):
            raise ParseError(f"{text} overflows {DTYPE_NAMES[code]} (write inf if meant)",
                             lineno, col)
        return value
    raise ParseError(f"bad {DTYPE_NAMES[code]} literal {text!r}", lineno, col)


NOT_FAST = object()


def fast_literal(text: str, code: int) -> Any:
    """The value of a literal the fast path matched, or ``NOT_FAST`` when it is bad."""
    try:
        return literal(text, code, 0, 0)
    except ParseError:
        return NOT_FAST  # the careful path reports it with its position


def const_array(lits: list[Token], is_list: bool, code: int, shape: tuple[int, ...],
                 lineno: int) -> np.ndarray:
    """The constant's array from its literal tokens; ParseError on a bad literal or count."""
    size = math.prod(shape)
    if len(lits) != size or (not is_list and size != 1):
        raise ParseError(f"constant has {len(lits)} value{'s' * (len(lits) != 1)}, type "
                         f"{DTYPE_NAMES[code]}[{', '.join(map(str, shape))}] needs {size}",
                         lineno, lits[0][2] if lits else 1)
    dt = numpy_dtype(code)
    nan_bits: list[tuple[int, int]] = []
    values = []
    for i, (_, text, col) in enumerate(lits):  # one per element: parse cost is the text's
        if code in FLOAT_DTYPES and text.startswith("nan:0x"):
            nan_bits.append((i, nan_from_bits(text, code, lineno, col)))
            values.append(math.nan)
        else:
            values.append(literal(text, code, lineno, col))
    arr = (narrow.to_storage(np.array(values, np.float64), code) if code in NARROW_FLOAT_DTYPES
           else np.array(values, dtype=dt))
    if nan_bits:
        raw = arr.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize])
        for i, bits in nan_bits:
            raw[i] = bits
    return arr.reshape(shape)


def const_literals(cur: Cursor) -> tuple[list[Token], bool]:
    """The literal tokens after ``const``, and whether they were a ``[...]`` list."""
    literal_kinds = ("number", "ident", "nanbits")
    if cur.accept("[") is None:
        return [cur.expect_kind(literal_kinds, "a constant value")], False
    lits: list[Token] = []
    if cur.accept("]") is None:
        while True:
            lits.append(cur.expect_kind(literal_kinds, "a constant value"))
            if cur.accept("]") is not None:
                break
            cur.expect(",", "or ']' in constant")
    return lits, True
