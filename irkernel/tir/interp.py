"""A reference interpreter for PrimFuncs: the semantic oracle for TIR passes and codegen.

Slow on purpose (one Python step per loop iteration): every value is a NumPy
array of ``lanes`` elements of the exact dtype, so float32 math stays float32
and ints wrap exactly as the generated code does. The division rules match
lowering: int ``x // 0``, ``x % 0``, truncating ``x / 0`` are 0; ``MIN / -1``
wraps; float-to-int casts saturate (NaN is 0). float16/bfloat16 values are float32
in registers, rounded by a Cast to them and by a store (``irkernel.ir.narrow``), as in
the generated code. Loop kinds do not change
meaning (a parallel loop must not carry dependences; that is the author's
contract, as in TVM). Reads outside a buffer raise IndexError naming it.
Imports numpy, the TIR node modules and ``irkernel.ir.interp``, whose ``RUN_PRIM_FUNC``
hook (``call_tir`` in the graph interpreter) it installs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from irkernel.ir import narrow
from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.interp import RUN_PRIM_FUNC
from irkernel.ir.ops import scalar
from irkernel.ir.ops.opcodes import BUILTIN_OP_NAMES, OP_ERF
from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LIBM_TRIG,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Broadcast,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from irkernel.tir.function import PrimFunc
from irkernel.tir.stmt import (
    Allocate,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

Env = dict[str, np.ndarray]


def _int_div(a: np.ndarray, b: np.ndarray, floor: bool) -> np.ndarray:
    safe = np.where((b == 0) | (b == -1), 1, b).astype(a.dtype)
    q = a // safe  # NumPy's integer // is floor division
    if not floor:  # truncate: one up when the remainder is nonzero and the signs differ
        q = q + ((q * safe != a) & ((a < 0) != (safe < 0)))
    q = np.where(b == -1, -a, q)
    return np.where(b == 0, 0, q).astype(a.dtype)


def _int_mod(a: np.ndarray, b: np.ndarray, floor: bool) -> np.ndarray:
    q = _int_div(a, b, floor)
    return np.where(b == 0, 0, a - q * b).astype(a.dtype)


def _float_to_int(x: np.ndarray, dtype: str) -> np.ndarray:
    """Saturating conversion (LLVM's fptosi.sat): NaN is 0, out-of-range clamps."""
    lo, hi = dt.int_range(dtype)
    x64 = x.astype(np.float64)
    ok = ((x64 > float(lo - 1)) | (x64 >= float(lo))) & (x64 < float(hi + 1))
    out = np.zeros(x.shape, dtype=dtype)
    out[ok] = x64[ok].astype(dtype)
    out[~ok & (x64 > 0)] = hi
    out[~ok & (x64 < 0)] = lo
    return out


def _round_narrow(value: np.ndarray, elem: str) -> np.ndarray:
    """float32 values rounded to float16/bfloat16 and held as float32 (a register)."""
    code = DTYPE_NAMES.index(elem)
    return narrow.widen(narrow.narrow(value, code), code)


def _cast(value: np.ndarray, target: str) -> np.ndarray:
    elem = dt.element(target)
    if elem == "bool":
        return value != 0
    if elem in dt.INT_ELEMENTS and value.dtype.kind == "f":
        return _float_to_int(value, elem)
    if elem in dt.NARROW_FLOAT_ELEMENTS:
        return _round_narrow(value, elem)
    return value.astype(elem)


def _value_array(value: Any, dtype: str) -> np.ndarray:
    """``[value]`` as a register: narrow floats rounded and held as float32."""
    elem = dt.element(dtype)
    if elem in dt.NARROW_FLOAT_ELEMENTS:
        return _round_narrow(np.array([value], np.float64), elem)
    return np.array([value], dtype=elem)


_MATH: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "fabs": np.abs, "floor": np.floor,
    "ceil": np.ceil, "round": np.rint, "pow": np.power, "abs": np.abs, "fmod": np.fmod,
    "erf": lambda a: _libm(OP_ERF, a),
    **{name: (lambda op: lambda a: _libm(op, a))(BUILTIN_OP_NAMES.index(name))
       for name in LIBM_TRIG},
    "fma": lambda a, b, c: _fma(a, b, c),
    "dot4_u8s8": lambda acc, a, b: _dot4(acc, a, b),
}


