"""TIR nodes: typing at construction, structural equality and hashing, depth guard, printing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
from irkernel import tir
from irkernel.tir import script as T

ROOT = Path(__file__).resolve().parents[2]


def _add_func() -> tir.PrimFunc:
    @T.prim_func
    def add(a: T.Buffer((8, 4), "float32"), b: T.Buffer((8, 4), "float32"),
            c: T.Buffer((8, 4), "float32")):
        for i, j in T.grid(8, 4):
            c[i, j] = a[i, j] + b[i, j] * 2.0

    return add


def test_binary_ops_check_dtypes():
    i32, i64 = tir.Var("x", "int32"), tir.Var("y", "int64")
    with pytest.raises(TypeError, match="operand dtypes differ"):
        _ = i32 + i64
    with pytest.raises(TypeError, match="'/' is float division"):
        _ = i64 / 2
    with pytest.raises(TypeError, match="not defined for bool"):
        tir.Add(tir.const(True), tir.const(False))
    with pytest.raises(TypeError, match="float constant 2.5"):
        _ = i32 * 2.5
    f = tir.Var("f", "float32")
    assert (f * 2).b == tir.FloatImm(2.0, "float32")
    assert (i32 + 1).dtype == "int32"
    assert (i64 < 3).dtype == "bool"


def test_immediates_fit_their_dtype():
    with pytest.raises(ValueError, match="does not fit int32"):
        tir.IntImm(2**31, "int32")
    assert tir.FloatImm(0.1, "float32").value == float(np.float32(0.1))
    assert tir.FloatImm(0.1, "float32") == tir.FloatImm(float(np.float32(0.1)), "float32")
    with pytest.raises(ValueError, match="unsupported TIR dtype"):
        tir.IntImm(1, "int4")


def test_vector_nodes_and_broadcasting():
    i = tir.Var("i")
    ramp = tir.Ramp(i * 16, tir.const(1), 16)
    assert ramp.dtype == "int64x16"
    a = tir.Buffer("a", (64,), "float32")
    load = a[ramp]
    assert load.dtype == "float32x16"
    mixed = load * 2.0
    assert mixed.dtype == "float32x16" and isinstance(mixed.b, tir.Broadcast)
    with pytest.raises(TypeError):
        tir.Ramp(tir.const(1.0), tir.const(1.0), 4)


def test_expressions_have_no_truth_value():
    with pytest.raises(TypeError, match="no truth value"):
        bool(tir.Var("i") < 3)
    assert (tir.Var("i") == tir.Var("i")) is True  # == is structural
    assert isinstance(tir.eq(tir.Var("i"), 3), tir.EQ)


def test_structural_equality_and_hash():
    f, g = _add_func(), _add_func()
    assert f is not g and f == g and hash(f) == hash(g)
    assert f.structural_digest() == g.structural_digest()
    h = f.with_attr("note", "x")
    assert h != f and h.structural_digest() != f.structural_digest()
    assert f.with_attr("global_symbol", "add") is f
    assert ik.structural_equal(f, g)
    assert ik.structural_hash(f) == ik.structural_hash(g)


def test_structural_digest_is_stable_across_processes():
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, "tests/tir")
        from test_nodes import _add_func
        print(_add_func().structural_digest().hex())
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.strip()
    assert out == _add_func().structural_digest().hex()


def test_replace_returns_self_when_unchanged():
    a = tir.Buffer("a", (4,), "int32")
    i = tir.Var("i")
    store = tir.BufferStore(a, a[i] + 1, (i,))
    assert store.replace(value=store.value) is store
    assert store.replace(value=a[i]) is not store
    with pytest.raises(TypeError, match="unknown fields"):
        store.replace(bogus=1)


def test_depth_guard_is_a_clear_error():
    e = tir.Var("x")
    with pytest.raises(ValueError, match="nested deeper than"):
        for _ in range(tir.MAX_DEPTH + 1):
            e = e + 1


def test_wide_sequences_are_fine():
    a = tir.Buffer("a", (1000,), "float32")
    body = tir.SeqStmt(tuple(tir.BufferStore(a, tir.const(1.0, "float32"), (k,))
                             for k in range(1000)))
    f = tir.PrimFunc((a,), body)
    f.verify("wide")
    assert f == tir.PrimFunc((a,), body) and len(f.script("wide").splitlines()) > 1000


def test_buffer_validation():
    with pytest.raises(ValueError, match="power of two"):
        tir.Buffer("a", (4,), "float32", align=3)
    with pytest.raises(ValueError, match="negative extent"):
        tir.Buffer("a", (-1,), "float32")
    with pytest.raises(IndexError, match="1 indices for a 2-d buffer"):
        _ = tir.Buffer("a", (2, 2), "float32")[0]
    with pytest.raises(ValueError, match="2 strides for 1 dimensions"):
        tir.Buffer("a", (4,), "float32", strides=(1, 1))


def test_printer_round_trips_through_the_tracer():
    f = _add_func()
    text = f.script("add")
    assert "for i in T.serial(8):" in text and "c[i, j] = a[i, j] + b[i, j] * 2.0" in text
    ns: dict[str, object] = {"T": T}
    exec(text, ns)
    assert ns["add"] == f


@pytest.mark.parametrize("expr_text", [
    "(x < 3) & (y > 2)", "x - (y - 1)", "(x + y) * 2", "T.min(x, y) // 3 % 5",
    "~(x <= y) | T.eq(x, 4)", "T.truncdiv(x, 3) + T.truncmod(y, 2)",
    "T.select(x < 1, x, -x)", 'T.cast("float32", x) / 2.0',
])
def test_printer_respects_python_precedence(expr_text):
    ns: dict[str, object] = {"T": T, "x": tir.Var("x"), "y": tir.Var("y")}
    e = eval(expr_text, ns)
    from irkernel.tir.printer import expr_text as show

    assert eval(show(e), ns) == e


def test_module_integration():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    mod = ik.IRModule({"main": bb.finish([bb.exp(x)]), "add": _add_func()})
    ik.verify(mod)
    assert "@T.prim_func" in mod.script()
    other = ik.IRModule({"main": mod["main"], "add": _add_func()})
    assert ik.structural_equal(mod, other)
    assert ik.structural_hash(mod) == ik.structural_hash(other)
    assert _add_func().callees() == ()
    assert type(_add_func())._irkernel_prim_func is True
