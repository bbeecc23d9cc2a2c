"""Products of symbolic dims (monomials such as ``batch*seq``): canonical, stored once,
sound (irkernel.ir.symdim, irkernel.ir.symbols), and the reshapes they make decidable."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
from irkernel.ir.symbols import SymbolTable
from irkernel.ir.symdim import DimVars, SymDim, UndecidableDim, key_interval, key_value

GRID = list(itertools.product(range(0, 5), range(2, 6), range(1, 4)))


def _vars() -> tuple[DimVars, dict[str, SymDim]]:
    dims = DimVars()
    dims.add("b", 0, 4)
    dims.add("s", 2, None)
    dims.add("h", 1, 3)
    return dims, {n: dims.var(n) for n in ("b", "s", "h")}


# polynomials: sums, differences and products of variables and small constants
_POLY = st.recursive(
    st.sampled_from(["b", "s", "h"]) | st.integers(-4, 4).map(str),
    lambda inner: st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
        lambda t: f"({' '.join(t)})"),
    max_leaves=7)
# the same with floor-divisions by constants mixed in (products with them may be refused)
_MIXED = st.recursive(
    st.sampled_from(["b", "s", "h"]) | st.integers(-4, 4).map(str),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
            lambda t: f"({' '.join(t)})"),
        st.tuples(inner, st.integers(1, 4)).map(lambda t: f"({t[0]} // {t[1]})")),
    max_leaves=7)


def _value(built: object, binding: tuple[int, ...]) -> int:
    return built if isinstance(built, int) else key_value(built.key, binding)  # type: ignore


@given(_MIXED)
@settings(max_examples=150, deadline=None)
def test_products_evaluate_exactly_or_are_refused(expr: str) -> None:
    """A built expression's key has Python's value at every binding of a grid, its text
    reads back to that value, and its table entry (postfix columns) to the same key;
    an expression outside the algebra raises UndecidableDim naming the product."""
    dims, names = _vars()
    try:
        built = eval(expr, {}, names)  # the test's own expression strings
    except UndecidableDim as exc:
        assert "product" in str(exc) or "floor" in str(exc)
        return
    for binding in GRID:
        want = eval(expr, {}, dict(zip(("b", "s", "h"), binding)))
        assert _value(built, binding) == want
        if isinstance(built, SymDim):
            assert eval(str(built), {}, dict(zip(("b", "s", "h"), binding))) == want
    if isinstance(built, SymDim):
        table = SymbolTable.from_keys(dims, [built.key])
        assert table.keys == (built.key,)
        assert SymbolTable(*table.state()) == table


@given(_POLY, _POLY, _POLY)
@settings(max_examples=100, deadline=None)
def test_polynomial_identities_give_one_key(p: str, q: str, r: str) -> None:
    """Without floor-divisions the form is the unique monomial expansion: commuted,
    associated and distributed products are one key (so one expression id)."""
    _, names = _vars()
    a, b, c = (eval(e, {}, names) for e in (p, q, r))
    assert a * b == b * a
    assert (a * b) * c == a * (b * c)
    assert (a + b) * c == a * c + b * c
    assert a * b - b * a == 0


@given(_MIXED)
@settings(max_examples=150, deadline=None)
def test_intervals_contain_every_value(expr: str) -> None:
    """The interval the decisions use holds the value at every binding in the bounds,
    so a comparison decided from it is never wrong."""
    dims, names = _vars()
    try:
        built = eval(expr, {}, names)
    except UndecidableDim:
        return
    if not isinstance(built, SymDim):
        return
    lo, hi = key_interval(built.key, dims)
    for binding in GRID:
        assert lo <= key_value(built.key, binding) <= hi


@given(_POLY)
@settings(max_examples=100, deadline=None)
def test_factors_multiply_back(expr: str) -> None:
    _, names = _vars()
    built = eval(expr, {}, names)
    if not isinstance(built, SymDim):
        return
    g, parts = built.factors()
    for binding in GRID:
        assert g * math.prod(_value(f, binding) for f in parts) == _value(built, binding)


def test_product_spelling_and_decisions() -> None:
    _, v = _vars()
    b, s, h = v["b"], v["s"], v["h"]
    assert str(2 * b * s) == "2*b*s" and str(s * b) == "b*s"
    assert str((b + 1) * s) == "s + b*s"
    assert str((b * s) // 2) == "(b*s) // 2"
    assert s * h >= 2 and s * h * 0 == 0 and isinstance(b * s - s * b, int)
    assert (2 * b * s + 2 * s).factors() == (2, [s, b + 1])
    with pytest.raises(UndecidableDim, match="cannot decide whether b\\*s >= 1"):
        _ = b * s >= 1  # b may be 0
    with pytest.raises(UndecidableDim, match="floor-divisions"):
        _ = (s // 2) * h


@pytest.mark.parametrize(("target", "want"), [
    ((-1, 64), "b*s, 64"),
    (("b*s", 64), "b*s, 64"),
    (("b", "s", 4, 16), "b, s, 4, 16"),
    (("b", -1), "b, 64*s"),
    ((-1,), "64*b*s"),
    (("s", "b", 64), "s, b, 64"),
])
def test_transformer_reshapes(target: tuple[object, ...], want: str) -> None:
    """(b, s, h*d) <-> (b*s, h*d), (b, s, heads, d) and flattening; each checked
    against the interpreter at a few bindings."""
    bb = ik.GraphBuilder("main")
    names = {"b": bb.dim("b"), "s": bb.dim("s")}
    x = bb.param("x", (names["b"], names["s"], 64), "float32")
    y = bb.reshape(x, shape=tuple(eval(d, {}, names) if isinstance(d, str) else d
                                  for d in target))
    assert ", ".join(map(str, bb.node_type(y)[1])) == want
    z = bb.reshape(y, shape=(names["b"], names["s"], 64))
    mod = ik.IRModule({"main": bb.finish([y, z])})
    assert ik.parse(mod.script()).script() == mod.script()  # the text round-trips
    for bv, sv in ((1, 1), (3, 5)):
        arr = np.arange(bv * sv * 64, dtype=np.float32).reshape(bv, sv, 64)
        got_y, got_z = ik.interpret(mod, arr)
        shape = tuple(eval(p, {}, {"b": bv, "s": sv}) for p in want.split(", "))
        np.testing.assert_array_equal(got_y, arr.reshape(shape))
        np.testing.assert_array_equal(got_z, arr)
