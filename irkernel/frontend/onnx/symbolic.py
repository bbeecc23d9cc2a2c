"""The graph inputs' symbolic dims as shape variables of the function being imported.

``from_onnx(..., symbolic=True)`` keeps the dims :class:`~irkernel.frontend.onnx.dims.
SymbolicDims` finds (``dim_param`` names, ``?`` axes, expression dims) as variables of
the graph (``GraphBuilder.dim``) instead of asking for their values:

- each dim without a value is one variable, named for the text format
  (:func:`variable_names`: ``batch`` stays, ``x.dim2`` becomes ``x_dim2``), with the
  ``bounds`` given (default ``[1, inf]``);
- an expression dim (``2*batch``, ``seq + 1``, ``floor(h/2)``) becomes the same
  expression of the variables (:func:`expression_dim`), when it is in the algebra of
  ``irkernel.ir.symdim`` (sums, products, floor-division by constants); any other
  expression is an error naming the input and the axis;
- a dim ``shape_dict`` fixes is its value.

Imports ``irkernel.ir`` and the frontend's ``dims``/``common`` only.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from irkernel.frontend.onnx.common import ONNXImportError
from irkernel.frontend.onnx.dims import DimExpr, SymbolicDims
from irkernel.ir.builder import GraphBuilder
from irkernel.ir.symdim import DEFAULT_LOWER, UndecidableDim


def variable_names(dims: Sequence[str], sanitize: Any) -> dict[str, str]:
    """``{ONNX dim name: variable name}``: identifiers, distinct (``sanitize`` is the
    importer's name sanitizer)."""
    return dict(zip(dims, sanitize(list(dims)), strict=True))


def declare(bb: GraphBuilder, dims: SymbolicDims, names: Mapping[str, str]
            ) -> dict[str, tuple[Any, ...]]:
    """Declare the variables of ``dims`` in ``bb``; returns every input's shape with its
    symbolic dims (``SymDim``) and fixed ones (ints)."""
    scope: dict[str, Any] = dict(dims.fixed)
    for name in dims.dims:
        low, high = dims.bounds.get(name, (None, None))
        scope[name] = bb.dim(names[name], DEFAULT_LOWER if low is None else max(low, 0), high)
    shapes = {}
    for inp, axes in zip(dims.inputs, dims.axes, strict=True):
        shape: list[Any] = []
        for k, axis in enumerate(axes):
            if isinstance(axis, int):
                shape.append(axis)
            elif isinstance(axis, str):
                shape.append(scope[axis])
            else:
                shape.append(expression_dim(axis, scope, f"input {inp!r} axis {k}"))
        shapes[inp] = tuple(shape)
    return shapes


_ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
          ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
          ast.Mod: lambda a, b: a % b}


def expression_dim(expr: DimExpr, scope: Mapping[str, Any], where: str) -> Any:
    """The dim of an expression ``dim_param`` over the variables in ``scope``:
    ``floor(a / k)`` and ``ceil(a / k)`` become floor-divisions; ONNXImportError naming
    ``where`` for anything outside the algebra (``min``, a division by a dim)."""
    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in scope:
            return scope[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            return _ARITH[type(node.op)](walk(node.left), walk(node.right))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1
                and node.func.id in ("floor", "Floor", "ceil", "ceiling", "Ceil")
                and isinstance(node.args[0], ast.BinOp) and isinstance(node.args[0].op, ast.Div)):
            a, b = walk(node.args[0].left), walk(node.args[0].right)
            return a // b if node.func.id.lower() == "floor" else -((-a) // b)
        raise UndecidableDim(f"{ast.unparse(node)!r} is outside the symbolic dim algebra")

    try:
        value = walk(ast.parse(expr.text.strip(), mode="eval"))
    except (UndecidableDim, ZeroDivisionError, TypeError) as exc:
        raise ONNXImportError(f"{where}: dim {expr.text!r} can not be imported symbolically: "
                              f"{exc}") from None
    if isinstance(value, int) and value < 0:
        raise ONNXImportError(f"{where}: dim {expr.text!r} is negative ({value})")
    return value


__all__ = ["declare", "expression_dim", "variable_names"]
