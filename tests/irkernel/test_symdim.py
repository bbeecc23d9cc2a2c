"""The algebra of symbolic dims (irkernel.ir.symdim) and their table (irkernel.ir.symbols)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from irkernel.ir.pools import SYMBOLIC_SIZE, ShapeTable
from irkernel.ir.symbols import EMPTY_SYMBOLS, SymbolTable, encode_expr
from irkernel.ir.symdim import DimVars, SymDim, UndecidableDim, key_value


def _vars() -> tuple[DimVars, SymDim, SymDim]:
    dims = DimVars()
    dims.add("h", 1, None)
    dims.add("n", 2, 9)
    return dims, dims.var("h"), dims.var("n")


def test_canonical_forms_are_equal_keys() -> None:
    _, h, n = _vars()
    assert (h - 1) // 2 + 1 == (h + 1) // 2
    assert 2 * n + 2 * h == 2 * (h + n)
    assert ((h // 2) + 3) // 5 == (h + 6) // 10
    assert (2 * h) // 4 == h // 2
    assert (h // 3) // 2 == h // 6
    assert h + 1 - 1 == h
    assert h - h == 0 and isinstance(h - h, int)  # constants are plain ints
    assert (4 * h + 2) // 2 == 2 * h + 1
    assert (h + n) % 1 == 0
    assert h != n and h != 1 and hash(h + 1) == hash(1 + h)


def test_canonical_spelling() -> None:
    _, h, n = _vars()
    assert str(2 * h - n + 1) == "2*h - n + 1"
    assert str(-h) == "-h"
    assert str((h + 1) // 2) == "(h + 1) // 2"
    assert str(h // 2) == "h // 2"
    assert str(2 * ((h + 1) // 2)) == "2*((h + 1) // 2)"
    assert str(-((h + 1) // 2)) == "-((h + 1) // 2)"


def test_orderings_are_decided_by_bounds_or_refused() -> None:
    _, h, n = _vars()
    assert n >= 2 and n <= 9 and n < 10 and not n > 9
    assert h >= 1 and h + 2 >= 3
    assert 2 * (h // 2) <= h  # decided through h // 2 = (h - r) / 2
    assert bool(n)  # n >= 2: provably non-zero
    with pytest.raises(UndecidableDim, match=r"h >= 3 for every value of h in \[1, inf\]"):
        _ = h >= 3
    with pytest.raises(UndecidableDim, match="no static value"):
        int(h)
    with pytest.raises(UndecidableDim, match="product"):
        _ = (h // 2) * n  # products multiply out only without floor-divisions
    with pytest.raises(UndecidableDim, match="divide only by a constant"):
        _ = h // n
    with pytest.raises(UndecidableDim, match="division by a symbolic dim"):
        _ = 4 // h


def test_dim_vars_refuse_bad_declarations() -> None:
    dims = DimVars()
    dims.add("b", 1, 8)
    assert dims.add("b", 1, 8) == 0
    with pytest.raises(ValueError, match="declared twice"):
        dims.add("b", 1, 9)
    with pytest.raises(ValueError, match="upper bound"):
        dims.add("c", 5, 4)
    with pytest.raises(ValueError, match="identifier"):
        dims.add("2x")


_ATOMS = st.recursive(
    st.sampled_from(["h", "n"]) | st.integers(-5, 5).map(str),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-"]), inner).map(lambda t: f"({' '.join(t)})"),
        st.tuples(st.integers(-3, 3), inner).map(lambda t: f"({t[0]} * {t[1]})"),
        st.tuples(inner, st.integers(1, 4)).map(lambda t: f"({t[0]} // {t[1]})")),
    max_leaves=8)


@given(_ATOMS)
def test_canonical_value_equals_python_value(expr: str) -> None:
    """Building an expression with the algebra and evaluating its key gives Python's value
    for every binding in a grid; its text, evaluated by Python, too."""
    dims, h, n = _vars()
    built = eval(expr, {}, {"h": h, "n": n})  # the test's own expression strings
    for hv, nv in itertools.product(range(1, 9), range(2, 6)):
        want = eval(expr, {}, {"h": hv, "n": nv})
        got = built if isinstance(built, int) else key_value(built.key, [hv, nv])
        assert got == want
        if isinstance(built, SymDim):
            assert eval(str(built), {}, {"h": hv, "n": nv}) == want


def test_symbol_table_columns_round_trip_the_keys() -> None:
    dims, h, n = _vars()
    keys = [h.key, (2 * h + n).key, ((h + 1) // 2).key, (((h + 1) // 2 + n) // 3).key]
    table = SymbolTable.from_keys(dims, keys)
    assert table.keys == tuple(keys)
    assert table.expr_op.dtype == np.int8 and table.expr_arg.dtype == np.int64
    assert not table.expr_ptr.flags.writeable
    again = SymbolTable(*table.state())
    assert again == table and hash(again) == hash(table)
    assert table.values([5, 3]) == [5, 13, 3, 2]
    same, ids = table.extended(dims, [(2 * h + n).key])
    assert same is table and ids == [encode_expr(1)]
    bigger, ids = table.extended(dims, [(h + 7).key])
    assert len(bigger) == 5 and ids == [encode_expr(4)]


def test_symbol_table_refuses_malformed_columns() -> None:
    with pytest.raises(ValueError, match="variable 3 not in"):
        SymbolTable(("h",), (1,), (-1,), (0, 1), (1,), (3,))
    with pytest.raises(ValueError, match="does not leave one symbolic value"):
        SymbolTable(("h",), (1,), (-1,), (0, 1), (0,), (4,))
    with pytest.raises(ValueError, match="stored twice"):
        SymbolTable(("h",), (1,), (-1,), (0, 1, 2), (1, 1), (0, 0))


def test_shape_table_with_symbols() -> None:
    dims, h, _ = _vars()
    symbols = SymbolTable.from_keys(dims, [h.key])
    table = ShapeTable([(), (encode_expr(0), 3), (2, 3)], symbols)
    assert table.size.tolist() == [1, SYMBOLIC_SIZE, 6]
    assert table.is_symbolic.tolist() == [False, True, False]
    assert table.shape_text(1) == "h, 3"
    dim, three = table.decode(1)
    assert dim.key == h.key and three == 3
    assert dim != h  # the dims of another variable list (another function) never compare equal
    with pytest.raises(ValueError, match="names no dim expression"):
        ShapeTable([(), (encode_expr(1),)], symbols)
    with pytest.raises(ValueError, match="negative"):
        ShapeTable([(), (-2,)])  # no symbols: nothing negative
    plain = ShapeTable([(), (2, 3)])
    assert plain.symbols is EMPTY_SYMBOLS and plain.keys is plain.shapes
