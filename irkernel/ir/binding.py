"""Binding shape variables from a call's inputs: the value of each variable, checked.

A function with symbolic dims (``irkernel.ir.symbols``) learns its variables from the
shapes of the arrays it is called with. Sweeps, in order, over the parameters' dims
(one step per dim of a parameter, never per node):

1. a dim that is a plain variable binds it (the first input that names it wins; a
   later one must agree);
2. a dim ``c*v + k`` of one still unbound variable binds it when it solves exactly;
3. every symbolic dim of every parameter must then equal its expression's value,
   every variable must be bound and within its bounds, and every expression of the
   table must be non-negative (an intermediate ``h - 2`` of a too small ``h``).

Each failure is a ValueError naming the function, the input, the axis and the
variable. Shared by the interpreter (and later by the runtime, which will run one
executable for every binding). Imports ``irkernel.ir`` basics only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from irkernel.ir.function import Function
from irkernel.ir.symbols import encode_expr, expr_of
from irkernel.ir.symdim import bounds_text


def _where(func: Function, pos: int, axis: int) -> str:
    return f"input {pos} ({func.param_names[pos]!r}) axis {axis}"


def _param_dims(func: Function) -> list[tuple[int, int, int]]:
    """(input position, axis, expression id) of every symbolic dim of a parameter."""
    out = []
    for pos, node in enumerate(func.params.tolist()):
        for axis, d in enumerate(func.shapes[int(func.shape_id[node])]):
            if d < 0:
                out.append((pos, axis, expr_of(d)))
    return out


def _linear(key: tuple) -> tuple[int, int, int] | None:
    """(variable, coefficient, constant) when ``key`` is ``c*v + k``, else None."""
    terms, const = key
    if len(terms) == 1 and terms[0][0][0] == 0:
        return terms[0][0][1], terms[0][1], const
    return None


def bind_dims(func: Function, name: str, arrays: Sequence[np.ndarray]) -> list[int]:
    """The value of every shape variable of ``func`` for these inputs (already checked
    for count, dtype and rank); ValueError naming the dim on a contradiction."""
    symbols = func.shapes.symbols
    keys, names = symbols.keys, symbols.var_names
    values: list[int | None] = [None] * symbols.n_vars
    source: list[str] = [""] * symbols.n_vars
    dims = _param_dims(func)
    for pos, axis, e in dims:  # sweep 1: plain variables
        lin = _linear(keys[e])
        if lin is not None and lin[1:] == (1, 0):
            v, got = lin[0], int(arrays[pos].shape[axis])
            if values[v] is None:
                values[v], source[v] = got, _where(func, pos, axis)
            elif values[v] != got:
                raise ValueError(f"{name}: {_where(func, pos, axis)} is {got}, but {names[v]} = "
                                 f"{values[v]} from {source[v]}")
    for pos, axis, e in dims:  # sweep 2: c*v + k of an unbound variable
        lin = _linear(keys[e])
        if lin is not None and values[lin[0]] is None:
            v, c, k = lin
            got = int(arrays[pos].shape[axis])
            if (got - k) % c:
                raise ValueError(f"{name}: {_where(func, pos, axis)} is {got}, which is not "
                                 f"{symbols.text(encode_expr(e))} for any integer {names[v]}")
            values[v], source[v] = (got - k) // c, _where(func, pos, axis)
    for v, value in enumerate(values):
        if value is None:
            raise ValueError(f"{name}: the shape variable {names[v]} can not be bound from "
                             "the inputs (no input dim is a multiple of it plus a constant)")
        lo, hi = int(symbols.var_lower[v]), int(symbols.var_upper[v])
        if value < lo or (hi >= 0 and value > hi):
            raise ValueError(f"{name}: {names[v]} = {value} (from {source[v]}) is outside its "
                             f"bounds {bounds_text(lo, None if hi < 0 else hi)}")
    bound = [int(v) for v in values]  # type: ignore[arg-type]
    expr_values = symbols.values(bound)
    binding = ", ".join(f"{n} = {x}" for n, x in zip(names, bound, strict=True))
    for pos, axis, e in dims:  # sweep 3: every symbolic dim of the inputs agrees
        got = int(arrays[pos].shape[axis])
        if got != expr_values[e]:
            raise ValueError(f"{name}: {_where(func, pos, axis)} is {got}, but "
                             f"{symbols.text(encode_expr(e))} = {expr_values[e]} for {binding}")
    for e, value in enumerate(expr_values):
        if value < 0:
            raise ValueError(f"{name}: the dim {symbols.text(encode_expr(e))} is {value} "
                             f"(negative) for {binding}")
    return bound


def concrete_shapes(func: Function, binding: Sequence[int]) -> list[tuple[int, ...]]:
    """Every shape of the table with its symbolic dims replaced by their values."""
    shapes = func.shapes
    if not shapes.symbols:
        return list(shapes.shapes)
    values = shapes.symbols.values(binding)
    return [tuple(d if d >= 0 else values[expr_of(d)] for d in s) for s in shapes.shapes]


__all__ = ["bind_dims", "concrete_shapes"]
