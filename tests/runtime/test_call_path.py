"""The short path of a graph call (the native guard, ``runtime/call_guard.py``) and
``runtime.address``.

The short path takes inputs that need nothing and must agree with the general path on
everything else: it declines (the general path copies a strided or misaligned input, or
raises naming the argument), so results and errors are the same either way.
"""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import runtime
from runtime import call_guard
from runtime.address import data_address


def test_data_address_is_the_ctypes_address() -> None:
    base = np.arange(120, dtype=np.float64).reshape(10, 12)
    for arr in (base, base[2:, 3:], base.T, base[::2], np.ones((), np.float32),
                np.zeros(7, np.int8)[1:]):
        assert data_address(arr) == arr.ctypes.data


@pytest.fixture(scope="module")
def matmul_add():
    bb = ik.GraphBuilder("main")
    a, b = bb.param("a", (9, 20), "float32"), bb.param("b", (20, 24), "float32")
    y = bb.call("add", bb.matmul(a, b), bb.param("c", (24,), "float32"))
    ex = runtime.build(ik.IRModule({"main": bb.finish([y])}))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((9, 20), (20, 24), (24,))]
    return ex["main"], args


def test_the_short_path_applies_and_agrees_with_numpy(matmul_add) -> None:
    fn, (a, b, c) = matmul_add
    assert fn._guard is not None
    want = a @ b + c
    np.testing.assert_allclose(fn(a, b, c)[0], want, rtol=1e-5, atol=1e-5)
    out = [np.full((9, 24), np.nan, np.float32)]
    got = fn(a, b, c, out=out)
    assert got[0] is out[0]
    np.testing.assert_allclose(out[0], want, rtol=1e-5, atol=1e-5)
    # declined: a strided input and a misaligned one are copied by the general path
    strided = np.empty((9, 40), np.float32)[:, ::2]
    strided[...] = a
    raw = np.empty(a.nbytes + 4, np.uint8)
    shifted = raw[(-raw.ctypes.data) % 16 + 4:][: a.nbytes].view(np.float32).reshape(a.shape)
    shifted[...] = a
    for x in (strided, shifted):
        np.testing.assert_allclose(fn(x, b, c)[0], want, rtol=1e-5, atol=1e-5)


def test_the_short_path_declines_what_the_general_path_rejects(matmul_add) -> None:
    fn, (a, b, c) = matmul_add
    with pytest.raises(TypeError, match="dtype"):
        fn(a.astype(np.float64), b, c)
    with pytest.raises(ValueError, match="shape"):
        fn(a[:8], b, c)
    with pytest.raises(TypeError):
        fn(a, b)
    out = np.empty((9, 24), np.float32)
    shared = np.empty(9 * 20 + 9 * 24, np.float32)
    shared[:180] = a.reshape(-1)
    with pytest.raises(ValueError, match="overlaps input 0"):
        fn(shared[:180].reshape(9, 20), b, c, out=[shared[160:376].reshape(9, 24)])
    big = np.empty(9 * 24 + 24, np.float32)
    with pytest.raises(ValueError, match="overlaps input 2"):
        fn(a, b, big[:24], out=[big[:9 * 24].reshape(9, 24)])
    with pytest.raises(ValueError, match="writeable"):
        frozen = np.empty((9, 24), np.float32)
        frozen.setflags(write=False)
        fn(a, b, c, out=[frozen])
    with pytest.raises(TypeError, match="out must be a list"):
        fn(a, b, c, out=out)


def test_concurrent_short_calls_take_separate_bindings(matmul_add) -> None:
    from concurrent.futures import ThreadPoolExecutor

    fn, (a, b, c) = matmul_add
    inputs = [(a * k, b, c) for k in range(1, 9)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda args: fn(*args)[0], inputs * 20))
    for (x, y, z), got in zip(inputs * 20, results, strict=True):
        np.testing.assert_allclose(got, x @ y + z, rtol=1e-5, atol=1e-4)


def _general_path_calls(fn, monkeypatch) -> list[int]:
    """Counts the calls that reach the general path (``GraphExecutor.run``)."""
    count = [0]
    general = fn.run

    def counted(*args, **kwargs):
        count[0] += 1
        return general(*args, **kwargs)

    monkeypatch.setattr(fn, "run", counted)
    return count


def test_the_layout_probe_agrees_with_this_numpy() -> None:
    assert call_guard.layout() is not None
    assert call_guard.available()


