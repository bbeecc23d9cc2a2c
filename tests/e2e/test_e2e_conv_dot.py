"""Small-map convs as dot products over (channel, tap) (``passes.topi.conv_dot``): against
the interpreter on random grouped shapes (groups 1..C, odd group widths, maps 1x1..9x9,
strides, dilations, asymmetric padding, 1-D and 3-D), at both register widths; chosen by
LegalizeOps for RegNet-X's and GoogLeNet's small maps with the epilogue fused; bitwise
the same at one and two threads."""

from __future__ import annotations

import numpy as np
from e2e_helpers import assert_close_to_interpreter, build_and_run
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from passes.topi.conv import gemv_ok
from passes.topi.conv_dot import conv_dot_tile, dot_ok, scheduled_conv_dot


def _conv_module(xs, ws, attrs, epilogue: str = "none") -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, "float32"), bb.param("w", ws, "float32")
    y = bb.conv(x, w, **attrs)
    if epilogue == "bias_relu":
        bias = bb.param("b", (ws[0],) + (1,) * (len(xs) - 2), "float32")
        y = bb.relu(bb.add(y, bias))
    return ik.IRModule({"main": bb.finish([y])})


def _out_size(xs, ws, attrs) -> tuple[int, ...]:
    rank = len(xs) - 2
    pads, dil, strides = attrs["padding"], attrs["dilation"], attrs["strides"]
    return tuple((xs[2 + a] + pads[a] + pads[rank + a] - dil[a] * (ws[2 + a] - 1) - 1)
                 // strides[a] + 1 for a in range(rank))


@st.composite
def grouped(draw, rank: int = 2):
    """A grouped conv on a map of 1 to 9 pixels a side: groups 1..C, odd and even widths."""
    g = draw(st.integers(1, 6))
    cg, og = draw(st.integers(2, 7)), draw(st.integers(1, 7))
    kernel = [draw(st.integers(1, 3)) for _ in range(rank)]
    dil = [draw(st.integers(1, 2)) for _ in range(rank)]
    pads = [draw(st.integers(0, 2)) for _ in range(2 * rank)]
    strides = [draw(st.integers(1, 2)) for _ in range(rank)]
    sizes = [draw(st.integers(max(1, dil[a] * (kernel[a] - 1) + 1 - pads[a] - pads[rank + a]),
                              9)) for a in range(rank)]
    attrs = {"strides": strides, "padding": pads, "dilation": dil, "groups": g}
    return (draw(st.integers(1, 2)), g * cg, *sizes), (g * og, cg, *kernel), attrs


def _run_kernel(xs, ws, attrs, bits: int, seed: int) -> None:
    """The schedule itself (whatever ``dot_ok`` says) against the interpreter."""
    rank = len(xs) - 2
    out = _out_size(xs, ws, attrs)
    prim = scheduled_conv_dot(xs, ws, attrs["groups"], attrs["strides"],
                              attrs["padding"][:rank], attrs["dilation"], out, bits)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    got = np.full((xs[0], ws[0], *out), np.nan, np.float32)
    exe = runtime.build(prim.with_attr("global_symbol", "conv_dot"), cache=False)
    exe["conv_dot"](x, w, got)
    mod = _conv_module(xs, ws, attrs)
    (want,) = ik.interpret(mod, x, w)
    (scale,) = ik.interpret(mod, np.abs(x), np.abs(w))  # rounding grows with |x| * |w|
    assert np.all(np.abs(got - want) <= 1e-5 * scale + 1e-6), np.abs(got - want).max()


@settings(max_examples=40, deadline=None)
@given(case=grouped(), bits=st.sampled_from([256, 512]), seed=st.integers(0, 99))
def test_random_grouped_convs_equal_the_interpreter(case, bits, seed) -> None:
    _run_kernel(*case, bits, seed)


@settings(max_examples=12, deadline=None)
@given(case=st.one_of(grouped(rank=1), grouped(rank=3)), bits=st.sampled_from([256, 512]),
       seed=st.integers(0, 99))
def test_one_and_three_spatial_axes(case, bits, seed) -> None:
    _run_kernel(*case, bits, seed)


#: (input, weight, attrs) of the small maps the schedule is for: RegNet-X-400MF at 64x64
#: (groups of 16 on 2x2 and 4x4 maps, 1x1 convs on 2x2, a strided grouped conv), GoogLeNet
#: at 64x64 (3x3 on 2x2), odd widths and a tail of output channels.
MODEL_SHAPES = [
    ((1, 400, 2, 2), (400, 16, 3, 3), {"groups": 25, "padding": [1, 1, 1, 1]}),
    ((1, 400, 2, 2), (400, 400, 1, 1), {}),
    ((1, 160, 4, 4), (160, 16, 3, 3), {"groups": 10, "padding": [1, 1, 1, 1]}),
    ((1, 400, 4, 4), (400, 16, 3, 3), {"groups": 25, "padding": [1, 1, 1, 1],
                                       "strides": [2, 2]}),
    ((1, 192, 2, 2), (384, 192, 3, 3), {"padding": [1, 1, 1, 1]}),
    ((2, 21, 3, 3), (33, 7, 3, 3), {"groups": 3, "padding": [1, 0, 2, 1]}),
    ((1, 64, 1, 1), (32, 64, 1, 1), {}),
]


def test_legalize_picks_the_dot_schedule_and_fuses_the_epilogue() -> None:
    for xs, ws, attrs in MODEL_SHAPES:
        full = {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1,
                **attrs}
        out = _out_size(xs, ws, full)
        assert gemv_ok(xs, ws, full["groups"], "float32", out, full["strides"],
                       full["padding"][:2], full["padding"][2:]), (xs, ws)
        mod = _conv_module(xs, ws, full, "bias_relu")
        rng = np.random.default_rng(xs[1])
        inputs = [rng.standard_normal(s).astype(np.float32)
                  for s in (xs, ws, (ws[0], 1, 1))]
        with transform.PassContext(config={"runtime.generic_max_elements": 0}):
            ex = runtime.build(mod, cache=False)
        source = ex.get_source("tir")
        # one kernel: the conv with the bias and relu in its store
        assert source.count("@T.prim_func") == 1 and "def fused_conv_add_relu" in source, xs
        assert "'schedule': 'conv_dot'" in source, xs
        assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), "conv")


