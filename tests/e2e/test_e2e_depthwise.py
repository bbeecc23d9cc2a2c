"""Depthwise convs (``depthwise_flat``, vectorized along the flattened output plane; else
``plane_window``): against the interpreter with a fused bias + SiLU epilogue, channel counts
off the vector width, strides, dilations and asymmetric padding, at every register width."""
from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import runtime
from irkernel import transform

CASES = [  # channels, map, kernel, stride, padding (t, l, b, r), dilation
    (1152, 7, 5, 1, (2, 2, 2, 2), 1),
    (37, 9, 3, 2, (1, 1, 1, 1), 1),
    (20, 6, 3, 1, (2, 2, 2, 2), 2),
    (19, 11, 3, 2, (0, 1, 1, 0), 1),
    (16, 16, 3, 1, (0, 0, 0, 0), 1),
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
    assert ("depthwise_flat" in ex.get_source("tir")) == (h != 11 and h != 16)
