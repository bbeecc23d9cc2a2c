"""The calling convention: every bad argument is a clear TypeError/ValueError naming it.

Nothing runs when an argument is rejected (the output stays untouched), so bad
input can never reach native code and crash the process.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import runtime
from irkernel.tir import script as T

n = T.var("int64")


@T.prim_func
def axpy(x: T.Buffer((n,), "float32", align=64), y: T.Buffer((n,), "float32"),
         out: T.Buffer((n,), "float32"), alpha: T.float32, count: T.int32, flag: T.bool):
    for i in T.serial(n):
        with T.If(flag & (T.cast("int32", i) < count)):
            out[i] = alpha * x[i] + y[i]


@T.prim_func
def cols(m: T.Buffer((4, 3), "int64", strides=(8, 2)), out: T.Buffer((4,), "int64")):
    for i in T.serial(4):
        out[i] = m[i, 0] + m[i, 2]


@functools.cache
def _kernels() -> runtime.Executable:
    import irkernel as ik

    return runtime.build(ik.IRModule({"axpy": axpy, "cols": cols}))


def _arrays(size: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = runtime.empty(size, np.float32, align=64)
    x[:] = np.arange(size)
    shared = np.full(2 * size, -7.0, np.float32)  # out is a view: overlaps can be made
    return x, np.ones(size, np.float32), shared[:size]


def test_good_call_and_keywords() -> None:
    x, y, out = _arrays()
    _kernels()["axpy"](x, y, out, 2.0, 10, True)
    np.testing.assert_array_equal(out[:10], 2 * x[:10] + 1)
    np.testing.assert_array_equal(out[10:], -7.0)
    _kernels()["axpy"](x, y, out=out, alpha=np.float32(3), count=np.int64(16), flag=np.True_)
    np.testing.assert_array_equal(out, 3 * x + 1)
    assert _kernels()["axpy"].signature == (
        "axpy(x: float32[n], y: float32[n], out: float32[n] (written), alpha: float32, "
        "count: int32, flag: bool)")


@pytest.mark.parametrize(("mutate", "error", "match"), [
    (lambda a: {**a, "x": a["x"].astype(np.float64)}, TypeError,
     "axpy: argument 'x' has dtype float64, expected float32"),
    (lambda a: {**a, "y": list(a["y"])}, TypeError,
     "argument 'y' must be a numpy.ndarray .float32.n.., got list"),
    (lambda a: {**a, "y": a["y"][:8]}, ValueError,
     "argument 'y' dimension 0 is 8, but n = 16 from an earlier argument"),
    (lambda a: {**a, "out": a["out"].reshape(4, 4)}, ValueError,
     r"argument 'out' has 2 dimension\(s\) \(4, 4\), expected 1"),
    (lambda a: {**a, "y": np.ones(32, np.float32)[::2]}, ValueError,
     "argument 'y' is not C-contiguous"),
    (lambda a: {**a, "x": runtime.empty(17, np.float32, align=64)[1:]}, ValueError,
     "argument 'x' data address 0x[0-9a-f]+ is not 64-byte aligned"),
    (lambda a: {**a, "out": a["x"]}, ValueError,
     "arguments 'x' and 'out' overlap in memory"),
    (lambda a: {**a, "y": a["out"].base[8:24] if a["out"].base is not None else None,
                "out": a["out"]}, ValueError, "arguments 'y' and 'out' overlap"),
    (lambda a: {**a, "alpha": "2"}, TypeError, "argument 'alpha' must be a float32 number"),
    (lambda a: {**a, "alpha": True}, TypeError, "argument 'alpha' must be a float32 number"),
    (lambda a: {**a, "count": 2.0}, TypeError, r"argument 'count' must be an int \(int32\)"),
    (lambda a: {**a, "count": 2**31}, ValueError, "argument 'count' = 2147483648 does not fit"),
    (lambda a: {**a, "flag": 1}, TypeError, "argument 'flag' must be a bool"),
])
def test_bad_arguments(mutate, error: type[Exception], match: str) -> None:
    x, y, out = _arrays()
    args = mutate({"x": x, "y": y, "out": out, "alpha": 2.0, "count": 16, "flag": True})
    before = args["out"].copy() if isinstance(args["out"], np.ndarray) else None
    with pytest.raises(error, match=match):
        _kernels()["axpy"](*args.values())
    if before is not None:
        np.testing.assert_array_equal(args["out"], before)  # nothing ran


def test_read_only_output_is_rejected() -> None:
    x, y, out = _arrays()
    out.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'out' is read-only, but the kernel writes"):
        _kernels()["axpy"](x, y, out, 2.0, 16, True)
    x.flags.writeable = False  # inputs may be read-only
    out.flags.writeable = True
    _kernels()["axpy"](x, y, out, 2.0, 16, True)


def test_argument_count_and_keyword_errors() -> None:
    x, y, out = _arrays()
    kernel = _kernels()["axpy"]
    with pytest.raises(TypeError, match=r"missing argument\(s\) count, flag \(got 4 of 6\)"):
        kernel(x, y, out, 2.0)
    with pytest.raises(TypeError, match="takes 6 arguments, got 7"):
        kernel(x, y, out, 2.0, 1, True, 0)
    with pytest.raises(TypeError, match="unknown argument 'beta'"):
        kernel(x, y, out, 2.0, 1, True, beta=1)
    with pytest.raises(TypeError, match="argument 'x' given twice"):
        kernel(x, y, out, 2.0, 1, True, x=x)


def test_declared_strides_are_checked() -> None:
    base = np.arange(64, dtype=np.int64).reshape(4, 16)
    view = base[:, :6:2]  # element strides (16, 2): declared (8, 2)
    out = np.zeros(4, np.int64)
    with pytest.raises(ValueError, match="argument 'm' stride 0 is 16, expected 8"):
        _kernels()["cols"](view, out)
    good = np.arange(32, dtype=np.int64).reshape(4, 8)[:, :6:2]
    _kernels()["cols"](good, out)
    np.testing.assert_array_equal(out, good[:, 0] + good[:, 2])


def test_unknown_kernel_and_source_format() -> None:
    with pytest.raises(KeyError, match=r"no function 'nope' .functions: axpy, cols."):
        _kernels()["nope"]
    with pytest.raises(ValueError, match="unknown format 'bitcode'"):
        _kernels().get_source("bitcode")
