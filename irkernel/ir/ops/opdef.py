"""One row of the op table: :class:`OpDef`, its typed attributes (:class:`AttrSpec`) and the
fusion pattern kinds.

The table itself, the registry and the public import path of these names are
:mod:`irkernel.ir.ops`. Imports numpy and ``irkernel.ir.ids`` only.

Attribute kinds (``A_*``) say how a keyword value is checked and normalized
into the canonical, hashable value that attribute tables intern:

==========  =======================================================================
``int``     a Python int (bools refused)
``bool``    a bool
``float``   a :class:`FloatAttr`: a Python float compared and hashed by its bits,
            so ``0.0`` and ``-0.0`` are different attributes and a NaN equals a
            NaN (every NaN is stored as the canonical NaN: payloads are not kept)
``ints``    a tuple of ints
``dims``    a tuple of ints holding a shape; ``<= -2`` is a symbolic dim (see ``A_DIMS``)
``floats``  a tuple of :class:`FloatAttr` (ints accepted), e.g. one parameter per slot
``axes``    None or a tuple of ints (an int is a one-axis tuple)
``dtype``   a dtype name
``str``     a str
==========  =======================================================================

Why a float subclass for ``A_FLOAT``: attribute records are interned by ``==``
and ``hash``. With plain floats a ``-0.0`` attribute would intern onto an
earlier ``0.0`` one (they compare equal) and no two NaN records would ever be
equal (``hash(nan)`` is per object), which breaks CSE and the text round trip.
``FloatAttr`` is still a ``float`` for every arithmetic use and prints with
``repr`` (``nan``, ``inf`` and ``-inf`` included), which the text format reads
back exactly.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irkernel.ir.ids import DTYPE_NAMES, dtype_code

Shape = tuple[int, ...]
TensorType = tuple[int, Shape]  # (dtype code, shape)

# Fusion pattern kinds, numbered as TVM's OpPatternKind.
ELEMWISE, BROADCAST, INJECTIVE, REDUCE, OUT_EWISE_FUSABLE, OPAQUE = 0, 1, 2, 3, 4, 8
PATTERN_NAMES = {ELEMWISE: "elemwise", BROADCAST: "broadcast", INJECTIVE: "injective",
                 REDUCE: "reduce", OUT_EWISE_FUSABLE: "out_ewise_fusable", OPAQUE: "opaque"}

# Attribute kinds: how a keyword value is checked and normalized.
A_INT, A_BOOL, A_INTS, A_AXES, A_DTYPE, A_STR = "int", "bool", "ints", "axes", "dtype", "str"
A_FLOAT, A_FLOATS = "float", "floats"
#: A shape given as an attribute (reshape, broadcast_to): ints, ``-1`` where the op
#: infers a dim, and symbolic dims stored as the shape table stores them (``<= -2``: an
#: expression of the function's ``SymbolTable``; the builder encodes ``SymDim`` values).
A_DIMS = "dims"
_REQUIRED = object()


class FloatAttr(float):
    """A float attribute value: equal (and equally hashed) exactly when the bits are equal.

    NaNs are canonicalized when built, so any two NaN attributes are equal;
    ``0.0 != -0.0``. Arithmetic gives plain floats; ``repr`` is float's.
    """

    __slots__ = ()

    def __new__(cls, value: float) -> FloatAttr:
        value = float(value)
        return super().__new__(cls, math.nan if math.isnan(value) else value)

    def _bits(self) -> bytes:
        return b"nan" if math.isnan(self) else struct.pack("<d", float(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, float):
            return self._bits() == FloatAttr(other)._bits()
        if isinstance(other, (int, np.integer, np.floating)) and not isinstance(other, bool):
            return self._bits() == FloatAttr(float(other))._bits()
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        # float's hash for numbers (so 1.0 and FloatAttr(1.0) hash alike); one value for NaN
        return 0x7FF8 if math.isnan(self) else float.__hash__(self)

    def __repr__(self) -> str:
        return float.__repr__(self)

    __str__ = __repr__

    def __reduce__(self) -> tuple[type, tuple[float]]:
        return FloatAttr, (float(self),)


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: str
    default: Any = _REQUIRED

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


_EXPECTED = {A_INT: "an int", A_BOOL: "a bool", A_STR: "a str", A_DTYPE: "a dtype name",
             A_INTS: "a sequence of ints", A_DIMS: "a sequence of ints and symbolic dims",
             A_AXES: "None, an int or a sequence of ints",
             A_FLOAT: "a float (or an int)", A_FLOATS: "a sequence of floats (or ints)"}


def normalize_attr(spec: AttrSpec, value: object) -> object:
    """Check ``value`` against the spec; returns the canonical (hashable) value.

    Raises TypeError naming the attribute.
    """
    kind = spec.kind
    if kind == A_INT and _is_int(value):
        return int(value)  # type: ignore[arg-type]
    if kind == A_BOOL and isinstance(value, (bool, np.bool_)):
        return bool(value)
    if kind == A_FLOAT and (_is_int(value) or isinstance(value, (float, np.floating))):
        try:
            return FloatAttr(float(value))  # type: ignore[arg-type]
        except OverflowError:  # an int too large for a float
            pass
    if kind == A_STR and isinstance(value, str):
        return value
    if kind == A_DTYPE:
        try:
            return DTYPE_NAMES[dtype_code(value)]
        except ValueError:
            pass
    if kind == A_AXES and value is None:
        return None
    if kind == A_AXES and _is_int(value):
        return (int(value),)  # type: ignore[arg-type]
    if kind in (A_INTS, A_AXES, A_DIMS) and isinstance(value, (tuple, list, np.ndarray)):
        items = list(value)
        if all(_is_int(v) for v in items):
            return tuple(int(v) for v in items)
    if kind == A_FLOATS and isinstance(value, (tuple, list, np.ndarray)):
        items = list(value)
        if all(_is_int(v) or isinstance(v, (float, np.floating)) for v in items):
            try:
                return tuple(FloatAttr(float(v)) for v in items)
            except OverflowError:
                pass
    raise TypeError(f"attribute {spec.name!r} must be {_EXPECTED[kind]}, got {value!r}")


@dataclass(frozen=True)
class OpDef:
    """One row of the op table. ``arity`` is the operand count, -1 for variadic."""

    name: str
    encoding: int
    arity: int
    infer: Callable[[Sequence[TensorType], Mapping[str, Any]], TensorType]
    reference: Callable[[Sequence[np.ndarray], Mapping[str, Any]], np.ndarray] | None
    pattern: int
    attrs: tuple[AttrSpec, ...] = ()
    pure: bool = True
    commutative: bool = False
    doc: str = ""
    opcode: int = field(default=-1, compare=False)
    #: ``legalize(operand types, attrs, result type) -> tir.PrimFunc`` (canonical form, attrs
    #: ``op_pattern``/``op_name``); the built-ins' live in ``passes.topi``.
    legalize: Callable[..., Any] | None = field(default=None, compare=False)
    #: The rule takes symbolic dims (``irkernel.ir.symdim``): it gives the right symbolic
    #: result or raises. Operands with symbolic dims reach no other op's rule.
    symbolic: bool = False

    def normalize_attrs(self, given: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
        """Canonical sorted (name, value) pairs with defaults filled; TypeError on a bad key."""
        known = {s.name: s for s in self.attrs}
        for key in given:
            if key not in known:
                valid = ", ".join(known) or "none"
                raise TypeError(f"{self.name}: unknown attribute {key!r} (valid: {valid})")
        out = []
        for spec in self.attrs:
            if spec.name in given:
                try:
                    value = normalize_attr(spec, given[spec.name])
                except TypeError as exc:
                    raise TypeError(f"{self.name}: {exc}") from None
            elif spec.required:
                raise TypeError(f"{self.name}: missing required attribute {spec.name!r}")
            else:
                value = spec.default
            out.append((spec.name, value))
        return tuple(sorted(out))


__all__ = [
    "A_AXES", "A_BOOL", "A_DIMS", "A_DTYPE", "A_FLOAT", "A_FLOATS", "A_INT", "A_INTS", "A_STR",
    "BROADCAST",
    "ELEMWISE", "INJECTIVE", "OPAQUE", "OUT_EWISE_FUSABLE", "PATTERN_NAMES", "REDUCE",
    "AttrSpec", "FloatAttr", "OpDef", "Shape", "TensorType", "normalize_attr",
]
