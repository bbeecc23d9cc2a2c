"""The symbolic input dims of an ONNX model: its variables, and binding them to values.

An exporter marks an input axis as symbolic in three ways: by a name (``dim_param:
"batch"``), by nothing (neither a value nor a name: ``?``), or by an expression of
names (``"2*batch"``, ``"seq + 1"``, ``"floor(h/2)"``). :class:`SymbolicDims` reads
the graph inputs once and makes one variable per name:

- a name that several inputs share is ONE variable (the exporter says the axes are
  equal); its order is that of its first appearance (inputs in graph order, axes in
  order), which is the order of :attr:`SymbolicDims.dims`;
- each ``?`` (no value and no name, a negative value, or a ``dim_param`` that only says
  "unknown": ``?``, ``-1``, ``None``) is a variable of its own, named ``INPUT.dimK``
  (input name, axis);
- an expression (integers, names, ``+ - * / // %``, ``floor ceil min max``) is
  evaluated from its names, exactly (fractions, no floats); a ``dim_param`` that is
  neither a name nor such an expression (``CeilToInt(IntTrueDiv(s0, 2))``) is a
  variable named by its whole text.

``shape_dict`` fixes dims: an entry replaces the input's declared dims, an int fixes
an axis (and the variable declared there, for every input that shares it), ``None``
or ``-1`` keeps the declared axis. The fixed variables are not in :attr:`dims`.

Binding goes both ways: :meth:`SymbolicDims.shapes` evaluates every input's shape from
the values of the variables, :meth:`SymbolicDims.infer` finds the values from the
inputs' shapes (a variable from any axis that names it; one that appears only in
expressions is solved from an expression affine in it, ``2*n`` or ``n+1``). Every
contradiction, bound violation or wrong rank is a :class:`DimError` naming the input,
the axis and the dim. Bounds are inclusive ``(low, high)``, either end ``None``.

A model has a handful of inputs of rank <= 8, so this is plain Python per axis (never
per node). Imports NumPy and ``onnx`` only; :mod:`irkernel.frontend.onnx.importer` uses it to
name the dims ``from_onnx`` cannot import, and ``irkernel.frontend.onnx.dynamic``
to bind them per call.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from types import CodeType
from typing import Any

import numpy as np
import onnx

from irkernel.frontend.onnx.common import ONNXImportError


class DimError(ValueError):
    """Values for the symbolic dims that contradict each other, the model, a bound or a rank."""


class SymbolicDimsError(ONNXImportError):
    """``from_onnx`` was asked for a module while some input dims have no value.

    Attributes
    ----------
    dims : tuple of str
        The unbound dims, in order.
    inputs : str
        The inputs that declare them, with their declared shapes.
    """

    def __init__(self, dims: Sequence[str], inputs: str) -> None:
        self.dims, self.inputs = tuple(dims), inputs
        super().__init__(
            f"graph inputs have symbolic dims {', '.join(self.dims)} ({inputs}): give every "
            "input's shape in shape_dict, or use irkernel.frontend.onnx.dynamic.DynamicModel, "
            "which binds the dims per call (.bind(NAME=VALUE, ...), .build() for any size)")


#: The functions an expression dim may call (the spellings of exporters and sympy).
_CALLS = {"floor": math.floor, "ceil": math.ceil, "ceiling": math.ceil, "min": min, "max": max,
          "Floor": math.floor, "Ceil": math.ceil, "Min": min, "Max": max}
_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant, ast.Call,
          ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd)
_MAX_EXPR = 200  # longer dim_params are names, never parsed
#: What evaluating a well-formed expression can still raise (``x/0``, ``x % 0``).
_EVAL_ERRORS = (ZeroDivisionError, ValueError, OverflowError, TypeError)


class _Exact(ast.NodeTransformer):
    """Integer literals become Fractions, so ``/`` is exact."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Call(ast.Name("_F", ast.Load()), [node], [])


