"""The op table: the single source of truth for every graph op.

Each op declares its operand encoding, arity, typed attributes, dtype and shape
rule (``infer``), a NumPy reference implementation, its fusion pattern kind
(TVM's OpPatternKind values) and whether it is pure. Passes read the integer
columns from :func:`op_arrays`; they never compare op names as strings.
Opcodes of the built-in ops are module constants ``OP_<NAME>`` (declared in
``irkernel.ir.opcodes``) and never change between versions (Numba caches
kernels that read them). Imports numpy and lower ``irkernel.ir`` modules.

Semantics worth stating once (the interpreter and every backend follow them):
binary ops need operands of one dtype (no implicit promotion, as in TVM Relax)
and broadcast as NumPy does; integer ``divide`` is floor division with
``x // 0 == 0`` (NumPy's result); ``astype`` from float to int truncates,
maps NaN to 0 and saturates out-of-range values (LLVM's ``fptosi.sat``);
integer arithmetic wraps; reductions keep the input dtype.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irkernel.ir import scalar_ops
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.ids import (
    ALL_DTYPES,
    BOOL,
    DTYPE_NAMES,
    ENC_BINARY,
    ENC_CONST,
    ENC_PARAM,
    ENC_UNARY,
    ENC_VARIADIC,
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    dtype_code,
    numpy_dtype,
)
from irkernel.ir.opcodes import *  # noqa: F403  (OP_<NAME> constants are part of this module's API)
from irkernel.ir.opcodes import BUILTIN_OP_NAMES, OP_POWER

Shape = tuple[int, ...]
TensorType = tuple[int, Shape]  # (dtype code, shape)

# Fusion pattern kinds, numbered as TVM's OpPatternKind.
ELEMWISE, BROADCAST, INJECTIVE, REDUCE, OUT_EWISE_FUSABLE, OPAQUE = 0, 1, 2, 3, 4, 8
PATTERN_NAMES = {ELEMWISE: "elemwise", BROADCAST: "broadcast", INJECTIVE: "injective",
                 REDUCE: "reduce", OUT_EWISE_FUSABLE: "out_ewise_fusable", OPAQUE: "opaque"}

# Attribute kinds: how a keyword value is checked and normalized.
A_INT, A_BOOL, A_INTS, A_AXES, A_DTYPE, A_STR = "int", "bool", "ints", "axes", "dtype", "str"
_REQUIRED = object()


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


def normalize_attr(spec: AttrSpec, value: object) -> object:
    """Check ``value`` against the spec; returns the canonical (hashable) value.

    Raises TypeError naming the attribute.
    """
    kind = spec.kind
    if kind == A_INT and _is_int(value):
        return int(value)  # type: ignore[arg-type]
    if kind == A_BOOL and isinstance(value, (bool, np.bool_)):
        return bool(value)
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
    if kind in (A_INTS, A_AXES) and isinstance(value, (tuple, list, np.ndarray)):
        items = list(value)
        if all(_is_int(v) for v in items):
            return tuple(int(v) for v in items)
    expected = {A_INT: "an int", A_BOOL: "a bool", A_STR: "a str", A_DTYPE: "a dtype name",
                A_INTS: "a sequence of ints", A_AXES: "None, an int or a sequence of ints"}[kind]
    raise TypeError(f"attribute {spec.name!r} must be {expected}, got {value!r}")


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
    #: ``op_pattern``/``op_name``); the built-ins' live in ``passes.topi.templates``.
    legalize: Callable[..., Any] | None = field(default=None, compare=False)

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


# ---------------------------------------------------------------------------
# dtype and shape rules
# ---------------------------------------------------------------------------

def _fmt(shape: Shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting with an error naming the shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(ndim):
        dim = 1
        for s in shapes:
            d = s[k - ndim + len(s)] if k - ndim + len(s) >= 0 else 1
            if d != 1:
                if dim not in (1, d):
                    raise TypeInferenceError(
                        "shapes " + ", ".join(_fmt(s) for s in shapes) + " do not broadcast")
                dim = d
        out.append(dim)
    return tuple(out)


def _dtypes_in(allowed: frozenset[int], types: Sequence[TensorType], what: str) -> None:
    for dt, _ in types:
        if dt not in allowed:
            names = ", ".join(DTYPE_NAMES[c] for c in sorted(allowed))
            raise TypeInferenceError(f"{what} dtype {DTYPE_NAMES[dt]} not supported ({names})")


def _same_dtype(types: Sequence[TensorType]) -> int:
    first = types[0][0]
    if any(dt != first for dt, _ in types):
        names = ", ".join(DTYPE_NAMES[dt] for dt, _ in types)
        raise TypeInferenceError(f"operand dtypes differ ({names}); insert astype")
    return first


def _elementwise_rule(allowed: frozenset[int], result_bool: bool = False):
    def infer(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
        _dtypes_in(allowed, types, "operand")
        dt = _same_dtype(types)
        return (BOOL if result_bool else dt), broadcast_shapes(*(s for _, s in types))
    return infer


def _where_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    if types[0][0] != BOOL:
        raise TypeInferenceError(f"condition must be bool, got {DTYPE_NAMES[types[0][0]]}")
    dt = _same_dtype(types[1:])
    return dt, broadcast_shapes(*(s for _, s in types))


def _matmul_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    _dtypes_in(NUMERIC_DTYPES, types, "operand")
    dt = _same_dtype(types)
    a, b = types[0][1], types[1][1]
    if not a or not b:
        raise TypeInferenceError(f"matmul operands must have rank >= 1, got {_fmt(a)} and {_fmt(b)}")
    a2 = a if len(a) >= 2 else (1,) + a
    b2 = b if len(b) >= 2 else b + (1,)
    if a2[-1] != b2[-2]:
        raise TypeInferenceError(f"matmul contraction mismatch: {_fmt(a)} @ {_fmt(b)}")
    out = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return dt, out


def normalize_axes(axes: tuple[int, ...] | None, rank: int) -> tuple[int, ...]:
    """Sorted non-negative axes; None means all. TypeInferenceError when out of range."""
    if axes is None:
        return tuple(range(rank))
    out = []
    for ax in axes:
        if not -rank <= ax < rank:
            raise TypeInferenceError(f"axis {ax} out of range for rank {rank}")
        out.append(ax % rank)
    if len(set(out)) != len(out):
        raise TypeInferenceError(f"repeated axis in {axes}")
    return tuple(sorted(out))


def _reduce_rule(allowed: frozenset[int], empty_ok: bool):
    def infer(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
        _dtypes_in(allowed, types, "operand")
        dt, shape = types[0]
        axes = normalize_axes(attrs["axis"], len(shape))
        if not empty_ok and any(shape[a] == 0 for a in axes):
            raise TypeInferenceError(f"reduction over an empty axis of shape {_fmt(shape)}")
        if attrs["keepdims"]:
            return dt, tuple(1 if k in axes else d for k, d in enumerate(shape))
        return dt, tuple(d for k, d in enumerate(shape) if k not in axes)
    return infer


def _reshape_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt, shape = types[0]
    new = attrs["shape"]
    size = math.prod(shape)  # exact Python ints: a huge target can not wrap to a match
    if sum(d == -1 for d in new) > 1 or any(d < -1 for d in new):
        raise TypeInferenceError(f"bad reshape target {_fmt(new)}")
    known = math.prod(d for d in new if d != -1)
    if -1 in new:
        if known == 0 or size % known:
            raise TypeInferenceError(f"cannot reshape {_fmt(shape)} to {_fmt(new)}")
        new = tuple(size // known if d == -1 else d for d in new)
    elif known != size:
        raise TypeInferenceError(f"cannot reshape {_fmt(shape)} to {_fmt(new)}")
    return dt, tuple(new)


def permutation(axes: tuple[int, ...] | None, rank: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(rank - 1, -1, -1))
    if sorted(a % rank if rank else a for a in axes) != list(range(rank)) or any(
            not -rank <= a < rank for a in axes):
        raise TypeInferenceError(f"axes {axes} are not a permutation of rank {rank}")
    return tuple(a % rank for a in axes)


def _permute_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt, shape = types[0]
    return dt, tuple(shape[a] for a in permutation(attrs["axes"], len(shape)))


def _broadcast_to_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt, shape = types[0]
    target = attrs["shape"]
    if any(d < 0 for d in target) or len(target) < len(shape) or (
            broadcast_shapes(shape, target) != target):
        raise TypeInferenceError(f"cannot broadcast {_fmt(shape)} to {_fmt(target)}")
    return dt, target


def _astype_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    return dtype_code(attrs["dtype"]), types[0][1]


def _concat_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    if not types:
        raise TypeInferenceError("concat needs at least one operand")
    dt = _same_dtype(types)
    first = types[0][1]
    rank = len(first)
    if rank == 0 or any(len(s) != rank for _, s in types):
        raise TypeInferenceError("concat operands must share one rank >= 1, got "
                                 + ", ".join(_fmt(s) for _, s in types))
    (axis,) = normalize_axes((attrs["axis"],), rank)
    for _, s in types:
        if any(s[k] != first[k] for k in range(rank) if k != axis):
            raise TypeInferenceError("concat shapes differ off the axis: "
                                     + ", ".join(_fmt(s) for _, s in types))
    return dt, first[:axis] + (sum(s[axis] for _, s in types),) + first[axis + 1:]


def _call_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    if any(d < 0 for d in attrs["shape"]):
        raise TypeInferenceError(f"bad result shape {_fmt(attrs['shape'])}")
    return dtype_code(attrs["dtype"]), attrs["shape"]


def _leaf_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    raise TypeInferenceError("param and const nodes carry their own type")


# ---------------------------------------------------------------------------
# NumPy reference implementations (the semantics; the interpreter calls these)
# ---------------------------------------------------------------------------

def _ufunc(fn: Callable[..., Any]):
    def ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(*xs))
    return ref


def _divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.true_divide(x, y) if x.dtype.kind == "f" else np.floor_divide(x, y)


def _float_math(opcode: int):
    """exp/log/tanh/sigmoid/power through the compiled scalar semantics (see scalar_ops)."""
    def ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        arrays = np.broadcast_arrays(*xs)
        dt = arrays[0].dtype
        # np.array copies: a broadcast view handed to Numba as is warns (FutureWarning)
        flat = [np.array(a, np.float64, order="C").ravel() for a in arrays]
        out = scalar_ops.float_math_kernel(opcode, flat[0], flat[-1], dt == np.float32)
        return out.astype(dt).reshape(arrays[0].shape)
    return ref


def _nan_max(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """NaN if either is NaN, else ``x if x > y else y`` (pins the signed-zero result)."""
    out = np.where(x > y, x, y)
    return np.where(np.isnan(x), x, out) if x.dtype.kind == "f" else out


def _nan_min(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.where(x < y, x, y)
    return np.where(np.isnan(x), x, out) if x.dtype.kind == "f" else out


def astype_reference(x: np.ndarray, code: int) -> np.ndarray:
    """Conversion with NaN -> 0 and saturation for float -> int (see module doc)."""
    dt = numpy_dtype(code)
    if x.dtype.kind == "f" and dt.kind == "i":
        info = np.iinfo(dt)
        hi = float(2 ** (info.bits - 1))
        with np.errstate(invalid="ignore"):
            inside = (x >= -hi) & (x < hi)
            out = np.trunc(np.where(inside, x, 0)).astype(dt)
            out = np.where(x >= hi, info.max, out)
            out = np.where(x < -hi, info.min, out).astype(dt)
        return np.asarray(out)
    with np.errstate(all="ignore"):
        return np.asarray(x.astype(dt))


def _reduce_ref(fn: Callable[..., Any], pass_dtype: bool):
    def ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
        x = xs[0]
        axes = normalize_axes(attrs["axis"], x.ndim)
        kw = {"dtype": x.dtype} if pass_dtype else {}
        with np.errstate(all="ignore"):
            return np.asarray(fn(x, axis=axes, keepdims=attrs["keepdims"], **kw), dtype=x.dtype)
    return ref


def _mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool, dtype: np.dtype) -> np.ndarray:
    """np.mean's arithmetic (sum in ``dtype``, then divide) without its empty-slice warning."""
    count = int(np.prod([x.shape[a] for a in axis], dtype=np.int64))
    return np.true_divide(np.sum(x, axis=axis, keepdims=keepdims, dtype=dtype), count)


