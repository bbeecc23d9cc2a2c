"""TIR expressions: immutable, typed dataclass nodes with structural equality.

Design notes
------------
* Every node is ``@dataclass(frozen=True, slots=True)``; ``==`` and ``hash``
  are structural (generated from the fields). Consequently ``==`` can not build
  an ``EQ`` node: use :func:`eq` / :func:`ne` (or ``T.eq``); ``<``, ``<=``,
  ``>``, ``>=``, ``+ - * / // %``, ``&``, ``|``, ``~`` and unary ``-`` do build
  nodes, and ``bool(expr)`` raises (use ``T.If`` for control flow).
* Types are checked when a node is built: operands of a binary op have the
  same dtype (a Python number or a scalar next to a vector is converted or
  broadcast), so an ill-typed tree can not exist. ``int32`` and ``int64`` never
  mix implicitly; ``/`` is float division and a TypeError on ints (use ``//``,
  floor, or :func:`truncdiv`).
* Vars compare by ``(name, dtype)``: the verifier forbids shadowing, so a name
  identifies one binding in scope and substitution is always capture-free.
  Alternatives considered: identity-compared vars (TVM) make printing,
  hashing across processes and before/expected tests need alpha-renaming.
* Each node records its nesting depth and refuses to exceed ``MAX_DEPTH``, so
  the recursive visitors, the generated ``__eq__``/``__hash__`` and the
  printer can never overflow the Python stack (PrimFuncs are small and wide,
  not deep).

The operators build nodes through the ``BINARY`` hook (Python numbers
converted, scalars broadcast), which ``irkernel.tir.construct`` installs; the
other constructors (``const``, ``as_expr``, ``select``, ``cast``, ...) live there.
Imports ``irkernel.tir.dtype`` and ``irkernel.ir.hooks`` only.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from irkernel.ir import narrow
from irkernel.ir.hooks import Hook
from irkernel.ir.ids import DTYPE_NAMES
from irkernel.tir import dtype as dt

#: ``cls(a, b)`` with Python numbers converted and scalars broadcast: what the operators
#: call (``irkernel.tir.construct.binary``, installed there).
BINARY = Hook("build a TIR expression with an operator", "irkernel.tir.construct")

#: Deepest allowed nesting of statements and expressions in one tree.
MAX_DEPTH = 200

#: Trigonometric and hyperbolic math ops that are libm calls (LLVM has no intrinsic for them).
LIBM_TRIG = ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")

#: Math intrinsics: name -> (arity, which element dtypes are accepted).
MATH_OPS: dict[str, tuple[int, frozenset[str]]] = {
    **{name: (1, dt.FLOAT_ELEMENTS) for name in (
        "exp", "exp2", "log", "log2", "sqrt", "tanh", "sin", "cos", "fabs", "floor", "ceil",
        "round", "erf", *LIBM_TRIG)},
    "pow": (2, dt.FLOAT_ELEMENTS),
    "fmod": (2, dt.FLOAT_ELEMENTS),  # C fmod (sign of the dividend): LLVM's frem
    "fma": (3, dt.FLOAT_ELEMENTS),
    "abs": (1, dt.INT_ELEMENTS),
}

#: Integer dot-product intrinsics: ``dot4_u8s8(acc, a, b)`` with ``acc`` int32 x L
#: (L >= 2), ``a`` uint8 x 4 (one group of four, the same for every lane) and ``b``
#: int8 x 4L is ``acc[i] + sum_j a[j] * b[4i + j]`` (j < 4), products and sums exact,
#: the final add wrapping in int32: VNNI's ``vpdpbusd`` with ``a`` broadcast. The
#: runtime lowers it to ``vpdpbusd``, to an exact ``vpmaddubsw``/``vpmaddwd`` sequence
#: on AVX2, or to plain int32 multiply-adds (``runtime/int_dot.py``).
DOT_OPS = ("dot4_u8s8",)


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


def _depth(obj: object, *children: Any) -> None:
    """Record the node's depth (1 + deepest child); ValueError past MAX_DEPTH."""
    depth = 1
    for c in children:  # a plain loop: this runs for every node built (no generator/max)
        if c._depth >= depth:
            depth = c._depth + 1
    if depth > MAX_DEPTH:
        raise ValueError(f"{type(obj).__name__}: TIR tree nested deeper than {MAX_DEPTH} levels; "
                         "split the computation with LetStmt/T.let or SeqStmt")
    _set(obj, "_depth", depth)


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """Base of every TIR node (expressions, statements, buffers, PrimFunc)."""

    _depth: int = field(init=False, repr=False, compare=False)

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes``; ``self`` when every new value *is* the old one."""
        names = self._init_fields()
        unknown = set(changes) - set(names)
        if unknown:
            raise TypeError(f"{type(self).__name__}.replace: unknown fields {sorted(unknown)}")
        if all(getattr(self, k) is v for k, v in changes.items()):
            return self
        return self._rebuild(changes)

    def _rebuild(self, changes: dict[str, Any]) -> Any:
        """A new node with ``changes`` (known constructor fields; no checks: see ``replace``)."""
        kwargs = {f: getattr(self, f) for f in self._init_fields()}
        kwargs.update(changes)
        return type(self)(**kwargs)

    @classmethod
    def _init_fields(cls) -> tuple[str, ...]:
        names = _INIT_FIELDS.get(cls)
        if names is None:
            names = _INIT_FIELDS[cls] = tuple(f.name for f in fields(cls) if f.init)
        return names


#: Constructor fields per node class (a cache keyed by class; classes never change).
_INIT_FIELDS: dict[type, tuple[str, ...]] = {}


class PrimExpr(Node):
    """Base of typed expressions; operators build nodes (see the module notes)."""

    __slots__ = ()
    dtype: str

    def __add__(self, other: Any) -> PrimExpr:
        return BINARY(Add, self, other)

    def __radd__(self, other: Any) -> PrimExpr:
        return BINARY(Add, other, self)

    def __sub__(self, other: Any) -> PrimExpr:
        return BINARY(Sub, self, other)

    def __rsub__(self, other: Any) -> PrimExpr:
        return BINARY(Sub, other, self)

    def __mul__(self, other: Any) -> PrimExpr:
        return BINARY(Mul, self, other)

    def __rmul__(self, other: Any) -> PrimExpr:
        return BINARY(Mul, other, self)

    def __truediv__(self, other: Any) -> PrimExpr:
        return _true_div(self, other)

    def __rtruediv__(self, other: Any) -> PrimExpr:
        return _true_div(other, self)

    def __floordiv__(self, other: Any) -> PrimExpr:
        return BINARY(FloorDiv, self, other)

    def __rfloordiv__(self, other: Any) -> PrimExpr:
        return BINARY(FloorDiv, other, self)

    def __mod__(self, other: Any) -> PrimExpr:
        return BINARY(FloorMod, self, other)

    def __rmod__(self, other: Any) -> PrimExpr:
        return BINARY(FloorMod, other, self)

    def __neg__(self) -> PrimExpr:
        # -0.0 - x is exactly -x for every float x (0.0 - x is wrong for x = 0.0)
        zero = -0.0 if dt.is_float(self.dtype) else 0
        return BINARY(Sub, zero, self)

    def __lt__(self, other: Any) -> PrimExpr:
        return BINARY(LT, self, other)

    def __le__(self, other: Any) -> PrimExpr:
        return BINARY(LE, self, other)

    def __gt__(self, other: Any) -> PrimExpr:
        return BINARY(GT, self, other)

    def __ge__(self, other: Any) -> PrimExpr:
        return BINARY(GE, self, other)

    def __and__(self, other: Any) -> PrimExpr:
        return BINARY(And, self, other)

    def __rand__(self, other: Any) -> PrimExpr:
        return BINARY(And, other, self)

    def __or__(self, other: Any) -> PrimExpr:
        return BINARY(Or, self, other)

    def __ror__(self, other: Any) -> PrimExpr:
        return BINARY(Or, other, self)

    def __invert__(self) -> PrimExpr:
        return Not(self)

    def __bool__(self) -> bool:
        raise TypeError("a TIR expression has no truth value: use T.If(cond) for control flow, "
                        "T.select(cond, a, b) for values and T.eq/T.ne for (in)equality nodes")

    @property
    def lanes(self) -> int:
        """Vector lane count (1 for scalars)."""
        return dt.lanes(self.dtype)


# ---------------------------------------------------------------------------
# leaves
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IntImm(PrimExpr):
    """An integer or bool constant; ``value`` must fit ``dtype``."""

    value: int
    dtype: str = dt.INDEX

    def __post_init__(self) -> None:
        dtype = dt.normalize(self.dtype)
        if dt.lanes(dtype) != 1 or dt.is_float(dtype):
            raise TypeError(f"IntImm: dtype must be a scalar int or bool, got {dtype!r}")
        if isinstance(self.value, (bool, np.bool_, np.integer)):
            _set(self, "value", int(self.value))
        if not isinstance(self.value, int):
            raise TypeError(f"IntImm: value must be an int, got {self.value!r}")
        lo, hi = dt.int_range(dtype)
        if not lo <= self.value <= hi:
            raise ValueError(f"IntImm: {self.value} does not fit {dtype} [{lo}, {hi}]")
        _set(self, "dtype", dtype)
        _depth(self)


@dataclass(frozen=True, slots=True, eq=False)
class FloatImm(PrimExpr):
    """A float constant, rounded to ``dtype`` when built (so equality is exact).

    Equality and hash compare the value's bits, not ``==`` on floats: ``0.0``
    and ``-0.0`` are different constants (``x * -0.0`` is not ``x * 0.0``) and
    a NaN equals a NaN, so ``==``, ``hash`` and ``structural_digest`` agree.
    """

    value: float
    dtype: str = "float64"

    def __post_init__(self) -> None:
        dtype = dt.normalize(self.dtype)
        if dtype not in dt.FLOAT_ELEMENTS:
            raise TypeError(f"FloatImm: dtype must be a float dtype, got {dtype!r}")
        if not isinstance(self.value, (int, float, np.floating, np.integer)) or isinstance(
                self.value, bool):
            raise TypeError(f"FloatImm: value must be a float, got {self.value!r}")
        value = float(np.float32(self.value)) if dtype == "float32" else float(self.value)
        if dtype in dt.NARROW_FLOAT_ELEMENTS:  # the float32 of the value rounded to dtype
            code = DTYPE_NAMES.index(dtype)
            value = float(narrow.widen(narrow.narrow(np.float64(self.value), code), code))
        _set(self, "value", value)
        _set(self, "dtype", dtype)
        _depth(self)

    def _key(self) -> tuple[Any, str]:
        bits = "nan" if math.isnan(self.value) else struct.pack("<d", self.value)
        return bits, self.dtype

    def __eq__(self, other: object) -> bool:
        return type(other) is FloatImm and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True, slots=True)
class Var(PrimExpr):
    """A scalar variable: loop variable, let binding, scalar parameter or shape variable."""

    name: str
    dtype: str = dt.INDEX

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"Var: name must be an identifier, got {self.name!r}")
        dtype = dt.normalize(self.dtype)
        if dt.lanes(dtype) != 1:
            raise TypeError(f"Var {self.name}: vars are scalars, got dtype {dtype!r} "
                            "(vector values are bound with Let)")
        _set(self, "dtype", dtype)
        _depth(self)


# ---------------------------------------------------------------------------
# binary operators
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BinaryOp(PrimExpr):
    """Base of two-operand nodes: operands of one dtype (checked), result per class."""

    a: PrimExpr
    b: PrimExpr
    dtype: str = field(init=False)

    # which element kinds the op accepts: "num" (int, float), "int", "bool", "any"
    _accepts = "num"
    _compare = False

    def __post_init__(self) -> None:
        name = type(self).__name__
        for side, v in (("a", self.a), ("b", self.b)):
            if not isinstance(v, PrimExpr):
                raise TypeError(f"{name}: operand {side} must be a PrimExpr, got {v!r}")
        if self.a.dtype != self.b.dtype:
            raise TypeError(f"{name}: operand dtypes differ ({self.a.dtype} vs {self.b.dtype}); "
                            "cast one side with T.cast")
        elem = dt.element(self.a.dtype)
        accepts = self._accepts
        ok = (elem != "bool" if accepts == "num" else elem in dt.INT_ELEMENTS
              if accepts == "int" else elem == "bool" if accepts == "bool" else True)
        if not ok:
            raise TypeError(f"{name}: not defined for {self.a.dtype} operands")
        _set(self, "dtype", dt.with_lanes("bool", self.a.lanes) if self._compare
             else self.a.dtype)
        _depth(self, self.a, self.b)


def _binop(doc: str, accepts: str = "num", compare: bool = False) -> Any:
    def wrap(cls: type) -> type:
        cls.__doc__ = doc
        cls._accepts = accepts
        cls._compare = compare
        return dataclass(frozen=True, slots=True)(cls)
    return wrap


@_binop("a + b (ints wrap around)")
class Add(BinaryOp):
    pass


@_binop("a - b (ints wrap around)")
class Sub(BinaryOp):
    pass


@_binop("a * b (ints wrap around)")
class Mul(BinaryOp):
    pass


@_binop("a / b: IEEE division for floats, truncating division for ints (x / 0 is 0)")
class Div(BinaryOp):
    pass


@_binop("truncated remainder, sign of a (ints only; x % 0 is 0)", accepts="int")
class Mod(BinaryOp):
    pass


@_binop("floor(a / b); for ints x // 0 is 0, as NumPy")
class FloorDiv(BinaryOp):
    pass


@_binop("a - floor(a / b) * b, sign of b (NumPy's remainder); for ints x % 0 is 0")
class FloorMod(BinaryOp):
    pass


@_binop("min(a, b); for floats IEEE 754-2019 minimum: NaN-propagating (np.minimum), "
        "and -0.0 < 0.0 (np.minimum returns b for equal zeros)")
class Min(BinaryOp):
    pass


@_binop("max(a, b); for floats IEEE 754-2019 maximum: NaN-propagating (np.maximum), "
        "and -0.0 < 0.0 (np.maximum returns b for equal zeros)")
class Max(BinaryOp):
    pass


@_binop("a == b", accepts="any", compare=True)
class EQ(BinaryOp):
    pass


@_binop("a != b (true for NaN)", accepts="any", compare=True)
class NE(BinaryOp):
    pass


@_binop("a < b", compare=True)
class LT(BinaryOp):
    pass


@_binop("a <= b", compare=True)
class LE(BinaryOp):
    pass


@_binop("a > b", compare=True)
class GT(BinaryOp):
    pass


@_binop("a >= b", compare=True)
class GE(BinaryOp):
    pass


@_binop("logical and of bools", accepts="bool")
class And(BinaryOp):
    pass


@_binop("logical or of bools", accepts="bool")
class Or(BinaryOp):
    pass


# ---------------------------------------------------------------------------
# other expressions
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Not(PrimExpr):
    """Logical not of a bool."""

    a: PrimExpr
    dtype: str = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.a, PrimExpr) or not dt.is_bool(self.a.dtype):
            raise TypeError(f"Not: operand must be a bool expression, got {self.a!r}")
        _set(self, "dtype", self.a.dtype)
        _depth(self, self.a)


@dataclass(frozen=True, slots=True)
class Select(PrimExpr):
    """``true_value if condition else false_value``; both sides are evaluated."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = field(init=False)

    def __post_init__(self) -> None:
        c, t, f = self.condition, self.true_value, self.false_value
        if not all(isinstance(v, PrimExpr) for v in (c, t, f)):
            raise TypeError("Select: condition and values must be PrimExprs")
        if not dt.is_bool(c.dtype):
            raise TypeError(f"Select: condition must be bool, got {c.dtype}")
        if t.dtype != f.dtype:
            raise TypeError(f"Select: branch dtypes differ ({t.dtype} vs {f.dtype})")
        if c.lanes not in (1, t.lanes):
            raise TypeError(f"Select: condition has {c.lanes} lanes, values {t.lanes}")
        _set(self, "dtype", t.dtype)
        _depth(self, c, t, f)


