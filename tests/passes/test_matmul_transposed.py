"""A matmul reading its operands through a transpose (``a @ b.T``, ``a.T @ b``, attention's
``q @ k.T``): LegalizeOps folds the ``permute_dims`` into the scheduled matmul, and a
transposed constant becomes a constant at build time, so no transpose kernel runs.

Random shapes (hypothesis) with dimensions drawn from 1, primes and register tile +- 1,
every form (2-d, rows flattened, equal batches), every register-file width, runtime and
constant B, against NumPy and the reference interpreter.
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
from passes.topi.matmul import scheduled_transposed_matmul

#: 1, primes, and tile edges for 4- 8- and 16-lane vectors (6-row tiles, 4-vector panels).
EDGES = (1, 2, 3, 5, 6, 7, 13, 15, 16, 17, 31, 33, 63, 64, 65, 97, 127, 129)


def _swap(bb: ik.GraphBuilder, x, rank: int):
    return bb.call("permute_dims", x, axes=(*range(rank - 2), rank - 1, rank - 2))


def _module(a_shape, b_shape, a_t: bool, b_t: bool, b_value=None, epilogue=False):
    """``main(a[, b]) = A @ B`` where A (B) is the parameter, or its last two axes swapped;
    ``b_value``: B's source as a constant."""
    bb = ik.GraphBuilder("main")
    a = bb.param("a", a_shape, "float32")
    b = bb.const(b_value) if b_value is not None else bb.param("b", b_shape, "float32")
    y = bb.matmul(_swap(bb, a, len(a_shape)) if a_t else a,
                  _swap(bb, b, len(b_shape)) if b_t else b)
    if epilogue:
        y = bb.call("relu", y)
    return ik.IRModule({"main": bb.finish([y])})


def _numpy(a, b, a_t: bool, b_t: bool, epilogue=False):
    y = (np.swapaxes(a, -1, -2) if a_t else a) @ (np.swapaxes(b, -1, -2) if b_t else b)
    return np.maximum(y, 0) if epilogue else y


@st.composite
def transposed_cases(draw: st.DrawFn):
    form = draw(st.sampled_from(["2d", "rows", "batch"]))
    dim = st.one_of(st.sampled_from(EDGES), st.integers(1, 150))
    m, k, n = draw(dim), draw(dim), draw(dim)
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    a_t, b_t = draw(st.sampled_from([(False, True), (True, False), (True, True)]))
    a_core = (k, m) if a_t else (m, k)
    b_core = (n, k) if b_t else (k, n)
    a_shape = a_core if form == "2d" else (*batch, *a_core)
    b_shape = (*batch, *b_core) if form == "batch" else b_core
    return (a_shape, b_shape, a_t, b_t, draw(st.sampled_from([128, 256, 512])),
            draw(st.booleans()), draw(st.booleans()))


@settings(max_examples=40, deadline=None)
@given(case=transposed_cases())
def test_transposed_operands_equal_numpy_and_the_interpreter(case) -> None:
    a_shape, b_shape, a_t, b_t, bits, const_b, epilogue = case
    rng = np.random.default_rng(sum(a_shape) * 7 + sum(b_shape))
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    mod = _module(a_shape, b_shape, a_t, b_t, b if const_b else None, epilogue)
    args = [a] if const_b else [a, b]
    want = ik.interpret(mod, *args)[0]
    with transform.PassContext(config={"topi.vector_bits": bits,
                                       "runtime.generic_max_elements": 0}):
        got = runtime.build(mod)["main"](*args)[0]
    k = a_shape[-2] if a_t else a_shape[-1]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * k)
    np.testing.assert_allclose(got, _numpy(a, b, a_t, b_t, epilogue), rtol=1e-4,
                               atol=1e-4 * k)


def _callees(mod: ik.IRModule) -> list:
    """The PrimFuncs a legalized ``main`` calls, in node order."""
    main = mod["main"]
    return [mod[dict(main.attr_table[int(a)])["callee"]]
            for kind, a in zip(main.kind.tolist(), main.attr_id.tolist(), strict=True)
            if kind == ik.ops.OP_CALL_TIR]