def _reshape_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.reshape(xs[0], attrs["shape"])


def _permute_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.transpose(xs[0], permutation(attrs["axes"], xs[0].ndim))


def _broadcast_to_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.broadcast_to(xs[0], attrs["shape"]).copy()


def _astype_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return astype_reference(xs[0], dtype_code(attrs["dtype"]))


def _concat_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    return np.concatenate(list(xs), axis=attrs["axis"])


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

_AXIS = (AttrSpec("axis", A_AXES, None), AttrSpec("keepdims", A_BOOL, False))
_CALL = (AttrSpec("callee", A_STR), AttrSpec("dtype", A_DTYPE), AttrSpec("shape", A_INTS))
_NUM, _FLOAT, _ALL = NUMERIC_DTYPES, FLOAT_DTYPES, ALL_DTYPES


def _binary(name: str, fn: Callable[..., Any], allowed: frozenset[int] = _NUM,
            result_bool: bool = False, commutative: bool = False, doc: str = "") -> OpDef:
    return OpDef(name, ENC_BINARY, 2, _elementwise_rule(allowed, result_bool), _ufunc(fn),
                 BROADCAST, commutative=commutative, doc=doc)


def _unary(name: str, fn: Callable[..., Any] | None, allowed: frozenset[int], doc: str) -> OpDef:
    ref = _float_math(BUILTIN_OP_NAMES.index(name)) if fn is None else _ufunc(fn)
    return OpDef(name, ENC_UNARY, 1, _elementwise_rule(allowed), ref, ELEMWISE, doc=doc)


