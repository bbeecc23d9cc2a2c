"""Integer analyses of TIR index expressions: constant bounds and linear forms.

``int_bounds`` is interval arithmetic over loop-variable ranges; it returns
None whenever a bound is unknown *or could overflow the dtype* (so callers
that rewrite on bounds never change wrapping semantics). ``linear_form``
writes an expression as ``sum(coef * var) + const``; when each var has an
independent range (loop vars with constant bounds), the extremes of a linear
form are exact, which is what the verifier's static bounds check needs to
report an error without false positives.
Imports the TIR node modules only.
"""

from __future__ import annotations

from collections.abc import Mapping

from irkernel.tir import dtype as dt
from irkernel.tir.expr import (
    Add,
    Broadcast,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from irkernel.tir.stmt import Allocate, For, IfThenElse, LetStmt, SeqStmt, Stmt

Interval = tuple[int, int]
#: The pseudo-variable standing for the lane number of a Ramp in linear forms.
LANE = "$lane"


def const_int(e: PrimExpr) -> int | None:
    """The value of an int/bool immediate (or a Broadcast of one), else None."""
    if isinstance(e, Broadcast):
        e = e.value
    return e.value if isinstance(e, IntImm) else None


def _fits(iv: Interval | None, dtype: str) -> Interval | None:
    if iv is None:
        return None
    lo, hi = dt.int_range(dtype)
    return iv if lo <= iv[0] and iv[1] <= hi else None


def _floordiv_iv(a: Interval, c: int) -> Interval:
    vals = (a[0] // c, a[1] // c)
    return min(vals), max(vals)


def int_bounds(e: PrimExpr, env: Mapping[str, Interval]) -> Interval | None:
    """Constant ``[lo, hi]`` of an int expression given var ranges ``env`` (None if unknown)."""
    if not dt.is_int(e.dtype) and not dt.is_bool(e.dtype):
        return None
    return _fits(_bounds(e, env), e.dtype)


def _bounds(e: PrimExpr, env: Mapping[str, Interval]) -> Interval | None:  # noqa: C901
    if isinstance(e, IntImm):
        return e.value, e.value
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, Broadcast):
        return int_bounds(e.value, env)
    if isinstance(e, Ramp):
        b, s = int_bounds(e.base, env), int_bounds(e.stride, env)
        if b is None or s is None:
            return None
        ends = (s[0] * (e.lanes - 1), s[1] * (e.lanes - 1), 0)
        return b[0] + min(ends), b[1] + max(ends)
    if isinstance(e, Let):
        v = int_bounds(e.value, env)
        inner = dict(env)
        if v is not None:
            inner[e.var.name] = v
        else:
            inner.pop(e.var.name, None)
        return int_bounds(e.body, inner)
    if isinstance(e, Cast):
        return int_bounds(e.value, env) if dt.is_int(e.value.dtype) else None
    if isinstance(e, Select):
        t, f = int_bounds(e.true_value, env), int_bounds(e.false_value, env)
        return None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]))
    if not isinstance(e, (Add, Sub, Mul, Min, Max, FloorDiv, FloorMod, Div, Mod)):
        return None
    a, b = int_bounds(e.a, env), int_bounds(e.b, env)
    if isinstance(e, FloorMod) and b is not None and b[0] == b[1] and b[0] > 0:
        c = b[0]
        if a is not None and a[0] >= 0 and a[1] < c:
            return a
        return 0, c - 1
    if a is None or b is None:
        return None
    if isinstance(e, Add):
        return a[0] + b[0], a[1] + b[1]
    if isinstance(e, Sub):
        return a[0] - b[1], a[1] - b[0]
    if isinstance(e, Mul):
        corners = [x * y for x in a for y in b]
        return min(corners), max(corners)
    if isinstance(e, Min):
        return min(a[0], b[0]), min(a[1], b[1])
    if isinstance(e, Max):
        return max(a[0], b[0]), max(a[1], b[1])
    if b[0] != b[1] or b[0] == 0:
        return None
    c = b[0]
    if isinstance(e, FloorDiv):
        return _floordiv_iv(a, c)
    if a[0] < 0 or c < 0:
        return None
    if isinstance(e, Div):
        return a[0] // c, a[1] // c
    if isinstance(e, Mod):
        return a if a[1] < c else (0, c - 1)
    return None


LinearForm = tuple[dict[str, int], int]


def linear_form(e: PrimExpr) -> LinearForm | None:
    """``({var: coef}, const)`` with ``e == sum(coef * var) + const``, or None if not affine.

    A Ramp contributes ``stride * LANE``; wrapping overflow is ignored (callers
    bound the result separately).
    """
    if isinstance(e, IntImm):
        return {}, e.value
    if isinstance(e, Var):
        return {e.name: 1}, 0
    if isinstance(e, Broadcast):
        return linear_form(e.value)
    if isinstance(e, Cast) and dt.is_int(e.value.dtype):
        return linear_form(e.value)
    if isinstance(e, Ramp):
        base, stride = linear_form(e.base), const_int(e.stride)
        if base is None or stride is None:
            return None
        return _combine(base, ({LANE: stride}, 0), 1)
    if isinstance(e, (Add, Sub)):
        a, b = linear_form(e.a), linear_form(e.b)
        if a is None or b is None:
            return None
        return _combine(a, b, 1 if isinstance(e, Add) else -1)
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            c = const_int(y)
            form = linear_form(x) if c is not None else None
            if form is not None and c is not None:
                return {k: v * c for k, v in form[0].items() if v * c}, form[1] * c
    return None


def _combine(a: LinearForm, b: LinearForm, sign: int) -> LinearForm:
    coeffs = dict(a[0])
    for k, v in b[0].items():
        coeffs[k] = coeffs.get(k, 0) + sign * v
    return {k: v for k, v in coeffs.items() if v}, a[1] + sign * b[1]


def linear_extremes(form: LinearForm, env: Mapping[str, Interval]) -> Interval | None:
    """Exact ``[min, max]`` of a linear form over independent var ranges (None if unbounded)."""
    coeffs, lo = form
    hi = lo
    for name, c in coeffs.items():
        rng = env.get(name)
        if rng is None:
            return None
        lo += min(c * rng[0], c * rng[1])
        hi += max(c * rng[0], c * rng[1])
    return lo, hi


def trip_count(stmt: Stmt, symbolic: int | None = None) -> int | None:
    """How many innermost statements ``stmt`` executes (the larger branch of an ``if``);
    a loop extent that is not a constant counts as ``symbolic``, or makes the answer None.

    A measure of a kernel's work that buffer sizes miss: a matmul of 4,096-element
    buffers runs ``M * N * K`` fma, not 4,096 (the runtime picks the LLVM tier by it).
    """
    if isinstance(stmt, For):
        extent = const_int(stmt.extent)
        extent = symbolic if extent is None else extent
        inner = trip_count(stmt.body, symbolic)
        return None if extent is None or inner is None else max(extent, 0) * inner
    if isinstance(stmt, SeqStmt):
        total = 0
        for s in stmt.stmts:
            count = trip_count(s, symbolic)
            if count is None:
                return None
            total += count
        return total
    if isinstance(stmt, IfThenElse):
        then = trip_count(stmt.then_case, symbolic)
        other = 0 if stmt.else_case is None else trip_count(stmt.else_case, symbolic)
        return None if then is None or other is None else max(then, other)
    if isinstance(stmt, (LetStmt, Allocate)):
        return trip_count(stmt.body, symbolic)
    return 1


__all__ = ["LANE", "Interval", "LinearForm", "const_int", "int_bounds", "linear_extremes",
           "linear_form", "trip_count"]
