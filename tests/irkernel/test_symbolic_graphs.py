"""Graphs with symbolic dims: the interpreter against the same graphs with the dims bound,
the text and pickle round trips, and binding errors of the interpreter."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings

import irkernel as ik
from irkernel.ir.binding import bind_dims, concrete_shapes
from irkernel.ir.verify import _check_types
from irkernel.testing.symbolic import SymbolicCase, symbolic_case, symbolic_cases


def _check_case(case: SymbolicCase) -> None:
    sym, static = case.symbolic, case.static
    assert sym.shapes.symbols and not static.shapes.symbols
    got = ik.interpret(sym, *case.inputs)
    want = ik.interpret(static, *case.inputs)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)  # same references on the same values: exact
    # every symbolic shape, evaluated at the binding, is the static graph's shape
    binding = bind_dims(sym, "main", case.inputs)
    assert dict(zip(sym.shapes.symbols.var_names, binding, strict=True)) == case.binding
    shapes = concrete_shapes(sym, binding)
    assert [shapes[s] for s in sym.shape_id.tolist()] == [
        static.shapes[s] for s in static.shape_id.tolist()]


@given(symbolic_cases())
def test_symbolic_graph_interprets_as_its_static_binding(case: SymbolicCase) -> None:
    _check_case(case)


@pytest.mark.parametrize("seed", range(8))
def test_long_symbolic_graphs(seed: int) -> None:
    case = symbolic_case(seed, n_steps=40)
    assert case.symbolic.num_nodes > 20
    _check_case(case)


@settings(max_examples=30)
@given(symbolic_cases())
def test_symbolic_text_round_trip_is_exact(case: SymbolicCase) -> None:
    text = case.symbolic.script()
    again = ik.parse(text)
    assert again.script() == text
    assert ik.structural_equal(again["main"], case.symbolic)
    assert ik.structural_hash(again["main"]) == ik.structural_hash(case.symbolic)


@settings(max_examples=20)
@given(symbolic_cases())
def test_symbolic_pickle_round_trip_verifies(case: SymbolicCase) -> None:
    loaded = pickle.loads(pickle.dumps(case.symbolic, protocol=5))
    assert loaded.shapes == case.symbolic.shapes
    assert ik.structural_equal(loaded, case.symbolic)
    _check_types("main", loaded, None)  # the type sweep over the symbolic rules


def test_structural_equality_sees_the_variables() -> None:
    def build(upper: int, name: str = "b") -> ik.Function:
        bb = ik.GraphBuilder("main")
        b = bb.dim(name, 1, upper)
        return bb.finish([bb.exp(bb.param("x", (b, 3), "float32"))])

    assert ik.structural_equal(build(8), build(8))
    assert not ik.structural_equal(build(8), build(9))
    assert not ik.structural_equal(build(8), build(8, "c"))
    assert ik.structural_hash(build(8)) != ik.structural_hash(build(9))


def _two_inputs() -> ik.Function:
    bb = ik.GraphBuilder("main")
    b, s = bb.dim("batch", 1, 8), bb.dim("seq", 2)
    x = bb.param("x", (b, s), "float32")
    y = bb.param("y", (2 * b + 1, s), "float32")
    return bb.finish([bb.concat(x, y, axis=0)])


def test_interpret_binds_dims_and_runs() -> None:
    f = _two_inputs()
    x, y = np.ones((3, 4), np.float32), np.zeros((7, 4), np.float32)
    (out,) = ik.interpret(f, x, y)
    assert out.shape == (10, 4)


@pytest.mark.parametrize(("x_shape", "y_shape", "match"), [
    ((9, 4), (19, 4), r"batch = 9 \(from input 0 \('x'\) axis 0\) is outside its bounds "
                      r"\[1, 8\]"),
    ((3, 1), (7, 1), r"seq = 1 .* outside its bounds \[2, inf\]"),
    ((3, 4), (7, 5), r"input 1 \('y'\) axis 1 is 5, but seq = 4 from input 0 \('x'\) axis 1"),
    ((3, 4), (8, 4), r"input 1 \('y'\) axis 0 is 8, but 2\*batch \+ 1 = 7 for batch = 3"),
    ((3, 4, 1), (7, 4), r"input 0 \('x'\) must have shape \(batch, seq\), got \(3, 4, 1\)"),
])
def test_interpret_names_the_dim_of_a_contradiction(x_shape: tuple[int, ...],
                                                    y_shape: tuple[int, ...],
                                                    match: str) -> None:
    f = _two_inputs()
    with pytest.raises(ValueError, match=match):
        ik.interpret(f, np.ones(x_shape, np.float32), np.ones(y_shape, np.float32))


def test_interpret_binds_a_variable_from_an_expression_and_refuses_non_solutions() -> None:
    bb = ik.GraphBuilder("main")
    n = bb.dim("n")
    f = bb.finish([bb.relu(bb.param("x", (2 * n + 1,), "float32"))])
    (out,) = ik.interpret(f, np.ones(7, np.float32))
    assert out.shape == (7,)
    with pytest.raises(ValueError, match=r"is 6, which is not 2\*n \+ 1 for any integer n"):
        ik.interpret(f, np.ones(6, np.float32))


def test_interpret_accepts_a_zero_dim_within_its_bounds() -> None:
    bb = ik.GraphBuilder("main")
    h = bb.dim("h", 0, 10)
    x = bb.param("x", (h,), "float32")
    f = bb.finish([bb.reshape(x, shape=(h, 1))])
    (out,) = ik.interpret(f, np.ones(0, np.float32))
    assert out.shape == (0, 1)
