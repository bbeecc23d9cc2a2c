"""Max and average pools run as row passes (``passes/topi/pool.py``): max pools
bit-identical to the interpreter for random shapes, kernels, strides 1-3, dilations,
asymmetric padding and ceil_mode, with NaN, +-inf and -0.0 in the input, output rows on
both sides of ``GATHER_OUTPUTS``, at two register widths, with a fused epilogue; average
pools the same within float32 rounding (they sum in another order), with and without
count_include_pad."""

from __future__ import annotations

import numpy as np
import pytest
from e2e_helpers import assert_close_to_interpreter, assert_scheduled_and_exact
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel.target import host_target
from passes.topi.pool import GATHER_OUTPUTS, pool_ok


@st.composite
def pool_cases(draw):
    kernel = [draw(st.integers(1, 4)) for _ in range(2)]
    dil = [draw(st.integers(1, 2)) for _ in range(2)]
    pads = [draw(st.integers(0, k - 1)) for k in kernel] + \
        [draw(st.integers(0, k - 1)) for k in kernel]
    wide = draw(st.booleans())
    sizes = [draw(st.integers(max(1, dil[0] * (kernel[0] - 1) + 1 - pads[0] - pads[2]), 9)),
             draw(st.integers(2 * GATHER_OUTPUTS - 6, 3 * GATHER_OUTPUTS + 10) if wide else
                  st.integers(max(1, dil[1] * (kernel[1] - 1) + 1 - pads[1] - pads[3]), 20))]
    attrs = {"kernel": kernel, "strides": [draw(st.integers(1, 3)) for _ in range(2)],
             "padding": pads, "dilation": dil, "ceil_mode": draw(st.booleans())}
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *sizes), attrs


def _row_schedule_applies(shape, attrs) -> bool:
    """Whether the row passes take this pool: not when an output row's window holds
    padding only (those keep the canonical template, tested below)."""
    from irkernel.ir.ops.nn_rules import pool_window

    win = pool_window(shape, {"count_include_pad": False, **attrs})
    return pool_ok(shape, win.kernel, win.strides, win.pad_begin, win.dilation, win.out,
                   "float32")


@settings(max_examples=30, deadline=None)
@given(case=pool_cases(), bits=st.sampled_from([256, 512]), seed=st.integers(0, 99),
       relu=st.booleans())
def test_max_pool_rows_equal_the_interpreter(case, bits, seed, relu) -> None:
    shape, attrs = case
    assume(_row_schedule_applies(shape, attrs))
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, "float32")
    y = bb.max_pool(x, **attrs)
    mod = ik.IRModule({"main": bb.finish([bb.relu(y) if relu else y])})
    assert_scheduled_and_exact(mod, {"topi.vector_bits": bits}, "max_pool_rows", seed)


@settings(max_examples=30, deadline=None)
@given(case=pool_cases(), bits=st.sampled_from([256, 512]), seed=st.integers(0, 99),
       relu=st.booleans(), include_pad=st.booleans())
def test_avg_pool_rows_match_the_interpreter(case, bits, seed, relu, include_pad) -> None:
    shape, attrs = case
    assume(_row_schedule_applies(shape, attrs))
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, "float32")
    y = bb.avg_pool(x, count_include_pad=include_pad, **attrs)
    mod = ik.IRModule({"main": bb.finish([bb.relu(y) if relu else y])})
    assert_scheduled_and_exact(mod, {"topi.vector_bits": bits}, "avg_pool_rows", seed)


@pytest.mark.parametrize(("shape", "k", "stride", "pad", "include_pad"), [
    ((1, 192, 28, 28), 3, 1, 1, False),  # Inception's branch pools
    ((1, 256, 14, 14), 3, 1, 1, True),
    ((1, 64, 56, 56), 2, 2, 0, False),  # DenseNet's transitions
    ((1, 3, 24, 80), 3, 1, 1, False),
])
def test_model_average_pools(shape, k, stride, pad, include_pad) -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, "float32")
    y = bb.avg_pool(x, kernel=[k, k], strides=[stride, stride], padding=[pad] * 4,
                    count_include_pad=include_pad)
    assert_scheduled_and_exact(ik.IRModule({"main": bb.finish([y])}), {"topi.vector_bits": 512},
                               "avg_pool_rows", 2)


