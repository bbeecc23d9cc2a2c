"""Simplify: constant folding and arithmetic simplification of TIR (mostly index math).

One bottom-up rewrite of every expression, with the constant bounds of loop
and let variables in scope (``irkernel.tir.analysis.int_bounds``):

* fold: an operator whose operands are all constants becomes a constant,
  computed by the reference interpreter (so folding can not disagree with
  it); math calls are left to LLVM.
* exact int identities: ``x+0``, ``x*1``, ``x*0``, ``x-x``, ``x//1``,
  ``x%1``; constants move right and merge (``(x+c1)+c2``, ``(x*c1)*c2``,
  ``(x+c1)*c2 -> x*c2 + c1*c2``): all exact in wrapping arithmetic.
* bound-based (ints, only when no intermediate can overflow): ``x // c`` and
  ``x % c`` of a known range, ``(x*c + y) // c -> x + y // c``, ``(x*c + y) % c
  -> y % c``, truncating division of non-negatives to floor division,
  ``min``/``max``/comparisons decided by ranges.
* floats only where IEEE-exact: ``x*1.0``, ``x/1.0``, ``x-0.0``, ``x+(-0.0)``.
* vectors: ``Ramp +- Broadcast``, ``Ramp * c``, ``Ramp + Ramp``, stride-0 ramps.
* statements: loops of extent 0 vanish, extent 1 binds the var, constant
  branches are chosen, trivial lets are inlined, dead lets and no-ops dropped.

Returns the input PrimFunc itself when nothing changes.
"""

from __future__ import annotations

import math
from typing import Any

from irkernel import transform
from irkernel.tir import dtype as dt
from irkernel.tir.analysis import Interval, const_int, int_bounds
from irkernel.tir.construct import const
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
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import Mutator, children, free_vars, substitute
from irkernel.tir.interp import evaluate
from irkernel.tir.stmt import Allocate, For, IfThenElse, LetStmt, SeqStmt, Stmt, is_no_op

_NOOP = SeqStmt(())
_MAX_REWRITES = 8


def _value(e: PrimExpr) -> int | float | None:
    """The Python value of a constant (or a Broadcast of one), else None."""
    if isinstance(e, Broadcast):
        e = e.value
    return e.value if isinstance(e, (IntImm, FloatImm)) else None


def _imm(value: int | float, dtype: str) -> PrimExpr:
    if dt.is_int(dtype) or dt.is_bool(dtype):
        value = dt.wrap_int(int(value), dtype)
    return const(value, dtype)


def _is_const_tree(e: PrimExpr) -> bool:
    if isinstance(e, (IntImm, FloatImm)):
        return True
    if isinstance(e, BinaryOp):  # the common case, without the generic field walk
        return _is_const_tree(e.a) and _is_const_tree(e.b)
    if isinstance(e, (Broadcast, Ramp, Cast, Not, Select)):
        return all(isinstance(c, PrimExpr) and _is_const_tree(c) for c in children(e))
    return False


#: Integer operators folded in Python (two scalar constants; a positive divisor): exact,
#: then wrapped, which is what the interpreter's fixed-width arithmetic gives. The
#: interpreter call costs ~60 us, and unrolled index math folds thousands per kernel.
_INT_FOLDS = {Add: lambda a, b: a + b, Sub: lambda a, b: a - b, Mul: lambda a, b: a * b,
              Min: min, Max: max, FloorDiv: lambda a, b: a // b if b > 0 else None,
              FloorMod: lambda a, b: a % b if b > 0 else None}


def _fold(e: PrimExpr) -> PrimExpr | None:
    fast = _INT_FOLDS.get(type(e))
    if fast is not None and type(e.a) is IntImm and type(e.b) is IntImm and dt.is_int(e.dtype):
        value = fast(e.a.value, e.b.value)
        if value is not None:
            return _imm(value, e.dtype)
    if isinstance(e, (IntImm, FloatImm, Call)) or not _is_const_tree(e):
        return None
    if isinstance(e, Broadcast) and isinstance(e.value, (IntImm, FloatImm)):
        return None  # already canonical: folding would rebuild an equal node (not idempotent)
    vals = evaluate(e)
    if vals.tobytes() != vals[:1].repeat(len(vals)).tobytes():
        return None  # a vector of distinct constants (e.g. a constant Ramp): keep it
    return _imm(vals[0].item(), e.dtype)


