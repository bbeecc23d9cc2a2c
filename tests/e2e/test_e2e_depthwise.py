"""Depthwise convs (``depthwise_flat``, vectorized along the flattened output plane; else
``plane_window``): against the interpreter with a fused bias + SiLU epilogue, channel counts
off the vector width, strides, dilations and asymmetric padding, at every register width."""
from __future__ import annotations

import numpy as np
import pytest
from e2e_helpers import assert_close_to_interpreter
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.testing import random_inputs
from passes.topi.conv import depthwise_ok
from passes.topi.depthwise_flat import flat_ok

CASES = [  # channels, map, kernel, stride, padding (t, l, b, r), dilation (7x7 kernels on
    # maps a vector wide run in row blocks, depthwise_rows)
    (1152, 7, 5, 1, (2, 2, 2, 2), 1),
    (37, 9, 3, 2, (1, 1, 1, 1), 1),
    (20, 6, 3, 1, (2, 2, 2, 2), 2),
    (19, 11, 3, 2, (0, 1, 1, 0), 1),
    (16, 16, 3, 1, (0, 0, 0, 0), 1),
    (96, 2, 7, 1, (3, 3, 3, 3), 1),  # taps reaching past a whole row (convnext on 2x2)
    (96, 24, 7, 1, (3, 3, 3, 3), 1),  # row blocks
    (24, 40, 3, 2, (1, 1, 1, 1), 1),  # phase rows copied one by one
    (40, 40, 5, 2, (2, 1, 2, 2), 1),  # row blocks over phase planes, asymmetric padding
    (16, 30, 3, 1, (1, 1, 1, 1), 1),  # the interior read from the image itself
    (64, 14, 7, 1, (3, 3, 3, 3), 1),  # one 16-lane vector a 14-wide row, into the next
    (40, 13, 5, 1, (2, 2, 2, 2), 1),
    (96, 7, 7, 1, (3, 3, 3, 3), 1),  # 7-wide rows in half vectors
]


@pytest.mark.parametrize("bits", [256, 512])
@pytest.mark.parametrize("case", CASES)
def test_small_map_depthwise_equals_the_interpreter(case, bits: int) -> None:
    c, h, k, s, pad, d = case
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, c, h, h), "float32")
    w = bb.param("w", (c, 1, k, k), "float32")
    b = bb.param("b", (1, c, 1, 1), "float32")
    y = bb.call("add", bb.call("conv", x, w, strides=(s, s), padding=pad, dilation=(d, d),
                               groups=c), b)
    y = bb.call("multiply", y, bb.call("sigmoid", y))
    mod = ik.IRModule({"main": bb.finish([y])})
    rng = np.random.default_rng(c + h)
    args = [rng.standard_normal(shape).astype(np.float32)
            for shape in ((1, c, h, h), (c, 1, k, k), (1, c, 1, 1))]
    with transform.PassContext(config={"topi.vector_bits": bits,
                                       "runtime.generic_max_elements": 0}):
        ex = runtime.build(mod)
    np.testing.assert_allclose(ex["main"](*args)[0], ik.interpret(mod, *args)[0],
                               rtol=1e-4, atol=1e-4)
    assert _schedule(ex) == ("other" if h in (11, 16) else "flat")


def _schedule(ex) -> str:
    """"flat" when the kernel is ``depthwise_flat`` or ``depthwise_rows``, else "other"."""
    tir = ex.get_source("tir")
    return "flat" if "depthwise_flat" in tir or "depthwise_rows" in tir else "other"


def _window_out(size: int, kernel: int, stride: int, pad: int, dil: int) -> int:
    return (size + pad - dil * (kernel - 1) - 1) // stride + 1


@st.composite
def depthwise_cases(draw):
    """A depthwise conv of random shape: any kernel up to 7, stride 1-3, dilation 1-2,
    asymmetric pads up to 3, maps up to 24 (the larger ones read the plane's interior
    directly), float32 or float64, batch 1-2, channels 1-40."""
    kernel = [draw(st.integers(1, 7)) for _ in range(2)]
    dil = [draw(st.integers(1, 2)) for _ in range(2)]
    pads = [draw(st.integers(0, 3)) for _ in range(4)]
    sizes = [draw(st.integers(max(1, dil[a] * (kernel[a] - 1) + 1 - pads[a] - pads[2 + a]),
                              24)) for a in range(2)]
    strides = [draw(st.integers(1, 3)) for _ in range(2)]
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 40))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    return (n, c, *sizes), (c, 1, *kernel), strides, pads, dil, dtype


def _depthwise_module(xs, ws, strides, pads, dil, dtype, epilogue: str) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, dtype), bb.param("w", ws, dtype)
    y = bb.conv(x, w, strides=strides, padding=pads, dilation=dil, groups=xs[1])
    out = (xs[0], xs[1], *(_window_out(xs[2 + a], ws[2 + a], strides[a],
                                        pads[a] + pads[2 + a], dil[a]) for a in range(2)))
    if epilogue == "bias_relu":
        y = bb.relu(bb.add(y, bb.param("b", (xs[1], 1, 1), dtype)))
    elif epilogue == "residual":
        y = bb.add(y, bb.param("r", out, dtype))
    elif epilogue == "silu":
        y = bb.call("multiply", y, bb.call("sigmoid", y))
    return ik.IRModule({"main": bb.finish([y])})


