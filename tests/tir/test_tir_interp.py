"""The reference interpreter: exact dtype semantics (the oracle of passes and codegen)."""

from __future__ import annotations

import numpy as np
import pytest

from irkernel import tir
from irkernel.tir import script as T
from irkernel.tir.interp import evaluate


def _value(expr: tir.PrimExpr) -> object:
    return evaluate(expr)[0].item()


def test_integer_division_never_traps_and_wraps() -> None:
    lo = -(2**31)
    x = tir.Var("x", "int32")
    env = {"x": np.array([lo], np.int32)}
    assert evaluate(tir.truncdiv(x, tir.IntImm(-1, "int32")), env)[0] == lo  # wraps
    for op in (tir.truncdiv, tir.truncmod, tir.FloorDiv, tir.FloorMod):
        assert evaluate(op(x, tir.IntImm(0, "int32")), env)[0] == 0
    seven, m2 = tir.IntImm(7, "int32"), tir.IntImm(-2, "int32")
    assert _value(tir.FloorDiv(seven, m2)) == -4 and _value(tir.truncdiv(seven, m2)) == -3
    assert _value(tir.FloorMod(seven, m2)) == -1 and _value(tir.truncmod(seven, m2)) == 1
    assert _value(tir.IntImm(2**31 - 1, "int32") + tir.IntImm(1, "int32")) == lo


def test_float_semantics_follow_numpy() -> None:
    nan = tir.FloatImm(float("nan"), "float32")
    one = tir.FloatImm(1.0, "float32")
    assert np.isnan(_value(tir.Min(nan, one)))  # NaN-propagating, as np.minimum
    assert _value(tir.FloorMod(tir.FloatImm(-1.0), tir.FloatImm(3.0))) == 2.0
    pz, nz = tir.FloatImm(0.0), tir.FloatImm(-0.0)  # IEEE maximum/minimum order the zeros
    for a, b in ((pz, nz), (nz, pz)):
        assert not np.signbit(_value(tir.Max(a, b))) and np.signbit(_value(tir.Min(a, b)))
    zero = tir.FloorMod(tir.FloatImm(0.0), tir.FloatImm(-3.0))
    assert np.signbit(_value(zero))  # NumPy's remainder: copysign(0, b)
    assert _value(tir.call("round", tir.FloatImm(2.5))) == 2.0  # round half to even
    third = tir.FloatImm(1.0, "float32") / 3.0
    assert evaluate(third).dtype == np.float32 and _value(third) == float(np.float32(1 / 3))


def test_fma_rounds_once() -> None:
    e = 2.0**-52
    exact = tir.call("fma", tir.FloatImm(1 + e), tir.FloatImm(1 - e), tir.FloatImm(-1.0))
    assert _value(exact) == -(2.0**-104)  # a * b + c in float64 would give 0.0
    inf = tir.call("fma", tir.FloatImm(1e308), tir.FloatImm(10.0), tir.FloatImm(-np.inf))
    assert _value(inf) == -np.inf


@pytest.mark.parametrize(("value", "dtype", "expected"), [
    (float("nan"), "int32", 0), (1e20, "int32", 2**31 - 1), (-1e20, "int64", -(2**63)),
    (-2.7, "int64", -2), (float("nan"), "bool", True), (0.0, "bool", False),
])
def test_float_to_int_casts_saturate(value: float, dtype: str, expected: object) -> None:
    assert _value(tir.Cast(dtype, tir.FloatImm(value))) == expected


def test_narrowing_and_bool_casts() -> None:
    assert _value(tir.Cast("int32", tir.IntImm(2**32 + 5))) == 5
    assert _value(tir.Cast("bool", tir.IntImm(-3))) is True
    assert _value(tir.Cast("float32", tir.const(True))) == 1.0


def test_run_executes_in_place_with_shape_vars_and_scalars() -> None:
    n = T.var("int64")

    @T.prim_func
    def axpy(x: T.Buffer((n,), "float32"), y: T.Buffer((n,), "float32"), alpha: T.float32):
        for i in T.serial(n):
            y[i] = alpha * x[i] + y[i]

    x = np.arange(5, dtype=np.float32)
    y = np.ones(5, np.float32)
    tir.interpret(axpy, x, y, 2.0)
    np.testing.assert_array_equal(y, 2 * x + 1)


def test_run_checks_its_arguments() -> None:
    n = T.var("int64")

    @T.prim_func
    def f(a: T.Buffer((n,), "float32"), b: T.Buffer((n,), "float32"),
          c: T.Buffer((4,), "float32")):
        for i in T.serial(4):
            c[i] = a[i] + b[i]

    a4, a8 = np.zeros(4, np.float32), np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="expected 3 arguments, got 2"):
        tir.interpret(f, a4, a4)
    with pytest.raises(TypeError, match="argument 'b' must be a 1-d float32 array"):
        tir.interpret(f, a4, a4.astype(np.float64), a4)
    with pytest.raises(ValueError, match="argument 'b' dimension 0 is 8, but n = 4"):
        tir.interpret(f, a4, a8, a4)
    with pytest.raises(ValueError, match="argument 'c' dimension 0 is 8, expected 4"):
        tir.interpret(f, a4, a4, a8)


def test_out_of_bounds_access_is_an_index_error() -> None:
    n = tir.Var("n")
    a = tir.Buffer("a", (4,), "int64")
    i = tir.Var("i")
    func = tir.PrimFunc((a, n), tir.For(i, 0, n, "serial", tir.BufferStore(a, i, (i,))))
    with pytest.raises(IndexError, match=r"buffer a index 0 = \[4\] outside \[0, 4\)"):
        tir.interpret(func, np.zeros(4, np.int64), 5)


def test_vectors_and_allocations() -> None:
    a = tir.Buffer("a", (8,), "int32")
    tmp = tir.Buffer("tmp", (8,), "int32")
    ramp = tir.Ramp(tir.IntImm(0), tir.IntImm(1), 8)
    rev = tir.Ramp(tir.IntImm(7), tir.IntImm(-1), 8)
    body = tir.Allocate(tmp, tir.seq(tir.BufferStore(tmp, a[rev], (ramp,)),
                                     tir.BufferStore(a, tmp[ramp] * 2, (ramp,))))
    arr = np.arange(8, dtype=np.int32)
    tir.interpret(tir.PrimFunc((a,), body), arr)
    np.testing.assert_array_equal(arr, np.arange(8)[::-1] * 2)