@dataclass(frozen=True, slots=True)
class Cast(PrimExpr):
    """Convert ``value`` to ``dtype`` (lanes are kept). Float to int saturates (NaN is 0);
    anything to bool is ``!= 0``; int narrowing wraps."""

    dtype: str
    value: PrimExpr

    def __post_init__(self) -> None:
        if not isinstance(self.value, PrimExpr):
            raise TypeError(f"Cast: value must be a PrimExpr, got {self.value!r}")
        target = dt.normalize(self.dtype)
        if dt.lanes(target) not in (1, self.value.lanes):
            raise TypeError(f"Cast: {target} does not match the {self.value.lanes} lanes of "
                            "the value")
        _set(self, "dtype", dt.with_lanes(target, self.value.lanes))
        _depth(self, self.value)


@dataclass(frozen=True, slots=True)
class Call(PrimExpr):
    """A math intrinsic (``MATH_OPS``) or an integer dot product (``DOT_OPS``). A math op
    is lowered to the LLVM intrinsic of the same name (float64 ``erf`` and ``LIBM_TRIG`` to
    libm's ``erf``, ``tan``/``tanf``, ..., which LLVM has no intrinsic for; float32 ``exp``
    and ``erf`` to inline IR; ``fmod`` to ``frem``)."""

    op: str
    args: tuple[PrimExpr, ...]
    dtype: str = field(init=False)

    def __post_init__(self) -> None:
        if self.op in DOT_OPS:
            _dot_type(self)
            return
        spec = MATH_OPS.get(self.op)
        if spec is None:
            raise ValueError(f"Call: unknown math op {self.op!r}; known: {', '.join(MATH_OPS)}")
        args = tuple(self.args)
        arity, accepted = spec
        if len(args) != arity or not all(isinstance(a, PrimExpr) for a in args):
            raise TypeError(f"Call {self.op}: expects {arity} PrimExpr argument(s), got {args!r}")
        if len({a.dtype for a in args}) != 1:
            raise TypeError(f"Call {self.op}: argument dtypes differ "
                            f"({', '.join(a.dtype for a in args)})")
        if dt.element(args[0].dtype) not in accepted:
            raise TypeError(f"Call {self.op}: not defined for {args[0].dtype}")
        _set(self, "args", args)
        _set(self, "dtype", args[0].dtype)
        _depth(self, *args)


