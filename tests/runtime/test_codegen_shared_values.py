"""Codegen emits a node shared within one statement's expression once (``ExprCodegen.expr``
memoizes by node): less LLVM IR for DAG-shaped kernels (a vectorized fused epilogue puts
each let's value at every use), and kernels whose results are bit-identical to the
unshared code's."""
from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.testing import random_inputs
from irkernel.tir.function import PrimFunc
from runtime.build import build_context
from runtime.codegen_expr import ExprCodegen
from runtime.compile import lower_tir
from runtime.lower import lower
from runtime.target import target_for


def _depthwise_hardswish(c: int, size: int, k: int) -> ik.IRModule:
    """A depthwise conv with bias and hard-swish (``x * clip(x + 3, 0, 6) / 6``) fused."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, c, size, size), "float32")
    w = bb.param("w", (c, 1, k, k), "float32")
    y = bb.add(bb.conv(x, w, padding=(k // 2,) * 4, groups=c),
               bb.param("b", (c, 1, 1), "float32"))
    consts = [bb.param(n, (), "float32") for n in ("three", "zero", "six", "sixth")]
    clip = bb.call("minimum", bb.call("maximum", bb.add(y, consts[0]), consts[1]), consts[2])
    y = bb.call("multiply", bb.call("multiply", y, clip), consts[3])
    return ik.IRModule({"main": bb.finish([y])})


CASES = {"depthwise_rows": (16, 19, 5), "depthwise_flat": (16, 20, 3)}


def _unshared(monkeypatch) -> None:
    """Codegen as it was: every path to a node emits it again."""
    monkeypatch.setattr(ExprCodegen, "expr", ExprCodegen._lower_expr)


@pytest.mark.parametrize("case", CASES)
def test_shared_nodes_make_less_ir(case: str, monkeypatch) -> None:
    mod = _depthwise_hardswish(*CASES[case])
    target = target_for("host")
    with build_context(None):
        low = transform.make_pipeline("GraphLowering")(mod)
        funcs = [lower_tir(n, f) for n, f in low.functions.items() if isinstance(f, PrimFunc)]
    assert any(f.attrs.get("schedule") == case for f in funcs)
    shared = [lower(f, f"k{i}", target) for i, f in enumerate(funcs)]
    _unshared(monkeypatch)
    unshared = [lower(f, f"k{i}", target) for i, f in enumerate(funcs)]
    sizes = [(a.count("\n"), b.count("\n")) for a, b in zip(shared, unshared, strict=True)]
    assert all(a <= b for a, b in sizes)
    assert sum(a for a, _ in sizes) < sum(b for _, b in sizes)


@pytest.mark.parametrize("case", CASES)
def test_shared_nodes_compute_the_same_bits(case: str, monkeypatch) -> None:
    mod = _depthwise_hardswish(*CASES[case])
    inputs = random_inputs(mod, seed=3)
    shared = runtime.build(mod, cache=False)["main"](*inputs)[0]
    _unshared(monkeypatch)
    unshared = runtime.build(mod, cache=False)["main"](*inputs)[0]
    assert shared.view(np.uint32).tobytes() == unshared.view(np.uint32).tobytes()
    want = ik.interpret(mod, *inputs)[0]
    np.testing.assert_allclose(shared, want, rtol=1e-4, atol=1e-4)
