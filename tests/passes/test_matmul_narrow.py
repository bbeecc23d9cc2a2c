"""Matmuls of a narrow N or a short K, through the whole build, against NumPy and the
reference interpreter (issue 31: matmul at every shape).

* a narrow N with a transposed B (``a @ w.T``, N under two vectors, any number of rows):
  dot products along K in blocks of rows (``passes/topi/matmul_dot.py``);
* a short K (at most ``matmul_tiles.SHORT_K``): tasks over row chunks, each writing whole rows
  of C and reading B in place, unpacked or packed at build time (``matmul._schedule``).

Random shapes (hypothesis) with dimensions from 1, primes and tile +- 1, float32 and
float64, every register-file width, 2-d, rows-flattened, equal-batch and transposed
forms, a parameter or constant B; results must not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from passes.legalize_ops import LegalizeOps
from passes.topi.matmul_tiles import SHORT_K

#: 1, primes, and tile edges for 4-, 8- and 16-lane vectors and 4- or 6-row blocks.
EDGES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 15, 16, 17, 31, 33, 63, 65, 97, 127)
NARROW = (1, 2, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17, 31)
SHORT = tuple(range(1, SHORT_K + 1))


def _module(a_shape, b_shape, dtype, a_t: bool, b_t: bool, b_value=None):
    bb = ik.GraphBuilder("main")
    a = bb.param("a", a_shape, dtype)
    b = bb.const(b_value) if b_value is not None else bb.param("b", b_shape, dtype)

    def swap(x, rank):
        return bb.call("permute_dims", x, axes=(*range(rank - 2), rank - 1, rank - 2))
    y = bb.matmul(swap(a, len(a_shape)) if a_t else a, swap(b, len(b_shape)) if b_t else b)
    return ik.IRModule({"main": bb.finish([y])})


def _check(a_shape, b_shape, dtype, a_t, b_t, bits, const_b, target: str = "") -> None:
    rng = np.random.default_rng(sum(a_shape) * 31 + sum(b_shape))
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    mod = _module(a_shape, b_shape, dtype, a_t, b_t, b if const_b else None)
    args = [a] if const_b else [a, b]
    config = {"topi.vector_bits": bits, "runtime.generic_max_elements": 0}
    if target:  # an ISA level: its own register file and lanes, not only a vector width
        config = {"target": target, "runtime.generic_max_elements": 0}
    with transform.PassContext(config=config):
        fn = runtime.build(mod)["main"]
    k = a_shape[-2] if a_t else a_shape[-1]
    want = (np.swapaxes(a, -1, -2) if a_t else a) @ (np.swapaxes(b, -1, -2) if b_t else b)
    tol = dict(rtol=1e-4, atol=1e-4 * k) if dtype == "float32" else \
        dict(rtol=1e-10, atol=1e-10 * k)
    results, previous = [], runtime.get_num_threads()
    try:
        for threads in (1, 2):
            runtime.set_num_threads(threads)
            results.append(fn(*args)[0])
    finally:
        runtime.set_num_threads(previous)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], want, **tol)
    np.testing.assert_allclose(results[0], ik.interpret(mod, *args)[0], **tol)


@st.composite
def narrow_cases(draw: st.DrawFn):
    """``a @ b.T`` (or ``a.T @ b.T``) with N narrow and any M."""
    m = draw(st.one_of(st.sampled_from(EDGES), st.integers(1, 300)))
    k = draw(st.one_of(st.sampled_from(EDGES), st.integers(1, 300)))
    n = draw(st.sampled_from(NARROW))
    a_t = draw(st.booleans())
    lead = draw(st.sampled_from([(), (2,), (3, 2)]))
    a_shape = (*lead, *((k, m) if a_t else (m, k)))
    return (a_shape, (n, k), draw(st.sampled_from(["float32", "float64"])), a_t,
            draw(st.sampled_from([256, 512])))


@settings(max_examples=30, deadline=None)
@given(case=narrow_cases())
def test_narrow_n_with_a_transposed_b(case) -> None:
    a_shape, b_shape, dtype, a_t, bits = case
    _check(a_shape, b_shape, dtype, a_t, True, bits, False)


@st.composite
def short_cases(draw: st.DrawFn):
    """A short K, every form: 2-d, rows flattened, equal batches, a transposed A, a
    parameter or constant B."""
    form = draw(st.sampled_from(["2d", "rows", "batch"]))
    m = draw(st.one_of(st.sampled_from(EDGES), st.integers(1, 400)))
    n = draw(st.one_of(st.sampled_from(EDGES), st.integers(1, 400)))
    k = draw(st.sampled_from(SHORT))
    a_t = draw(st.booleans())
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    a_core = (k, m) if a_t else (m, k)
    a_shape = a_core if form == "2d" else (*batch, *a_core)
    b_shape = (*batch, k, n) if form == "batch" else (k, n)
    const_b = form != "batch" and draw(st.booleans())
    return (a_shape, b_shape, draw(st.sampled_from(["float32", "float64"])), a_t,
            draw(st.sampled_from([128, 256, 512])), const_b)


@settings(max_examples=40, deadline=None)
@given(case=short_cases())
def test_short_k_every_form(case) -> None:
    a_shape, b_shape, dtype, a_t, bits, const_b = case
    _check(a_shape, b_shape, dtype, a_t, False, bits, const_b)


@pytest.mark.parametrize(("a_shape", "b_shape", "b_t", "schedule"), [
    ((54, 2039), (9, 2039), True, "matmul_dot"),     # narrow N, many rows: dot products
    ((25, 197), (13, 197), True, "matmul_dot"),
    ((431, 300), (3, 300), True, "matmul_dot"),      # below 4 columns: no longer canonical
    ((540, 8), (9, 8), True, "matmul"),              # K under a vector: packed panels
    ((54, 300), (64, 300), True, "matmul"),          # N of four vectors: packed panels
    ((3502, 3), (3, 1639), False, "matmul"),         # a short K: row chunks
    ((1021, 5), (5, 2), False, "matmul"),            # and under 4 columns: one narrow tile
    ((300, 500), (3, 500), True, "matmul_dot"),      # 3 columns: 8-row blocks
])
def test_schedule_chosen(a_shape, b_shape, b_t, schedule) -> None:
    mod = _module(a_shape, b_shape, "float32", False, b_t)
    with transform.PassContext(config={"runtime.generic_max_elements": 0,
                                       "topi.vector_bits": 512}):
        out = LegalizeOps()(mod)
    main = out["main"]
    callees = [out[dict(main.attr_table[int(a)])["callee"]]
               for kind, a in zip(main.kind.tolist(), main.attr_id.tolist(), strict=True)
               if kind == ik.ops.OP_CALL_TIR]
    assert [c.attrs["schedule"] for c in callees] == [schedule]


@pytest.mark.parametrize("bits", [256, 512])
@pytest.mark.parametrize(("a_shape", "b_shape", "a_t", "b_t", "const_b"), [
    ((54, 2039), (9, 2039), False, True, False),
    ((2039, 54), (9, 2039), True, True, False),
    ((9, 3), (3, 1982), False, False, True),
    ((3, 3502), (3, 1639), True, False, False),
    ((5, 107, 6), (5, 6, 6), False, False, False),
    ((3, 67, 8), (8, 129), False, False, True),
])
def test_weak_shapes_of_the_sweep(a_shape, b_shape, a_t, b_t, const_b, bits) -> None:
    """The sweep's weak cases (bench/README.md), float32 and float64."""
    for dtype in ("float32", "float64"):
        _check(a_shape, b_shape, dtype, a_t, b_t, bits, const_b)


