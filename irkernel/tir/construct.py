"""Building TIR expressions from Python values: conversion, broadcasting, constructors.

Owns ``const``, ``as_expr``, ``binary`` (what the ``PrimExpr`` operators call: installed
as the ``expr.BINARY`` hook), ``eq``/``ne``, ``truncdiv``/``truncmod``, ``select``,
``cast`` and ``call``. Imports ``irkernel.tir.expr`` and ``dtype`` only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from irkernel.tir import dtype as dt
from irkernel.tir.expr import (
    BINARY,
    EQ,
    NE,
    BinaryOp,
    Broadcast,
    Call,
    Cast,
    Div,
    FloatImm,
    IntImm,
    Mod,
    PrimExpr,
    Select,
)


def const(value: Any, dtype: str | None = None) -> PrimExpr:
    """A constant of ``dtype`` (default: int64 for ints, float64 for floats, bool for bools).

    A vector ``dtype`` gives a :class:`Broadcast`.
    """
    if dtype is None:
        if isinstance(value, (bool, np.bool_)):
            dtype = "bool"
        elif isinstance(value, (int, np.integer)):
            dtype = np.dtype(type(value)).name if isinstance(value, np.integer) else dt.INDEX
        elif isinstance(value, (float, np.floating)):
            dtype = np.dtype(type(value)).name if isinstance(value, np.floating) else "float64"
        else:
            raise TypeError(f"cannot make a TIR constant from {value!r}")
    dtype = dt.normalize(dtype)
    elem, n = dt.element(dtype), dt.lanes(dtype)
    if elem in dt.FLOAT_ELEMENTS:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError(f"bool constant {value!r} in a {elem} expression")
        scalar: PrimExpr = FloatImm(value, elem)
    else:
        if isinstance(value, (float, np.floating)):
            if not float(value).is_integer() or math.isinf(value):
                raise TypeError(f"float constant {value!r} in a {elem} expression; cast it")
            value = int(value)
        if elem == "bool" and value not in (0, 1):
            raise ValueError(f"bool constant must be True/False, got {value!r}")
        scalar = IntImm(int(value), elem)
    return scalar if n == 1 else Broadcast(scalar, n)


def as_expr(value: Any, like: str | None = None) -> PrimExpr:
    """``value`` as a PrimExpr; Python numbers take the dtype ``like`` (lanes included)."""
    if isinstance(value, PrimExpr):
        return value
    if like is None:
        return const(value)
    return const(value, like)


def _match_lanes(a: PrimExpr, b: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
    if a.lanes == b.lanes:
        return a, b
    if a.lanes == 1:
        return Broadcast(a, b.lanes), b
    if b.lanes == 1:
        return a, Broadcast(b, a.lanes)
    raise TypeError(f"vector lanes differ ({a.dtype} vs {b.dtype})")


def binary(cls: type[BinaryOp], a: Any, b: Any) -> PrimExpr:
    """``cls(a, b)`` with Python numbers converted and scalars broadcast to vectors."""
    if not isinstance(a, PrimExpr) and not isinstance(b, PrimExpr):
        a, b = const(a), const(b)
    elif not isinstance(a, PrimExpr):
        a = as_expr(a, b.dtype)
    elif not isinstance(b, PrimExpr):
        b = as_expr(b, a.dtype)
    a, b = _match_lanes(a, b)
    return cls(a, b)


def eq(a: Any, b: Any) -> PrimExpr:
    """The ``EQ`` node (``==`` on expressions is structural equality)."""
    return binary(EQ, a, b)


def ne(a: Any, b: Any) -> PrimExpr:
    """The ``NE`` node."""
    return binary(NE, a, b)


def truncdiv(a: Any, b: Any) -> PrimExpr:
    """C division of ints (rounds toward zero)."""
    return binary(Div, a, b)


def truncmod(a: Any, b: Any) -> PrimExpr:
    """C remainder of ints (sign of ``a``)."""
    return binary(Mod, a, b)


def select(condition: Any, true_value: Any, false_value: Any) -> PrimExpr:
    """:class:`Select` with number conversion and broadcasting."""
    t, f = true_value, false_value
    if not isinstance(t, PrimExpr) and not isinstance(f, PrimExpr):
        t, f = const(t), const(f)
    elif not isinstance(t, PrimExpr):
        t = as_expr(t, f.dtype)
    elif not isinstance(f, PrimExpr):
        f = as_expr(f, t.dtype)
    t, f = _match_lanes(t, f)
    cond = as_expr(condition, "bool")
    if cond.lanes > 1 and t.lanes == 1:
        t, f = Broadcast(t, cond.lanes), Broadcast(f, cond.lanes)
    return Select(cond, t, f)


def cast(dtype: str, value: Any) -> PrimExpr:
    """:class:`Cast` (no node when ``value`` already has ``dtype``)."""
    value = as_expr(value)
    target = dt.with_lanes(dt.normalize(dtype), value.lanes)
    return value if value.dtype == target else Cast(target, value)


def call(op: str, *args: Any) -> PrimExpr:
    """A math :class:`Call`; Python numbers take the dtype of the first expression argument."""
    like = next((a.dtype for a in args if isinstance(a, PrimExpr)), None)
    exprs = [as_expr(a, like) for a in args]
    widest = max(e.lanes for e in exprs)
    exprs = [Broadcast(e, widest) if e.lanes == 1 and widest > 1 else e for e in exprs]
    return Call(op, tuple(exprs))


BINARY.install(binary)

__all__ = [
    "as_expr", "binary", "call", "cast", "const", "eq", "ne", "select", "truncdiv", "truncmod",
]