def _relu(x: np.ndarray) -> np.ndarray:
    return _nan_max(x, np.zeros((), x.dtype))


BUILTIN_OPS: tuple[OpDef, ...] = (
    OpDef("param", ENC_PARAM, 0, _leaf_rule, None, OPAQUE, doc="a0 = position; a function input"),
    OpDef("const", ENC_CONST, 0, _leaf_rule, None, OPAQUE, doc="a0 = const_id in the pool"),
    _binary("add", np.add, commutative=True, doc="x + y; ints wrap"),
    _binary("subtract", np.subtract, doc="x - y; ints wrap"),
    _binary("multiply", np.multiply, commutative=True, doc="x * y; ints wrap"),
    _binary("divide", _divide, doc="x / y for floats; floor division (x // 0 == 0) for ints"),
    _binary("maximum", _nan_max, commutative=True, doc="elementwise max, NaN propagates"),
    _binary("minimum", _nan_min, commutative=True, doc="elementwise min, NaN propagates"),
    OpDef("power", ENC_BINARY, 2, _elementwise_rule(_FLOAT), _float_math(OP_POWER), BROADCAST,
          doc="x ** y (floats; libm pow)"),
    _unary("negative", np.negative, _NUM, "-x; ints wrap"),
    _unary("exp", None, _FLOAT, "e ** x (libm)"),
    _unary("log", None, _FLOAT, "natural log (libm); log(0) = -inf, log(x < 0) = NaN"),
    _unary("sqrt", np.sqrt, _FLOAT, "square root; NaN below 0"),
    _unary("tanh", None, _FLOAT, "hyperbolic tangent (libm)"),
    _unary("sigmoid", None, _FLOAT, "1 / (1 + exp(-x)) in the input dtype"),
    _unary("relu", _relu, _NUM, "maximum(x, 0); NaN propagates"),
    _unary("abs", np.abs, _NUM, "|x|; abs(INT_MIN) wraps"),
    OpDef("where", ENC_VARIADIC, 3, _where_rule, _ufunc(np.where), BROADCAST,
          doc="operands (cond bool, x, y) in extra; broadcasting select"),
    _binary("equal", np.equal, _ALL, result_bool=True, commutative=True, doc="x == y -> bool"),
    _binary("less", np.less, _ALL, result_bool=True, doc="x < y -> bool"),
    _binary("greater", np.greater, _ALL, result_bool=True, doc="x > y -> bool"),
    OpDef("matmul", ENC_BINARY, 2, _matmul_rule, _ufunc(np.matmul), OUT_EWISE_FUSABLE,
          doc="NumPy matmul (1-D promotion, batch broadcasting); ints wrap"),
    OpDef("sum", ENC_UNARY, 1, _reduce_rule(_NUM, True), _reduce_ref(np.sum, True), REDUCE,
          _AXIS, doc="sum over axis (None = all), accumulated in the input dtype"),
    OpDef("max", ENC_UNARY, 1, _reduce_rule(_NUM, False), _reduce_ref(np.max, False), REDUCE,
          _AXIS, doc="max over axis; NaN propagates; empty axes rejected"),
    OpDef("mean", ENC_UNARY, 1, _reduce_rule(_FLOAT, True), _reduce_ref(_mean, True), REDUCE,
          _AXIS, doc="mean over axis in the input dtype (floats)"),
    OpDef("reshape", ENC_UNARY, 1, _reshape_rule, _reshape_ref, INJECTIVE,
          (AttrSpec("shape", A_INTS),), doc="row-major reshape; one -1 is inferred"),
    OpDef("permute_dims", ENC_UNARY, 1, _permute_rule, _permute_ref, INJECTIVE,
          (AttrSpec("axes", A_AXES, None),), doc="transpose; axes None reverses"),
    OpDef("broadcast_to", ENC_UNARY, 1, _broadcast_to_rule, _broadcast_to_ref, BROADCAST,
          (AttrSpec("shape", A_INTS),), doc="NumPy broadcast_to, materialized"),
    OpDef("astype", ENC_UNARY, 1, _astype_rule, _astype_ref, ELEMWISE,
          (AttrSpec("dtype", A_DTYPE),), doc="convert; float->int truncates, NaN->0, saturates"),
    OpDef("concat", ENC_VARIADIC, -1, _concat_rule, _concat_ref, INJECTIVE,
          (AttrSpec("axis", A_INT, 0),), doc="operands in extra; join along axis"),
    OpDef("call_func", ENC_VARIADIC, -1, _call_rule, None, OPAQUE, _CALL,
          doc="operands in extra; call graph function `callee` (one output of dtype/shape)"),
    OpDef("call_tir", ENC_VARIADIC, -1, _call_rule, None, OPAQUE, _CALL,
          doc="operands in extra; call tir.PrimFunc `callee`, whose last buffer is the result"),
)

