"""The scheduled matmul through the whole build, against the reference interpreter.

Random shapes (hypothesis) for every form LegalizeOps schedules: 2-d, ``x[..., M, K] @
w[K, N]`` (rows flattened, read and written through the batch indices) and equal batch
shapes (one task per batch and column panel); each at every register-file width
(``topi.vector_bits``: SSE, AVX2, AVX-512 tiles, whatever the host), with row and column
tails, and with a bias + relu epilogue that FuseTIR folds into the tile's store.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from passes.topi.matmul import MIN_WORK, scheduled_batch_matmul


@st.composite
def matmul_cases(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], str, int, bool]:
    form = draw(st.sampled_from(["2d", "rows", "batch"]))
    m, n, k = (draw(st.integers(1, 40)) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    a = (m, k) if form == "2d" else (*batch, m, k)
    b = (*batch, k, n) if form == "batch" else (k, n)
    dtype = draw(st.sampled_from(["float32", "float64"]))
    bits = draw(st.sampled_from([128, 256, 512]))
    return a, b, dtype, bits, draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(case=matmul_cases())
def test_scheduled_matmul_equals_the_interpreter(case) -> None:
    a_shape, b_shape, dtype, bits, epilogue = case
    bb = ik.GraphBuilder("main")
    a, b = bb.param("a", a_shape, dtype), bb.param("b", b_shape, dtype)
    y = bb.matmul(a, b)
    if epilogue:
        bias = bb.param("bias", b_shape[-1:], dtype)
        y = bb.call("relu", bb.call("add", y, bias))
    mod = ik.IRModule({"main": bb.finish([y])})
    rng = np.random.default_rng(sum(a_shape) * 31 + sum(b_shape))
    args = [rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)]
    if epilogue:
        args.append(rng.standard_normal(b_shape[-1:]).astype(dtype))
    want = ik.interpret(mod, *args)[0]
    with transform.PassContext(config={"topi.vector_bits": bits,
                                       "runtime.generic_max_elements": 0}):
        got = runtime.build(mod)["main"](*args)[0]
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * a_shape[-1])


def test_batched_forms_are_scheduled_or_declined() -> None:
    """Which forms get the schedule: flattened rows and equal batches do; broadcast
    batches and tiny problems take the canonical reduction."""
    assert scheduled_batch_matmul((2, 16, 64), (64, 128), "float32", 256) is not None
    assert scheduled_batch_matmul((8, 16, 32), (8, 32, 16), "float32", 256) is not None
    assert scheduled_batch_matmul((2, 16, 64), (1, 64, 128), "float32", 256) is None
    assert scheduled_batch_matmul((2, 4, 4), (4, 8), "float32", 256) is None  # < MIN_WORK
    assert MIN_WORK > 2 * 4 * 4 * 8
    assert scheduled_batch_matmul((2, 16, 64), (64, 128), "int32", 256) is None


def test_grouped_panels_pack_four_panels_per_task() -> None:
    """Wide B: each task packs four 16-column panels in one pass over B's rows (fewer
    page walks); 2-d and equal-batch forms, against NumPy on two threads."""
    from irkernel import tir

    cases = [((16, 64), (64, 1024)), ((2, 13, 40), (2, 40, 640))]
    previous = runtime.get_num_threads()
    runtime.set_num_threads(2)
    try:
        for a_shape, b_shape in cases:
            pf = scheduled_batch_matmul(a_shape, b_shape, "float32", 256)
            panels = [n.buffer for n in tir.post_order(pf.body)
                      if isinstance(n, tir.Allocate) and n.buffer.name == "panel"]
            assert [int(d.value) for d in panels[0].shape] == [4, a_shape[-1], 16]
            rng = np.random.default_rng(len(a_shape))
            a = rng.standard_normal(a_shape).astype(np.float32)
            b = rng.standard_normal(b_shape).astype(np.float32)
            out = np.empty((*a_shape[:-1], b_shape[-1]), np.float32)
            runtime.build(pf.with_attr("global_symbol", "mm"))["mm"](a, b, out)
            np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4 * a_shape[-1])
    finally:
        runtime.set_num_threads(previous)


#: Shapes off every tile: prime rows (197: 32 row blocks and a 5-row tail at 6 x 4
#: vectors), GEMV rows with a column tail of whole vectors plus a part vector (1 x 1000),
#: a column count one past a panel (129), few columns and many rows (row chunks: one
#: column task), and K of 1.
AWKWARD = [(197, 24, 200), (1, 64, 1000), (13, 7, 129), (300, 16, 17), (50, 33, 95),
           (97, 1, 130), (8, 40, 33),
           # few rows, B streamed by rows (tasks over column ranges, a narrower last one)
           (3, 17, 700), (4, 5, 257), (2, 130, 4096)]


@pytest.mark.parametrize("bits", [128, 256, 512])
def test_awkward_shapes_are_exact_and_the_same_at_every_thread_count(bits: int) -> None:
    """Row and column tails, the zero-padded tail panel and row chunks, against the
    interpreter; outputs bitwise equal at 1 and 2 threads (each output element is
    accumulated by one task in K order)."""
    previous = runtime.get_num_threads()
    try:
        for m, k, n in AWKWARD:
            bb = ik.GraphBuilder("main")
            y = bb.matmul(bb.param("a", (m, k), "float32"), bb.param("b", (k, n), "float32"))
            mod = ik.IRModule({"main": bb.finish([y])})
            rng = np.random.default_rng(m * 7 + n)
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((k, n)).astype(np.float32)
            want = ik.interpret(mod, a, b)[0]
            with transform.PassContext(config={"topi.vector_bits": bits,
                                               "runtime.generic_max_elements": 0}):
                fn = runtime.build(mod)["main"]
            outs = []
            for threads in (1, 2):
                runtime.set_num_threads(threads)
                outs.append(fn(a, b)[0])
            np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4 * k)
            assert outs[0].tobytes() == outs[1].tobytes(), (m, k, n)
    finally:
        runtime.set_num_threads(previous)


def test_tiles_do_not_depend_on_the_divisors_of_m() -> None:
    """A prime M gets the register tile of a round one (the rows past it form a tail),
    and fewer rows than a tile widen it (GEMV)."""
    from irkernel.target import host_target
    from passes.topi.matmul_tiles import register_tile as _tile

    avx512, avx2 = host_target().with_vector_bits(512), host_target().with_vector_bits(256)
    assert _tile(197, 2304, 768, "float32", avx512) == _tile(192, 2304, 768, "float32", avx512)
    assert _tile(509, 1531, 1531, "float32", avx2) == (6, 16)
    mr, nr = _tile(1, 1000, 512, "float32", avx512)
    assert mr == 1 and nr >= 4 * 16


def test_few_rows_stream_b_and_take_the_epilogue() -> None:
    """A batch-1 linear layer with bias and relu: the row-streamed schedule, its store
    carrying FuseTIR's epilogue, against the interpreter."""
    from passes.topi.matmul_rows import rows_ok

    from irkernel.target import host_target
    assert rows_ok(1, 1, 1000, host_target(), "float32")
    assert not rows_ok(1, 5, 1000, host_target(), "float32")
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", (1, 300), "float32"), bb.param("w", (300, 1000), "float32")
    y = bb.call("relu", bb.call("add", bb.matmul(x, w), bb.param("b", (1000,), "float32")))
    mod = ik.IRModule({"main": bb.finish([y])})
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((1, 300), (300, 1000), (1000,))]
    ex = runtime.build(mod)
    np.testing.assert_allclose(ex["main"](*args)[0], ik.interpret(mod, *args)[0],
                               rtol=1e-4, atol=1e-3)
    assert "racc" in ex.get_source("tir")
