"""ik.interpret against hand-written NumPy, for every op and every dtype it accepts.

Expected values are plain NumPy/Python expressions written here, never the op
table's reference functions.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from interp_helpers import ALL, FLOATS, INTS, NUMERIC, check, run, sample
from test_interp_elementwise_ops import COVERED as COVERED_ELEMENTWISE
from test_interp_export_ops import COVERED as COVERED_EXPORT
from test_interp_movement import COVERED as COVERED_MOVEMENT
from test_interp_nn import COVERED as COVERED_NN
from test_interp_recurrent import COVERED as COVERED_RECURRENT
from test_interp_selection import COVERED as COVERED_SELECTION

import irkernel as ik
from irkernel import ops

TESTED_ELSEWHERE = {"param", "const", "call_tir", "call_func"}


BROADCAST_SHAPES = [((6,), (6,)), ((3, 1), (4,)), ((), (2, 3)), ((2, 3), ()), ((), ()),
                    ((2, 1, 4), (3, 1)), ((0, 3), (3,))]

# -- binary arithmetic ----------------------------------------------------------

ARITH = {
    "add": lambda x, y: x + y,
    "subtract": lambda x, y: x - y,
    "multiply": lambda x, y: x * y,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("op", list(ARITH))
def test_binary_arithmetic(op, dtype, shapes):
    x, y = sample(dtype, shapes[0], 1), sample(dtype, shapes[1], 2)
    with np.errstate(all="ignore"):
        expected = ARITH[op](x, y)
    check(run(op, x, y), expected, dtype)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_arithmetic_wraps(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, info.min, info.max], dtype)
    y = np.array([1, -1, 1, 2], dtype)
    bits = info.bits
    wrap = lambda v: (v + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)  # noqa: E731
    xs, ys = [int(v) for v in x], [int(v) for v in y]
    check(run("add", x, y), [wrap(a + b) for a, b in zip(xs, ys, strict=True)], dtype)
    check(run("subtract", x, y), [wrap(a - b) for a, b in zip(xs, ys, strict=True)], dtype)
    check(run("multiply", x, y), [wrap(a * b) for a, b in zip(xs, ys, strict=True)], dtype)
    check(run("negative", x), [wrap(-a) for a in xs], dtype)
    check(run("abs", x), [wrap(abs(a)) for a in xs], dtype)


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_divide_float_is_true_division(dtype, shapes):
    x, y = sample(dtype, shapes[0], 3), sample(dtype, shapes[1], 4)
    with np.errstate(all="ignore"):
        expected = x / y
    check(run("divide", x, y), expected, dtype)


def _floor_div(a, b):
    return 0 if b == 0 else a // b  # Python ints: exact floor division


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("dtype", INTS)
def test_divide_int_is_floor_division_with_zero_divisor_giving_zero(dtype):
    x = np.array([-7, 7, -7, 7, 0, 5, -5, 9], dtype)
    y = np.array([2, -2, -2, 0, 0, 5, 3, 1], dtype)
    out = run("divide", x, y)
    check(out, [-4, -4, 3, 0, 0, 1, -2, 9], dtype)
    info = np.iinfo(dtype)
    big = np.array([info.max, info.min, info.min, info.min], dtype)
    by = np.array([-1, 2, 0, -1], dtype)
    # INT_MIN // -1 overflows and wraps back to INT_MIN (as NumPy and int_binary_kernel).
    check(run("divide", big, by), [-info.max, info.min // 2, 0, info.min], dtype)


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES[:4])
@pytest.mark.parametrize("dtype", INTS)
def test_divide_int_broadcast(dtype, shapes):
    x, y = sample(dtype, shapes[0], 5), sample(dtype, shapes[1], 6, special=False)
    xb, yb = np.broadcast_arrays(x, y)
    pairs = zip(xb.ravel().tolist(), yb.ravel().tolist(), strict=True)
    expected = np.array([_floor_div(a, b) for a, b in pairs], dtype).reshape(xb.shape)
    check(run("divide", x, y), expected, dtype)


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES[:4])
@pytest.mark.parametrize("dtype", FLOATS)
def test_power(dtype, shapes):
    x = np.abs(sample(dtype, shapes[0], 7))
    y = sample(dtype, shapes[1], 8)
    with np.errstate(all="ignore"):
        expected = x**y
    check(run("power", x, y), expected, dtype, exact=False)


def test_power_special_values():
    x = np.array([-8.0, 0.0, 1.0, np.nan, 2.0, -1.0, np.inf], np.float64)
    y = np.array([1 / 3, -1.0, np.nan, 0.0, 1024.0, np.inf, -1.0], np.float64)
    check(run("power", x, y), [np.nan, np.inf, 1.0, 1.0, np.inf, 1.0, 0.0], "float64")


@pytest.mark.parametrize("dtype", FLOATS)
def test_maximum_minimum_propagate_nan(dtype):
    x = np.array([np.nan, 1.0, np.nan, -np.inf], dtype)
    y = np.array([1.0, np.nan, np.nan, np.inf], dtype)
    check(run("maximum", x, y), [np.nan, np.nan, np.nan, np.inf], dtype)
    check(run("minimum", x, y), [np.nan, np.nan, np.nan, -np.inf], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_special_values_propagate(dtype):
    x = np.array([np.inf, np.inf, np.nan, 0.0, 1.0, -1.0], dtype)
    y = np.array([-np.inf, np.inf, 1.0, 0.0, 0.0, 0.0], dtype)
    check(run("add", x, y), [np.nan, np.inf, np.nan, 0.0, 1.0, -1.0], dtype)
    check(run("subtract", x, y), [np.inf, np.nan, np.nan, 0.0, 1.0, -1.0], dtype)
    check(run("multiply", x, y), [-np.inf, np.inf, np.nan, 0.0, 0.0, -0.0], dtype)
    check(run("divide", x, y), [np.nan, np.nan, np.nan, np.nan, np.inf, -np.inf], dtype)


# -- comparisons --------------------------------------------------------------

COMPARE = {"equal": lambda x, y: x == y, "less": lambda x, y: x < y,
           "greater": lambda x, y: x > y}


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", list(COMPARE))
def test_comparisons(op, dtype, shapes):
    x, y = sample(dtype, shapes[0], 9), sample(dtype, shapes[1], 10)
    if dtype in FLOATS and x.size and y.size:  # make some elements equal
        y = np.broadcast_to(x, np.broadcast_shapes(x.shape, y.shape)).copy()
        y.ravel()[::2] = 1.5
        x = x.copy()
        y = y.reshape(np.broadcast_shapes(x.shape, y.shape))
    check(run(op, x, y), COMPARE[op](x, y), "bool")


def test_comparisons_with_nan_are_false():
    x = np.array([np.nan, np.nan, 1.0], np.float32)
    y = np.array([np.nan, 1.0, np.nan], np.float32)
    for op in COMPARE:
        check(run(op, x, y), [False, False, False], "bool")


# -- unary ----------------------------------------------------------------------

UNARY_EXACT = {
    "negative": (NUMERIC, lambda x: -x),
    "abs": (NUMERIC, np.abs),
    "relu": (NUMERIC, lambda x: np.where(np.isnan(x), x, np.where(x > 0, x, x.dtype.type(0)))
             if x.dtype.kind == "f" else np.where(x > 0, x, x.dtype.type(0))),
    "sqrt": (FLOATS, np.sqrt),
}
UNARY_MATH = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}
UNARY_SHAPES = [(), (5,), (2, 3), (0,), (2, 1, 3)]


@pytest.mark.parametrize("shape", UNARY_SHAPES)
@pytest.mark.parametrize(("op", "dtype"), [(op, dt) for op, (dts, _) in UNARY_EXACT.items()
                                           for dt in dts])
def test_unary_exact_ops(op, dtype, shape):
    x = sample(dtype, shape, 11)
    with np.errstate(all="ignore"):
        expected = UNARY_EXACT[op][1](x)
    check(run(op, x), expected, dtype)


@pytest.mark.parametrize("shape", UNARY_SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", list(UNARY_MATH))
def test_unary_math_ops(op, dtype, shape):
    x = sample(dtype, shape, 12)
    with np.errstate(all="ignore"):
        expected = UNARY_MATH[op](x)
    check(run(op, x), expected, dtype, exact=False)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_math_special_values(dtype):
    x = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1000.0, -1000.0], dtype)
    check(run("log", x), [-np.inf, -np.inf, np.nan, np.inf, np.nan, np.nan, math.log(1000.0),
                          np.nan], dtype, exact=False)
    check(run("exp", x), [1.0, 1.0, math.exp(-1.0), np.inf, 0.0, np.nan, np.inf, 0.0], dtype,
          exact=False)
    check(run("sqrt", x), [0.0, -0.0, np.nan, np.inf, np.nan, np.nan, math.sqrt(1000.0),
                           np.nan], dtype, exact=False)
    check(run("tanh", x), [0.0, -0.0, math.tanh(-1.0), 1.0, -1.0, np.nan, 1.0, -1.0], dtype,
          exact=False)
    check(run("sigmoid", x), [0.5, 0.5, 1 / (1 + math.e), 1.0, 0.0, np.nan, 1.0, 0.0], dtype,
          exact=False)
    check(run("relu", x), [0.0, 0.0, 0.0, np.inf, 0.0, np.nan, 1000.0, 0.0], dtype)
    check(run("abs", x), [0.0, 0.0, 1.0, np.inf, np.inf, np.nan, 1000.0, 1000.0], dtype)


# -- where ------------------------------------------------------------------------

@pytest.mark.parametrize("shapes", [((4,), (4,), (4,)), ((3, 1), (4,), ()), ((), (2, 2), (2, 1)),
                                    ((), (), ())])
@pytest.mark.parametrize("dtype", ALL)
def test_where(dtype, shapes):
    cond = sample("bool", shapes[0], 13)
    x, y = sample(dtype, shapes[1], 14), sample(dtype, shapes[2], 15)
    check(run("where", cond, x, y), np.where(cond, x, y), dtype)


# -- matmul -------------------------------------------------------------------

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((2, 1, 2, 3), (5, 3, 4)), ((4, 2, 3), (3,)), ((0, 3), (3, 2)), ((2, 0), (0, 3))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES)
@pytest.mark.parametrize("dtype", NUMERIC)
def test_matmul(dtype, shapes):
    x = sample(dtype, shapes[0], 16, special=False)
    y = sample(dtype, shapes[1], 17, special=False)
    expected = x @ y
    check(run("matmul", x, y), expected, dtype, exact=False)


def test_matmul_matches_explicit_loops():
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    y = np.arange(12, dtype=np.int64).reshape(3, 4)
    expected = [[sum(int(x[i, k]) * int(y[k, j]) for k in range(3)) for j in range(4)]
                for i in range(2)]
    check(run("matmul", x, y), expected, "int64")


def test_matmul_int32_wraps():
    x = np.full((1, 2), 2**30, np.int32)
    y = np.full((2, 1), 2, np.int32)
    check(run("matmul", x, y), [[0]], "int32")  # 2**31 + 2**31 wraps to 0


# -- reductions ---------------------------------------------------------------

AXES = [None, 0, 1, -1, (0, 2), (-1, 0), (), [1]]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize(("op", "dtype"), [("sum", dt) for dt in NUMERIC]
                         + [("max", dt) for dt in NUMERIC] + [("mean", dt) for dt in FLOATS])
def test_reductions(op, dtype, axis, keepdims):
    x = sample(dtype, (2, 3, 4), 18, special=dtype in INTS)
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    with np.errstate(all="ignore"):
        if op == "sum":
            expected = x.sum(axis=np_axis, keepdims=keepdims, dtype=x.dtype)
        elif op == "max":
            expected = x.max(axis=np_axis, keepdims=keepdims)
        else:
            expected = x.mean(axis=np_axis, keepdims=keepdims, dtype=x.dtype)
    check(run(op, x, axis=axis, keepdims=keepdims), expected, dtype, exact=dtype in INTS)


def test_reductions_default_axis_is_all_and_scalar_input():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    check(run("sum", x), 15.0, "float64")
    check(run("max", x), 5.0, "float64")
    check(run("mean", x), 2.5, "float64")
    s = np.array(4, np.int32)
    check(run("sum", s), 4, "int32")
    check(run("max", s, axis=()), 4, "int32")


def test_sum_accumulates_in_the_input_dtype():
    x = np.array([2**31 - 1, 1, 1], np.int32)
    check(run("sum", x), -(2**31) + 1, "int32")


@pytest.mark.filterwarnings("error")
def test_reductions_over_empty_axes():
    x = np.zeros((0, 3), np.float32)
    check(run("sum", x, axis=0), [0.0, 0.0, 0.0], "float32")
    check(run("mean", x, axis=0), [np.nan] * 3, "float32")
    check(run("max", x, axis=1), np.zeros(0), "float32")


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_and_sum_propagate_nan(dtype):
    x = np.array([[1.0, np.nan], [2.0, 3.0]], dtype)
    check(run("max", x, axis=1), [np.nan, 3.0], dtype)
    check(run("sum", x, axis=0), [3.0, np.nan], dtype)


# -- layout ops -----------------------------------------------------------------

@pytest.mark.parametrize(("shape", "new", "want"), [
    ((2, 3, 4), (6, -1), (6, 4)), ((2, 3, 4), (-1,), (24,)), ((2, 3, 4), (4, 3, 2), (4, 3, 2)),
    ((2, 3, 4), (2, -1, 3), (2, 4, 3)), ((), (1, 1), (1, 1)), ((1, 1), (), ()),
    ((0, 3), (-1, 3), (0, 3)), ((6,), [2, 3], (2, 3)),
])
@pytest.mark.parametrize("dtype", ALL)
def test_reshape(dtype, shape, new, want):
    x = sample(dtype, shape, 19)
    out = run("reshape", x, shape=new)
    assert out.shape == want
    check(out, x.ravel().reshape(want), dtype)


@pytest.mark.parametrize(("shape", "axes", "want"), [
    ((2, 3, 4), None, (4, 3, 2)), ((2, 3, 4), (1, 0, 2), (3, 2, 4)),
    ((2, 3, 4), (-1, 0, 1), (4, 2, 3)), ((5,), None, (5,)), ((), None, ()),
    ((2, 3), [1, 0], (3, 2)),
])
@pytest.mark.parametrize("dtype", ALL)
def test_permute_dims(dtype, shape, axes, want):
    x = sample(dtype, shape, 20)
    out = run("permute_dims", x) if axes is None else run("permute_dims", x, axes=axes)
    perm = tuple(range(x.ndim))[::-1] if axes is None else tuple(a % x.ndim for a in axes)
    expected = np.empty(want, dtype)
    for idx in itertools.product(*[range(d) for d in want]):
        src = [0] * x.ndim
        for k, p in enumerate(perm):
            src[p] = idx[k]
        expected[idx] = x[tuple(src)]
    check(out, expected, dtype)


@pytest.mark.parametrize(("shape", "target"), [
    ((3, 1), (2, 3, 4)), ((), (2, 2)), ((4,), (4,)), ((1,), (0,)), ((2, 1), (2, 5)),
])
@pytest.mark.parametrize("dtype", ALL)
def test_broadcast_to(dtype, shape, target):
    x = sample(dtype, shape, 21)
    out = run("broadcast_to", x, shape=target)
    check(out, x * np.ones(target, dtype) if dtype != "bool" else x & np.ones(target, bool), dtype)
    assert out.flags.writeable
    assert out.flags.c_contiguous


# -- astype ---------------------------------------------------------------------

ASTYPE_VALUES = {
    "float32": [0.0, -0.0, 1.5, -1.5, 2.7, -2.7, np.nan, np.inf, -np.inf, 1e10, -1e10, 3e9,
                -3e9, 2147483520.0, -2147483648.0, 2.0**31, 9.2e18, -9.3e18, 16777217.0],
    "float64": [0.0, -0.0, 1.5, -1.5, 2.7, -2.7, np.nan, np.inf, -np.inf, 1e10, -1e10, 3e9,
                -3e9, 2147483647.9, -2147483648.9, -2147483649.0, 2.0**31, 2.0**63, -(2.0**63),
                9223372036854774784.0, 1e300, -1e300, 1e-300, 0.1],
    "int32": [0, 1, -1, 2**31 - 1, -(2**31), 16777217, 123456789, -7],
    "int64": [0, 1, -1, 2**63 - 1, -(2**63), 2**31, -(2**31) - 1, 2**53 + 1, 4294967297],
    "bool": [True, False],
}


def _astype_expected(values, src, dst):
    """Hand-written conversion rule: float->int truncates, NaN->0, saturates (ops.table doc)."""
    dt = np.dtype(dst)
    x = np.array(values, src)
    if np.dtype(src).kind == "f" and dt.kind == "i":
        info = np.iinfo(dt)
        out = []
        for v in x.tolist():  # exact Python floats
            if math.isnan(v):
                out.append(0)
            elif v >= info.max + 1:
                out.append(info.max)
            elif v < info.min:
                out.append(info.min)
            else:
                out.append(int(v))  # int() truncates toward zero
        return np.array(out, dt)
    if dt.kind == "b":
        return np.array([v != 0 for v in x.tolist()], bool)  # NaN != 0 is True
    if np.dtype(src).kind in "ib" and dt.kind == "i":
        bits = np.iinfo(dt).bits
        return np.array([(int(v) + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
                         for v in x.tolist()], dt)
    with np.errstate(over="ignore"):
        return x.astype(dt)  # float<->float, int->float: IEEE round to nearest


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize(("src", "dst"), list(itertools.product(ALL, ALL)))
def test_astype_every_dtype_pair(src, dst):
    x = np.array(ASTYPE_VALUES[src], src)
    out = run("astype", x, dtype=dst)
    check(out, _astype_expected(ASTYPE_VALUES[src], src, dst), dst)


def test_astype_float_to_int_documented_cases():
    x = np.array([np.nan, 1e20, -1e20, 2.9, -2.9, np.inf, -np.inf], np.float64)
    check(run("astype", x, dtype="int32"),
          [0, 2**31 - 1, -(2**31), 2, -2, 2**31 - 1, -(2**31)], "int32")
    check(run("astype", x, dtype="int64"),
          [0, 2**63 - 1, -(2**63), 2, -2, 2**63 - 1, -(2**63)], "int64")


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_astype_scalar_and_empty(dtype):
    check(run("astype", np.array(3.75, np.float64), dtype=dtype),
          {"float32": 3.75, "int64": 3, "bool": True}[dtype], dtype)
    check(run("astype", np.zeros((0, 2), np.int32), dtype=dtype), np.zeros((0, 2)), dtype)


# -- concat -------------------------------------------------------------------

@pytest.mark.parametrize(("shapes", "axis"), [
    ([(2,), (3,)], 0), ([(2, 3), (1, 3), (4, 3)], 0), ([(2, 3), (2, 1)], 1), ([(2, 3), (2, 2)], -1),
    ([(1, 2), (2, 2), (3, 2), (1, 2), (2, 2)], 0), ([(4,)], 0), ([(0, 2), (3, 2)], 0),
])
@pytest.mark.parametrize("dtype", ALL)
def test_concat(dtype, shapes, axis):
    xs = [sample(dtype, s, 30 + i) for i, s in enumerate(shapes)]
    check(run("concat", *xs, axis=axis), np.concatenate(xs, axis=axis), dtype)


def test_concat_same_operand_twice():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "int32")
    f = bb.finish([bb.concat(x, x, x, x)])
    (out,) = ik.interpret(f, np.array([1, 2], np.int32))
    check(out, [1, 2, 1, 2, 1, 2, 1, 2], "int32")


# -- every op is covered --------------------------------------------------------

COVERED = set(ARITH) | {"divide", "power"} | set(COMPARE) | set(UNARY_EXACT) | set(UNARY_MATH) | {
    "where", "matmul", "sum", "max", "mean", "reshape", "permute_dims", "broadcast_to", "astype",
    "concat"} | COVERED_ELEMENTWISE | COVERED_MOVEMENT | COVERED_NN | COVERED_EXPORT | \
    COVERED_SELECTION | COVERED_RECURRENT


def test_every_op_in_the_table_has_an_interpreter_test():
    names = {op.name for op in ops.all_ops()} - TESTED_ELSEWHERE
    assert names <= COVERED, f"untested ops: {sorted(names - COVERED)}"