class _Simplifier(Mutator):
    def __init__(self) -> None:
        self.env: dict[str, Interval] = {}
        # Results by node identity under the current ``env``: unrolled and vectorized code
        # shares unchanged subtrees between its copies (Substitute keeps the objects), so
        # each is simplified once. A result depends only on the node and ``env``; every
        # change of ``env`` goes through ``_bind``/``_restore``, which drop the memo.
        self._memo: dict[int, tuple[PrimExpr, PrimExpr]] = {}

    def _bind(self, name: str, bound: Interval | None) -> Interval | None:
        """Set (or clear) ``name``'s range; returns the previous one for ``_restore``."""
        saved = self.env.pop(name, None)
        if bound is not None:
            self.env[name] = bound
        self._memo.clear()
        return saved

    def _restore(self, name: str, saved: Interval | None) -> None:
        self._bind(name, saved)

    def bounds(self, e: PrimExpr) -> Interval | None:
        return int_bounds(e, self.env)

    # -- dispatch ------------------------------------------------------------
    def visit(self, node: Any) -> Any:
        if isinstance(node, PrimExpr) and not isinstance(node, Let):
            hit = self._memo.get(id(node))
            if hit is not None and hit[0] is node:
                return hit[1]
            out = self.rewrite(self.generic(node))
            self._memo[id(node)] = (node, out)
            return out
        return super().visit(node)

    def rewrite(self, e: PrimExpr) -> PrimExpr:
        for _ in range(_MAX_REWRITES):
            new = _fold(e)
            if new is None:
                new = self.rules(e)
            if new is e:
                break
            e = self.rewrite_children(new)
        return e

    def rewrite_children(self, e: PrimExpr) -> PrimExpr:
        """Re-simplify the direct operands of a node a rule just built."""
        if isinstance(e, BinaryOp):
            a, b = self.rewrite(e.a), self.rewrite(e.b)
            return e if a is e.a and b is e.b else type(e)(a, b)
        return e

    # -- expression rules --------------------------------------------------
    def rules(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, Select):
            c = const_int(e.condition)
            if c is not None:
                return e.true_value if c else e.false_value
            return e.true_value if e.true_value == e.false_value else e
        if isinstance(e, Not):
            return e.a.a if isinstance(e.a, Not) else e
        if isinstance(e, Ramp):
            return Broadcast(e.base, e.lanes) if const_int(e.stride) == 0 else e
        if isinstance(e, Cast):
            return e.value if e.value.dtype == e.dtype else e
        if not isinstance(e, BinaryOp):
            return e
        if isinstance(e, (And, Or)):
            return _logic(e)
        if isinstance(e, (EQ, NE, LT, LE, GT, GE)):
            return self.compare(e)
        if dt.is_float(e.dtype):
            return _float_rules(e)
        if isinstance(e, (Add, Sub, Mul)):
            return _ring_rules(e)
        return self.division_rules(e)

    def compare(self, e: BinaryOp) -> PrimExpr:
        if not dt.is_int(e.a.dtype):
            return e
        if e.a == e.b:
            return _imm(isinstance(e, (EQ, LE, GE)), e.dtype)
        ba, bb = self.bounds(e.a), self.bounds(e.b)
        if ba is None or bb is None:
            return e
        (alo, ahi), (blo, bhi) = ba, bb
        verdict = {
            LT: (ahi < blo, alo >= bhi), LE: (ahi <= blo, alo > bhi),
            GT: (alo > bhi, ahi <= blo), GE: (alo >= bhi, ahi < blo),
            EQ: (alo == ahi == blo == bhi, ahi < blo or bhi < alo),
            NE: (ahi < blo or bhi < alo, alo == ahi == blo == bhi),
        }[type(e)]
        if verdict[0]:
            return _imm(True, e.dtype)
        if verdict[1]:
            return _imm(False, e.dtype)
        return e

    def division_rules(self, e: BinaryOp) -> PrimExpr:  # noqa: C901
        a, b = e.a, e.b
        c = _value(b)
        if isinstance(e, (Min, Max)):
            if a == b:
                return a
            ba, bb = self.bounds(a), self.bounds(b)
            if ba is not None and bb is not None:
                if ba[1] <= bb[0]:
                    return a if isinstance(e, Min) else b
                if bb[1] <= ba[0]:
                    return b if isinstance(e, Min) else a
            return e
        if not isinstance(c, int) or c == 0:
            return e
        if c == 1:
            return a if isinstance(e, (Div, FloorDiv)) else _imm(0, e.dtype)
        ba = self.bounds(a)
        if isinstance(e, (Div, Mod)):
            if ba is not None and ba[0] >= 0 and c > 0:
                return (FloorDiv if isinstance(e, Div) else FloorMod)(a, b)
            return e
        if c < 0 or ba is None:
            return e
        q = (ba[0] // c, ba[1] // c)
        if q[0] == q[1]:  # the whole range lies in one block of c
            if isinstance(e, FloorDiv):
                return _imm(q[0], e.dtype)
            return a if q[0] == 0 else a - _imm(q[0] * c, e.dtype)
        if isinstance(a, Mul) and _value(a.b) is not None and int(_value(a.b)) % c == 0:
            if isinstance(e, FloorMod):
                return _imm(0, e.dtype)
            return Mul(a.a, _imm(int(_value(a.b)) // c, e.dtype))
        if isinstance(a, Add) and isinstance(a.a, Mul) and self.bounds(a.a) is not None:
            k = _value(a.a.b)
            if isinstance(k, int) and k % c == 0:
                if isinstance(e, FloorMod):
                    return FloorMod(a.b, b)
                return Add(Mul(a.a.a, _imm(k // c, e.dtype)), FloorDiv(a.b, b))
        if isinstance(e, FloorDiv) and isinstance(a, FloorDiv):
            k = _value(a.b)
            if isinstance(k, int) and k > 0:
                lo, hi = dt.int_range(e.dtype)
                if lo <= k * c <= hi:
                    return FloorDiv(a.a, _imm(k * c, e.dtype))
        return e

    # -- statements ----------------------------------------------------------
    def visit_For(self, s: For) -> Stmt:
        lo, ext = self.visit(s.min), self.visit(s.extent)
        n = const_int(ext)
        if n is not None and n <= 0:
            return _NOOP
        if n == 1:
            return self.visit(substitute(s.body, {s.loop_var.name: lo}))
        name = s.loop_var.name
        saved = self._bind(name, None)  # before the bounds, as they must not see a shadow
        blo, bext = self.bounds(lo), self.bounds(ext)
        if blo is not None and bext is not None and bext[1] >= 1:
            self.env[name] = (blo[0], blo[1] + bext[1] - 1)  # memo is empty: just cleared
        body = self.visit(s.body)
        self._restore(name, saved)
        if is_no_op(body):
            return _NOOP
        return s.replace(min=lo, extent=ext, body=body)

    def _let(self, node: Any, visit_body: Any) -> Any:
        value = self.visit(node.value)
        if isinstance(value, (IntImm, FloatImm, Var)):
            return visit_body(substitute(node.body, {node.var.name: value}))
        name = node.var.name
        saved = self._bind(name, None)
        bound = self.bounds(value)
        if bound is not None:
            self.env[name] = bound  # memo is empty: just cleared
        body = visit_body(node.body)
        self._restore(name, saved)
        if name not in free_vars(body):
            return body
        return node.replace(value=value, body=body)

    def visit_LetStmt(self, s: LetStmt) -> Stmt:
        return self._let(s, self.visit)

    def visit_Let(self, e: Let) -> PrimExpr:
        return self._let(e, self.visit)

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        cond = self.visit(s.condition)
        c = const_int(cond)
        if c is not None:
            chosen = s.then_case if c else s.else_case
            return _NOOP if chosen is None else self.visit(chosen)
        then = self.visit(s.then_case)
        other = None if s.else_case is None else self.visit(s.else_case)
        if other is not None and is_no_op(other):
            other = None
        if is_no_op(then) and other is None:
            return _NOOP
        return s.replace(condition=cond, then_case=then, else_case=other)

    def visit_SeqStmt(self, s: SeqStmt) -> Stmt:
        out: list[Stmt] = []
        for x in s.stmts:
            y = self.visit(x)
            if isinstance(y, SeqStmt):
                out.extend(z for z in y.stmts if not is_no_op(z))
            elif not is_no_op(y):
                out.append(y)
        if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts, strict=True)):
            return s
        return out[0] if len(out) == 1 else SeqStmt(tuple(out))

    def visit_Allocate(self, s: Allocate) -> Stmt:
        body = self.visit(s.body)
        return _NOOP if is_no_op(body) else s.replace(body=body)


def _logic(e: BinaryOp) -> PrimExpr:
    for x, y in ((e.a, e.b), (e.b, e.a)):
        c = const_int(x)
        if c is not None:
            if isinstance(e, And):
                return y if c else x
            return x if c else y
    return e.a if e.a == e.b else e


def _float_rules(e: BinaryOp) -> PrimExpr:
    cb = _value(e.b)
    if cb is None:
        return e
    negative_zero = cb == 0 and math.copysign(1.0, cb) < 0
    if (isinstance(e, (Mul, Div)) and cb == 1) or (isinstance(e, Sub) and cb == 0
                                                  and not negative_zero) \
            or (isinstance(e, Add) and negative_zero):
        return e.a
    return e


def _ring_rules(e: BinaryOp) -> PrimExpr:  # noqa: C901
    a, b = e.a, e.b
    ca, cb = _value(a), _value(b)
    if isinstance(e, Add):
        if cb == 0:
            return a
        if ca is not None and cb is None:
            return Add(b, a)
        if cb is not None and isinstance(a, Add) and _value(a.b) is not None:
            return Add(a.a, _imm(_value(a.b) + cb, e.dtype))
        ramp = _ramp_add(a, b, 1)
        return e if ramp is None else ramp
    if isinstance(e, Sub):
        if cb == 0:
            return a
        if a == b:
            return _imm(0, e.dtype)
        if cb is not None:
            return Add(a, _imm(-cb, e.dtype))
        ramp = _ramp_add(a, b, -1)
        return e if ramp is None else ramp
    # Mul
    if cb == 1:
        return a
    if cb == 0:
        return b
    if ca is not None and cb is None:
        return Mul(b, a)
    if cb is not None and isinstance(a, Mul) and _value(a.b) is not None:
        return Mul(a.a, _imm(_value(a.b) * cb, e.dtype))
    if cb is not None and isinstance(a, Add) and _value(a.b) is not None:
        return Add(Mul(a.a, b), _imm(_value(a.b) * cb, e.dtype))
    if cb is not None and isinstance(a, Ramp):
        scalar = b.value if isinstance(b, Broadcast) else b
        return Ramp(Mul(a.base, scalar), Mul(a.stride, scalar), a.lanes)
    return e


def _ramp_add(a: PrimExpr, b: PrimExpr, sign: int) -> PrimExpr | None:
    """``Ramp +- Broadcast`` / ``Ramp +- Ramp`` as one Ramp (None when neither applies)."""
    op = Add if sign > 0 else Sub
    if isinstance(a, Ramp) and isinstance(b, Broadcast):
        return Ramp(op(a.base, b.value), a.stride, a.lanes)
    if isinstance(a, Broadcast) and isinstance(b, Ramp) and sign > 0:
        return Ramp(Add(a.value, b.base), b.stride, b.lanes)
    if isinstance(a, Ramp) and isinstance(b, Ramp):
        return Ramp(op(a.base, b.base), op(a.stride, b.stride), a.lanes)
    return None


def simplify_expr(expr: PrimExpr, ranges: dict[str, Interval] | None = None) -> PrimExpr:
    """Simplify one expression given constant var ranges (``{name: (lo, hi)}``)."""
    s = _Simplifier()
    s.env.update(ranges or {})
    return s.visit(expr)


def simplify(func: PrimFunc) -> PrimFunc:
    """Simplify ``func``'s body (see the module docstring); ``func`` itself if unchanged.

    Parameters
    ----------
    func : PrimFunc

    Returns
    -------
    PrimFunc
    """
    return func.with_body(_Simplifier().visit(func.body))


def Simplify() -> transform.PrimFuncPass:
    """Constant folding and arithmetic simplification of every PrimFunc (opt level 0).

    Requires nothing; preserves results exactly (only IEEE-exact float rules).
    """

    def run(func: PrimFunc, mod: Any, ctx: transform.PassContext) -> PrimFunc:
        del mod, ctx
        return simplify(func)

    return transform.prim_func_pass(run, opt_level=0, name="Simplify")


transform.register_pass("Simplify", Simplify)

__all__ = ["Simplify", "simplify", "simplify_expr"]
