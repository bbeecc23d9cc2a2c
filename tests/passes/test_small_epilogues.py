"""Small elementwise ops after a specialized conv or matmul stay specialized, so they fuse
into its store (passes/small_epilogues.py), while small ops elsewhere keep the
shape-generic kernels."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform


def _net(c: int, hw: int, chain: int, extra: bool) -> tuple[ik.IRModule, np.ndarray]:
    """A conv (weights above the generic limit) on a small map, then ``chain`` small
    elementwise ops (bias, relu, add of the input, ...), and (``extra``) a small add of two
    params that no specialized op feeds."""
    rng = np.random.default_rng(c * 100 + hw)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, c, hw, hw), "float32")
    z = bb.param("z", (1, c, hw, hw), "float32")
    w = bb.const(rng.standard_normal((c, c, 3, 3)).astype(np.float32))
    b = bb.const(rng.standard_normal((1, c, 1, 1)).astype(np.float32))
    y = bb.conv(x, w, padding=[1, 1, 1, 1])
    steps = [lambda v: bb.add(v, b), bb.relu, lambda v: bb.add(v, x), bb.sigmoid,
             lambda v: bb.multiply(v, x)]
    for k in range(chain):
        y = steps[k % len(steps)](y)
    outs = [y, bb.add(x, z)] if extra else [y]
    inputs = [rng.standard_normal((1, c, hw, hw)).astype(np.float32) for _ in range(2)]
    return ik.IRModule({"main": bb.finish(outs)}), inputs


def _schedules(ex: runtime.Executable, inputs: list[np.ndarray]) -> list[str]:
    return [row.schedule for row in ex.profile(*inputs, repeat=1).rows]


def test_bias_and_relu_fuse_into_a_conv_on_a_small_map() -> None:
    mod, inputs = _net(c=24, hw=4, chain=2, extra=True)  # 384-element maps, 5184 weights
    with transform.PassContext(config={"runtime.generic_max_elements": 4096}):
        ex = runtime.build(mod, cache=False)
    schedules = _schedules(ex, inputs)
    # the conv with its bias and relu in one kernel (16 pixels: the small-map dot
    # products); the unrelated add stays generic
    assert sorted(s.split("[")[0] for s in schedules) == ["conv_dot", "generic"]
    expected = ik.interpret(mod, *inputs)
    for got, want in zip(ex["main"](*inputs), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=st.integers(8, 30), hw=st.integers(2, 6), chain=st.integers(0, 8),
       extra=st.booleans())
def test_small_epilogues_match_the_interpreter(c: int, hw: int, chain: int,
                                               extra: bool) -> None:
    mod, inputs = _net(c, hw, chain, extra)
    with transform.PassContext(config={"runtime.generic_max_elements": 4096}):
        ex = runtime.build(mod, cache=False)
    expected = ik.interpret(mod, *inputs)
    for got, want in zip(ex["main"](*inputs), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
