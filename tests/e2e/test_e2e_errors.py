"""Bad inputs to a built executable: a clear TypeError/ValueError naming the parameter,
raised before any kernel runs. And an executor outliving its Executable stays valid."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import irkernel as ik
import runtime


def _module() -> ik.IRModule:
    helper = ik.GraphBuilder("helper", private=True)
    h = helper.param("h", (2, 3), "float32")
    helper_fn = helper.finish([helper.tanh(h)])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), "float32")
    s = bb.param("s", (), "float64")
    flag = bb.param("flag", (3,), "bool")
    y = bb.call_func("helper", bb.exp(x), dtype="float32", shape=(2, 3))
    z = bb.call("where", flag, y, bb.call("astype", s, dtype="float32"))
    return ik.IRModule({"main": bb.finish([z, bb.add(s, s)]), "helper": helper_fn})


X = np.ones((2, 3), np.float32)
FLAG = np.array([True, False, True])

BAD_CASES = [
    pytest.param((), TypeError, r"main takes 3 inputs \(x, s, flag\), got 0", id="none"),
    pytest.param((X, 1.0), TypeError, r"main takes 3 inputs \(x, s, flag\), got 2", id="few"),
    pytest.param((X, 1.0, FLAG, X), TypeError, "main takes 3 inputs", id="many"),
    pytest.param((X.astype(np.float64), 1.0, FLAG), TypeError,
                 r"main: input 0 \('x'\) must have dtype float32, got float64", id="dtype"),
    pytest.param((X, 1, FLAG), TypeError,
                 r"main: input 1 \('s'\) must have dtype float64, got int64", id="int-scalar"),
    pytest.param((X, 1.0, FLAG.astype(np.int32)), TypeError,
                 r"main: input 2 \('flag'\) must have dtype bool, got int32", id="bool"),
    pytest.param((X.T, 1.0, FLAG), ValueError,
                 r"main: input 0 \('x'\) must have shape \(2, 3\), got \(3, 2\)", id="shape"),
    pytest.param((X, np.array([1.0]), FLAG), ValueError,
                 r"main: input 1 \('s'\) must have shape \(\), got \(1,\)", id="rank"),
    pytest.param((object(), 1.0, FLAG), TypeError,
                 r"main: input 0 \('x'\) must have dtype float32, got object", id="object"),
    pytest.param((None, 1.0, FLAG), TypeError, r"input 0 \('x'\) must have dtype float32",
                 id="None"),
    pytest.param(("abc", 1.0, FLAG), TypeError, r"input 0 \('x'\) must have dtype float32",
                 id="str"),
    pytest.param(([[1.0], [1.0, 2.0]], 1.0, FLAG), TypeError,
                 r"main: input 0 \('x'\) is not convertible to an array", id="ragged"),
    pytest.param((np.ma.masked_array(X, mask=X > 0), 1.0, FLAG), TypeError,
                 r"main: input 0 \('x'\) is a masked array", id="masked"),
]


@pytest.fixture(scope="module")
def executable() -> runtime.Executable:
    return runtime.build(_module())


@pytest.mark.parametrize(("args", "error", "match"), BAD_CASES)
def test_bad_inputs_raise_before_anything_runs(executable, monkeypatch, args, error,
                                               match) -> None:
    main = executable["main"]
    ran: list[Any] = []
    monkeypatch.setattr(main, "run", lambda *a: ran.append(a))
    with pytest.raises(error, match=match):
        main(*args)
    assert not ran


def test_keyword_arguments_are_rejected(executable) -> None:
    with pytest.raises(TypeError, match="keyword"):
        executable["main"](X, 1.0, flag=FLAG)


def test_good_inputs_in_every_accepted_form(executable) -> None:
    mod = _module()
    want = ik.interpret(mod, X, np.float64(2.5), FLAG)
    strided = np.repeat(X, 2, axis=1)[:, ::2]
    for args in ((X, np.float64(2.5), FLAG), (X, 2.5, FLAG.tolist()),
                 (strided, np.array(2.5), FLAG)):
        got = executable["main"](*args)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_executor_outlives_its_executable() -> None:
    """Regression: runtime.build(mod)["main"] used to segfault once the Executable (and
    with it the JIT engine holding the machine code) was garbage collected."""
    mod = _module()
    main = runtime.build(mod, cache=False)["main"]
    gc.collect()
    got = main(X, 0.5, FLAG)
    want = ik.interpret(mod, X, np.float64(0.5), FLAG)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def _arena_module() -> ik.IRModule:
    """Two large intermediates (exp -> matmul -> sum): an arena of about 1 MB, which the
    allocator maps on its own and unmaps when it is freed."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (256, 256), "float64")
    y = bb.call("sum", bb.call("matmul", bb.exp(x), x), axis=1)
    return ik.IRModule({"main": bb.finish([y])})


def test_a_busy_executor_keeps_its_private_arena_alive() -> None:
    """Regression: when the executor's own arena was busy (a concurrent or nested call), the
    private arena was freed before its kernels ran (only raw pointers into it were kept):
    heap corruption, "The futex facility returned an unexpected error code", or a crash."""
    mod = _arena_module()
    ex = runtime.build(mod)
    main = ex["main"]
    assert ex.memory_plan("main").planned_bytes >= 2**20
    x = np.random.default_rng(6).standard_normal((256, 256)) / 16
    want = main(x)[0]
    busy = main._take()                   # as if another thread were running it
    try:
        for _ in range(3):
            np.testing.assert_array_equal(main(x)[0], want)
    finally:
        main._free.append(busy)
    np.testing.assert_allclose(want, ik.interpret(mod, x)[0], rtol=1e-9)


def test_concurrent_calls_with_parallel_kernels() -> None:
    import threading

    mod = _arena_module()
    main = runtime.build(mod)["main"]
    rng = np.random.default_rng(7)
    cases = [rng.standard_normal((256, 256)) / 16 for _ in range(3)]
    wants = [main(c)[0] for c in cases]
    errors: list[str] = []

    def work(k: int) -> None:
        for it in range(15):
            if not np.array_equal(main(cases[k % 3])[0], wants[k % 3]):
                errors.append(f"thread {k}, call {it}")
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
