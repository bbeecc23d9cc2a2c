"""The TIR printer: readable TVMScript-like text that traces back to an equal PrimFunc."""

from __future__ import annotations

from hypothesis import given

import passes.tir as pt
from irkernel import tir
from irkernel.tir import script as T
from irkernel.tir.printer import expr_text
from irkernel.tir.testing import prim_funcs

n = T.var("int64")


@T.prim_func
def kernel(a: T.Buffer((n, 4), "float32", align=64), b: T.Buffer((n,), "int32"),
           out: T.Buffer((n,), "float32"), s: T.float32):
    tmp = T.alloc_buffer((4,), "float32")
    for i in T.parallel(n):
        for j in T.vectorized(4):
            tmp[j] = a[i, j] * s
        v = T.let(T.cast("float32", b[i]) + 1.0)
        with T.If(v > 0.0):
            out[i] = T.max(tmp[0], v) - T.exp(tmp[1]) / 2.0
        with T.Else():
            out[i] = T.select(T.eq(b[i] % 2, 0), -v, T.float32(0.5))
    for j in T.unroll(1, extent=2, annotations={"nontemporal": True}):  # noqa: B007
        T.evaluate(0)


GOLDEN = '''\
n = T.var("int64")
@T.prim_func
def kernel(a: T.Buffer((n, 4), "float32", align=64), b: T.Buffer((n,), "int32"), out: T.Buffer((n,), "float32"), s: T.float32):
    T.func_attr({'global_symbol': 'kernel'})
    tmp = T.alloc_buffer((4,), "float32")
    for i in T.parallel(n):
        for j in T.vectorized(4):
            tmp[j] = a[i, j] * s
        v = T.let(T.cast("float32", b[i]) + 1.0)
        with T.If(v > 0.0):
            out[i] = T.max(tmp[0], v) - T.exp(tmp[1]) / 2.0
        with T.Else():
            out[i] = T.select(T.eq(b[i] % 2, 0), -0.0 - v, T.float32(0.5))
    for j in T.unroll(1, extent=2, annotations={'nontemporal': True}):
        T.evaluate(0)
'''  # noqa: E501


def _retrace(text: str, name: str) -> tir.PrimFunc:
    namespace: dict[str, object] = {"T": T}
    exec(compile(text, "<printed>", "exec", dont_inherit=True), namespace)
    func = namespace[name]
    assert isinstance(func, tir.PrimFunc)
    return func


def test_golden_text_of_every_construct() -> None:
    assert kernel.script() == GOLDEN
    assert str(kernel) == GOLDEN


def test_printed_text_traces_back_to_an_equal_function() -> None:
    assert _retrace(kernel.script(), "kernel") == kernel


def test_script_takes_another_name() -> None:
    text = kernel.script("other")
    assert "def other(" in text and _retrace(text, "other") == kernel


@given(prim_funcs())
def test_random_functions_round_trip(func: tir.PrimFunc) -> None:
    assert _retrace(func.script(), "random_func") == func


def test_python_bools_and_reflected_comparisons_print_traceably() -> None:
    # found by the round trip: `T.If(False)` is rejected by the tracer, and `0 > i`
    # would trace as `i < 0` (Python reflects the comparison)
    a = tir.Buffer("a", (4,), "bool")
    i = tir.Var("i")
    body = tir.For(i, 0, 4, "serial", tir.IfThenElse(
        tir.const(False), tir.BufferStore(a, tir.GT(tir.IntImm(0), i), (i,))))
    func = tir.PrimFunc((a,), body)
    text = func.script("f")
    assert "T.If(T.bool(False))" in text and "T.int64(0) > i" in text
    assert _retrace(text, "f") == func


def test_lowered_vector_code_is_readable() -> None:
    @T.prim_func
    def scale(a: T.Buffer((4, 8), "float32"), b: T.Buffer((4, 8), "float32")):
        for i in T.serial(4):
            for j in T.vectorized(8):
                b[i, j] = a[i, j] * 2.0

    text = pt.simplify(pt.vectorize_loop(pt.flatten_buffer(scale))).script()
    assert text.splitlines()[3:] == [
        "    for i in T.serial(4):",
        "        b[T.ramp(i * 8, 1, 8)] = a[T.ramp(i * 8, 1, 8)] * 2.0",
    ]


def test_expression_text_respects_precedence_and_special_floats() -> None:
    x, y = tir.Var("x", "float64"), tir.Var("y", "float64")
    i = tir.Var("i")
    assert expr_text((x + y) * x) == "(x + y) * x"
    assert expr_text(x - (y - x)) == "x - (y - x)"
    assert expr_text((i < 3) & (i > 0)) == "(i < 3) & (i > 0)"
    assert expr_text(x * float("inf")) == 'x * T.float64("inf")'
    assert expr_text(tir.truncdiv(i, 3)) == "T.truncdiv(i, 3)"
    assert expr_text(tir.cast("int32", i) + 1) == 'T.cast("int32", i) + 1'


def test_let_expressions_name_their_var_for_the_body() -> None:
    a = tir.Buffer("a", (4,), "float32")
    i, v = tir.Var("i"), tir.Var("v", "float32")
    value = tir.Let(v, a[i] * 2.0, v * v + 1.0)
    func = tir.PrimFunc((a,), tir.For(i, 0, 4, "serial", tir.BufferStore(a, value, (i,))),
                        {"global_symbol": "f"})
    text = func.script()
    assert 'T.let_expr((v := T.var("float32", name="v")), a[i] * 2.0, v * v + 1.0)' in text
    assert _retrace(text, "f") == func