def test_the_implicit_gemm_keeps_maps_that_fill_its_lanes() -> None:
    """A 1x1 conv on a 4x4 map fills one 16-lane vector: it stays a GEMM; a 3x3 conv with
    padding there (32 wide-grid columns for 16 pixels) and any 3x3 map do not; neither do
    depthwise convs (one channel per group) nor maps above 16 pixels."""
    assert not dot_ok((1, 160, 4, 4), (160, 160, 1, 1), 1, "float32", (4, 4), bits=512)
    assert dot_ok((1, 160, 4, 4), (160, 16, 3, 3), 10, "float32", (4, 4), (1, 1), (1, 1),
                  (1, 1), bits=512)
    assert not dot_ok((1, 64, 4, 4), (64, 1, 3, 3), 64, "float32", (4, 4), (1, 1), (1, 1),
                      (1, 1), bits=512)
    assert not dot_ok((1, 64, 5, 5), (64, 64, 1, 1), 1, "float32", (5, 5), bits=512)
    assert not dot_ok((1, 64, 2, 2), (64, 64, 1, 1), 1, "float64", (2, 2), bits=512)


def test_tiles() -> None:
    """At most 4 pixels: one output channel per task (the weights stream sequentially);
    more: the register file's even share of the group's rows."""
    assert conv_dot_tile(400, 4, 512) == (1, 4)
    assert conv_dot_tile(16, 16, 512) == (6, 4)  # 6 + 6 + a tail block of 4
    assert conv_dot_tile(16, 16, 256) == (3, 4)
    assert conv_dot_tile(5, 9, 512) == (5, 4)


def test_bitwise_the_same_at_one_and_two_threads() -> None:
    xs, ws, attrs = MODEL_SHAPES[0]
    full = {"strides": [1, 1], "dilation": [1, 1], **attrs}
    mod = _conv_module(xs, ws, full)
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in (xs, ws)]
    results = []
    before = runtime.get_num_threads()
    try:
        for threads in (1, 2):
            runtime.set_num_threads(threads)
            results.append(build_and_run(mod, inputs)[0])
    finally:
        runtime.set_num_threads(before)
    assert np.array_equal(results[0].view(np.uint32), results[1].view(np.uint32))
