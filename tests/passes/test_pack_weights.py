"""Constant matmul weights packed at build time (``PackConstantWeights``).

Random shapes (hypothesis) with M, K and N drawn from 1, primes and register tile +- 1,
every register-file width, float32 and float64, rows flattened over batch dims, A read
through a transpose, and fused epilogues (bias + relu, an erf GELU): the packed build
against NumPy/the reference interpreter, and bit for bit against the same build with
the pass disabled (both accumulate each output in K order with exact fmas). Plus the
pass's bookkeeping: a weight shared by matmuls of different row counts, a weight also read
by another op, and the packing's layout itself.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.tir.function import PrimFunc
from passes.topi.matmul_tiles import packed_length, packed_tile, tail_width
from passes.topi.matmul_packed import pack_b
from passes.topi.vector import current_target
from runtime.build import graph_pipeline

#: 1, primes, and tile edges for 4- 8- and 16-lane vectors (rows up to the 8-row packed
#: tile and past it, 6-row tiles, 4- and 8-vector panels).
EDGES = (1, 2, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17, 31, 33, 63, 64, 65, 97, 127, 129)
OFF = {"disabled_pass": ["PackConstantWeights"]}


def _module(a_shape, w, a_t=False, epilogue="none", bias=None):
    """``main(a) = epilogue(A @ W)`` with W the constant ``w`` and A the parameter or its
    last two axes swapped."""
    bb = ik.GraphBuilder("main")
    dtype = str(w.dtype)
    a = bb.param("a", a_shape, dtype)
    if a_t:
        a = bb.call("permute_dims", a, axes=(*range(len(a_shape) - 2), len(a_shape) - 1,
                                              len(a_shape) - 2))
    y = bb.matmul(a, bb.const(w))
    if epilogue == "bias_relu":
        y = bb.call("relu", bb.call("add", y, bb.const(bias)))
    elif epilogue == "gelu":
        half = bb.call("multiply", y, bb.const(np.array(0.5, dtype)))
        scaled = bb.call("multiply", y, bb.const(np.array(1 / math.sqrt(2), dtype)))
        y = bb.call("multiply", half, bb.call("add", bb.call("erf", scaled),
                                         bb.const(np.array(1.0, dtype))))
    return ik.IRModule({"main": bb.finish([y])})


def _schedules(mod, **ctx):
    with transform.PassContext(opt_level=3, **ctx):
        low = graph_pipeline()(mod)
    return sorted(f.attrs.get("schedule", "") for f in low.functions.values()
                  if isinstance(f, PrimFunc))


@st.composite
def packed_cases(draw: st.DrawFn):
    dim = st.one_of(st.sampled_from(EDGES), st.integers(1, 200))
    m, k, n = draw(dim), draw(dim), draw(dim)
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    a_t = draw(st.booleans())
    core = (k, m) if a_t else (m, k)
    return ((*lead, *core), (k, n), a_t, draw(st.sampled_from(["float32", "float64"])),
            draw(st.sampled_from([128, 256, 512])),
            draw(st.sampled_from(["none", "bias_relu", "gelu"])))


@settings(max_examples=40, deadline=None)
@given(case=packed_cases())
def test_packed_weights_equal_numpy_and_the_unpacked_build(case) -> None:
    a_shape, (k, n), a_t, dtype, bits, epilogue = case
    rng = np.random.default_rng(sum(a_shape) * 7 + k * 3 + n)
    w = rng.standard_normal((k, n)).astype(dtype)
    bias = rng.standard_normal(n).astype(dtype)
    a = rng.standard_normal(a_shape).astype(dtype)
    mod = _module(a_shape, w, a_t, epilogue, bias)
    config = {"topi.vector_bits": bits, "runtime.generic_max_elements": 0}
    with transform.PassContext(config=config):
        got = runtime.build(mod)["main"](a)[0]
    with transform.PassContext(config=config, **OFF):
        unpacked = runtime.build(mod)["main"](a)[0]
    want = ik.interpret(mod, a)[0]
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * k)
    np.testing.assert_array_equal(got, unpacked)  # the same fmas in the same order


def test_linear_layers_read_packed_weights_and_fuse_their_epilogue() -> None:
    """Rows 1, 4, 16 and 197 with a bias + relu: one fused kernel each, scheduled
    ``matmul_packed``; with the pass disabled, the schedules that pack per call."""
    rng = np.random.default_rng(0)
    for m in (1, 4, 16, 197):
        w = rng.standard_normal((96, 200)).astype(np.float32)
        mod = _module((m, 96), w, epilogue="bias_relu", bias=w[0])
        assert _schedules(mod) == ["matmul_packed"], m
        assert "matmul_packed" not in _schedules(mod, **OFF)


def test_a_weight_shared_by_matmuls_of_two_row_counts_is_packed_for_each() -> None:
    """Each (weight, tile) pair gets its own packed constant; a weight also returned
    stays as it is beside them."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((40, 70)).astype(np.float32)
    bb = ik.GraphBuilder("main")
    a1, a2 = bb.param("a1", (3, 40), "float32"), bb.param("a2", (21, 40), "float32")
    wc = bb.const(w)
    mod = ik.IRModule({"main": bb.finish([bb.matmul(a1, wc), bb.matmul(a2, wc),
                                          bb.call("relu", wc)])})
    x1, x2 = rng.standard_normal((3, 40)).astype(np.float32), \
        rng.standard_normal((21, 40)).astype(np.float32)
    with transform.PassContext(opt_level=3):
        low = graph_pipeline()(mod)
    main = low["main"]
    sizes = sorted(int(main.shapes.size[s]) for s, k in zip(main.shape_id, main.kind)
                   if k == ik.ir.ops.OP_CONST)
    assert w.size in sizes and sum(s >= w.size for s in sizes) == 3  # two packed + w
    y1, y2, r = runtime.build(mod)["main"](x1, x2)
    np.testing.assert_allclose(y1, x1 @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y2, x2 @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(r, np.maximum(w, 0))


@pytest.mark.parametrize("rows,k,n", [(1, 5, 1000), (4, 7, 96), (16, 3, 65), (2, 9, 7),
                                      (9, 4, 81)])
def test_packing_lays_out_panels_then_the_zero_padded_tail(rows, k, n) -> None:
    w = np.arange(k * n, dtype=np.float32).reshape(k, n)
    key = ((rows, k), (k, n), "float32", False)
    with transform.PassContext(config={"topi.vector_bits": 512}):
        packed = pack_b(w, key)
        _, nr, lanes = packed_tile(rows, n, k, "float32", current_target())
    assert packed.shape == (packed_length(n, k, nr, lanes),)
    full, tail = divmod(n, nr)
    for p in range(full):
        np.testing.assert_array_equal(packed[p * k * nr:(p + 1) * k * nr].reshape(k, nr),
                                      w[:, p * nr:(p + 1) * nr])
    rest = packed[full * k * nr:].reshape(k, -1)
    np.testing.assert_array_equal(rest[:, :tail], w[:, full * nr:])
    assert not rest[:, tail:].any() and rest.shape[1] == tail_width(tail, lanes)


def test_packing_a_weight_of_the_wrong_shape_is_an_error() -> None:
    with pytest.raises(ValueError, match="B has shape"):
        pack_b(np.zeros((3, 4), np.float32), ((2, 5), (5, 4), "float32", False))
