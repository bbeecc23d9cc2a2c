"""The symbol table of a function's shapes: shape variables and dim expressions as columns.

It sits beside the interned shapes (``ShapeTable.symbols``). A dim of a shape is a
non-negative int, or a *symbolic* dim ``-2 - e`` naming expression ``e`` of this
table (``-1`` is left free: it means "infer" in a reshape target). Layout:

- variables (length v): ``var_names`` (tuple of str), ``var_lower`` int64 and
  ``var_upper`` int64 (``-1``: unbounded), inclusive;
- expressions (length E) in postfix, CSR: expression ``e`` is the ops
  ``expr_op[expr_ptr[e]:expr_ptr[e+1]]`` with their ``expr_arg`` (int64): ``CONST c``,
  ``VAR i``, ``ADD`` and ``PROD`` (pop two; ``PROD`` multiplies, for monomials such as
  ``batch*seq``), ``MUL c`` and ``FLOORDIV c`` (pop one, by a constant).

Every expression is stored in the canonical form of :mod:`irkernel.ir.symdim`, so equal
expressions have one id and equal symbolic shapes one shape id (the type sweep and CSE
compare shape ids). A plain variable is an expression too (``VAR i``). A function
without variables has the empty table and pays nothing. :class:`SymbolBuilder` is the
growable form a ``GraphBuilder`` keeps. Imports numpy and ``irkernel.ir.ids``/``symdim``
only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from irkernel.ir.ids import shape_problem

from irkernel.ir.symdim import (
    DEFAULT_LOWER,
    DimVars,
    SymDim,
    Key,
    add_keys,
    floordiv_key,
    key_value,
    UndecidableDim,
    make_dim,
    mul_keys,
    scale_key,
)

OP_CONST, OP_VAR, OP_ADD, OP_MUL, OP_FLOORDIV, OP_PROD = range(6)
OP_NAMES = ("const", "var", "add", "mul", "floordiv", "prod")
#: Symbolic dims are ``<= SYM_BASE``: dim ``SYM_BASE - e`` is expression ``e``.
SYM_BASE = -2


def encode_expr(expr_id: int) -> int:
    """The dim value of expression ``expr_id``."""
    return SYM_BASE - expr_id


def expr_of(dim: int) -> int:
    """The expression id of a symbolic dim value (``dim <= SYM_BASE``)."""
    return SYM_BASE - dim


def _postfix(key: Key, op: list[int], arg: list[int]) -> None:
    first = True
    for atom, c in key[0]:
        if atom[0] == 0:
            op.append(OP_VAR)
            arg.append(atom[1])
        elif atom[0] == 2:
            for k, v in enumerate(atom[1]):
                op.append(OP_VAR)
                arg.append(v)
                if k:
                    op.append(OP_PROD)
                    arg.append(0)
        else:
            _postfix(atom[2], op, arg)
            op.append(OP_FLOORDIV)
            arg.append(atom[1])
        if c != 1:
            op.append(OP_MUL)
            arg.append(c)
        if not first:
            op.append(OP_ADD)
            arg.append(0)
        first = False
    if key[1] or first:
        op.append(OP_CONST)
        arg.append(key[1])
        if not first:
            op.append(OP_ADD)
            arg.append(0)


def _from_postfix(ops: Sequence[int], args: Sequence[int], n_vars: int, what: str) -> Key:
    """The canonical key of one postfix program; ValueError when it is malformed."""
    stack: list[Key] = []
    for op, a in zip(ops, args, strict=True):
        if op == OP_CONST:
            stack.append(((), a))
        elif op == OP_VAR:
            if not 0 <= a < n_vars:
                raise ValueError(f"{what}: variable {a} not in [0, {n_vars})")
            stack.append(((((0, a), 1),), 0))
        elif op == OP_ADD and len(stack) >= 2:
            b = stack.pop()
            stack.append(add_keys(stack.pop(), b))
        elif op == OP_PROD and len(stack) >= 2:
            b = stack.pop()
            try:
                stack.append(mul_keys(stack.pop(), b))
            except UndecidableDim as exc:
                raise ValueError(f"{what}: {exc}") from None
        elif op == OP_MUL and stack:
            stack.append(scale_key(stack.pop(), a))
        elif op == OP_FLOORDIV and stack and a >= 1:
            stack.append(floordiv_key(stack.pop(), a))
        else:
            raise ValueError(f"{what}: bad op {op} (arg {a}) with {len(stack)} values")
    if len(stack) != 1 or not stack[0][0]:
        raise ValueError(f"{what}: does not leave one symbolic value")
    return stack[0]


class SymbolTable:
    """Variables and canonical dim expressions of one function (see the module docstring).

    Immutable and shared like the other tables; :meth:`extended` returns a new table.
    """

    __slots__ = ("__dict__", "expr_arg", "expr_op", "expr_ptr", "var_lower", "var_names",
                 "var_upper")

    def __init__(self, var_names: Sequence[str] = (), var_lower: Sequence[int] = (),
                 var_upper: Sequence[int] = (), expr_ptr: Sequence[int] = (0,),
                 expr_op: Sequence[int] = (), expr_arg: Sequence[int] = ()) -> None:
        self.var_names = tuple(var_names)
        self.var_lower = _frozen(np.asarray(var_lower, np.int64))
        self.var_upper = _frozen(np.asarray(var_upper, np.int64))
        self.expr_ptr = _frozen(np.asarray(expr_ptr, np.int32))
        self.expr_op = _frozen(np.asarray(expr_op, np.int8))
        self.expr_arg = _frozen(np.asarray(expr_arg, np.int64))
        if not len(self.var_names) == len(self.var_lower) == len(self.var_upper):
            raise ValueError("SymbolTable: variable columns differ in length")
        ptr = self.expr_ptr
        if (len(ptr) < 1 or ptr[0] != 0 or np.any(np.diff(ptr) < 1)
                or ptr[-1] != len(self.expr_op) or len(self.expr_op) != len(self.expr_arg)):
            raise ValueError("SymbolTable: expression columns are not a CSR of non-empty "
                             "programs")
        keys = self.keys  # checks every program and the variables
        if len(set(keys)) != len(keys):
            raise ValueError("SymbolTable: an expression is stored twice")

    @classmethod
    def from_keys(cls, dims: DimVars, keys: Iterable[Key]) -> SymbolTable:
        op: list[int] = []
        arg: list[int] = []
        ptr = [0]
        for key in keys:
            _postfix(key, op, arg)
            ptr.append(len(op))
        return cls(dims.names, dims.lower, [-1 if u is None else u for u in dims.upper],
                   ptr, op, arg)

    def __len__(self) -> int:
        """The number of expressions."""
        return len(self.expr_ptr) - 1

    @property
    def n_vars(self) -> int:
        return len(self.var_names)

    def __bool__(self) -> bool:
        return bool(self.var_names)

    @cached_property
    def dim_vars(self) -> DimVars:
        """The variables as the algebra's :class:`DimVars` (bounds for decisions)."""
        upper = [None if u < 0 else u for u in self.var_upper.tolist()]
        return DimVars(self.var_names, self.var_lower.tolist(), upper)

    @cached_property
    def keys(self) -> tuple[Key, ...]:
        """The canonical key of every expression (ValueError for a malformed one)."""
        dims = self.dim_vars  # checks names and bounds
        ops, args, ptr = self.expr_op.tolist(), self.expr_arg.tolist(), self.expr_ptr.tolist()
        out = []
        for e in range(len(ptr) - 1):  # one step per distinct expression (tables are small)
            key = _from_postfix(ops[ptr[e]:ptr[e + 1]], args[ptr[e]:ptr[e + 1]], len(dims),
                                f"dim expression {e}")
            out.append(key)
        return tuple(out)

    @cached_property
    def index(self) -> dict[Key, int]:
        return {k: e for e, k in enumerate(self.keys)}

    def dim(self, value: int) -> Any:
        """A shape's dim as the type rules see it: the int, or the :class:`SymDim`."""
        if value >= 0:
            return value
        return make_dim(self.dim_vars, self.keys[expr_of(value)])

    def decode(self, shape: Sequence[int]) -> tuple[Any, ...]:
        return tuple(d if d >= 0 else self.dim(d) for d in shape)

    def text(self, value: int) -> str:
        """How the text format spells one dim value."""
        return str(value) if value >= 0 else str(self.dim(value))

    def values(self, binding: Sequence[int]) -> list[int]:
        """The value of every expression when variable ``i`` is ``binding[i]``."""
        return [key_value(k, binding) for k in self.keys]

    def extended(self, dims: DimVars, keys: Iterable[Key]) -> tuple[SymbolTable, list[int]]:
        """A table of the variables ``dims`` (a superset of this table's, in order) holding
        ``keys`` too, and the dim value of each key; self when nothing is new."""
        if list(dims.names[:self.n_vars]) != list(self.var_names):
            raise ValueError("SymbolTable.extended: the variables must extend the table's")
        index = dict(self.index)
        added = list(self.keys)
        out = []
        for key in keys:
            e = index.get(key)
            if e is None:
                e = index[key] = len(added)
                added.append(key)
            out.append(encode_expr(e))
        if len(added) == len(self) and len(dims) == self.n_vars:
            return self, out
        return SymbolTable.from_keys(dims, added), out

    def state(self) -> tuple[Any, ...]:
        """The pickled form (the constructor's arguments)."""
        return (self.var_names, self.var_lower, self.var_upper, self.expr_ptr, self.expr_op,
                self.expr_arg)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymbolTable) and self.var_names == other.var_names and all(
            np.array_equal(a, b) for a, b in zip(self.state()[1:], other.state()[1:],
                                                  strict=True))

    def __hash__(self) -> int:
        return hash((self.var_names, self.keys))

    def __repr__(self) -> str:
        return f"SymbolTable({self.n_vars} variables, {len(self)} expressions)"


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr)
    arr.setflags(write=False)
    return arr


