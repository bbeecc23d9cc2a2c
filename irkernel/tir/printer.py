"""TVMScript-like text of PrimFuncs.

The output is Python that :mod:`irkernel.tir.script` can run again (``T`` is
``irkernel.tir.script``): executing the text of an unlowered PrimFunc gives a
structurally equal PrimFunc. Lowered forms (flattened buffers, vector lanes)
print with the same syntax for reading. Immediates print as plain literals
where the tracer would convert them back to the same dtype (next to a
non-constant operand of that dtype), else as ``T.int32(5)``-style constants.
Python's precedence is respected: comparisons bind looser than ``&``/``|``.
Imports the TIR node modules only; installs ``function.PRINT`` (``PrimFunc.script``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Broadcast,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from irkernel.tir.function import PRINT, PrimFunc
from irkernel.tir.stmt import (
    Allocate,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

_ATOM = 20
# (symbol, precedence) of infix operators; Python: comparisons < | < & < +,- < *,/,//,% < unary
_INFIX: dict[type, tuple[str, int]] = {
    LT: ("<", 5), LE: ("<=", 5), GT: (">", 5), GE: (">=", 5),
    Or: ("|", 6), And: ("&", 8), Add: ("+", 10), Sub: ("-", 10),
    Mul: ("*", 11), FloorDiv: ("//", 11), FloorMod: ("%", 11),
}
_CALLS: dict[type, str] = {EQ: "T.eq", NE: "T.ne", Min: "T.min", Max: "T.max",
                           Mod: "T.truncmod"}
_UNARY = 12


def format_float(value: float, dtype: str) -> str:
    """The shortest literal that reads back as the same ``dtype`` value."""
    if math.isnan(value) or math.isinf(value):
        return f'"{value}"'
    if dtype == "float32":
        text = np.format_float_scientific(np.float32(value), unique=True, trim="-")
        short = np.format_float_positional(np.float32(value), unique=True, trim="0")
        text = short if len(short) <= len(text) else text
        return text if any(c in text for c in ".en") else text + ".0"
    return repr(float(value))


def _immediate(e: PrimExpr, literal: bool) -> str:
    """An IntImm/FloatImm (or a Broadcast of one) as text."""
    inner = e.value if isinstance(e, Broadcast) else e
    assert isinstance(inner, (IntImm, FloatImm))
    if isinstance(inner, FloatImm):
        text = format_float(inner.value, inner.dtype)
        if not literal or text.startswith('"'):
            text = f"T.{inner.dtype}({text})"
    elif inner.dtype == "bool":  # a bare Python bool is only accepted next to a bool operand
        text = "True" if inner.value else "False"
        if not literal:
            text = f"T.bool({text})"
    else:
        text = str(inner.value)
        if not literal and inner.dtype != dt.INDEX:
            text = f"T.{inner.dtype}({text})"
    if isinstance(e, Broadcast) and not literal:
        return f"T.broadcast({text}, {e.lanes})"
    return text


def _is_imm(e: PrimExpr) -> bool:
    inner = e.value if isinstance(e, Broadcast) else e
    return isinstance(inner, (IntImm, FloatImm))


class _Printer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    # -- expressions -------------------------------------------------------
    def expr(self, e: PrimExpr, literal: bool = False) -> str:
        return self._expr(e, literal)[0]

    def _paren(self, e: PrimExpr, prec: int, right: bool = False,
               literal: bool = False) -> str:
        text, p = self._expr(e, literal)
        return f"({text})" if p < prec or (right and p == prec) or (p == 5 and prec == 5) \
            else text

    def _expr(self, e: PrimExpr, literal: bool = False) -> tuple[str, int]:
        if _is_imm(e):
            text = _immediate(e, literal)
            return text, (_UNARY if text.startswith("-") else _ATOM)
        if isinstance(e, Var):
            return e.name, _ATOM
        if isinstance(e, BufferLoad):
            return f"{e.buffer.name}[{self._indices(e.indices)}]", _ATOM
        if isinstance(e, BinaryOp):
            return self._binary(e)
        if isinstance(e, Not):
            return f"~{self._paren(e.a, _UNARY)}", _UNARY
        if isinstance(e, Select):
            args = ", ".join(self.expr(x) for x in (e.condition, e.true_value, e.false_value))
            return f"T.select({args})", _ATOM
        if isinstance(e, Cast):
            return f'T.cast("{e.dtype}", {self.expr(e.value)})', _ATOM
        if isinstance(e, Call):
            return f"T.{e.op}({', '.join(self.expr(a) for a in e.args)})", _ATOM
        if isinstance(e, Ramp):
            return f"T.ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})", _ATOM
        if isinstance(e, Broadcast):
            return f"T.broadcast({self.expr(e.value)}, {e.lanes})", _ATOM
        if isinstance(e, Let):
            # a walrus names the var for the body that follows (arguments run left to right)
            var = f'({e.var.name} := T.var("{e.var.dtype}", name="{e.var.name}"))'
            return f"T.let_expr({var}, {self.expr(e.value)}, {self.expr(e.body)})", _ATOM
        raise TypeError(f"cannot print {type(e).__name__}")

    def _binary(self, e: BinaryOp) -> tuple[str, int]:
        # a literal converts back to its dtype only next to a non-literal of that dtype
        # (not left of <, <=, >, >=: Python would reflect `3 < x` into `x > 3`)
        a_lit = _is_imm(e.a) and not _is_imm(e.b) and type(e) not in (LT, LE, GT, GE)
        b_lit = _is_imm(e.b) and not _is_imm(e.a)
        if isinstance(e.a, IntImm) and (_is_imm(e.b) or type(e) in (LT, LE, GT, GE)):
            # two literals would be folded by Python itself, and `3 < x` reflected into
            # `x > 3`: spell the left one out
            left = f"T.{e.a.dtype}({e.a.value})"
            sym, prec = _INFIX.get(type(e), ("", 0))
            if sym:
                return f"{left} {sym} {self._paren(e.b, prec, right=True)}", prec
        if type(e) in _CALLS or (isinstance(e, Div) and not dt.is_float(e.dtype)):
            name = _CALLS.get(type(e), "T.truncdiv")
            return f"{name}({self.expr(e.a, a_lit)}, {self.expr(e.b, b_lit)})", _ATOM
        sym, prec = ("/", 11) if isinstance(e, Div) else _INFIX[type(e)]
        left = self._paren(e.a, prec, literal=a_lit)
        right = self._paren(e.b, prec, right=True, literal=b_lit)
        return f"{left} {sym} {right}", prec

    def _indices(self, indices: tuple[PrimExpr, ...]) -> str:
        return ", ".join(self.expr(i, literal=i.dtype == dt.INDEX) for i in indices) or "()"

    # -- statements --------------------------------------------------------
    def line(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def stmt(self, s: Stmt, indent: int) -> None:
        if isinstance(s, SeqStmt):
            if not s.stmts:
                self.line(indent, "pass")
            for x in s.stmts:
                self.stmt(x, indent)
        elif isinstance(s, BufferStore):
            value = self.expr(s.value, literal=True)
            self.line(indent, f"{s.buffer.name}[{self._indices(s.indices)}] = {value}")
        elif isinstance(s, For):
            self._for(s, indent)
        elif isinstance(s, LetStmt):
            self.line(indent, f"{s.var.name} = T.let({self.expr(s.value)})")
            self.stmt(s.body, indent)
        elif isinstance(s, IfThenElse):
            self.line(indent, f"with T.If({self.expr(s.condition)}):")
            self.stmt(s.then_case, indent + 1)
            if s.else_case is not None:
                self.line(indent, "with T.Else():")
                self.stmt(s.else_case, indent + 1)
        elif isinstance(s, Allocate):
            self.line(indent, f"{s.buffer.name} = T.alloc_buffer({_buffer_args(s.buffer)})")
            self.stmt(s.body, indent)
        elif isinstance(s, Evaluate):
            self.line(indent, f"T.evaluate({self.expr(s.value)})")
        else:
            raise TypeError(f"cannot print {type(s).__name__}")

    def _for(self, s: For, indent: int) -> None:
        kind = {"serial": "serial", "parallel": "parallel", "vectorized": "vectorized",
                "unrolled": "unroll"}[s.kind]
        index = s.loop_var.dtype == dt.INDEX
        ext = self.expr(s.extent, literal=index)
        if isinstance(s.min, IntImm) and s.min.value == 0:
            args = ext
        else:
            args = f"{self.expr(s.min, literal=index)}, extent={ext}"
        if s.annotations:
            args += f", annotations={dict(s.annotations)!r}"
        self.line(indent, f"for {s.loop_var.name} in T.{kind}({args}):")
        self.stmt(s.body, indent + 1)


def _buffer_args(buf: Buffer) -> str:
    p = _Printer()
    shape = ", ".join(p.expr(s, literal=s.dtype == dt.INDEX) for s in buf.shape)
    shape = f"({shape},)" if len(buf.shape) == 1 else f"({shape})"
    text = f'{shape}, "{buf.dtype}"'
    if buf.strides:
        strides = ", ".join(p.expr(s, literal=s.dtype == dt.INDEX) for s in buf.strides)
        text += f", strides=({strides}{',' if len(buf.strides) == 1 else ''})"
    if buf.align != dt.ELEMENT_BYTES[buf.dtype]:
        text += f", align={buf.align}"
    return text


def script(func: PrimFunc, name: str) -> str:
    """The text of ``func`` under ``name`` (shape vars are declared above the decorator)."""
    p = _Printer()
    for var in func.shape_vars:
        p.line(0, f'{var.name} = T.var("{var.dtype}")')
    params = []
    for param in func.params:
        if isinstance(param, Buffer):
            params.append(f"{param.name}: T.Buffer({_buffer_args(param)})")
        else:
            params.append(f"{param.name}: T.{param.dtype}")
    # without a global_symbol the tracer must not add one (it would name the function)
    p.line(0, "@T.prim_func" if "global_symbol" in func.attrs else "@T.prim_func(private=True)")
    p.line(0, f"def {name}({', '.join(params)}):")
    if func.attrs:
        p.line(1, f"T.func_attr({_attrs(func.attrs)})")
    p.stmt(func.body, 1)
    return "\n".join(p.lines) + "\n"


def _attrs(attrs: Any) -> str:
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in attrs.items()) + "}"


def expr_text(e: PrimExpr) -> str:
    """One expression as text (used in error messages)."""
    return _Printer().expr(e)


PRINT.install(script)

__all__ = ["expr_text", "format_float", "script"]
