"""The blocked transpose (permute_dims moving the inner axis) against the interpreter."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from passes.topi.transpose import BLOCK, MIN_ELEMENTS, blocked_ok


@st.composite
def cases(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    ndim = draw(st.integers(2, 4))
    shape = [draw(st.integers(1, 3)) for _ in range(ndim)]
    # two axes large enough to be tiled, off the tile edge
    for axis in draw(st.permutations(range(ndim)))[:2]:
        shape[axis] = draw(st.sampled_from([BLOCK - 1, BLOCK, BLOCK + 5, 3 * BLOCK + 7, 130]))
    perm = tuple(draw(st.permutations(range(ndim))))
    dtype = draw(st.sampled_from(["float32", "float64", "int32", "bool"]))
    return tuple(shape), perm, dtype


@settings(max_examples=25, deadline=None)
@given(case=cases())
def test_permute_dims_equals_the_interpreter(case) -> None:
    shape, perm, dtype = case
    bb = ik.GraphBuilder("main")
    y = bb.call("permute_dims", bb.param("x", shape, dtype), axes=perm)
    mod = ik.IRModule({"main": bb.finish([y])})
    x = (np.arange(np.prod(shape)) % 251).astype(dtype).reshape(shape)
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        got = runtime.build(mod)["main"](x)[0]
    np.testing.assert_array_equal(got, ik.interpret(mod, x)[0])


def test_which_permutations_are_blocked() -> None:
    assert blocked_ok((300, 200), (1, 0))
    assert not blocked_ok((300, 200, 4), (1, 0, 2))   # inner axis stays: a contiguous copy
    assert not blocked_ok((8, 8), (1, 0))             # small: the canonical copy
    assert MIN_ELEMENTS > 64


def test_a_large_transpose_runs_the_blocked_kernel() -> None:
    bb = ik.GraphBuilder("main")
    y = bb.call("permute_dims", bb.param("x", (300, 201), "float32"), axes=(1, 0))
    mod = ik.IRModule({"main": bb.finish([y])})
    x = np.random.default_rng(0).standard_normal((300, 201)).astype(np.float32)
    ex = runtime.build(mod)
    np.testing.assert_array_equal(ex["main"](x)[0], x.T)
    assert "permute_dims" in ex.get_source("tir") and "T.If" in ex.get_source("tir")
