"""Simplify folds integer operators of two constants in Python (``_INT_FOLDS``), where it
otherwise asks the interpreter: the two must agree on every dtype, at the wrap edges."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from irkernel import tir
from irkernel.tir import dtype as dt
from irkernel.tir.interp import evaluate
from passes.tir.simplify import simplify_expr

OPS = [tir.Add, tir.Sub, tir.Mul, tir.Min, tir.Max, tir.FloorDiv, tir.FloorMod]


@st.composite
def int_pairs(draw):
    dtype = draw(st.sampled_from(["int8", "int16", "int32", "int64", "uint8", "uint16"]))
    lo, hi = dt.int_range(dtype)
    edge = st.sampled_from([lo, lo + 1, -1, 0, 1, hi - 1, hi]).filter(lambda v: lo <= v <= hi)
    value = st.one_of(edge, st.integers(lo, hi))
    return dtype, draw(value), draw(value)


@settings(max_examples=300, deadline=None)
@given(case=int_pairs(), op=st.sampled_from(OPS))
def test_folded_constants_are_the_interpreters(case, op) -> None:
    dtype, a, b = case
    e = op(tir.IntImm(a, dtype), tir.IntImm(b, dtype))
    folded = simplify_expr(e)
    assert isinstance(folded, tir.IntImm) and folded.dtype == dtype
    assert folded.value == evaluate(e)[0].item()
