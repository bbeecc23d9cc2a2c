"""IntegerMatmul: exact 8-bit matmuls call the int32 kernel, bit for bit the interpreter.

Random shapes, activation types (uint8/int8), zero points, weight ranges (int8, and
uint8-like columns that need a shift), per-tensor and per-column scales, float32 and
float64 accumulators; the AVX2 build (vpmaddubsw/vpmaddwd) against the host's (VNNI on
this machine); and the matmuls the pass must leave alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irkernel as ik
import passes
import runtime
from irkernel import transform
from irkernel.target import host_target

_ORDER = ("sse4.2", "avx2", "avx512")


def _module(x_shape, x_dtype, zx, c, acc="float32", scale=None, zy=None, out="uint8"):
    """``matmul(astype(x) - zx, c)`` then a requantization (or ``astype(int32)``), as
    the ONNX frontend imports QLinearMatMul / MatMulInteger."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", x_shape, x_dtype)
    a = bb.call("astype", x, dtype=acc)
    if zx is not None:
        a = bb.call("subtract", a, bb.const(np.asarray(zx, acc)))
    y = bb.matmul(a, bb.const(c.astype(acc)))
    if scale is None:
        y = bb.call("astype", y, dtype="int32")
    else:
        y = bb.call("multiply", bb.call("astype", y, dtype="float32"),
                    bb.const(np.asarray(scale, np.float32)))
        y = bb.call("add", bb.call("round", y), bb.const(np.float32(zy)))
        y = bb.call("astype", y, dtype=out)
    return ik.IRModule({"main": bb.finish([y])})


def _rewritten(mod: ik.IRModule) -> bool:
    return any(name.startswith("int_matmul") for name in passes.IntegerMatmul()(mod).functions)


def _input(rng, shape, dtype):
    lo, hi = (0, 256) if dtype == "uint8" else (-128, 128)
    x = rng.integers(lo, hi, shape).astype(dtype)
    flat = x.reshape(-1)
    flat[0], flat[-1] = lo, hi - 1  # the extremes
    return x


def _build(mod, level="host"):
    with transform.PassContext(config={"target": level, "runtime.generic_max_elements": 0}):
        return runtime.build(mod)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_integer_kernel_equals_the_interpreter(data) -> None:
    draw = data.draw
    rows = draw(st.lists(st.integers(1, 9), min_size=1, max_size=2))
    k, n = draw(st.integers(1, 70)), draw(st.integers(2, 70))
    x_dtype = draw(st.sampled_from(["uint8", "int8"]))
    zx = draw(st.one_of(st.none(), st.integers(-128, 255) if x_dtype == "uint8"
                        else st.integers(-128, 127)))
    weights = draw(st.sampled_from(["int8", "uint8", "mixed"]))
    per_column = draw(st.booleans())
    acc = draw(st.sampled_from(["float32", "float64"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    if weights == "int8":
        c = rng.integers(-128, 128, (k, n))
    elif weights == "uint8":  # uint8 weights minus a zero point of 0: columns need a shift
        c = rng.integers(0, 256, (k, n))
    else:  # uint8 weights minus per-column zero points
        c = rng.integers(0, 256, (k, n)) - rng.integers(0, 256, (1, n))
    scale = (rng.random(n) * 0.01 + 1e-4) if per_column else 0.003
    mod = _module((*rows, k), x_dtype, zx, c, acc, scale, zy=7)
    x = _input(rng, (*rows, k), x_dtype)
    (want,) = ik.interpret(mod, x)
    (got,) = _build(mod)["main"](x)
    np.testing.assert_array_equal(got, want)
    # taken exactly when the float matmul is exact and int32 holds it
    assert _rewritten(mod) == (_bound(x_dtype, zx, c) < (2**24 if acc == "float32" else 2**31))


def _bound(x_dtype, zx, c):
    lo, hi = (0, 255) if x_dtype == "uint8" else (-128, 127)
    z = zx or 0
    return max(abs(hi - z), abs(lo - z)) * int(np.abs(c).sum(0).max())


@pytest.mark.parametrize("x_dtype", ["uint8", "int8"])
def test_matmul_integer_int32_result(x_dtype) -> None:
    rng = np.random.default_rng(3)
    c = rng.integers(-128, 128, (45, 33))
    mod = _module((2, 5, 45), x_dtype, 3, c)
    assert _rewritten(mod)
    x = _input(rng, (2, 5, 45), x_dtype)
    (got,) = _build(mod)["main"](x)
    want = (x.astype(np.int64) - 3) @ c
    np.testing.assert_array_equal(got, want.astype(np.int32))


@pytest.mark.skipif(_ORDER.index(host_target().isa) < _ORDER.index("avx2"),
                    reason="needs an AVX2 CPU")
def test_avx2_and_host_builds_give_the_same_bits() -> None:
    rng = np.random.default_rng(11)
    c = rng.integers(-128, 128, (131, 77))
    c[:, 0] = -128  # pairs that saturate a plain vpmaddubsw against 255s
    mod = _module((19, 131), "uint8", 200, c, "float32", rng.random(77) * 1e-3, zy=128)
    x = _input(rng, (19, 131), "uint8")
    x[0] = 255
    host, avx2 = _build(mod), _build(mod, "avx2")
    assert "vpmaddubsw" in avx2.get_source("asm")
    if host_target().vnni:
        assert "vpdpbusd" in host.get_source("asm")
    (a,), (b,) = host["main"](x), avx2["main"](x)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, ik.interpret(mod, x)[0])


def test_the_requantization_fuses_into_the_integer_kernel() -> None:
    rng = np.random.default_rng(2)
    mod = _module((8, 64), "uint8", 5, rng.integers(-128, 128, (64, 48)), "float32",
                  0.002, zy=3)
    assert _build(mod)["main"].num_kernels == 1
    # small tensors too: the epilogue stays specialized to fuse (passes/small_epilogues.py)
    assert runtime.build(mod)["main"].num_kernels == 1


@pytest.mark.parametrize("case", ["fractional", "wide_column", "float32_bound", "float_x"])
def test_leaves_matmuls_that_are_not_exact_integers(case) -> None:
    rng = np.random.default_rng(1)
    c = rng.integers(-128, 128, (16, 8)).astype(np.float64)
    if case == "fractional":
        c[0, 0] = 0.5
    if case == "wide_column":
        c[0, 0], c[1, 0] = -200, 100
    k = 600 if case == "float32_bound" else 16  # 255 * 600 * 128 > 2**24
    if case == "float32_bound":
        c = np.full((k, 8), -128.0)
    if case == "float_x":
        bb = ik.GraphBuilder("main")
        x = bb.param("x", (4, 16), "float32")
        mod = ik.IRModule({"main": bb.finish([bb.matmul(x, bb.const(c.astype(np.float32)))])})
    else:
        mod = _module((4, k), "uint8", 0, c)
    assert not _rewritten(mod)
    assert passes.IntegerMatmul()(mod) is mod


def test_a_shared_weight_and_activation_stay_for_their_other_readers() -> None:
    rng = np.random.default_rng(6)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3, 20), "uint8")
    a = bb.call("subtract", bb.call("astype", x, dtype="float32"), bb.const(np.float32(9)))
    w = bb.const(rng.integers(-128, 128, (20, 6)).astype(np.float32))
    y = bb.matmul(a, w)
    mod = ik.IRModule({"main": bb.finish([y, bb.call("sum", a), bb.call("sum", w)])})
    assert _rewritten(mod)
    x_in = _input(rng, (3, 20), "uint8")
    want = ik.interpret(mod, x_in)
    got = _build(mod)["main"](x_in)
    for g, w_ in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w_)
