"""1x1 convs on small maps vectorized over output channels (``passes.topi.conv_channels``).

The kernel itself against the interpreter on random maps (1x1..16x16), channel counts
that are no multiple of the vector (tail blocks, tail pixel tiles), strides 1 and 2,
float32 and float64, at 256 and 512 bits; whole builds with a constant weight and fused
epilogues (bias + relu6, a residual add) against the interpreter and bit for bit against
the same build with ``PackConstantWeights`` off (the implicit GEMM: the same fmas in the
same order); the cost rule on mobilenet_v2's shapes; an AVX2 (x86-64-v3) build; and the
same bits at one and two threads.
"""

from __future__ import annotations

import numpy as np
import pytest
from e2e_helpers import assert_close_to_interpreter
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.target import cpu_target
from passes.topi.conv_channels import (
    channels_tile,
    channels_worth,
    conv_channels,
    pack_channels,
)

OFF = {"disabled_pass": ["PackConstantWeights"]}
GENERIC_OFF = {"runtime.generic_max_elements": 0}


def _out(xs, strides, kernel=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1)):
    return tuple((xs[2 + a] + pads[a] + pads[2 + a] - dil[a] * (kernel[a] - 1) - 1)
                 // strides[a] + 1 for a in range(2))


def _module(xs, w, strides, epilogue="none", bias=None, pads=(0, 0, 0, 0), dil=(1, 1)):
    """``main(x[, r]) = epilogue(conv(x, W))`` with the constant ``W``."""
    dtype = str(w.dtype)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", xs, dtype)
    y = bb.conv(x, bb.const(w), strides=list(strides), padding=list(pads),
                dilation=list(dil), groups=1)
    if epilogue in ("bias_relu6", "bias_relu6_residual"):
        y = bb.call("add", y, bb.const(bias.reshape(-1, 1, 1)))
        y = bb.call("minimum", bb.call("maximum", y, bb.const(np.array(0, dtype))),
                    bb.const(np.array(6, dtype)))
    if epilogue in ("residual", "bias_relu6_residual"):
        r = bb.param("r", (xs[0], w.shape[0], *_out(xs, strides, w.shape[2:], pads, dil)),
                     dtype)
        y = bb.call("add", y, r)
    return ik.IRModule({"main": bb.finish([y])})


@st.composite
def cases(draw):
    """Maps 1x1..16x16, 1x1 kernels (half the cases) or up to 3x3 with padding and
    dilation, channels that are no multiple of the vector."""
    n = draw(st.integers(1, 2))
    c, o = draw(st.integers(1, 40)), draw(st.integers(1, 70))
    strides = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    if draw(st.booleans()):
        kernel, pads, dil = (1, 1), (0, 0, 0, 0), (1, 1)
    else:
        kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        pads = tuple(draw(st.integers(0, 1)) for _ in range(4))
        dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h, w = (draw(st.integers(max(1, dil[a] * (kernel[a] - 1) + 1 - pads[a] - pads[2 + a]),
                             16)) for a in range(2))
    return ((n, c, h, w), (o, c, *kernel), strides, pads, dil,
            draw(st.sampled_from(["float32", "float64"])), draw(st.sampled_from([256, 512])),
            draw(st.integers(0, 99)))


@settings(max_examples=40, deadline=None)
@given(case=cases())
def test_the_kernel_equals_the_interpreter(case) -> None:
    xs, ws, strides, pads, dil, dtype, bits, seed = case
    out = _out(xs, strides, ws[2:], pads, dil)
    key = (xs, ws, strides, pads[:2], pads[2:], dil, out, dtype, bits)
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    prim = conv_channels(*key)
    got = np.full((xs[0], ws[0], *out), np.nan, dtype)
    exe = runtime.build(prim.with_attr("global_symbol", "cc"), cache=False)
    exe["cc"](x, pack_channels(w, key), got)
    mod = _module(xs, w, strides, pads=pads, dil=dil)
    (want,) = ik.interpret(mod, x)
    (scale,) = ik.interpret(_module(xs, np.abs(w), strides, pads=pads, dil=dil), np.abs(x))
    eps = 1e-6 if dtype == "float32" else 1e-14
    assert np.all(np.abs(got - want) <= 4 * eps * scale + eps), np.abs(got - want).max()


#: (input, output channels, strides, kernel side, padding): 7x7 and 14x14 1x1 convs with
#: fewer channels than mobilenet_v2's where the cost rule still picks this form, a tail
#: block, a stride, a padded strided 3x3 conv (stride 1 would go to Winograd).
PICKED = [((1, 160, 7, 7), 96, (1, 1), 1, 0), ((1, 256, 14, 14), 48, (1, 1), 1, 0),
          ((2, 200, 7, 7), 70, (1, 1), 1, 0), ((1, 256, 13, 13), 128, (2, 2), 1, 0),
          ((1, 96, 13, 13), 64, (2, 2), 3, 1)]


@settings(max_examples=15, deadline=None)
@given(case=st.sampled_from(PICKED), dtype=st.sampled_from(["float32", "float64"]),
       bits=st.sampled_from([256, 512]),
       epilogue=st.sampled_from(["none", "bias_relu6", "residual", "bias_relu6_residual"]),
       seed=st.integers(0, 99))
def test_builds_pick_it_fuse_the_epilogue_and_equal_the_implicit_gemm(
        case, dtype, bits, epilogue, seed) -> None:
    xs, o, strides, k, pad = case
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((o, xs[1], k, k)).astype(dtype)
    bias = rng.standard_normal(o).astype(dtype)
    mod = _module(xs, w, strides, epilogue, bias, (pad,) * 4)
    inputs = [rng.standard_normal(xs).astype(dtype) * 2]
    if "residual" in epilogue:
        inputs.append(rng.standard_normal((xs[0], o, *_out(xs, strides, (k, k), (pad,) * 4)))
                      .astype(dtype))
    config = {"topi.vector_bits": bits, **GENERIC_OFF}
    with transform.PassContext(config=config):
        ex = runtime.build(mod, cache=False)
    with transform.PassContext(config=config, **OFF):
        gemm = runtime.build(mod, cache=False)
    source = ex.get_source("tir")
    assert source.count("@T.prim_func") == 1 and "'schedule': 'conv_channels'" in source
    assert "'schedule': 'conv_implicit_gemm'" in gemm.get_source("tir")
    got = ex["main"](*inputs)
    assert_close_to_interpreter(mod, inputs, got, "conv_channels")
    np.testing.assert_array_equal(got[0], gemm["main"](*inputs)[0])


def test_an_avx2_build_picks_it_and_equals_the_interpreter() -> None:
    rng = np.random.default_rng(5)
    xs, o = (1, 96, 7, 7), 44
    w = rng.standard_normal((o, 96, 1, 1)).astype(np.float32)
    mod = _module(xs, w, (1, 1), "bias_relu6", rng.standard_normal(o).astype(np.float32))
    x = rng.standard_normal(xs).astype(np.float32)
    with transform.PassContext(config={"target": "x86-64-v3", **GENERIC_OFF}):
        ex = runtime.build(mod, cache=False)
    assert "'schedule': 'conv_channels'" in ex.get_source("tir")
    assert "'tile': '6x16'" in ex.get_source("tir")  # 6 pixels x 2 vectors of 8 lanes
    assert_close_to_interpreter(mod, [x], ex["main"](x), "avx2")


def test_the_cost_rule_on_mobilenet_v2() -> None:
    """Zen 4 with AVX-512 (one 512-bit FMA a cycle): every 7x7 conv and the long
    reductions on 14x14 take this form; the short ones (64 and 96 input channels, where
    the scattered store costs more than the GEMM's 28 wasted columns of 224) keep the
    GEMM; grouped convs and maps of 28x28 or of whole vectors never take it."""
    zen4 = cpu_target("host").__class__(
        name="zen4", llvm_cpu="znver4", llvm_features="", isa="avx512", vnni=True,
        amx=False, vector_bits=512, vector_registers=32, fma_units=1, l1d=32768,
        l2=1 << 20, l3=32 << 20, cores=1)

    def worth(c, o, side, columns, kernel=1, groups=1, pad=0):
        return channels_worth((1, c, side, side), (o, c // groups, kernel, kernel), groups,
                              "float32", (1, 1), (pad, pad), (pad, pad), (side, side), columns,
                              zen4)

    for c, o in ((160, 960), (960, 160), (960, 320), (320, 1280), (576, 160)):
        assert worth(c, o, 7, 64), (c, o)
    for c, o in ((384, 64), (384, 96), (576, 96)):
        assert worth(c, o, 14, 224), (c, o)
    for c, o in ((64, 384), (96, 576)):
        assert not worth(c, o, 14, 224), (c, o)
    # 3x3 convs with padding: the GEMM's wide grid has 2 more columns a row, and this
    # form gathers K = 9 C rows first: resnet18's on 7x7 (when Winograd does not take
    # it), squeezenet1_1's expand on 13x13 (224 columns for 169 pixels)
    assert worth(512, 512, 7, 64, kernel=3, pad=1)
    assert worth(64, 256, 13, 224, kernel=3, pad=1)
    assert not worth(160, 960, 7, 64, groups=2)
    assert not worth(160, 960, 28, 800)
    assert not worth(160, 960, 8, 64)  # 64 pixels fill the GEMM's lanes


def _key(xs, ws, out):
    return (xs, ws, (1, 1), (0, 0), (0, 0), (1, 1), out, "float32", 512)


def test_tiles_and_packing() -> None:
    assert channels_tile(960, 49, "float32", 512) == (3, 8)
    assert channels_tile(960, 49, "float32", 256) == (2, 6)
    assert channels_tile(20, 49, "float32", 512) == (2, 8)  # two vectors cover 20
    assert channels_tile(960, 3, "float64", 512) == (4, 3)
    o, c = 37, 5  # 512 bits float32: blocks of 3 x 16, nothing full; a tail of 48
    w = np.arange(o * c, dtype=np.float32).reshape(o, c, 1, 1)
    packed = pack_channels(w, _key((1, c, 4, 4), (o, c, 1, 1), (4, 4)))
    assert packed.shape == (c * 48,)
    tail = packed.reshape(c, 48)
    np.testing.assert_array_equal(tail[:, :o], w[:, :, 0, 0].T)
    assert not tail[:, o:].any()
    o = 100  # two full blocks of 48, then a tail of 4 padded to 16
    w = np.arange(o * c, dtype=np.float32).reshape(o, c, 1, 1)
    packed = pack_channels(w, _key((1, c, 7, 7), (o, c, 1, 1), (7, 7)))
    assert packed.shape == (c * (96 + 16),)
    np.testing.assert_array_equal(packed[:c * 48].reshape(c, 48), w[:48, :, 0, 0].T)
    np.testing.assert_array_equal(packed[c * 48:c * 96].reshape(c, 48), w[48:96, :, 0, 0].T)
    np.testing.assert_array_equal(packed[c * 96:].reshape(c, 16)[:, :4], w[96:, :, 0, 0].T)
    assert not packed[c * 96:].reshape(c, 16)[:, 4:].any()
    with pytest.raises(ValueError, match="the weight has shape"):
        pack_channels(w[:5], _key((1, c, 7, 7), (o, c, 1, 1), (7, 7)))


def test_bitwise_the_same_at_one_and_two_threads() -> None:
    rng = np.random.default_rng(3)
    xs = (1, 160, 7, 7)
    w = rng.standard_normal((320, 160, 1, 1)).astype(np.float32)
    mod = _module(xs, w, (1, 1))
    x = rng.standard_normal(xs).astype(np.float32)
    ex = runtime.build(mod, cache=False)
    assert "conv_channels" in ex.get_source("tir")
    before = runtime.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            runtime.set_num_threads(threads)
            results.append(ex["main"](x)[0])
    finally:
        runtime.set_num_threads(before)
    assert np.array_equal(results[0].view(np.uint32), results[1].view(np.uint32))