class DimExpr:
    """One expression dim: its text, the names it reads, and its compiled evaluation."""

    __slots__ = ("code", "names", "text")

    def __init__(self, text: str, names: tuple[str, ...], code: CodeType) -> None:
        self.text, self.names, self.code = text, names, code

    def __call__(self, values: Mapping[str, int]) -> Fraction:
        scope = {"__builtins__": {}, "_F": Fraction, **_CALLS}
        return Fraction(eval(self.code, scope, {n: Fraction(values[n]) for n in self.names}))

    def __repr__(self) -> str:
        return self.text


def parse_dim_param(text: str) -> str | int | DimExpr:
    """A ``dim_param``: a variable name, a constant, or an expression (module doc)."""
    if text.isidentifier() or len(text) > _MAX_EXPR:
        return text
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    names = _grammar_names(tree)
    if names is None:
        return text
    try:
        code = compile(ast.fix_missing_locations(_Exact().visit(tree)), "<dim>", "eval")
    except (RecursionError, MemoryError, ValueError):  # deeply nested: a name
        return text
    expr = DimExpr(text, tuple(names), code)
    if not names:
        try:
            value = expr({})
        except _EVAL_ERRORS:
            return text
        return int(value) if value.denominator == 1 and value >= 0 else text
    return expr


def _grammar_names(tree: ast.AST) -> list[str] | None:
    """The variables an expression reads, or None when it is outside the grammar."""
    names: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, _NODES) or (isinstance(node, ast.Constant)
                                            and type(node.value) is not int):
            return None
        if isinstance(node, ast.Call) and not _known_call(node):
            return None
        if isinstance(node, ast.Name) and node.id not in names:
            names.append(node.id)
    return [n for n in names if n not in _CALLS or _is_variable(tree, n)]


def _known_call(node: ast.Call) -> bool:
    """``floor(x)``, ``ceil(x)``; ``min``/``max`` of two or more; no keywords."""
    if not isinstance(node.func, ast.Name) or node.func.id not in _CALLS or node.keywords:
        return False
    one = _CALLS[node.func.id] in (math.floor, math.ceil)
    return len(node.args) == 1 if one else len(node.args) >= 2


