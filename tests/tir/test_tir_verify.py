"""PrimFunc verification: scopes, buffers, static bounds, types; errors name function and rule."""

from __future__ import annotations

import pytest

import irkernel as ik
from irkernel import tir
from irkernel.tir import script as T

A = tir.Buffer("a", (16,), "float32")
M = tir.Buffer("m", (4, 8), "int32")
i, j = tir.Var("i"), tir.Var("j")


def _loop(var: tir.Var, extent: int, body: tir.Stmt, lo: int = 0) -> tir.For:
    return tir.For(var, lo, extent, "serial", body)


def _fails(func: tir.PrimFunc, *fragments: str) -> str:
    with pytest.raises(ik.IRError) as info:
        func.verify("f")
    text = str(info.value)
    assert text.startswith("f: ")
    for fragment in fragments:
        assert fragment in text, text
    return text


def test_a_well_formed_function_verifies() -> None:
    body = _loop(i, 4, _loop(j, 8, tir.BufferStore(M, M[i, j] + tir.cast("int32", j), (i, j))))
    tir.PrimFunc((M,), body).verify("f")


def test_loop_var_used_outside_its_loop() -> None:
    body = tir.seq(_loop(i, 16, tir.BufferStore(A, A[i], (i,))),
                   tir.BufferStore(A, tir.FloatImm(1.0, "float32"), (i,)))
    _fails(tir.PrimFunc((A,), body), "var 'i' (int64) is used outside its scope",
           "(rule: vars in scope)")


def test_free_var_in_a_value() -> None:
    x = tir.Var("x", "float32")
    body = _loop(i, 16, tir.BufferStore(A, x, (i,)))
    _fails(tir.PrimFunc((A,), body), "for i: var 'x' (float32)", "vars in scope")
    tir.PrimFunc((A, x), body).verify("f")  # as a parameter it is fine


def test_shadowing_is_rejected() -> None:
    body = _loop(i, 4, _loop(i, 4, tir.BufferStore(A, A[i], (i,))))
    _fails(tir.PrimFunc((A,), body), "var 'i' is bound again", "(rule: no shadowing)")


def test_undeclared_and_mismatched_buffers() -> None:
    other = tir.Buffer("b", (16,), "float32")
    _fails(tir.PrimFunc((A,), _loop(i, 16, tir.BufferStore(other, A[i], (i,)))),
           "store of buffer 'b', which is neither a parameter nor allocated",
           "buffers declared")
    wrong = tir.Buffer("a", (8,), "float32")
    _fails(tir.PrimFunc((A,), _loop(i, 8, tir.BufferStore(A, wrong[i], (i,)))),
           "load of buffer 'a' does not match its declaration (float32[8] vs float32[16])")


def test_allocation_reusing_a_name() -> None:
    scratch = tir.Buffer("a", (4,), "float32")
    body = tir.Allocate(scratch, _loop(i, 4, tir.BufferStore(scratch, A[i], (i,))))
    _fails(tir.PrimFunc((A,), body), "allocation 'a' reuses the name", "unique buffer names")


@pytest.mark.parametrize(("index", "lo", "extent", "reach"), [
    (i, 0, 17, 16), (i - 1, 0, 16, -1), (i * 2, 0, 9, 16), (15 - i, 0, 17, -1),
    (i, 10, 7, 16),
])
def test_static_out_of_bounds(index: tir.PrimExpr, lo: int, extent: int, reach: int) -> None:
    func = tir.PrimFunc((A,), _loop(i, extent, tir.BufferStore(A, A[i * 0], (index,)), lo))
    _fails(func, "for i: store a: the index", f"on axis 0 reaches {reach}, outside [0, 16)",
           "(rule: static bounds)")


def test_out_of_bounds_on_the_second_axis_and_in_loads() -> None:
    body = _loop(i, 4, _loop(j, 8, tir.BufferStore(M, M[i, j + 1], (i, j))))
    _fails(tir.PrimFunc((M,), body), "for j: load m: the index j + 1 on axis 1 reaches 8")


def test_vector_index_bounds_count_every_lane() -> None:
    ramp = tir.Ramp(i * 8, tir.IntImm(1), 8)
    ok = _loop(i, 2, tir.BufferStore(A, A[ramp], (ramp,)))
    tir.PrimFunc((A,), ok).verify("f")
    _fails(tir.PrimFunc((A,), _loop(i, 3, tir.BufferStore(A, A[ramp], (ramp,)))),
           "reaches 23, outside [0, 16)")


def test_guarded_and_dynamic_accesses_are_not_false_positives() -> None:
    store = tir.BufferStore(A, A[i], (i,))
    guarded = _loop(i, 20, tir.IfThenElse(i < 16, store))
    tir.PrimFunc((A,), guarded).verify("f")
    n = tir.Var("n")
    tir.PrimFunc((A, n), _loop(i, 16, tir.BufferStore(A, A[(i * n) % 16], (i,)))).verify("f")
    empty = tir.PrimFunc((A,), _loop(i, 0, tir.BufferStore(A, A[i + 100], (i,))))
    empty.verify("f")  # the body never runs


def test_types_are_checked_when_nodes_are_built() -> None:
    with pytest.raises(TypeError, match="BufferStore a: value is int32, the buffer element"):
        tir.BufferStore(A, tir.IntImm(1, "int32"), (i,))
    with pytest.raises(TypeError, match="For x: loop variable must be an int"):
        tir.For(tir.Var("x", "float32"), 0, 4, "serial", tir.SeqStmt(()))
    with pytest.raises(TypeError, match="IfThenElse: condition must be a scalar bool"):
        tir.IfThenElse(i, tir.SeqStmt(()))
    with pytest.raises(IndexError, match="BufferLoad m: 1 indices for a 2-d buffer"):
        _ = M[i]
    with pytest.raises(TypeError, match="index must be an int expression"):
        _ = A[tir.Var("x", "float32")]
    with pytest.raises(ValueError, match="kind must be one of"):
        tir.For(i, 0, 4, "gpu", tir.SeqStmt(()))


def test_ik_verify_names_the_module_function() -> None:
    bad = tir.PrimFunc((A,), _loop(i, 17, tir.BufferStore(A, A[i], (i,))))
    good = tir.PrimFunc((A,), _loop(i, 16, tir.BufferStore(A, A[i], (i,))))
    ik.verify(ik.IRModule({"good": good}))
    with pytest.raises(ik.IRError, match=r"^bad_kernel: for i: .*static bounds"):
        ik.verify(ik.IRModule({"good": good, "bad_kernel": bad}))


def test_traced_functions_verify() -> None:
    @T.prim_func
    def f(a: T.Buffer((4,), "float32")):
        for k in T.serial(5):
            a[k] = 0.0

    with pytest.raises(ik.IRError, match="reaches 4, outside"):
        f.verify("f")
