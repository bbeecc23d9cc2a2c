"""Type rules over symbolic shapes: which ops take them, and results back to table dims.

The builder and ``verify`` give an op's rule the operand shapes with their symbolic dims
as :class:`~irkernel.ir.symdim.SymDim` objects (one conversion per distinct signature,
never per node). Only rows with ``OpDef.symbolic`` see them: every other op gets a
clear :class:`~irkernel.ir.symdim.UndecidableDim` naming the dim, so no rule written
for ints can give a wrong static answer. Imports ``irkernel.ir`` basics only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from irkernel.ir.ops.opdef import A_DIMS, OpDef
from irkernel.ir.symbols import SymbolBuilder, SymbolTable, encode_expr
from irkernel.ir.symdim import SymDim, UndecidableDim


def refuse_symbolic(opdef: OpDef, types: Sequence[tuple[int, tuple[Any, ...]]]) -> None:
    """UndecidableDim when an operand has a symbolic dim and the op's rule does not
    support symbolic dims (``OpDef.symbolic``)."""
    if opdef.symbolic:
        return
    for pos, (_, shape) in enumerate(types):
        for axis, d in enumerate(shape):
            if isinstance(d, SymDim):
                raise UndecidableDim(f"{opdef.name} does not support symbolic dims: dim {d} "
                                     f"(axis {axis} of operand {pos})")


def lookup_shape(symbols: SymbolTable, shape: Sequence[Any]) -> tuple[int, ...] | None:
    """A rule's result shape as table dims, or None when one of its expressions is not in
    ``symbols`` (so no node of the function can have that type)."""
    out = []
    for d in shape:
        if isinstance(d, SymDim):
            if d.dims is not symbols.dim_vars:
                return None
            e = symbols.index.get(d.key)
            if e is None:
                return None
            out.append(encode_expr(e))
        else:
            out.append(int(d))
    return tuple(out)


def map_dims_attrs(opdef: OpDef, attrs: dict[str, Any], dim: Callable[[int], Any]
                   ) -> dict[str, Any]:
    """``attrs`` with every symbolic dim (``<= -2``) of its ``A_DIMS`` attributes mapped
    by ``dim``: to a ``SymDim`` for the type rules, to its value for the interpreter."""
    for spec in opdef.attrs:
        if spec.kind == A_DIMS:
            value = attrs.get(spec.name)
            if value is not None and any(d <= -2 for d in value):
                attrs[spec.name] = tuple(d if d > -2 else dim(d) for d in value)
    return attrs


def encode_dims_attrs(opdef: OpDef, attrs: dict[str, Any], symbols: SymbolBuilder
                      ) -> dict[str, Any]:
    """``A_DIMS`` attributes (a reshape target) given with symbolic dims or declared
    variables' names, encoded as the shape table stores them; ``-1`` and ints stay."""
    for spec in opdef.attrs:
        value = attrs.get(spec.name)
        if spec.kind == A_DIMS and isinstance(value, (tuple, list)) and any(
                isinstance(d, (SymDim, str)) for d in value):
            for d in value:
                if isinstance(d, str) and d not in symbols.dims.index:
                    raise ValueError(f"{opdef.name}: attribute {spec.name!r} names the "
                                     f"undeclared dim variable {d!r}")
            attrs = {**attrs, spec.name: tuple(
                symbols.encode(d) if isinstance(d, (SymDim, str)) else d for d in value)}
    return attrs


__all__ = ["encode_dims_attrs", "lookup_shape", "map_dims_attrs", "refuse_symbolic"]
