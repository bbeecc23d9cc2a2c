"""FoldBatchNorm: conv (+ bias) then a per-channel scale and shift fold into the conv."""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import passes
import runtime


def _module(rng, bias: bool, scale_shape=(1, 6, 1, 1), shared_weight: bool = False,
            weight_param: bool = False):
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3, 7, 8), "float32")
    arrays = {"w": rng.standard_normal((6, 3, 3, 3)).astype(np.float32),
              "b": rng.standard_normal((1, 6, 1, 1)).astype(np.float32),
              "s": rng.standard_normal(scale_shape).astype(np.float32),
              "t": rng.standard_normal((6, 1, 1)).astype(np.float32)}
    w = bb.param("w", (6, 3, 3, 3), "float32") if weight_param else bb.const(arrays["w"])
    y = bb.conv(x, w, padding=[1, 1, 1, 1])
    if bias:
        y = bb.add(y, bb.const(arrays["b"]))
    y = bb.relu(bb.add(bb.multiply(y, bb.const(arrays["s"])), bb.const(arrays["t"])))
    outs = [y, bb.conv(x, w, padding=[1, 1, 1, 1])] if shared_weight else [y]
    return ik.IRModule({"main": bb.finish(outs)}), arrays


def _ops(mod: ik.IRModule) -> list[str]:
    f = mod["main"]
    return [f.op(i).name for i in range(f.num_nodes)]


@pytest.mark.parametrize("bias", [False, True])
def test_folds_into_the_weights_and_bias_without_touching_the_constants(bias) -> None:
    rng = np.random.default_rng(4)
    mod, arrays = _module(rng, bias)
    before = {k: v.copy() for k, v in arrays.items()}
    folded = passes.DeadCodeElimination()(passes.FoldBatchNorm()(mod))
    assert "multiply" not in _ops(folded)
    assert _ops(folded).count("add") == 1  # conv + (b * s + t), or conv + t
    for k, v in arrays.items():
        np.testing.assert_array_equal(v, before[k])  # the user's arrays are never written
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    (want,) = ik.interpret(mod, x)
    np.testing.assert_allclose(ik.interpret(folded, x)[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(runtime.build(mod)["main"](x)[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["not_per_channel", "shared_weight", "weight_param"])
def test_leaves_what_it_can_not_fold(case) -> None:
    rng = np.random.default_rng(5)
    mod, _ = _module(rng, True, scale_shape=(1, 6, 7, 1) if case == "not_per_channel"
                     else (1, 6, 1, 1), shared_weight=case == "shared_weight",
                     weight_param=case == "weight_param")
    assert passes.FoldBatchNorm()(mod) is mod
