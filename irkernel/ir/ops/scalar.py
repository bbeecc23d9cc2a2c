"""Scalar semantics of the elementwise ops, compiled once and shared.

FoldConstant evaluates one-element constants with ``scalar_eval_kernel`` and
the reference interpreter evaluates the transcendental ops (exp, log, tanh,
sigmoid, power, erf, sin ... atanh) with ``float_math_kernel``, which calls the same scalar code,
so folded results are bit-identical to ``ik.interpret`` by construction. The
exact ops (floor, ceil, round, the logical ops, floor_mod, fmod) are written
here to give NumPy's results bit for bit (their references are NumPy ufuncs).
(NumPy's own SIMD exp/log/tanh may differ from libm by an ulp; we define the
semantics by the libm result instead.) Float32 ops compute in float32.

Values travel as a pair (f, i): float64 for float dtypes (a float32 value is
held exactly), int64 for int and bool dtypes. ``dt`` is the result dtype code,
``odt`` the operand dtype code (they differ for comparisons and astype).
"""

from __future__ import annotations

import math

import numpy as np

from irkernel.ir.ids import BOOL, FLOAT32, FLOAT64, INT32
from irkernel.ir.jit import kernel
from irkernel.ir.ops.opcodes import (
    OP_ABS,
    OP_ACOS,
    OP_ACOSH,
    OP_ADD,
    OP_ASIN,
    OP_ASINH,
    OP_ATAN,
    OP_ATANH,
    OP_ASTYPE,
    OP_CEIL,
    OP_COS,
    OP_COSH,
    OP_DIVIDE,
    OP_EQUAL,
    OP_ERF,
    OP_EXP,
    OP_FLOOR,
    OP_FLOOR_MOD,
    OP_FMOD,
    OP_GREATER,
    OP_LESS,
    OP_LOG,
    OP_LOGICAL_AND,
    OP_LOGICAL_NOT,
    OP_LOGICAL_OR,
    OP_LOGICAL_XOR,
    OP_MAXIMUM,
    OP_MINIMUM,
    OP_MULTIPLY,
    OP_NEGATIVE,
    OP_POWER,
    OP_RELU,
    OP_ROUND,
    OP_SIGMOID,
    OP_SIN,
    OP_SINH,
    OP_SQRT,
    OP_SUBTRACT,
    OP_TAN,
    OP_TANH,
    OP_WHERE,
)

_I32_MIN, _I64_MIN = -(2**31), -(2**63)


@kernel
def wrap_int_kernel(v, dt):
    """Wrap an int64 to the range of int dtype ``dt`` (two's complement), bool to 0/1."""
    if dt == INT32:
        return np.int64(np.int32(v))
    if dt == BOOL:
        return np.int64(1) if v != 0 else np.int64(0)
    return np.int64(v)


@kernel
def exact_unary_kernel(op, x):
    """floor/ceil/round (half to even, as np.round) of one float; exact in any dtype."""
    if op == OP_FLOOR:
        return np.floor(x)
    if op == OP_CEIL:
        return np.ceil(x)
    return np.rint(x)  # OP_ROUND


@kernel
def trig_kernel(op, a):
    """sin ... atanh (the ``OP_SIN..OP_ATANH`` range) of one float32 or float64 ``a``, in its
    own precision: libm's ``sinf``/``sin`` ..., the functions compiled code calls."""
    if op == OP_SIN:
        return np.sin(a)
    if op == OP_COS:
        return np.cos(a)
    if op == OP_TAN:
        return np.tan(a)
    if op == OP_ASIN:
        return np.arcsin(a)
    if op == OP_ACOS:
        return np.arccos(a)
    if op == OP_ATAN:
        return np.arctan(a)
    if op == OP_SINH:
        return np.sinh(a)
    if op == OP_COSH:
        return np.cosh(a)
    if op == OP_ASINH:
        return np.arcsinh(a)
    if op == OP_ACOSH:
        return np.arccosh(a)
    return np.arctanh(a)  # OP_ATANH