@pytest.mark.parametrize(("a_shape", "b_shape", "a_t", "b_t", "schedule"), [
    ((11, 90), (291, 90), False, True, "matmul"),          # packed from B's rows
    ((3, 90), (291, 90), False, True, "matmul_dot"),       # few rows: dot products
    ((90, 11), (90, 291), True, False, "matmul"),
    ((90, 11), (291, 90), True, True, "matmul"),
    ((1, 4, 50, 16), (1, 4, 50, 16), False, True, "matmul"),  # attention's q @ k.T
])
def test_the_transpose_folds_into_the_matmul(a_shape, b_shape, a_t, b_t, schedule) -> None:
    """One call_tir, to the schedule named, reading the parameters themselves: the
    transposes are gone."""
    mod = _module(a_shape, b_shape, a_t, b_t)
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        out = LegalizeOps()(mod)
    (callee,) = _callees(out)
    assert callee.attrs["schedule"] == schedule
    main = out["main"]
    assert list(main.extra[main.a0[-1]: main.a0[-1] + 2]) == list(main.params)


def test_a_transpose_read_elsewhere_stays() -> None:
    """The transpose is also an output: the matmul still reads its source, the transpose
    still runs for the output."""
    bb = ik.GraphBuilder("main")
    a, b = bb.param("a", (20, 64), "float32"), bb.param("b", (48, 64), "float32")
    bt = _swap(bb, b, 2)
    mod = ik.IRModule({"main": bb.finish([bb.matmul(a, bt), bt])})
    out = LegalizeOps()(mod)
    assert [c.attrs.get("op_name") for c in _callees(out)] == ["permute_dims", "matmul"]
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((20, 64), (48, 64))]
    got = runtime.build(mod)["main"](*args)
    np.testing.assert_allclose(got[0], args[0] @ args[1].T, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got[1], args[1].T)


def test_a_transposed_constant_is_transposed_at_build_time() -> None:
    """A weight stored ``(out, in)``, larger than FoldConstant folds: it becomes a constant
    in ``(in, out)`` order, so the matmul is the plain one and no kernel transposes."""
    w = np.random.default_rng(2).standard_normal((1000, 512)).astype(np.float32)
    mod = _module((1, 512), w.shape, False, True, w)
    out = LegalizeOps()(mod)
    (callee,) = _callees(out)
    assert callee.attrs["op_name"] == "matmul"
    consts = [out["main"].consts.value(int(c), out["main"].shapes)
              for kind, c in zip(out["main"].kind.tolist(), out["main"].a0.tolist(),
                                 strict=True) if kind == ik.ops.OP_CONST]
    assert any(c.shape == (512, 1000) and np.array_equal(c, w.T) for c in consts)


def test_unscheduled_shapes_keep_the_transpose() -> None:
    """Too small for the schedule, or an integer matmul: the transpose stays a kernel and
    the canonical matmul reads it."""
    assert scheduled_transposed_matmul((2, 3), (4, 3), "float32", False, True) is None
    assert scheduled_transposed_matmul((40, 40), (40, 40), "int32", False, True) is None
    mod = _module((2, 3), (4, 3), False, True)
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        out = LegalizeOps()(mod)
    assert [c.attrs.get("op_name") for c in _callees(out)] == ["permute_dims", "matmul"]


def test_one_batch_of_one_row_reads_the_batch_index() -> None:
    """Equal batch shapes of one batch and one row (found by hypothesis): the packed
    schedule, with B's batch index, not the dot products of a 2-d B."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, 1, 64)).astype(np.float32)
    b = rng.standard_normal((1, 64, 64)).astype(np.float32)
    mod = _module(a.shape, b.shape, False, True)
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        got = runtime.build(mod)["main"](a, b)[0]
    np.testing.assert_allclose(got, a @ np.swapaxes(b, -1, -2), rtol=1e-4, atol=1e-4)