def _is_variable(tree: ast.AST, name: str) -> bool:
    """Whether ``name`` is read as a value somewhere (not only called)."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return any(isinstance(n, ast.Name) and n.id == name and id(n) not in called
               for n in ast.walk(tree))


Axis = int | str | DimExpr  # a fixed extent, a variable, an expression


#: ``dim_param`` texts that exporters write for "unknown" (paddle2onnx's ``?``): such an
#: axis is a dim of its own, like one with no name, not a name shared with every other
#: axis that carries the marker (onnxruntime does not tie them either).
UNKNOWN_MARKERS = frozenset({"?", "-1", "None", "none", "unk", "unknown"})


def _label(axis: Axis) -> str:
    return str(axis) if not isinstance(axis, DimExpr) else axis.text


def _declared_axes(info: onnx.ValueInfoProto) -> list[Axis] | None:
    """The axes an input declares, or None when it declares no shape."""
    ttype = info.type.tensor_type
    if not (info.type.HasField("tensor_type") and ttype.HasField("shape")):
        return None
    axes: list[Axis] = []
    for k, dim in enumerate(ttype.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value >= 0:
            axes.append(int(dim.dim_value))
        elif dim.dim_param and dim.dim_param.strip() not in UNKNOWN_MARKERS:
            axes.append(parse_dim_param(dim.dim_param))
        else:
            axes.append(f"{info.name}.dim{k}")
    return axes


def _free(d: Any) -> bool:
    return d is None or (isinstance(d, int) and d == -1)


class SymbolicDims:
    """The symbolic dims of a graph's inputs (module doc).

    Parameters
    ----------
    graph : onnx.GraphProto
    shape_dict : mapping, optional
        ``{input: shape}``; an int fixes an axis, ``None`` or ``-1`` keeps the declared one.
    bounds : mapping, optional
        ``{dim: (low, high)}``, inclusive, either end ``None``.
    skip : iterable of str
        Inputs that are not parameters (initializers, constants).

    Attributes
    ----------
    inputs : tuple of str
        The parameter inputs, in graph order.
    axes : tuple of tuple
        Per input, its axes: int (fixed), str (a variable) or :class:`DimExpr`.
    dims : tuple of str
        The variables without a value, in order of first appearance.
    fixed : dict
        ``{variable: value}`` fixed by ``shape_dict``.
    """

    def __init__(self, graph: onnx.GraphProto,
                 shape_dict: Mapping[str, Sequence[Any]] | None = None,
                 bounds: Mapping[str, tuple[int | None, int | None]] | None = None,
                 skip: Iterable[str] = ()) -> None:
        shape_dict, skipped = dict(shape_dict or {}), set(skip)
        infos = [i for i in graph.input if i.name not in skipped]
        self.inputs = tuple(i.name for i in infos)
        unknown = sorted(set(shape_dict) - set(self.inputs))
        if unknown:
            raise ValueError(f"shape_dict: {', '.join(map(repr, unknown))} is not an input of "
                             f"the graph (inputs: {', '.join(self.inputs) or 'none'})")
        declared = [_declared_axes(i) for i in infos]
        partial: list[list[int | None] | None] = [None] * len(infos)
        for k, info in enumerate(infos):
            if info.name in shape_dict:
                partial[k] = _entry(info.name, shape_dict[info.name], declared[k])
                if declared[k] is None or len(declared[k]) != len(partial[k]):
                    declared[k] = list(partial[k])  # a new rank: the given shape, all fixed
            elif not info.type.HasField("tensor_type"):
                raise ONNXImportError(f"graph input {info.name!r} is not a tensor")
            elif declared[k] is None:
                raise ONNXImportError(f"graph input {info.name!r} has no shape; give it in "
                                      "shape_dict")
        self.axes = tuple(tuple(a) for a in declared)
        self.variables = _names(self.axes)
        self.bounds = _check_bounds(bounds or {}, self.variables)
        self.fixed: dict[str, int] = {}
        self.fixed = self._infer(partial, "shape_dict", complete=False)
        # the given ints replace the declared axes (a declared 224 may become 112); a
        # variable no axis reads any more is not a dim
        self.axes = tuple(axes if p is None else tuple(a if d is None else d for a, d in zip(
            axes, p, strict=True)) for axes, p in zip(self.axes, partial, strict=True))
        self.variables = _names(self.axes)
        self.dims = tuple(n for n in self.variables if n not in self.fixed)

    # -- describing -----------------------------------------------------------------------

    def describe(self, only_symbolic: bool = True) -> str:
        """``input 'x' [batch, seq, 64], input 'mask' [batch, seq]``."""
        return ", ".join(f"input {name!r} [{', '.join(map(_label, axes))}]"
                         for name, axes in zip(self.inputs, self.axes, strict=True)
                         if not only_symbolic or not all(isinstance(a, int) for a in axes))

    # -- values -> shapes -----------------------------------------------------------------

    def values(self, binding: Mapping[str, Any]) -> dict[str, int]:
        """Every variable's value: ``binding`` (one value per dim) and the fixed ones."""
        unknown = [n for n in binding if n not in self.variables]
        if unknown:
            raise DimError(f"{', '.join(map(repr, unknown))} is not a dim of the model "
                           f"(dims: {', '.join(self.dims) or 'none'})")
        values = dict(self.fixed)
        for name, value in binding.items():
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise DimError(f"dim {name!r}: expected an int, got {value!r}")
            value = int(value)
            if name in self.fixed and value != self.fixed[name]:
                raise DimError(f"dim {name!r} is fixed to {self.fixed[name]} by shape_dict, "
                               f"got {value}")
            self._check_bound(name, value, "given")
            values[name] = value
        missing = [n for n in self.dims if n not in values]
        if missing:
            raise DimError(f"no value for dim(s) {', '.join(missing)} (the model's dims: "
                           f"{', '.join(self.dims)})")
        return values

    def key(self, values: Mapping[str, int]) -> tuple[int, ...]:
        """The values of :attr:`dims`, in order: what identifies a binding."""
        return tuple(values[n] for n in self.dims)

    def shapes(self, values: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """Every input's shape at ``values`` (all variables: :meth:`values`)."""
        out = {}
        for name, axes in zip(self.inputs, self.axes, strict=True):
            shape = []
            for k, axis in enumerate(axes):
                if isinstance(axis, int):
                    shape.append(axis)
                elif isinstance(axis, str):
                    shape.append(values[axis])
                else:
                    shape.append(self._evaluate(axis, values, f"input {name!r} axis {k}"))
            out[name] = tuple(shape)
        return out

    def _evaluate(self, expr: DimExpr, values: Mapping[str, int], where: str) -> int:
        args = ", ".join(f"{n} = {values[n]}" for n in expr.names)
        try:
            value = expr(values)
        except _EVAL_ERRORS as exc:
            raise DimError(f"{where}: dim {expr.text!r} cannot be evaluated at {args}: "
                           f"{exc}") from None
        if value.denominator != 1 or value < 0:
            raise DimError(f"{where}: dim {expr.text!r} = {value} at {args} is not a "
                           "non-negative integer")
        return int(value)

    # -- shapes -> values -----------------------------------------------------------------

    def infer(self, shapes: Sequence[Sequence[int]]) -> dict[str, int]:
        """Every variable's value from the inputs' shapes (one per input, in order)."""
        if len(shapes) != len(self.inputs):
            raise DimError(f"the model takes {len(self.inputs)} inputs "
                           f"({', '.join(self.inputs)}), got {len(shapes)}")
        return self._infer([[int(d) for d in s] for s in shapes], "input", complete=True)

    def _infer(self, shapes: Sequence[Sequence[int | None] | None], what: str,
               complete: bool) -> dict[str, int]:
        values, source = dict(self.fixed), dict.fromkeys(self.fixed, "shape_dict")
        pending: list[tuple[str, DimExpr, int]] = []
        for name, axes, shape in zip(self.inputs, self.axes, shapes, strict=True):
            if shape is None:
                continue
            if len(shape) != len(axes):
                raise DimError(f"{what} {name!r} has rank {len(shape)} (shape "
                               f"{tuple(shape)}), but the model declares rank {len(axes)}: "
                               f"[{', '.join(map(_label, axes))}]")
            for k, (axis, d) in enumerate(zip(axes, shape, strict=True)):
                if d is not None and (complete or not isinstance(axis, int)):
                    # (a shape_dict int overrides a declared extent)
                    self._match(axis, d, f"{what} {name!r} axis {k}", values, source, pending)
        self._solve(pending, values, source)
        if complete:
            for where, expr, _ in pending:
                missing = [n for n in expr.names if n not in values]
                if missing:
                    raise DimError(f"dim {missing[0]!r} cannot be inferred from the inputs: "
                                   f"it appears only in {expr.text!r} ({where}); bind it by "
                                   "name")
        return values

    def _match(self, axis: Axis, d: int, where: str, values: dict[str, int],
               source: dict[str, str], pending: list[tuple[str, DimExpr, int]]) -> None:
        """One axis of one input against the model: checked, bound, or left for _solve."""
        if isinstance(axis, int):
            if d != axis:
                raise DimError(f"{where} is {d}, but the model fixes it to {axis}")
        elif isinstance(axis, str):
            self._bind(values, source, axis, d, where)
        else:
            pending.append((where, axis, d))

    def _bind(self, values: dict[str, int], source: dict[str, str], name: str, d: int,
              where: str) -> None:
        if name in values:
            if values[name] != d:
                raise DimError(f"{where} is {d}, but dim {name!r} is {values[name]} (from "
                               f"{source[name]})")
            return
        self._check_bound(name, d, where)
        values[name], source[name] = d, where

    def _solve(self, pending: list[tuple[str, DimExpr, int]], values: dict[str, int],
               source: dict[str, str]) -> None:
        """Check the expressions whose names are known; solve those with one unknown
        that they are affine in; repeat while something was solved."""
        progress = True
        while progress:
            progress = False
            for where, expr, d in pending:
                unknown = [n for n in expr.names if n not in values]
                if not unknown:
                    got = self._evaluate(expr, values, where)
                    if got != d:
                        args = ", ".join(f"{n} = {values[n]} (from {source[n]})"
                                         for n in expr.names)
                        raise DimError(f"{where} is {d}, but dim {expr.text!r} is {got} at "
                                       f"{args}")
                elif len(unknown) == 1:
                    solved = _solve_affine(expr, values, unknown[0], d)
                    if solved is None:
                        continue
                    if solved < 0 or solved.denominator != 1:
                        raise DimError(f"{where} is {d}, but the model declares it as "
                                       f"{expr.text!r}, which no value of {unknown[0]!r} gives")
                    self._bind(values, source, unknown[0], int(solved), where)
                    progress = True

    def _check_bound(self, name: str, value: int, where: str) -> None:
        low, high = self.bounds.get(name, (None, None))
        if value < 0 or (low is not None and value < low) or (high is not None and value > high):
            span = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
            raise DimError(f"dim {name!r} = {value} ({where}) is outside its bounds "
                           f"{span if name in self.bounds else '(non-negative)'}")


def _names(axes: Sequence[Sequence[Axis]]) -> tuple[str, ...]:
    """The variables the axes read, in order of first appearance."""
    names: dict[str, None] = {}
    for row in axes:
        for axis in row:
            for name in ([axis] if isinstance(axis, str) else getattr(axis, "names", ())):
                names.setdefault(name)
    return tuple(names)


def _solve_affine(expr: DimExpr, values: Mapping[str, int], name: str,
                  d: int) -> Fraction | None:
    """The ``v`` with ``expr(v) == d`` when ``expr`` is affine in ``name`` (checked at
    0, 1, 2 and at the solution), else None."""
    try:
        f0, f1, f2 = (expr({**values, name: v}) for v in (0, 1, 2))
    except _EVAL_ERRORS:
        return None
    slope = f1 - f0
    if slope == 0 or f2 - f1 != slope:
        return None
    v = (d - f0) / slope
    try:
        if v.denominator == 1 and v >= 0 and expr({**values, name: int(v)}) != d:
            return None
    except _EVAL_ERRORS:
        return None
    return v


def _entry(name: str, shape: Any, declared: Sequence[Axis] | None) -> list[int | None]:
    """A ``shape_dict`` entry: ints >= 0, or None/-1 for 'keep the declared axis'."""
    try:
        dims = [None if _free(d) else int(d) for d in shape]
    except (TypeError, ValueError):
        raise ValueError(f"shape_dict[{name!r}] = {shape!r}: expected a sequence of ints "
                         "(None or -1 keeps the model's dim)") from None
    bad = [d for d in dims if d is not None and d < 0]
    if bad:
        raise ValueError(f"shape_dict[{name!r}] = {tuple(shape)}: dimension {bad[0]} is "
                         "negative")
    if any(d is None for d in dims) and (declared is None or len(declared) != len(dims)):
        rank = "no shape" if declared is None else f"rank {len(declared)}"
        raise ValueError(f"shape_dict[{name!r}] = {tuple(shape)}: None or -1 keeps the "
                         f"model's dim, but the input declares {rank}")
    return dims


def _check_bounds(bounds: Mapping[str, Any], variables: Sequence[str]
                  ) -> dict[str, tuple[int | None, int | None]]:
    out = {}
    for name, pair in bounds.items():
        if name not in variables:
            raise ValueError(f"bounds: {name!r} is not a dim of the model (dims: "
                             f"{', '.join(variables) or 'none'})")
        try:
            low, high = (None if b is None else int(b) for b in pair)
        except (TypeError, ValueError):
            raise ValueError(f"bounds[{name!r}] = {pair!r}: expected (low, high), ints or "
                             "None") from None
        if low is not None and high is not None and low > high:
            raise ValueError(f"bounds[{name!r}] = {pair!r}: low is above high")
        out[name] = (low, high)
    return out


__all__ = ["DimError", "DimExpr", "SymbolicDims", "SymbolicDimsError", "parse_dim_param"]