@settings(max_examples=40, deadline=None)
@given(case=depthwise_cases(), epilogue=st.sampled_from(["none", "bias_relu", "residual",
                                                         "silu"]),
       bits=st.sampled_from([256, 512]), seed=st.integers(0, 99))
def test_random_depthwise_equals_the_interpreter(case, epilogue, bits, seed) -> None:
    xs, ws, strides, pads, dil, dtype = case
    mod = _depthwise_module(xs, ws, strides, pads, dil, dtype, epilogue)
    inputs = random_inputs(mod, seed=seed)
    config = {"topi.vector_bits": bits, "runtime.generic_max_elements": 0}
    with transform.PassContext(config=config):
        ex = runtime.build(mod)
        out_hw = tuple(_window_out(xs[2 + a], ws[2 + a], strides[a], pads[a] + pads[2 + a],
                                   dil[a]) for a in range(2))
        flat = depthwise_ok(xs, ws, xs[1], dtype) and flat_ok(
            xs, ws[2:], tuple(strides), tuple(pads[:2]), out_hw, dtype)
    assert _schedule(ex) == ("flat" if flat else "other")
    assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), "depthwise")


@pytest.mark.parametrize("case", [((1, 3, 14, 14), 3, 1), ((1, 2, 24, 24), 5, 1),
                                  ((2, 3, 9, 9), 3, 2)])
def test_an_inf_in_the_next_row_stays_out_of_the_row_end(case) -> None:
    """A lane at a row's end reads the next row's first element for the taps past the edge;
    the column mask is a select, so an inf there is dropped, not turned into 0 * inf."""
    xs, k, s = case
    mod = _depthwise_module(xs, (xs[1], 1, k, k), [s, s], [k // 2] * 4, [1, 1], "float32",
                            "none")
    x = np.random.default_rng(0).standard_normal(xs).astype(np.float32)
    x[:, :, 3:, 0] = np.inf
    x[:, :, :4, -1] = -np.inf
    w = np.ones((xs[1], 1, k, k), np.float32)
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        ex = runtime.build(mod)
    assert _schedule(ex) == "flat"
    got, want = ex["main"](x, w)[0], ik.interpret(mod, x, w)[0]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


@st.composite
def banded_cases(draw):
    """A strided depthwise conv on a map of 16-48 pixels a side, computed in bands of output
    rows when ``topi.l1d_bytes`` is small (``depthwise_flat.band_rows``)."""
    kernel = [draw(st.integers(1, 5)) for _ in range(2)]
    dil = [draw(st.integers(1, 2)) for _ in range(2)]
    strides = [draw(st.integers(1, 3)), draw(st.integers(2, 3))]
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    sizes = [draw(st.integers(16, 48)) for _ in range(2)]
    if sizes[1] // strides[1] < 16:  # long phase rows: no whole-plane column split
        sizes[1] = 16 * strides[1] + draw(st.integers(0, 8))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 6))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    return (n, c, *sizes), (c, 1, *kernel), strides, pads, dil, dtype


@settings(max_examples=30, deadline=None)
@given(case=banded_cases(), epilogue=st.sampled_from(["none", "bias_relu", "residual",
                                                      "silu"]),
       bits=st.sampled_from([256, 512]), l1=st.sampled_from([512, 1024, 4096]),
       seed=st.integers(0, 99))
def test_banded_depthwise_equals_the_interpreter(case, epilogue, bits, l1, seed) -> None:
    """Bands of output rows over a plane larger than half of a (small) L1: every band's
    phase rows with their halo, the masked lanes at band edges, the last band's partial
    vector."""
    xs, ws, strides, pads, dil, dtype = case
    mod = _depthwise_module(xs, ws, strides, pads, dil, dtype, epilogue)
    inputs = random_inputs(mod, seed=seed)
    config = {"topi.vector_bits": bits, "runtime.generic_max_elements": 0,
              "topi.l1d_bytes": l1}
    with transform.PassContext(config=config):
        ex = runtime.build(mod)
    assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), "banded depthwise")


def test_a_large_strided_plane_runs_in_bands_that_fit_l1() -> None:
    """mobilenet_v2's 96-channel 112x112 stride-2 layer: bands of 16 output rows, a scratch
    of at most half of a 32 KiB L1 instead of the whole plane's phases (51 KB)."""
    from passes.topi.depthwise_flat import Taps, band_rows

    taps = Taps.of((3, 3), (2, 2), (1, 1), (1, 1), 56)
    assert band_rows(taps, 56, 32, 32 * 1024 // 4) == 16
    assert band_rows(taps, 56, 16, 32 * 1024 // 4) % 2 == 0     # AVX2 chunks: whole
    assert band_rows(Taps.of((3, 3), (2, 2), (1, 1), (1, 1), 28), 28, 32, 8192) == 0  # fits
    mod = _depthwise_module((1, 96, 112, 112), (96, 1, 3, 3), [2, 2], [1] * 4, [1, 1],
                            "float32", "bias_relu")
    inputs = random_inputs(mod, seed=1)
    with transform.PassContext(config={"topi.vector_bits": 512, "topi.l1d_bytes": 32768}):
        ex = runtime.build(mod)
    tir = ex.get_source("tir")
    sizes = [int(line.split("((")[1].split(",")[0]) for line in tir.splitlines()
             if "xpad = T.alloc_buffer" in line]
    assert sizes and max(sizes) * 4 <= 16 * 1024
    assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), "banded 96x112")