@kernel
def float_unary_kernel(op, x, is_f32):
    """exp/log/sqrt/tanh/sigmoid/erf/negative/abs/floor/ceil/round/trig of one float, in
    float32 when ``is_f32``."""
    if op == OP_FLOOR or op == OP_CEIL or op == OP_ROUND:
        return exact_unary_kernel(op, np.float64(x))  # a float32 value's result is a float32
    if op >= OP_SIN and op <= OP_ATANH:
        if is_f32:
            return np.float64(trig_kernel(op, np.float32(x)))
        return trig_kernel(op, np.float64(x))
    if is_f32:
        a = np.float32(x)
        one = np.float32(1.0)
        if op == OP_EXP:
            r = np.exp(a)
        elif op == OP_LOG:
            r = np.log(a)
        elif op == OP_SQRT:
            r = np.sqrt(a)
        elif op == OP_TANH:
            r = np.tanh(a)
        elif op == OP_SIGMOID:
            r = one / (one + np.exp(-a))
        elif op == OP_ERF:
            r = math.erf(a)  # rounded to float32 by the caller; compiled: within 2 ulp
        elif op == OP_NEGATIVE:
            r = -a
        else:
            r = np.abs(a)
        return np.float64(r)
    b = np.float64(x)
    if op == OP_EXP:
        return np.exp(b)
    if op == OP_LOG:
        return np.log(b)
    if op == OP_SQRT:
        return np.sqrt(b)
    if op == OP_TANH:
        return np.tanh(b)
    if op == OP_SIGMOID:
        return 1.0 / (1.0 + np.exp(-b))
    if op == OP_ERF:
        return math.erf(b)
    if op == OP_NEGATIVE:
        return -b
    return np.abs(b)


@kernel
def float_mod_kernel(op, x, y):
    """fmod (C: sign of x) or floor_mod (np.mod: sign of y) of two float64s.

    np.mod's algorithm (npy_divmod): r = fmod(x, y); unless y is 0, a nonzero r
    whose sign differs from y's becomes r + y, and a zero r takes y's sign.
    float32 operands give the float32 result after rounding: fmod is exact and
    rounding the float64 sum of two float32s to float32 equals the float32 sum.
    """
    r = np.fmod(x, y)
    if op == OP_FMOD or y == 0:
        return r
    if r != 0:
        if (y < 0) != (r < 0):
            return r + y
        return r
    return math.copysign(0.0, y)  # r is a zero here (a NaN r took the branch above)


@kernel
def float_binary_kernel(op, x, y, is_f32):
    """Arithmetic of two floats in float32 when ``is_f32`` (NaN-propagating max/min)."""
    if op == OP_FMOD or op == OP_FLOOR_MOD:
        r = float_mod_kernel(op, x, y)
        return np.float64(np.float32(r)) if is_f32 else r
    if x != x or y != y:
        if op == OP_MAXIMUM or op == OP_MINIMUM:
            return np.nan
    if is_f32:
        a, b = np.float32(x), np.float32(y)
        if op == OP_ADD:
            return np.float64(a + b)
        if op == OP_SUBTRACT:
            return np.float64(a - b)
        if op == OP_MULTIPLY:
            return np.float64(a * b)
        if op == OP_DIVIDE:
            return np.float64(a / b)
        if op == OP_POWER:
            return np.float64(np.power(a, b))
    else:
        if op == OP_ADD:
            return x + y
        if op == OP_SUBTRACT:
            return x - y
        if op == OP_MULTIPLY:
            return x * y
        if op == OP_DIVIDE:
            return x / y
        if op == OP_POWER:
            return np.power(x, y)
    if op == OP_MAXIMUM:
        return x if x > y else y
    return x if x < y else y  # OP_MINIMUM


@kernel
def int_binary_kernel(op, x, y, dt):
    """Wrapping integer arithmetic; floor division with x // 0 == 0."""
    if op == OP_ADD:
        r = x + y
    elif op == OP_SUBTRACT:
        r = x - y
    elif op == OP_MULTIPLY:
        r = x * y
    elif op == OP_DIVIDE:
        if y == 0:
            r = np.int64(0)
        elif y == -1:
            r = -x  # avoids the trapping INT_MIN // -1; wraps like NumPy
        else:
            q = x // y
            r = q
    elif op == OP_FLOOR_MOD or op == OP_FMOD:
        if y == 0 or y == -1 or y == 1:
            r = np.int64(0)  # x % 0 == 0 (NumPy); never the trapping INT_MIN % -1
        else:
            r = x % y  # Python's floor remainder: the sign of y
            if op == OP_FMOD and r != 0 and (x < 0) != (y < 0):
                r -= y  # C's truncated remainder: the sign of x
    elif op == OP_MAXIMUM:
        r = x if x > y else y
    else:
        r = x if x < y else y
    return wrap_int_kernel(r, dt)


