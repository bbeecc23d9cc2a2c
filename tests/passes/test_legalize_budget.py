"""LegalizeOps keeps at most MAX_SPECIALIZED_SIGNATURES specialized signatures per
function when it may use shape-generic kernels: a graph with a new shape per lane must
not compile a kernel per shape (passes/legalize_ops.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.testing import random_inputs
from passes import legalize_ops

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import graph_families  # noqa: E402


def _specialized(ex: runtime.Executable, inputs: list[np.ndarray]) -> int:
    return sum(1 for row in ex.profile(*inputs, repeat=1).rows if row.schedule != "generic")


@pytest.mark.parametrize("budget", [4, 12])
def test_signatures_past_the_budget_take_generic_kernels(budget: int,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    mod = graph_families.shapes(1200, 0)  # 60 lanes of shapes (1,) .. (60,)
    inputs = random_inputs(mod["main"], seed=0, special_values=False)
    config = {"runtime.generic_max_elements": 8}  # lanes above 8 elements specialize
    with transform.PassContext(config=config):
        unlimited = runtime.build(mod, cache=False)
        monkeypatch.setattr(legalize_ops, "MAX_SPECIALIZED_SIGNATURES", budget)
        limited = runtime.build(mod, cache=False)
    # the budget bounds specialized op signatures; a kept signature can sit in a few fused
    # kernels (its lane's chain splits where the demoted ops went generic)
    assert _specialized(unlimited, inputs) > 40
    assert _specialized(limited, inputs) <= 2 * budget
    want = ik.interpret(mod, *inputs)[0]
    for ex in (unlimited, limited):
        np.testing.assert_allclose(ex["main"](*inputs)[0], want, rtol=1e-5, atol=1e-4)


def test_a_conv_is_never_demoted(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 8, 16, 16), "float32")
    w = bb.const(rng.standard_normal((16, 8, 3, 3)).astype(np.float32))
    y = bb.relu(bb.conv(x, w, padding=[1, 1, 1, 1]))
    mod = ik.IRModule({"main": bb.finish([y, bb.tanh(x)])})
    xv = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
    monkeypatch.setattr(legalize_ops, "MAX_SPECIALIZED_SIGNATURES", 0)
    with transform.PassContext(config={"runtime.generic_max_elements": 64}):
        ex = runtime.build(mod, cache=False)
    schedules = sorted(row.schedule.split("[")[0] for row in ex.profile(xv, repeat=1).rows)
    assert schedules == ["conv_implicit_gemm", "generic"]  # relu fused, tanh demoted
    for got, want in zip(ex["main"](xv), ik.interpret(mod, xv), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