def test_plain_calls_never_reach_the_general_path(matmul_add, monkeypatch) -> None:
    fn, (a, b, c) = matmul_add
    count = _general_path_calls(fn, monkeypatch)
    want = a @ b + c
    frozen = a.copy()
    frozen.setflags(write=False)  # inputs need not be writeable
    for _ in range(3):
        np.testing.assert_allclose(fn(a, b, c)[0], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(fn(frozen, b, c)[0], want, rtol=1e-5, atol=1e-5)
        for out in ((np.empty((9, 24), np.float32),), [np.empty((9, 24), np.float32)]):
            got = fn(a, b, c, out=out)
            assert type(got) is list and got[0] is out[0]
            np.testing.assert_allclose(out[0], want, rtol=1e-5, atol=1e-5)
    assert count[0] == 0


def test_each_declined_case_reaches_the_general_path(matmul_add, monkeypatch) -> None:
    """One thing wrong at a time (so the guard's check of that thing is what declines):
    the general path runs, converting or raising as it always has."""
    fn, (a, b, c) = matmul_add
    count = _general_path_calls(fn, monkeypatch)
    want = a @ b + c
    fortran = np.asfortranarray(a)
    assert fortran.shape == a.shape and fortran.dtype is a.dtype
    for x in (fortran, a.view(np.ndarray)[:, :].copy(order="F")):
        np.testing.assert_allclose(fn(x, b, c)[0], want, rtol=1e-5, atol=1e-5)
    assert count[0] == 2
    not_contiguous = np.empty((9, 48), np.float32)[:, ::2]
    frozen = np.empty((9, 24), np.float32)
    frozen.setflags(write=False)
    for out, error, message in ((not_contiguous, ValueError, "C-contiguous"),
                                (frozen, ValueError, "writeable"),
                                (np.empty((9, 24), np.float64), TypeError, "dtype"),
                                (np.empty((24, 9), np.float32), ValueError, "shape"),
                                (np.empty((9, 24, 1), np.float32), ValueError, "shape")):
        with pytest.raises(error, match=message):
            fn(a, b, c, out=[out])
    with pytest.raises(TypeError, match="out has 2 arrays"):
        fn(a, b, c, out=[np.empty((9, 24), np.float32)] * 2)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        fn(a, b, c, out=[[[0.0] * 24] * 9])
    with pytest.raises(TypeError):
        fn(a.tolist(), b, c)


def test_empty_and_scalar_shapes_take_the_short_path(monkeypatch) -> None:
    bb = ik.GraphBuilder("main")
    x, y = bb.param("x", (0, 5), "float32"), bb.param("y", (), "float32")
    ex = runtime.build(ik.IRModule({"main": bb.finish([bb.call("add", x, y)])}))
    fn = ex["main"]
    assert fn._guard is not None
    count = _general_path_calls(fn, monkeypatch)
    got = fn(np.empty((0, 5), np.float32), np.full((), 2.0, np.float32))
    assert got[0].shape == (0, 5)
    out = [np.empty((0, 5), np.float32)]
    assert fn(np.empty((0, 5), np.float32), np.ones((), np.float32), out=out)[0] is out[0]
    assert count[0] == 0


def test_a_long_table_runs_in_slices_after_the_guard(monkeypatch) -> None:
    """Past ``FIRST_SLICE`` launches the guard only checks and binds; the executor then
    runs the launches in slices (Ctrl-C stops a long run)."""
    import sys
    from pathlib import Path

    from irkernel.testing import random_inputs
    from runtime import executor, launcher

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import graph_families

    mod = graph_families.FAMILIES["wide"](600, 0)
    fn = runtime.build(mod, cache=False)["main"]
    assert fn._guard is not None and fn._guard.sliced
    assert fn.num_kernels > launcher.FIRST_SLICE
    steps: list[tuple[int, int]] = []
    run_steps = executor.run_steps

    def traced(context, begin, end, wide=False):
        steps.append((begin, end))
        run_steps(context, begin, end, wide)

    monkeypatch.setattr(executor, "run_steps", traced)
    count = _general_path_calls(fn, monkeypatch)
    inputs = random_inputs(mod["main"], seed=2, special_values=False)
    for got, ref in zip(fn(*inputs), ik.interpret(mod, *inputs), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert steps == [(0, fn.num_kernels)] and count[0] == 0


def test_state_nbytes_counts_the_guard(matmul_add) -> None:
    fn, _ = matmul_add
    binding = fn._take()
    try:
        assert binding.guard_context.nbytes == fn._guard.context_nbytes
    finally:
        fn._free.append(binding)
    table, one = fn.state_nbytes
    assert table >= fn.launch_table.nbytes + fn._guard.spec.nbytes
    assert one >= fn._guard.context_nbytes