@kernel
def astype_scalar_kernel(f, i, odt, dt):
    """Convert one value from dtype ``odt`` to ``dt``; float->int truncates, NaN->0, saturates."""
    src_float = odt == FLOAT32 or odt == FLOAT64
    if dt == FLOAT32 or dt == FLOAT64:
        if src_float:
            v = f
        elif dt == FLOAT32:
            return np.float64(np.float32(i)), np.int64(0)
        else:
            v = np.float64(i)
        if dt == FLOAT32:
            return np.float64(np.float32(v)), np.int64(0)
        return v, np.int64(0)
    if dt == BOOL:
        if src_float:
            return 0.0, np.int64(1) if f != 0.0 else np.int64(0)
        return 0.0, np.int64(1) if i != 0 else np.int64(0)
    if not src_float:
        return 0.0, wrap_int_kernel(i, dt)
    hi = 2147483648.0 if dt == INT32 else 9223372036854775808.0
    if f != f:
        return 0.0, np.int64(0)
    if f >= hi:
        return 0.0, np.int64(2147483647) if dt == INT32 else np.int64(9223372036854775807)
    if f < -hi:
        return 0.0, np.int64(_I32_MIN) if dt == INT32 else np.int64(_I64_MIN)
    return 0.0, np.int64(f)


@kernel
def scalar_eval_kernel(op, dt, odt, fx, ix, fy, iy, fz, iz):
    """Evaluate one elementwise op on scalar operands; returns (f, i) of dtype ``dt``.

    Operands: x = (fx, ix), y = (fy, iy), z = (fz, iz) (where: cond, x, y).
    Returns ok=False in a third slot for ops it does not evaluate.
    """
    if dt > BOOL or odt > BOOL:  # float16 ... uint16 (codes after bool): NumPy evaluates them
        return 0.0, np.int64(0), False
    is_float = odt == FLOAT32 or odt == FLOAT64
    is_f32 = odt == FLOAT32
    if op == OP_WHERE:
        if ix != 0:
            return fy, iy, True
        return fz, iz, True
    if op == OP_ASTYPE:
        f, i = astype_scalar_kernel(fx, ix, odt, dt)
        return f, i, True
    if op == OP_EQUAL or op == OP_LESS or op == OP_GREATER:
        if is_float:
            c = fx == fy if op == OP_EQUAL else (fx < fy if op == OP_LESS else fx > fy)
        else:
            c = ix == iy if op == OP_EQUAL else (ix < iy if op == OP_LESS else ix > iy)
        return 0.0, np.int64(1) if c else np.int64(0), True
    if op == OP_RELU:
        if is_float:
            return float_binary_kernel(OP_MAXIMUM, fx, 0.0, is_f32), np.int64(0), True
        return 0.0, ix if ix > 0 else np.int64(0), True
    if (op == OP_EXP or op == OP_LOG or op == OP_SQRT or op == OP_TANH or op == OP_SIGMOID
            or op == OP_ERF or op == OP_FLOOR or op == OP_CEIL or op == OP_ROUND
            or (op >= OP_SIN and op <= OP_ATANH)):
        return float_unary_kernel(op, fx, is_f32), np.int64(0), True
    if op == OP_LOGICAL_NOT:
        return 0.0, np.int64(0) if ix != 0 else np.int64(1), True
    if op == OP_LOGICAL_AND or op == OP_LOGICAL_OR or op == OP_LOGICAL_XOR:
        a, b = ix != 0, iy != 0
        c = (a and b) if op == OP_LOGICAL_AND else ((a or b) if op == OP_LOGICAL_OR else a != b)
        return 0.0, np.int64(1) if c else np.int64(0), True
    if op == OP_FLOOR_MOD or op == OP_FMOD:
        if is_float:
            return float_binary_kernel(op, fx, fy, is_f32), np.int64(0), True
        return 0.0, int_binary_kernel(op, ix, iy, dt), True
    if op == OP_NEGATIVE or op == OP_ABS:
        if is_float:
            return float_unary_kernel(op, fx, is_f32), np.int64(0), True
        r = -ix if (op == OP_NEGATIVE or ix < 0) else ix
        return 0.0, wrap_int_kernel(r, dt), True
    if op <= OP_POWER and op >= OP_ADD:  # the binary arithmetic block of the op table
        if is_float:
            return float_binary_kernel(op, fx, fy, is_f32), np.int64(0), True
        return 0.0, int_binary_kernel(op, ix, iy, dt), True
    return 0.0, np.int64(0), False


@kernel
def float_math_kernel(op, x, y, is_f32):
    """Array form of the float ops for the interpreter: out[k] = op(x[k], y[k]).

    Arrays: x, y float64[n] (y ignored for unary ops; float32 values held exactly).
    """
    out = np.empty(x.shape[0], np.float64)
    if op == OP_POWER or op == OP_FMOD or op == OP_FLOOR_MOD:
        for k in range(x.shape[0]):
            out[k] = float_binary_kernel(op, x[k], y[k], is_f32)
    else:
        for k in range(x.shape[0]):
            out[k] = float_unary_kernel(op, x[k], is_f32)
    return out
