"""The short path of a graph call (``GraphExecutor._run_fast``) and ``runtime.address``.

The short path takes inputs that need nothing and must agree with the general path on
everything else: it declines (the general path copies a strided or misaligned input, or
raises naming the argument), so results and errors are the same either way.
"""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import runtime
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
