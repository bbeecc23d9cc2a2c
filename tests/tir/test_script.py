"""The ``@T.prim_func`` tracer: what each construct records, and clear errors for misuse."""

from __future__ import annotations

import pytest

from irkernel import tir
from irkernel.tir import script as T


def _only(stmt: tir.Stmt) -> tir.Stmt:
    return stmt.stmts[0] if isinstance(stmt, tir.SeqStmt) and len(stmt.stmts) == 1 else stmt


def test_loops_take_names_kinds_and_ranges() -> None:
    @T.prim_func
    def f(a: T.Buffer((8, 8), "float32")):
        for i, j in T.grid(2, 3):
            a[i, j] = 1.0
        for k in T.parallel(2, 6):
            a[k, 0] = 2.0
        for q in T.vectorized(1, extent=4, name="lane"):
            a[0, q] = 3.0
        for u in T.unroll(2):
            a[u, u] = 4.0

    grid, par, vec, unr = f.body.stmts
    assert (grid.loop_var.name, grid.body.loop_var.name) == ("i", "j")
    assert (grid.extent, grid.body.extent) == (tir.IntImm(2), tir.IntImm(3))
    assert (par.kind, par.min, par.extent) == ("parallel", tir.IntImm(2), tir.IntImm(4))
    assert (vec.kind, vec.loop_var.name, vec.min, vec.extent) == (
        "vectorized", "lane", tir.IntImm(1), tir.IntImm(4))
    assert unr.kind == "unrolled"
    assert f.attrs["global_symbol"] == "f"


def test_symbolic_ranges_and_int32_loops() -> None:
    n = T.var("int64")
    m = tir.Var("m", "int32")

    @T.prim_func
    def f(a: T.Buffer((n,), "int32"), lo: T.int64, count: T.int32):
        for i in T.serial(lo, n):
            a[i] = 0
        for k in T.serial(count):
            a[T.cast("int64", k)] = k

    first, second = f.body.stmts
    assert first.extent == n - tir.Var("lo")
    assert second.loop_var.dtype == "int32"
    assert f.shape_vars == (tir.Var("n"),)
    assert m.dtype == "int32"


def test_lets_allocations_and_branches_scope_over_the_rest_of_the_block() -> None:
    @T.prim_func
    def f(a: T.Buffer((4,), "float32"), flag: T.bool):
        for i in T.serial(4):
            v = T.let(a[i] * 2.0)
            tmp = T.alloc_buffer((4,), "float32", align=32)
            tmp[i] = v
            with T.If(flag & (v > 1.0)):
                a[i] = tmp[i]
            with T.Else():
                a[i] = 0.0
            a[i] = a[i] + 1.0

    let = f.body.body
    assert isinstance(let, tir.LetStmt) and let.var == tir.Var("v", "float32")
    alloc = let.body
    assert isinstance(alloc, tir.Allocate) and alloc.buffer.align == 32
    _store, branch, last = alloc.body.stmts
    assert isinstance(branch, tir.IfThenElse) and branch.else_case is not None
    assert isinstance(last, tir.BufferStore)
    f.verify("f")


def test_python_control_flow_is_meta_programming() -> None:
    def make(unroll: bool) -> tir.PrimFunc:
        @T.prim_func
        def f(a: T.Buffer((3,), "int64")):
            if unroll:
                for k in range(3):  # a Python loop: three stores
                    a[k] = k * 10
            else:
                for k in T.serial(3):
                    a[k] = k * 10
        return f

    assert len(make(True).body.stmts) == 3
    assert isinstance(_only(make(False).body), tir.For)


def test_private_name_and_func_attr() -> None:
    @T.prim_func(private=True)
    def hidden(a: T.Buffer((1,), "float32")):
        a[0] = 0.0

    @T.prim_func(name="renamed")
    def named(a: T.Buffer((1,), "float32")):
        T.func_attr({"tir.noalias": True})
        a[0] = 0.0

    assert "global_symbol" not in hidden.attrs
    assert dict(named.attrs) == {"global_symbol": "renamed", "tir.noalias": True}


def test_values_are_converted_and_broadcast_on_store() -> None:
    @T.prim_func
    def f(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "bool")):
        a[T.ramp(0, 1, 8)] = 1.5
        b[0] = True

    vec, flag = f.body.stmts
    assert vec.value == tir.Broadcast(tir.FloatImm(1.5, "float32"), 8)
    assert flag.value == tir.const(True)


@pytest.mark.parametrize(("source", "error", "match"), [
    ("def f(a):\n    pass", TypeError, "parameter 'a' needs an annotation"),
    ("def f(a: T.Buffer((4,), 'float32')):\n    return 1", TypeError,
     "must not return a value"),
    ("def f(a: T.Buffer((4,), 'float32')):\n    for i in T.serial(4):\n        break",
     SyntaxError, "traced loop was left early"),
    ("def f(a: T.Buffer((4,), 'int32')):\n    with T.If(a[0] == 1):\n        a[0] = 2",
     TypeError, "condition is a Python bool"),
    ("def f(a: T.Buffer((4,), 'int32')):\n    a[0] = T.select(True, 1, 2)", TypeError,
     "T.select: the condition is a Python bool"),
    ("def f(a: T.Buffer((4,), 'int32')):\n    with T.Else():\n        a[0] = 1",
     SyntaxError, "must directly follow a T.If"),
    ("def f(a: T.Buffer((4,), 'int32')):\n    a[0] = 1.5", TypeError,
     "float constant 1.5 in a int32 expression"),
    ("def f(a: T.Buffer((4,), 'int4')):\n    pass", ValueError, "unsupported TIR dtype"),
    ("def f(a: T.Buffer((4,), 'float32')):\n    a[0, 1] = 1.0", IndexError,
     "2 indices for a 1-d buffer"),
])
def test_tracing_errors(source: str, error: type[Exception], match: str) -> None:
    namespace: dict[str, object] = {"T": T}
    exec(compile(source, "<test>", "exec", dont_inherit=True), namespace)
    with pytest.raises(error, match=match):
        T.prim_func(namespace["f"])
    # a failed trace leaves no open frame behind
    assert not T._frames()


def test_constructs_outside_a_trace_are_errors() -> None:
    a = tir.Buffer("a", (4,), "float32")
    with pytest.raises(RuntimeError, match=r"only valid while a @T.prim_func body"):
        a[0] = 1.0
    with pytest.raises(RuntimeError, match=r"T.let"):
        T.let(1.0)
    with pytest.raises(RuntimeError, match=r"T.func_attr is only valid"):
        T.func_attr({"x": 1})


def test_string_annotations_see_the_decorating_scope() -> None:
    # this module uses `from __future__ import annotations`: shapes are local names
    source = ("from __future__ import annotations\n"
              "def make(N):\n"
              "    @T.prim_func\n"
              "    def f(a: T.Buffer((N,), 'float32')):\n"
              "        a[0] = 0.0\n"
              "    return f\n"
              "def broken():\n"
              "    def g(a: T.Buffer((UNDEFINED,), 'float32')):\n"
              "        a[0] = 0.0\n"
              "    return T.prim_func(g)\n")
    namespace: dict[str, object] = {"T": T}
    exec(compile(source, "<test>", "exec", dont_inherit=True), namespace)
    assert namespace["make"](4).params[0].shape == (tir.IntImm(4),)  # type: ignore[operator]
    with pytest.raises(NameError, match="prim_func g: cannot evaluate a parameter annotation"):
        namespace["broken"]()  # type: ignore[operator]