def _dot4(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``acc[i] + sum_j a[j] * b[4i + j]``, exact, the final add wrapping in int32."""
    prods = b.astype(np.int64).reshape(-1, 4) * a.astype(np.int64).reshape(1, 4)
    total = acc.astype(np.int64) + prods.sum(axis=1)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


def _libm(opcode: int, a: np.ndarray) -> np.ndarray:
    """libm's erf, tan, ... (erff, tanf, ... for float32) per lane: the graph interpreter's
    own scalar code (the graph op of the same name)."""
    flat = np.array(a, np.float64).ravel()
    out = scalar.float_math_kernel(opcode, flat, flat, a.dtype == np.float32)
    return out.astype(a.dtype).reshape(a.shape)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once, as ``llvm.fma``.

    float32: the float64 product is exact and one float64 add rounds; float64:
    exact rational arithmetic per finite lane (the non-finite ones follow IEEE).
    """
    if a.dtype == np.float32:
        return (a.astype(np.float64) * b + c).astype(np.float32)
    with np.errstate(all="ignore"):
        out = a * b + c
    # the exact product of finite lanes never overflows: an infinite c wins
    out = np.where(np.isfinite(a) & np.isfinite(b) & np.isinf(c), c, out)
    for k in np.flatnonzero(np.isfinite(a) & np.isfinite(b) & np.isfinite(c)):
        exact = Fraction(float(a[k])) * Fraction(float(b[k])) + Fraction(float(c[k]))
        try:
            out[k] = float(exact)
        except OverflowError:
            out[k] = math.copysign(math.inf, exact)
    return out


def _min_max(a: np.ndarray, b: np.ndarray, is_min: bool) -> np.ndarray:
    """IEEE 754-2019 minimum/maximum (LLVM's ``llvm.minimum``/``maximum``): NaN-propagating
    like ``np.minimum``, but ordering ``-0.0 < 0.0`` where NumPy returns ``b`` for a tie."""
    if a.dtype == bool:
        return np.logical_and(a, b) if is_min else np.logical_or(a, b)
    out = np.minimum(a, b) if is_min else np.maximum(a, b)
    if a.dtype.kind != "f":
        return out
    prefer_a = np.signbit(a) if is_min else np.signbit(b)
    return np.where((a == b) & (a == 0), np.where(prefer_a, a, b), out)


def _binary(e: BinaryOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    is_int = a.dtype.kind in "iu"
    if isinstance(e, Add):
        return a + b
    if isinstance(e, Sub):
        return a - b
    if isinstance(e, Mul):
        return a * b
    if isinstance(e, Div):
        return _int_div(a, b, floor=False) if is_int else a / b
    if isinstance(e, Mod):
        return _int_mod(a, b, floor=False)
    if isinstance(e, FloorDiv):
        return _int_div(a, b, floor=True) if is_int else np.floor(a / b)
    if isinstance(e, FloorMod):
        return _int_mod(a, b, floor=True) if is_int else np.remainder(a, b)
    if isinstance(e, (Min, Max)):
        return _min_max(a, b, isinstance(e, Min))
    if isinstance(e, (And, Or)):
        return np.logical_and(a, b) if isinstance(e, And) else np.logical_or(a, b)
    return {EQ: np.equal, NE: np.not_equal, LT: np.less, LE: np.less_equal, GT: np.greater,
            GE: np.greater_equal}[type(e)](a, b)


class _Interpreter:
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.memory: dict[str, np.ndarray] = {}

    # -- expressions -------------------------------------------------------
    def eval(self, e: PrimExpr, env: Env) -> np.ndarray:
        if isinstance(e, (IntImm, FloatImm)):
            return _value_array(e.value, e.dtype)
        if isinstance(e, Var):
            return env[e.name]
        if isinstance(e, BinaryOp):
            out = _binary(e, self.eval(e.a, env), self.eval(e.b, env))
            return np.asarray(out, dtype=dt.register_numpy_dtype(e.dtype))
        if isinstance(e, BufferLoad):
            return self.load(e.buffer, e.indices, env)
        if isinstance(e, Not):
            return np.logical_not(self.eval(e.a, env))
        if isinstance(e, Select):
            c = self.eval(e.condition, env)
            return np.where(c, self.eval(e.true_value, env), self.eval(e.false_value, env))
        if isinstance(e, Cast):
            return _cast(self.eval(e.value, env), e.dtype)
        if isinstance(e, Call):
            args = [self.eval(a, env) for a in e.args]
            return np.asarray(_MATH[e.op](*args), dtype=dt.register_numpy_dtype(e.dtype))
        if isinstance(e, Ramp):
            base, stride = self.eval(e.base, env), self.eval(e.stride, env)
            return (base + stride * np.arange(e.lanes, dtype=base.dtype)).astype(base.dtype)
        if isinstance(e, Broadcast):
            return np.repeat(self.eval(e.value, env), e.lanes)
        if isinstance(e, Let):
            return self.eval(e.body, {**env, e.var.name: self.eval(e.value, env)})
        raise TypeError(f"interpret: unsupported expression {type(e).__name__}")

    def _where(self, buf: Buffer, indices: tuple[PrimExpr, ...], env: Env,
               lanes: int) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        arr = self.memory[buf.name]
        idx = tuple(np.broadcast_to(self.eval(i, env), (lanes,)).astype(np.int64)
                    for i in indices)
        for axis, (i, n) in enumerate(zip(idx, arr.shape, strict=True)):
            if np.any(i < 0) or np.any(i >= n):
                raise IndexError(f"interpret: buffer {buf.name} index {axis} = {i.tolist()} "
                                 f"outside [0, {n})")
        return arr, idx

    def load(self, buf: Buffer, indices: tuple[PrimExpr, ...], env: Env) -> np.ndarray:
        lanes = max((i.lanes for i in indices), default=1)
        if not indices:
            out = self.memory[buf.name].reshape(1).copy()
        else:
            arr, idx = self._where(buf, indices, env, lanes)
            out = arr[idx].copy()
        if dt.is_narrow_float(buf.dtype):  # stored narrow, float32 in registers
            return narrow.widen(out, DTYPE_NAMES.index(buf.dtype))
        return out

    # -- statements --------------------------------------------------------
    def exec(self, s: Stmt, env: Env) -> None:  # noqa: C901
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.exec(x, env)
        elif isinstance(s, BufferStore):
            value = self.eval(s.value, env)
            if dt.is_narrow_float(s.buffer.dtype):  # rounded as it is stored
                value = narrow.narrow(value, DTYPE_NAMES.index(s.buffer.dtype))
            if not s.indices:
                self.memory[s.buffer.name][()] = value[0]
                return
            arr, idx = self._where(s.buffer, s.indices, env, value.shape[0])
            arr[idx] = value
        elif isinstance(s, For):
            lo, ext = int(self.eval(s.min, env)[0]), int(self.eval(s.extent, env)[0])
            vdt = s.loop_var.dtype
            for k in range(lo, lo + ext):
                self.exec(s.body, {**env, s.loop_var.name: np.array([k], dtype=vdt)})
        elif isinstance(s, LetStmt):
            self.exec(s.body, {**env, s.var.name: self.eval(s.value, env)})
        elif isinstance(s, IfThenElse):
            if bool(self.eval(s.condition, env)[0]):
                self.exec(s.then_case, env)
            elif s.else_case is not None:
                self.exec(s.else_case, env)
        elif isinstance(s, Allocate):
            shape = tuple(int(self.eval(x, env)[0]) for x in s.buffer.shape)
            saved = self.memory.get(s.buffer.name)
            self.memory[s.buffer.name] = np.zeros(shape, dtype=dt.numpy_dtype(s.buffer.dtype))
            self.exec(s.body, env)
            if saved is not None:
                self.memory[s.buffer.name] = saved
        elif isinstance(s, Evaluate):
            self.eval(s.value, env)
        else:
            raise TypeError(f"interpret: unsupported statement {type(s).__name__}")


def _flat_view(arr: np.ndarray) -> np.ndarray:
    """A 1-d view from the array's first element over every element it can address."""
    if arr.size == 0:
        return arr.reshape(-1)
    span = 1 + sum((n - 1) * (s // arr.itemsize) for n, s in zip(arr.shape, arr.strides,
                                                                   strict=True))
    return np.lib.stride_tricks.as_strided(arr, shape=(span,), strides=(arr.itemsize,))


def run(func: PrimFunc, *args: Any) -> None:
    """Execute ``func`` on NumPy arrays in place (destination-passing, like the runtime).

    Parameters
    ----------
    func : PrimFunc
    *args : numpy.ndarray or scalar
        One per parameter: arrays of the buffer's dtype and shape (written in
        place), Python numbers for scalar parameters.

    Raises
    ------
    TypeError, ValueError
        For a wrong number of arguments, dtype or shape (naming the parameter).
    IndexError
        When the function reads or writes outside a buffer.
    """
    if len(args) != len(func.params):
        raise TypeError(f"interpret: expected {len(func.params)} arguments, got {len(args)}")
    it = _Interpreter(func)
    env: Env = {}
    flat = bool(func.attrs.get("tir.flattened", False))
    for param, arg in zip(func.params, args, strict=True):
        if isinstance(param, Var):
            env[param.name] = _value_array(arg, param.dtype)
            continue
        if not isinstance(arg, np.ndarray) or arg.dtype != dt.numpy_dtype(param.dtype) \
                or arg.ndim != param.ndim:
            raise TypeError(f"interpret: argument {param.name!r} must be a {param.ndim}-d "
                            f"{param.dtype} array, got {getattr(arg, 'dtype', type(arg))}")
        for axis, (dim, n) in enumerate(zip(param.shape, arg.shape, strict=True)):
            if isinstance(dim, Var):
                bound = int(env.setdefault(dim.name, np.array([n], dtype=dim.dtype))[0])
                if bound != n:
                    raise ValueError(f"interpret: argument {param.name!r} dimension {axis} is "
                                     f"{n}, but {dim.name} = {bound} from an earlier argument")
            elif isinstance(dim, IntImm) and dim.value != n:
                raise ValueError(f"interpret: argument {param.name!r} dimension {axis} is {n}, "
                                 f"expected {dim.value}")
        for k, s in enumerate(param.strides):
            if isinstance(s, Var):
                env.setdefault(s.name, np.array([arg.strides[k] // arg.itemsize], s.dtype))
        it.memory[param.name] = _flat_view(arg) if flat else arg
    with np.errstate(all="ignore"):
        it.exec(func.body, env)




def evaluate(expr: PrimExpr, env: dict[str, Any] | None = None) -> np.ndarray:
    """The value of an expression without buffer loads, as an array of ``lanes`` elements.

    Constant folding (``passes.tir.Simplify``) calls this, so folded results
    are the interpreter's by construction.
    """
    values = {k: np.asarray(v).reshape(-1) for k, v in (env or {}).items()}
    with np.errstate(all="ignore"):
        return _Interpreter(None).eval(expr, values)  # type: ignore[arg-type]


RUN_PRIM_FUNC.install(run)

__all__ = ["evaluate", "run"]
