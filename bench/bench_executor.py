"""Graph executor launch overhead and memory planning.

Run with::

    PYTHONPATH=. .venv/bin/python -m pytest bench/bench_executor.py --benchmark-enable -q
    PYTHONPATH=. .venv/bin/python bench/bench_executor.py      # prints the figures

The graph is a chain of 1000 ``add`` ops on 4-element float32 arrays
(``y = y + x``), built by ``runtime.build`` with fusion disabled
(``disabled_pass=["FuseOps", "FuseTIR"]``), so each op is one kernel launch
of a few nanoseconds of work: the time per op is the executor's per-kernel
overhead. It is reported as (chain call - empty graph call) / 1000, both
medians of blocks of their own in the same run (noisy 2-core VM), next to the
checked ``runtime.Kernel`` call of the same kernel for comparison. Target:
<= 2 us per kernel. Also: the memory plan of the chain (naive vs planned).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.testing.timing import compare

N_OPS = 1000
TARGET_US = 2.0
REPORT_ONLY = os.environ.get("IRKERNEL_BENCH_REPORT_ONLY", "") not in ("", "0")


def chain_module(n_ops: int = N_OPS, n: int = 4) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (n,), "float32")
    y = x
    for _ in range(n_ops):
        y = bb.call("add", y, x)
    return ik.IRModule({"main": bb.finish([y])})


def empty_module(n: int = 4) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (n,), "float32")
    return ik.IRModule({"main": bb.finish([x])})


def build_unfused(mod: ik.IRModule) -> runtime.Executable:
    with transform.PassContext(disabled_pass=["FuseOps", "FuseTIR"]):
        return runtime.build(mod)


def mlp_module(batch: int = 64, hidden: int = 1024, layers: int = 3) -> ik.IRModule:
    """matmul + bias + relu, ``layers`` times (weights are params)."""
    bb = ik.GraphBuilder("main")
    h = bb.param("x", (batch, hidden), "float32")
    for k in range(layers):
        w = bb.param(f"w{k}", (hidden, hidden), "float32")
        b = bb.const(np.full(hidden, 0.01 * (k + 1), np.float32))
        h = bb.call("relu", bb.call("add", bb.call("matmul", h, w), b))
    return ik.IRModule({"main": bb.finish([h])})


def mlp_plans() -> dict[str, float]:
    """Naive vs planned intermediate bytes of the MLP, unfused and fused."""
    out: dict[str, float] = {}
    for label, disabled in (("unfused", ["FuseOps", "FuseTIR"]), ("fused", [])):
        with transform.PassContext(disabled_pass=disabled):
            plan = runtime.build(mlp_module()).memory_plan("main")
        out[f"mlp_{label}_naive_bytes"] = float(plan.naive_bytes)
        out[f"mlp_{label}_planned_bytes"] = float(plan.planned_bytes)
    return out


def _blocks(a: Callable[[], object], b: Callable[[], object], rounds: int,
            inner: int) -> tuple[float, float]:
    """Median seconds per call of ``a`` and ``b``, each timed in blocks of its own after
    warm-ups (``irkernel.testing.timing.compare``), ``inner`` calls per timed sample."""

    def many(fn: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(inner):
                fn()
        return run

    cmp = compare(many(a), many(b), repeat=rounds, pause=0.1)
    return cmp.ours.median / inner, cmp.ref.median / inner


def measure(rounds: int = 31) -> dict[str, float]:
    """The figures of this benchmark (also printed by ``main``)."""
    chain = build_unfused(chain_module())
    empty = build_unfused(empty_module())
    x = np.ones(4, np.float32)
    expected = ik.interpret(chain_module(), x)[0]
    got = chain["main"](x)[0]
    np.testing.assert_array_equal(got, expected)
    graph = chain["main"]
    assert graph.num_kernels == N_OPS, graph.num_kernels
    t_chain, t_empty = _blocks(lambda: chain["main"](x), lambda: empty["main"](x), rounds, 5)
    kernel = next(chain[name] for name in chain if name != "main")
    out = np.empty(4, np.float32)
    t_checked, _ = _blocks(lambda: kernel(x, x, out), lambda: None, rounds, 200)
    plan = chain.memory_plan("main")
    return {
        "kernels": float(graph.num_kernels),
        "chain_call_ms": t_chain * 1e3,
        "empty_call_us": t_empty * 1e6,
        "per_kernel_us": (t_chain - t_empty) / N_OPS * 1e6,
        "checked_kernel_call_us": t_checked * 1e6,
        "naive_bytes": float(plan.naive_bytes),
        "planned_bytes": float(plan.planned_bytes),
    }


def test_launch_overhead_1000_ops(benchmark) -> None:
    figures = measure()
    benchmark.extra_info.update(figures)
    ex = build_unfused(chain_module())
    x = np.ones(4, np.float32)
    benchmark.pedantic(lambda: ex["main"](x), rounds=21, iterations=5, warmup_rounds=2)
    if figures["per_kernel_us"] > TARGET_US and not REPORT_ONLY:
        pytest.fail(f"per-kernel overhead {figures['per_kernel_us']:.2f} us > {TARGET_US} us")
    assert figures["planned_bytes"] < figures["naive_bytes"]


def main() -> None:
    figures = measure()
    print(f"chain of {N_OPS} adds on float32[4], fusion disabled ({int(figures['kernels'])} "
          "kernel launches)")
    print(f"  call of the chain          {figures['chain_call_ms']:8.3f} ms")
    print(f"  call of an empty graph     {figures['empty_call_us']:8.2f} us")
    print(f"  per kernel launch          {figures['per_kernel_us']:8.3f} us   "
          f"(target <= {TARGET_US} us)")
    print(f"  checked runtime.Kernel call{figures['checked_kernel_call_us']:8.2f} us")
    print(f"  memory plan                {int(figures['naive_bytes']):,} B naive -> "
          f"{int(figures['planned_bytes']):,} B planned")
    plans = mlp_plans()
    for label in ("unfused", "fused"):
        print(f"MLP 64x1024, 3 layers, {label}: intermediates "
              f"{int(plans[f'mlp_{label}_naive_bytes']):,} B naive -> "
              f"{int(plans[f'mlp_{label}_planned_bytes']):,} B planned")


if __name__ == "__main__":
    main()