@pytest.mark.parametrize("shape", [(1, 64, 111, 111), (1, 128, 55, 55), (1, 256, 27, 27)])
def test_squeezenet_pools(shape) -> None:
    """squeezenet1_1's 3x3 stride-2 ceil_mode pools: the 55-wide output rows are a serial
    loop (LLVM vectorizes it), the 27- and 13-wide ones gathers."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, "float32")
    y = bb.max_pool(x, kernel=[3, 3], strides=[2, 2], padding=[0] * 4, ceil_mode=True)
    assert_scheduled_and_exact(ik.IRModule({"main": bb.finish([y])}), {"topi.vector_bits": 512},
                               "max_pool_rows", 1)


@pytest.mark.parametrize("k", [5, 9, 13])
def test_spp_pools_of_wide_windows(k) -> None:
    """YOLO's spatial pyramid pools: k x k, stride 1, padding k // 2, on a 13x13 map. The
    row passes cost kh + kw taps per output, so 9x9 and 13x13 windows (81 and 169 taps)
    are theirs too (the canonical loop ran them at 0.04 GB/s, 5.9 ms for one pool)."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 6, 13, 13), "float32")
    y = bb.max_pool(x, kernel=[k, k], strides=[1, 1], padding=[k // 2] * 4)
    assert_scheduled_and_exact(ik.IRModule({"main": bb.finish([y])}), {"topi.vector_bits": 512},
                               "max_pool_rows", k)


def test_wide_windows_stay_small_expressions() -> None:
    """A select names each operand twice: chained over a 16-tap axis it was a tree of
    2**16 nodes (a 13x13 pool took minutes to print and lower); the balanced tree stays
    near k**2 (regression test of that blow-up)."""
    from passes.topi.pool import max_pool_rows

    func = max_pool_rows((1, 2, 40, 40), (16, 16), (1, 1), (8, 8), (1, 1), (41, 41), bits=512)
    assert len(func.script()) < 200_000


def test_nan_and_signed_infinities_propagate() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 1, 4, 70), "float32")
    mod = ik.IRModule({"main": bb.finish([bb.max_pool(x, kernel=[2, 3], strides=[2, 2],
                                                      padding=[1, 1, 1, 1])])})
    a = np.full((1, 1, 4, 70), -np.inf, np.float32)
    a[0, 0, 1, 5] = np.nan
    a[0, 0, 2, 40] = np.inf
    got = runtime.build(mod)["main"](a)[0]
    assert_close_to_interpreter(mod, [a], [got], "special values")
    assert np.isnan(got).sum() == 2 and np.isposinf(got).sum() == 1


def test_windows_of_padding_only_keep_the_canonical_template() -> None:
    # kernel 2, dilation 1, top padding 2: output row 0 reads rows -2 and -1 only
    assert not pool_ok((1, 1, 5, 5), (2, 2), (1, 1), (2, 0), (1, 1), (6, 4), "float32")
    assert pool_ok((1, 1, 5, 5), (2, 2), (1, 1), (1, 0), (1, 1), (5, 4), "float32")
    assert not pool_ok((1, 1, 5, 5), (2, 2), (1, 1), (1, 0), (1, 1), (5, 4), "float64")


@pytest.mark.skipif(host_target().isa == "sse4.2", reason="the host cannot run AVX2 code")
def test_an_avx2_build_equals_the_interpreter() -> None:
    """The same pools compiled for x86-64-v3 (AVX2: 8-lane vectors, no vscalefps, LLVM's
    own shuffles for the serial rows), on any host that runs it."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 5, 40, 90), "float32")
    ys = [bb.max_pool(x, kernel=[3, 3], strides=[2, 2], padding=[1, 0, 0, 1], ceil_mode=True),
          bb.max_pool(x, kernel=[2, 3], strides=[1, 3], padding=[0, 1, 1, 1], dilation=[2, 1])]
    assert_scheduled_and_exact(ik.IRModule({"main": bb.finish(ys)}), {"target": "x86-64-v3"},
                               "max_pool_rows", 3)
