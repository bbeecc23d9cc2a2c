"""What each TIR pass does (the spec, as before/expected checks), and its errors and config."""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import passes.tir as pt
from irkernel import tir, transform
from irkernel.tir import script as T
from passes.tir.simplify import simplify_expr

i, j, k = tir.Var("i"), tir.Var("j"), tir.Var("k")


def _nodes(func: tir.PrimFunc, cls: type) -> list[tir.Node]:
    return [n for n in tir.post_order(func.body) if isinstance(n, cls)]


def _via_pass(name: str, func: tir.PrimFunc, **config: object) -> tir.PrimFunc:
    with transform.PassContext(config=config):
        return transform.get_pass(name)(ik.IRModule({"f": func}))["f"]


# -- Simplify -------------------------------------------------------------------

@pytest.mark.parametrize(("expr", "ranges", "expected"), [
    ((i * 16 + j) // 16, {"i": (0, 99), "j": (0, 15)}, i),
    ((i * 16 + j) % 16, {"i": (0, 99), "j": (0, 15)}, j),
    ((i * 16 + j) // 16, {"j": (0, 15)}, (i * 16 + j) // 16),  # i * 16 might overflow
    (i * 1 + 0, {}, i),
    ((i + 2) + 3, {}, i + 5),
    ((i * 4) * 2, {}, i * 8),
    (i - i, {}, tir.IntImm(0)),
    (tir.IntImm(7) // 2 * 3 + 1, {}, tir.IntImm(10)),
    (tir.Min(i, tir.IntImm(20)), {"i": (0, 15)}, i),
    (tir.truncdiv(i, 4), {"i": (0, 15)}, i // 4),
    (tir.select(i < 16, j, k), {"i": (0, 15)}, j),
    (tir.Cast("int32", tir.IntImm(2**31 + 1)), {}, tir.IntImm(-(2**31) + 1, "int32")),
])
def test_simplify_folds_index_expressions(expr: tir.PrimExpr, ranges: dict[str, tuple[int, int]],
                                          expected: tir.PrimExpr) -> None:
    assert simplify_expr(expr, ranges) == expected


def test_simplify_keeps_inexact_float_rewrites_out() -> None:
    x = tir.Var("x", "float32")
    assert simplify_expr(x * 1.0) == x and simplify_expr(x - 0.0) == x
    for kept in (x + 0.0, x * 0.0, x - x, x / x):  # wrong for -0.0, NaN or inf
        assert simplify_expr(kept) == kept
    two = tir.FloatImm(2.0, "float32")
    assert simplify_expr(two * 3.0) == tir.FloatImm(6.0, "float32")
    assert simplify_expr(tir.call("exp", two)) == tir.call("exp", two)  # calls left to LLVM


def test_simplify_statements_use_loop_bounds() -> None:
    @T.prim_func
    def f(a: T.Buffer((64,), "float32")):
        for io in T.serial(4):
            for ii in T.serial(16):
                with T.If(io * 16 + ii < 64):
                    a[(io * 16 + ii) // 16 * 16 + (io * 16 + ii) % 16] = 1.0
        for z in T.serial(0):
            a[z] = 2.0
        for one in T.serial(1):
            a[one + 3] = 3.0

    out = pt.simplify(f)
    text = out.script()
    assert "T.If" not in text and "for z" not in text and "for one" not in text
    assert "a[io * 16 + ii] = 1.0" in text and "a[3] = 3.0" in text
    assert pt.simplify(out) is out
    assert _via_pass("Simplify", out) is out


# -- FlattenBuffer --------------------------------------------------------------

def test_flatten_buffer_uses_strides_and_marks_the_function() -> None:
    n = tir.Var("n")
    a = tir.Buffer("a", (n, 3, 4), "float64")
    s = tir.Buffer("s", (2, 5), "int32", strides=(16, 2))
    body = tir.seq(tir.BufferStore(a, a[i, j, k], (j, i, k)),
                   tir.BufferStore(s, s[1, j], (i, j)))
    func = tir.PrimFunc((a, s, n, i, j, k), body)
    flat = pt.flatten_buffer(func)
    assert flat.attrs["tir.flattened"] is True
    assert flat.params == func.params  # the calling convention keeps n-d buffers
    store_a, store_s = flat.body.stmts
    assert store_a.indices == (j * 12 + i * 4 + k,)
    assert store_a.value.indices == (i * 12 + j * 4 + k,)
    assert store_a.buffer.shape == (n * 3 * 4,) and store_a.buffer.align == 8
    assert store_s.indices == (i * 16 + j * 2,)
    assert store_s.buffer.shape == (tir.IntImm(1 + 16 + 8),)  # the addressed span
    flat.verify("f")


def test_flatten_buffer_merges_a_split_index_pair() -> None:
    """``(x // e, x % e)`` on adjacent axes of extent ``e`` is ``x`` (the conv schedule's
    flat pixel index stays contiguous); other divisors, or strided buffers, keep the pair."""
    a = tir.Buffer("a", (2, 3, 4), "float32")
    e = tir.IntImm(4)
    x = i * 5 + j
    one = tir.FloatImm(1.0, "float32")
    merged = tir.BufferStore(a, one, (k, tir.FloorDiv(x, e), tir.FloorMod(x, e)))
    other = tir.BufferStore(a, one, (k, tir.FloorDiv(x, tir.IntImm(3)),
                                     tir.FloorMod(x, tir.IntImm(3))))
    func = tir.PrimFunc((a, i, j, k), tir.seq(merged, other))
    first, second = pt.flatten_buffer(func).body.stmts
    assert first.indices == (k * 12 + x,)
    assert second.indices != (k * 12 + x,)
    assert any(isinstance(n, tir.FloorDiv) for n in _nodes_of(second.indices[0]))


def test_flatten_buffer_merges_a_chain_of_split_pairs() -> None:
    """``(x // 12, (x % 12) // 4, (x % 12) % 4)`` over extents ``(.., 3, 4)`` is ``x``: a
    conv weight's ``(c, kh, kw)`` from a flat position in its row (``conv_dot``); a broken
    link (a divisor that is not the extent) keeps the division."""
    a = tir.Buffer("a", (2, 5, 3, 4), "float32")
    x = i * 7 + j
    one = tir.FloatImm(1.0, "float32")

    def chain(inner: int) -> tir.BufferStore:
        rest = tir.FloorMod(x, tir.IntImm(12))
        return tir.BufferStore(a, one, (k, tir.FloorDiv(x, tir.IntImm(12)),
                                        tir.FloorDiv(rest, tir.IntImm(inner)),
                                        tir.FloorMod(rest, tir.IntImm(inner))))

    func = tir.PrimFunc((a, i, j, k), tir.seq(chain(4), chain(2)))
    first, second = pt.flatten_buffer(func).body.stmts
    assert first.indices == (k * 60 + x,)
    assert any(isinstance(n, tir.FloorDiv) for n in _nodes_of(second.indices[0]))


def _nodes_of(expr: tir.PrimExpr) -> list[object]:
    from irkernel.tir.functor import post_order
    return list(post_order(expr))


def test_flatten_buffer_leaves_1d_contiguous_functions_alone() -> None:
    a = tir.Buffer("a", (8,), "float32")
    func = tir.PrimFunc((a,), tir.For(i, 0, 8, "serial", tir.BufferStore(a, a[i], (i,))))
    assert pt.flatten_buffer(func) is func


# -- UnrollLoop -----------------------------------------------------------------

@T.prim_func
def rowsum(a: T.Buffer((8, 4), "float32"), out: T.Buffer((8,), "float32")):
    for r in T.serial(8):
        out[r] = 0.0
        for c in T.serial(4):
            out[r] = out[r] + a[r, c]


def _loop_vars(func: tir.PrimFunc) -> list[str]:
    return [n.loop_var.name for n in _nodes(func, tir.For)]


def test_unroll_default_only_unrolls_explicit_loops() -> None:
    assert _via_pass("UnrollLoop", rowsum) is rowsum

    @T.prim_func
    def f(a: T.Buffer((3,), "int64")):
        for u in T.unroll(3):
            a[u] = u

    out = pt.unroll_loop(f)
    assert _nodes(out, tir.For) == []
    assert [s.indices for s in out.body.stmts] == [(tir.IntImm(v),) for v in range(3)]


@pytest.mark.parametrize(("config", "remaining"), [
    ({"auto_max_step": 3}, ["c", "r"]),            # 4 steps > 3
    ({"auto_max_step": 4}, ["r"]),                 # c: 4 * 1 step
    ({"auto_max_step": 40}, []),                   # r: 8 * (1 + 4) = 40 steps
    ({"auto_max_extent": 4}, ["r"]),
    ({"auto_max_step": 40, "auto_max_depth": 0}, ["r"]),  # r would nest an unrolled loop
])
def test_unroll_auto_rules(config: dict[str, int], remaining: list[str]) -> None:
    out = _via_pass("UnrollLoop", rowsum, **{"tir.UnrollLoop": config})
    assert _loop_vars(out) == remaining
    assert len(_nodes(out, tir.BufferStore)) == {("c", "r"): 2, ("r",): 5, (): 40}[
        tuple(remaining)]


def test_unroll_without_explicit_copies_marks_the_loop() -> None:
    out = pt.unroll_loop(rowsum, {"auto_max_step": 4, "explicit_unroll": False})
    kinds = {n.loop_var.name: n.kind for n in _nodes(out, tir.For)}
    assert kinds == {"c": "unrolled", "r": "serial"}


def test_unroll_errors() -> None:
    n = tir.Var("n")
    a = tir.Buffer("a", (8,), "float32")
    func = tir.PrimFunc((a, n), tir.For(i, 0, n, "unrolled", tir.BufferStore(
        a, tir.FloatImm(0.0, "float32"), (i,))))
    with pytest.raises(ik.IRError, match="for i: cannot unroll a loop with a non-constant"):
        pt.unroll_loop(func)
    with pytest.raises(ValueError, match="unknown option 'max_step'"):
        transform.PassContext(config={"tir.UnrollLoop": {"max_step": 4}})
    with pytest.raises(ValueError, match="'auto_max_step' must be int"):
        transform.PassContext(config={"tir.UnrollLoop": {"auto_max_step": "4"}})


# -- VectorizeLoop --------------------------------------------------------------

def test_vectorize_produces_ramps_and_broadcasts() -> None:
    @T.prim_func
    def f(a: T.Buffer((32,), "float32"), b: T.Buffer((32,), "float32"), s: T.float32):
        for o in T.serial(4):
            for v in T.vectorized(8):
                b[o * 8 + v] = a[o * 8 + v] * s + T.exp(a[v * 4])

    out = pt.simplify(pt.vectorize_loop(f))
    assert [n.loop_var.name for n in _nodes(out, tir.For)] == ["o"]
    store = _nodes(out, tir.BufferStore)[0]
    assert store.indices == (tir.Ramp(tir.Var("o") * 8, tir.IntImm(1), 8),)
    assert store.value.dtype == "float32x8"
    assert tir.Broadcast(tir.Var("s", "float32"), 8) in list(tir.post_order(store.value))
    loads = _nodes(out, tir.BufferLoad)
    assert tir.Ramp(tir.IntImm(0), tir.IntImm(4), 8) in [ld.indices[0] for ld in loads]


def test_vectorize_falls_back_to_a_serial_loop() -> None:
    @T.prim_func
    def f(a: T.Buffer((8,), "float32"), n: T.int64):
        for v in T.vectorized(8):
            with T.If(a[v] > 0.0):  # a vector condition
                a[v] = 0.0
        for w in T.vectorized(n):  # not a constant extent
            a[w] = 1.0

    out = pt.vectorize_loop(f)
    assert [(n.loop_var.name, n.kind) for n in _nodes(out, tir.For)] == [
        ("v", "serial"), ("w", "serial")]


def test_a_let_read_after_a_store_to_its_buffer_keeps_the_loop_serial() -> None:
    """Regression: a vector let is inlined into its body, so a let of ``c[v]`` used after
    ``c[v]`` is stored read the new value (the LSTM cell update ``c = f(c); h = g(c_old)``)."""

    @T.prim_func
    def f(c: T.Buffer((4,), "float32"), h: T.Buffer((4,), "float32")):
        for v in T.vectorized(4):
            old = T.let(c[v])
            c[v] = old * 2.0
            h[v] = old + 1.0

    out = pt.vectorize_loop(f)
    assert [(n.loop_var.name, n.kind) for n in _nodes(out, tir.For)] == [("v", "serial")]
    c, h = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    tir.interpret(out, c, h)
    np.testing.assert_array_equal(h, np.arange(4, dtype=np.float32) + 1)

    @T.prim_func
    def g(c: T.Buffer((4,), "float32"), h: T.Buffer((4,), "float32")):
        for v in T.vectorized(4):  # no store to c after the let: still vectorized
            old = T.let(c[v])
            h[v] = old + 1.0

    assert not _nodes(pt.vectorize_loop(g), tir.For)


def test_nested_vectorized_loops_vectorize_only_the_inner_one() -> None:
    """Regression (found by hypothesis): vectorizing both loops of a 2x2 nest gave the
    index pair (ramp, ramp), whose lanes pair up: only the diagonal was written."""

    @T.prim_func
    def f(a: T.Buffer((2, 2), "float32"), b: T.Buffer((2, 2), "float32")):
        for i in T.vectorized(2):
            for j in T.vectorized(2):
                b[i, j] = a[i, j] + 1.0

    out = pt.vectorize_loop(f)
    assert [(n.loop_var.name, n.kind) for n in _nodes(out, tir.For)] == [("i", "serial")]
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    b = np.zeros((2, 2), np.float32)
    tir.interpret(out, a, b)
    np.testing.assert_array_equal(b, a + 1)


# -- LowerParallel --------------------------------------------------------------

def test_lower_parallel_keeps_only_outer_nontrivial_parallel_loops() -> None:
    @T.prim_func
    def f(a: T.Buffer((4, 4), "float32")):
        for p in T.parallel(4):
            for q in T.parallel(4):
                a[p, q] = 1.0
        for one in T.parallel(1):
            a[one, 0] = 2.0

    out = pt.lower_parallel(f)
    assert {n.loop_var.name: n.kind for n in _nodes(out, tir.For)} == {
        "p": "parallel", "q": "serial", "one": "serial"}
    assert pt.lower_parallel(out) is out


# -- MergeLoops ------------------------------------------------------------------

def _extents(func: tir.PrimFunc) -> dict[str, int]:
    return {n.loop_var.name: n.extent.value for n in _nodes(func, tir.For)}


def test_merge_loops_merges_contiguous_pairs_bottom_up() -> None:
    """A squeeze-excite scale over 14 x 14 maps: the row loops become one loop of 196
    (a three-deep contiguous nest becomes one loop), and the results do not change."""
    @T.prim_func
    def scale(x: T.Buffer((3, 14, 14), "float32"), s: T.Buffer((3,), "float32"),
              out: T.Buffer((3, 14, 14), "float32"), total: T.Buffer((3,), "float32")):
        for c in T.parallel(3):
            for h in T.serial(14):
                for w in T.serial(14):
                    out[c, h, w] = x[c, h, w] * s[c]
        for a in T.serial(3):
            for b in T.serial(14):
                for d in T.serial(14):
                    out[a, b, d] = out[a, b, d] + 1.0
        for r in T.serial(3):
            total[r] = 0.0
            for p in T.serial(14):
                for q in T.serial(14):
                    total[r] = total[r] + x[r, p, q]

    flat = pt.flatten_buffer(scale)
    merged = pt.merge_loops(flat)
    assert _extents(merged) == {"c": 3, "w": 196, "d": 588, "r": 3, "q": 196}
    assert _via_pass("MergeLoops", flat).script() == merged.script()
    merged.verify("scale")
    rng = np.random.default_rng(0)
    x, s = rng.standard_normal((3, 14, 14), np.float32), rng.standard_normal(3, np.float32)
    results = []
    for func in (scale, merged):
        out, total = np.zeros((3, 14, 14), np.float32), np.zeros(3, np.float32)
        tir.interpret(func, x, s, out, total)
        results.append((out, total))
    for want, got in zip(results[0], results[1], strict=True):
        np.testing.assert_array_equal(got, want)  # same order: bit for bit


def test_merge_loops_leaves_other_nests_alone() -> None:
    """Rows of a padded copy (stride 16 over 14 columns), a loop var used as a value or in
    a condition, a non-affine index, and loops that are not plain serial ones stay."""
    @T.prim_func
    def f(a: T.Buffer((14, 16), "float32"), b: T.Buffer((14, 14), "float32"),
          idx: T.Buffer((196,), "int64")):
        for i0 in T.serial(14):
            for j0 in T.serial(14):
                a[i0, j0 + 1] = b[i0, j0]
        for i1 in T.serial(14):
            for j1 in T.serial(14):
                b[i1, j1] = T.cast("float32", j1)
        for i2 in T.serial(14):
            for j2 in T.serial(14):
                with T.If(i2 < 7):
                    b[i2, j2] = 0.0
        for i3 in T.serial(14):
            for j3 in T.serial(14):
                b[i3, j3] = a[idx[i3 * 14 + j3], 0]
        for i4 in T.serial(14):
            for j4 in T.unroll(14):
                b[i4, j4] = 1.0
        for i5 in T.serial(1, 14):
            for j5 in T.serial(14):
                b[i5, j5] = 2.0

    flat = pt.flatten_buffer(f)
    assert pt.merge_loops(flat) is flat


def test_passes_are_registered_prim_func_passes() -> None:
    for name in ("Simplify", "FlattenBuffer", "UnrollLoop", "VectorizeLoop", "LowerParallel",
                 "MergeLoops"):
        p = transform.get_pass(name)
        assert isinstance(p, transform.PrimFuncPass) and p.info.name == name