if tuple(op.name for op in BUILTIN_OPS) != BUILTIN_OP_NAMES:
    raise AssertionError("BUILTIN_OPS must list the ops in opcode order (irkernel.ir.opcodes)")


# ---------------------------------------------------------------------------
# Registry and array view
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class OpArrays:
    """The table as columns that kernels take as arguments (index = opcode)."""

    encoding: np.ndarray  # int8[n_ops]
    arity: np.ndarray  # int8[n_ops], -1 = variadic
    pattern: np.ndarray  # int8[n_ops]
    pure: np.ndarray  # bool[n_ops]
    commutative: np.ndarray  # bool[n_ops]


_lock = threading.Lock()
_ops: list[OpDef] = []
_by_name: dict[str, OpDef] = {}
_arrays: list[OpArrays] = []  # cache of one, reset on registration


def register_op(op: OpDef) -> OpDef:
    """Append an op to the table (append-only); returns it with its opcode set."""
    with _lock:
        if op.name in _by_name:
            raise ValueError(f"op {op.name!r} is already registered")
        if len(_ops) >= len(BUILTIN_OPS) and op.encoding in (ENC_PARAM, ENC_CONST):
            raise ValueError(f"op {op.name!r}: only the built-in param and const are leaves")
        op = OpDef(**{**op.__dict__, "opcode": len(_ops)})
        _ops.append(op)
        _by_name[op.name] = op
        _arrays.clear()
        return op