def _dot_type(call: Call) -> None:
    """Check and set the type of a ``DOT_OPS`` call (see there)."""
    args = tuple(call.args)
    if len(args) != 3 or not all(isinstance(a, PrimExpr) for a in args):
        raise TypeError(f"Call {call.op}: expects (acc, a, b) PrimExprs, got {args!r}")
    acc, a, b = args
    lanes = acc.lanes
    if dt.element(acc.dtype) != "int32" or lanes < 2:
        raise TypeError(f"Call {call.op}: acc must be int32 x L with L >= 2, got {acc.dtype}")
    if dt.element(a.dtype) != "uint8" or a.lanes != 4:
        raise TypeError(f"Call {call.op}: a must be uint8x4 (one group), got {a.dtype}")
    if dt.element(b.dtype) != "int8" or b.lanes != 4 * lanes:
        raise TypeError(f"Call {call.op}: b must be int8x{4 * lanes} for {lanes} "
                        f"accumulator lanes, got {b.dtype}")
    _set(call, "args", args)
    _set(call, "dtype", acc.dtype)
    _depth(call, *args)


@dataclass(frozen=True, slots=True)
class Ramp(PrimExpr):
    """The vector ``[base, base + stride, ..., base + (lanes - 1) * stride]`` of ints."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int
    dtype: str = field(init=False)

    def __post_init__(self) -> None:
        b, s = self.base, self.stride
        if not (isinstance(b, PrimExpr) and isinstance(s, PrimExpr)) or b.dtype != s.dtype \
                or not dt.is_int(b.dtype) or b.lanes != 1:
            raise TypeError(f"Ramp: base and stride must be scalar ints of one dtype, "
                            f"got {b!r}, {s!r}")
        if not isinstance(self.lanes, int) or not 2 <= self.lanes <= dt.MAX_LANES:
            raise ValueError(f"Ramp: lanes must be an int in [2, {dt.MAX_LANES}]")
        _set(self, "dtype", dt.with_lanes(b.dtype, self.lanes))
        _depth(self, b, s)


@dataclass(frozen=True, slots=True)
class Broadcast(PrimExpr):
    """A scalar repeated over ``lanes`` lanes."""

    value: PrimExpr
    lanes: int
    dtype: str = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.value, PrimExpr) or self.value.lanes != 1:
            raise TypeError(f"Broadcast: value must be a scalar PrimExpr, got {self.value!r}")
        if not isinstance(self.lanes, int) or not 2 <= self.lanes <= dt.MAX_LANES:
            raise ValueError(f"Broadcast: lanes must be an int in [2, {dt.MAX_LANES}]")
        _set(self, "dtype", dt.with_lanes(self.value.dtype, self.lanes))
        _depth(self, self.value)


@dataclass(frozen=True, slots=True)
class Let(PrimExpr):
    """``body`` with ``var`` bound to ``value``."""

    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: str = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.var, Var) or not isinstance(self.value, PrimExpr) \
                or not isinstance(self.body, PrimExpr):
            raise TypeError("Let: expects a Var, a value and a body expression")
        if self.var.dtype != self.value.dtype:
            raise TypeError(f"Let {self.var.name}: var is {self.var.dtype}, "
                            f"value is {self.value.dtype}")
        _set(self, "dtype", self.body.dtype)
        _depth(self, self.var, self.value, self.body)


def _true_div(a: Any, b: Any) -> PrimExpr:
    """``a / b``: float division only."""
    out = BINARY(Div, a, b)
    if not dt.is_float(out.dtype):
        raise TypeError(f"'/' is float division; for {out.dtype} use '//' (floor) or "
                        "T.truncdiv")
    return out


__all__ = [
    "EQ", "GE", "GT", "LE", "LT", "MATH_OPS", "MAX_DEPTH", "NE", "Add", "And",
    "BinaryOp", "Broadcast", "Call", "Cast", "DOT_OPS", "Div", "FloatImm", "FloorDiv",
    "FloorMod", "IntImm",
    "Let", "Max", "Min", "Mod", "Mul", "Node", "Not", "Or", "PrimExpr", "Ramp", "Select", "Sub",
    "Var",
]