def symbolic_shape_problem(shape: Sequence[int], symbols: SymbolTable) -> str | None:
    """:func:`ids.shape_problem` for a shape that may hold symbolic dims of ``symbols``:
    each negative dim must name one of its expressions; the static dims are checked
    as usual (the element count at run time is the interpreter's and runtime's)."""
    for d in shape:
        if d < 0 and not 0 <= expr_of(d) < len(symbols):
            return (f"dimension {d} is negative and names no dim expression (symbolic dims "
                    f"are {SYM_BASE} - e for expression e in [0, {len(symbols)}))")
    return shape_problem(tuple(d for d in shape if d >= 0))


#: The table of every function without shape variables.
EMPTY_SYMBOLS = SymbolTable()


class SymbolBuilder:
    """The variables and dim expressions of a function being built (``GraphBuilder``);
    :meth:`freeze` makes its :class:`SymbolTable` (one entry per distinct expression)."""

    def __init__(self) -> None:
        self.dims = DimVars()
        self.keys: list[Key] = []
        self._index: dict[Key, int] = {}

    def encode(self, dim: Any) -> int:
        """A shape's dim as the table stores it: a non-negative int stays; a variable's
        name (declared with the default bounds when new) or a ``SymDim`` of these
        variables becomes ``SYM_BASE - e``. ValueError/TypeError naming the dim."""
        if isinstance(dim, str):
            dim = self.dims.var(dim) if dim in self.dims.index else self.declare(dim)
        if isinstance(dim, SymDim):
            if dim.dims is not self.dims:
                raise ValueError(f"dim {dim} belongs to another function's variables")
            e = self._index.get(dim.key)
            if e is None:
                e = self._index[dim.key] = len(self.keys)
                self.keys.append(dim.key)
            return encode_expr(e)
        if isinstance(dim, (int, np.integer)) and not isinstance(dim, (bool, np.bool_)):
            if dim < 0:
                raise ValueError(f"dimension {dim} is negative")
            return int(dim)
        raise TypeError(f"a dim must be an int or a symbolic dim, got {dim!r}")

    def declare(self, name: str, lower: int = DEFAULT_LOWER, upper: int | None = None
                ) -> SymDim:
        self.dims.add(name, lower, upper)
        return self.dims.var(name)

    def decode(self, value: int) -> Any:
        return value if value >= 0 else make_dim(self.dims, self.keys[expr_of(value)])

    def freeze(self) -> SymbolTable:
        return SymbolTable.from_keys(self.dims, self.keys) if self.dims.names else EMPTY_SYMBOLS
