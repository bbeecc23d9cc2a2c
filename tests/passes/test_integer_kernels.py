"""IntegerKernels: exact 8-bit matmuls and convs call int32 kernels, bit for bit the
interpreter.

Random shapes, activation types (uint8/int8), zero points, weight ranges (int8, and
uint8-like columns that need a shift), per-tensor and per-column scales, float32 and
float64 accumulators; convs of random shapes, strides, padding and dilation; the AVX2
build (vpmaddubsw/vpmaddwd) against the host's (VNNI on this machine); and the matmuls
and convs the pass must leave alone.
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


def _rewritten(mod: ik.IRModule, kernel: str = "int_matmul") -> bool:
    return any(name.startswith(kernel) for name in passes.IntegerKernels()(mod).functions)


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
    assert passes.IntegerKernels()(mod) is mod


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


def _conv_module(x_shape, x_dtype, zx, w, strides, padding, dilation, scale, zy,
                 groups=1, acc="float32"):
    """``conv(astype(x) - zx, w)``, a per-channel bias and requantization to uint8, as
    the ONNX frontend imports QLinearConv."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", x_shape, x_dtype)
    a = bb.call("subtract", bb.call("astype", x, dtype=acc), bb.const(np.asarray(zx, acc)))
    y = bb.call("conv", a, bb.const(w.astype(acc)), strides=strides, padding=padding,
                dilation=dilation, groups=groups)
    o = w.shape[0]
    y = bb.call("add", y, bb.const(np.arange(o, dtype=acc).reshape(o, 1, 1) * 7 - 30))
    y = bb.call("multiply", y, bb.const(np.asarray(scale, np.float32).reshape(-1, 1, 1)))
    y = bb.call("astype", bb.call("add", bb.call("round", y), bb.const(np.float32(zy))),
                dtype="uint8")
    return ik.IRModule({"main": bb.finish([y])})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_integer_conv_equals_the_interpreter(data) -> None:
    draw = data.draw
    c, o = draw(st.integers(1, 13)), draw(st.integers(2, 37))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = draw(st.integers(kh + 2, 12)), draw(st.integers(kw + 2, 12))
    strides = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), 1)
    padding = tuple(draw(st.integers(0, 2)) for _ in range(4))
    x_dtype = draw(st.sampled_from(["uint8", "int8"]))
    zx = draw(st.integers(0, 255) if x_dtype == "uint8" else st.integers(-128, 127))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    weights = rng.integers(-128, 128, (o, c, kh, kw))
    scale = rng.random(o) * 1e-3 if draw(st.booleans()) else np.float32(2e-3)
    if (h + padding[0] + padding[2] - dilation[0] * (kh - 1) - 1) < 0:
        return
    mod = _conv_module((draw(st.integers(1, 2)), c, h, w), x_dtype, zx, weights, strides,
                       padding, dilation, scale, 100)
    x = _input(rng, mod["main"].node_type(0)[1], x_dtype)
    assert _rewritten(mod, "int_conv2d")
    (want,) = ik.interpret(mod, x)
    (got,) = _build(mod)["main"](x)
    np.testing.assert_array_equal(got, want)


def test_the_integer_conv_takes_its_requantization_in_its_stores() -> None:
    rng = np.random.default_rng(8)
    mod = _conv_module((1, 8, 10, 10), "uint8", 7, rng.integers(-128, 128, (20, 8, 3, 3)),
                       (1, 1), (1, 1, 1, 1), (1, 1), 1e-3, 5)
    ex = _build(mod)
    assert ex["main"].num_kernels == 1
    tir = ex.get_source("tir")
    assert "T.cast(\"uint8x" in tir  # the conversion to uint8 happens in the vector stores
    x = _input(rng, (1, 8, 10, 10), "uint8")
    np.testing.assert_array_equal(ex["main"](x)[0], ik.interpret(mod, x)[0])
    if _ORDER.index(host_target().isa) >= _ORDER.index("avx2"):
        np.testing.assert_array_equal(_build(mod, "avx2")["main"](x)[0], ex["main"](x)[0])


@pytest.mark.parametrize("case", ["groups", "uint8_weights", "fractional"])
def test_leaves_convs_it_does_not_take(case) -> None:
    rng = np.random.default_rng(9)
    w = rng.integers(-128, 128, (6, 4 if case != "groups" else 2, 3, 3)).astype(np.float64)
    if case == "uint8_weights":
        w[0, 0, 0, 0] = 200
    if case == "fractional":
        w[0, 0, 0, 0] = 0.25
    mod = _conv_module((1, 4, 8, 8), "uint8", 3, w, (1, 1), (1, 1, 1, 1), (1, 1), 1e-3, 0,
                       groups=2 if case == "groups" else 1)
    assert passes.IntegerKernels()(mod) is mod