@pytest.mark.parametrize(("a_shape", "b_shape", "a_t", "b_t", "const_b"), [
    ((54, 2039), (9, 2039), False, True, False),
    ((6, 17), (628, 17), False, True, False),
    ((3, 3502), (3, 1639), True, False, False),
    ((2, 44, 1079), (2, 1079, 20), False, False, False),
    ((1633, 19), (19, 14), False, False, True),
])
def test_built_for_avx2(a_shape, b_shape, a_t, b_t, const_b) -> None:
    """Built for x86-64-v3 (AVX2: 8 lanes, 16 registers; runs on any newer host)."""
    for dtype in ("float32", "float64"):
        _check(a_shape, b_shape, dtype, a_t, b_t, 0, const_b, "x86-64-v3")


@pytest.mark.parametrize("bits", [128, 256, 512])
def test_equal_batches_of_one_batch_and_few_rows(bits) -> None:
    """``a[1, 1, K] @ b[1, K, N]`` (found by hypothesis): a 3-d B is read through its batch
    index, never by the 2-d streamed-rows schedule (which indexed ``x0`` with 2 indices)."""
    _check((1, 1, 32), (1, 32, 128), "float32", False, False, bits, False)
    _check((1, 3, 40), (1, 40, 200), "float64", False, False, bits, False)