for _op in BUILTIN_OPS:
    register_op(_op)


def set_legalize(name: str, legalize: Callable[..., Any] | None) -> OpDef:
    """Install the TIR template (LegalizeOps hook) of a registered op; returns the new row."""
    with _lock:
        op = _by_name.get(name)
        if op is None:
            raise ValueError(f"set_legalize: unknown op {name!r}")
        if legalize is not None and not callable(legalize):
            raise TypeError(f"set_legalize: legalize of {name!r} must be callable")
        op = OpDef(**{**op.__dict__, "legalize": legalize})
        _ops[op.opcode] = op
        _by_name[name] = op
        return op


def get_op(name_or_opcode: str | int) -> OpDef:
    """Look an op up by name or opcode; ValueError naming it when unknown."""
    if isinstance(name_or_opcode, str):
        op = _by_name.get(name_or_opcode)
        if op is None:
            raise ValueError(f"unknown op {name_or_opcode!r}")
        return op
    if 0 <= name_or_opcode < len(_ops):
        return _ops[name_or_opcode]
    raise ValueError(f"unknown opcode {name_or_opcode}")


def all_ops() -> tuple[OpDef, ...]:
    return tuple(_ops)


def num_ops() -> int:
    return len(_ops)


def op_arrays() -> OpArrays:
    cached = _arrays[:1]
    if cached:
        return cached[0]
    ops = list(_ops)

    def col(attr: str, dtype: type) -> np.ndarray:
        arr = np.array([getattr(op, attr) for op in ops], dtype=dtype)
        arr.setflags(write=False)
        return arr

    arrays = OpArrays(col("encoding", np.int8), col("arity", np.int8), col("pattern", np.int8),
                      col("pure", np.bool_), col("commutative", np.bool_))
    with _lock:
        if len(ops) == len(_ops):
            _arrays[:] = [arrays]
    return arrays
