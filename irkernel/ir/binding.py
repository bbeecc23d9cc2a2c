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
executable for every binding).

:func:`specialize` goes the other way: the static function of one binding, made by
substituting the values into the shape table and the ``A_DIMS`` attributes (a reshape
target) and re-interning both; the node columns are only remapped (whole-array
indexing, no per-node Python), so an imported symbolic model serves each binding
without being imported again (``DynamicModel.bind``). Imports ``irkernel.ir`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ops.opdef import A_DIMS
from irkernel.ir.pools import AttrTable, ConstPool, ShapeTable
from irkernel.ir.symbols import encode_expr, expr_of
from irkernel.ir.symdim import bounds_text
from irkernel.ir.verify import verify_function


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
    bound = [int(v) for v in values]  # type: ignore[arg-type]
    expr_values = check_binding(func, name, bound, [f" (from {s})" for s in source])
    binding = ", ".join(f"{n} = {x}" for n, x in zip(names, bound, strict=True))
    for pos, axis, e in dims:  # sweep 3: every symbolic dim of the inputs agrees
        got = int(arrays[pos].shape[axis])
        if got != expr_values[e]:
            raise ValueError(f"{name}: {_where(func, pos, axis)} is {got}, but "
                             f"{symbols.text(encode_expr(e))} = {expr_values[e]} for {binding}")
    return bound


def check_binding(func: Function, name: str, bound: Sequence[int],
                  sources: Sequence[str] | None = None) -> list[int]:
    """The value of every expression of ``func``'s table at ``bound`` (one value per
    variable), after checking each variable against its bounds and each expression for
    a negative value; ValueError naming the variable or the dim."""
    symbols = func.shapes.symbols
    names = symbols.var_names
    if len(bound) != len(names):
        raise ValueError(f"{name}: {len(bound)} values for the {len(names)} shape variables "
                         f"({', '.join(names)})")
    for v, value in enumerate(bound):
        lo, hi = int(symbols.var_lower[v]), int(symbols.var_upper[v])
        if value < lo or (hi >= 0 and value > hi):
            where = sources[v] if sources else ""
            raise ValueError(f"{name}: {names[v]} = {value}{where} is outside its "
                             f"bounds {bounds_text(lo, None if hi < 0 else hi)}")
    expr_values = symbols.values(bound)
    for e, value in enumerate(expr_values):
        if value < 0:
            binding = ", ".join(f"{n} = {x}" for n, x in zip(names, bound, strict=True))
            raise ValueError(f"{name}: the dim {symbols.text(encode_expr(e))} is {value} "
                             f"(negative) for {binding}")
    return expr_values


def concrete_shapes(func: Function, binding: Sequence[int]) -> list[tuple[int, ...]]:
    """Every shape of the table with its symbolic dims replaced by their values."""
    shapes = func.shapes
    if not shapes.symbols:
        return list(shapes.shapes)
    values = shapes.symbols.values(binding)
    return [tuple(d if d >= 0 else values[expr_of(d)] for d in s) for s in shapes.shapes]


def _dims_attr_names() -> frozenset[str]:
    return frozenset(spec.name for op in ops.all_ops() for spec in op.attrs
                     if spec.kind == A_DIMS)


def _dims_op_codes() -> np.ndarray:
    return np.array([op.opcode for op in ops.all_ops()
                     if any(spec.kind == A_DIMS for spec in op.attrs)], np.int16)


def _intern(items: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """The distinct items in first-seen order and each item's index among them."""
    index: dict[Any, int] = {}
    remap = np.fromiter((index.setdefault(item, len(index)) for item in items), np.int32,
                        len(items))
    return list(index), remap


def specialize(func: Function, binding: Sequence[int], name: str = "main") -> Function:
    """``func`` at one binding of its shape variables (module doc): every symbolic dim of
    its shapes and ``A_DIMS`` attributes replaced by its value, the tables re-interned,
    the columns remapped; verified. ``func`` itself when it has no variables.

    Raises ValueError naming the variable or the dim for a value outside its bounds or a
    dim that is negative at this binding (:func:`check_binding`), and IRError when the
    bound function does not type-check."""
    symbols = func.shapes.symbols
    if not symbols:
        return func
    values = check_binding(func, name, [int(v) for v in binding])
    shapes, shape_map = _intern(concrete_shapes(func, [int(v) for v in binding]))
    dims_names = _dims_attr_names()
    used = set(np.unique(func.attr_id[np.isin(func.kind, _dims_op_codes())]).tolist())

    def bound(aid: int, record: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
        if aid not in used:
            return record
        return tuple((k, tuple(d if d > -2 else values[expr_of(d)] for d in v))
                     if k in dims_names and isinstance(v, tuple) else (k, v) for k, v in record)

    records, attr_map = _intern([bound(a, r) for a, r in enumerate(func.attr_table.records)])
    pool = func.consts
    consts = ConstPool(pool.dtype, shape_map[pool.shape_id], pool.sval, pool.offset, pool.data,
                       pool.external)
    out = replace(func, shape_id=shape_map[func.shape_id], attr_id=attr_map[func.attr_id],
                  shapes=ShapeTable(shapes),
                  attr_table=AttrTable(records), consts=consts)
    verify_function(out, name)
    return out


__all__ = ["bind_dims", "check_binding", "concrete_shapes", "specialize"]
