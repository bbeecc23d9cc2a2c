"""Wall-clock budgets of large-graph operations that used to be asserts inside tests/.

A timed assert in a test fails on a loaded machine and proves nothing on an idle
one, so the tests keep their functional checks and the times live here, each
against the bound its test used to assert (a ``check``: report-only with
``IRKERNEL_BENCH_REPORT_ONLY=1``). Run with::

    IRKERNEL_BENCH_REPORT_ONLY=1 PYTHONPATH=. .venv/bin/python -m pytest \\
        bench/bench_scaling.py --benchmark-enable -q -s

Each figure is the median of 3 calls after one warm-up call (JIT load, first
touch of memory); the machine is a shared 2-core VM.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
import passes
from irkernel import ops
from irkernel.testing import random_function

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "passes"))
sys.path.insert(0, str(ROOT / "tests" / "runtime"))
from benchutil import check  # noqa: E402


def _median(fn: Callable[[], object], rounds: int = 3) -> float:
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _report(benchmark, what: str, seconds: float, bound: float) -> None:
    benchmark.extra_info.update({"seconds": seconds, "bound_s": bound})
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are in extra_info
    print(f"\n{what}: {seconds:.3f} s (bound {bound} s)")
    check(seconds <= bound, f"{what}: {seconds:.2f} s (bound {bound} s)")


def _chain_of_adds(n: int) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float64")
    one = bb.const(np.float64(1.0))
    start = len(bb)
    a0 = np.arange(start - 1, start + n - 1, dtype=np.int32)
    a0[0] = x
    ids = bb.add_nodes(np.full(n, ops.OP_ADD, np.int16), a0, np.full(n, one, np.int32))
    return bb.finish([int(ids[-1])])


def test_plan_memory_of_50k_kernels(benchmark) -> None:  # tests/runtime/test_memory_plan.py
    from runtime.memory_plan import plan_memory
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    y = x
    for _ in range(50_000):
        y = bb.call("call_tir", y, x, callee="k", dtype="float32", shape=(4,))
    func = bb.finish([y])
    _report(benchmark, "plan_memory, 5e4 call_tir", _median(lambda: plan_memory(func)), 1.0)


def test_legalize_1e5_ops(benchmark) -> None:  # tests/passes/test_legalize_ops.py
    mod = ik.IRModule({"main": random_function(100_000, seed=1)})
    _report(benchmark, "LegalizeOps, 1e5 ops", _median(lambda: passes.LegalizeOps()(mod)), 2.0)


def test_fuse_1e5_ops(benchmark) -> None:  # tests/passes/test_fuse_ops.py
    legal = passes.LegalizeOps()(ik.IRModule({"main": random_function(100_000, seed=3)}))
    _report(benchmark, "FuseOps, 1e5 ops", _median(lambda: passes.FuseOps()(legal)), 10.0)


@pytest.mark.parametrize("graph", ["const_chain", "identity_chain", "twin_chains",
                                   "dead_chain", "concat_fan_in", "add_tree"])
def test_passes_on_1e6_node_graphs(benchmark, graph: str) -> None:  # tests/passes/test_scale.py
    import test_scale
    from passes_helpers import PASS_FACTORIES, make_pass

    mod = ik.IRModule({"main": test_scale.GRAPHS[graph](test_scale.N)})
    worst = max(_median(lambda name=name: make_pass(name)(mod), 1) for name in PASS_FACTORIES)
    _report(benchmark, f"slowest pass on {graph} (1e6)", worst, 20.0)


def test_verify_1e6_chain(benchmark) -> None:  # tests/irkernel/test_verify.py
    n = 1_000_000
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    kind = np.full(n, ops.OP_NEGATIVE, np.int16)
    kind[1::3] = ops.OP_EXP
    bb.add_nodes(kind, np.arange(x, x + n, dtype=np.int32))
    mod = ik.IRModule({"main": bb.finish([n])})
    _report(benchmark, "verify, 1e6 chain", _median(lambda: ik.verify(mod)), 10.0)


def test_structural_equal_and_hash_2e5_constants(benchmark) -> None:  # test_structural.py
    values = np.arange(200_000, dtype=np.float64)

    def graph(shift: bool) -> ik.Function:
        bb = ik.GraphBuilder("main")
        if shift:
            bb.add_scalar_consts(values.max(keepdims=True), "float64")
        cids = bb.add_scalar_consts(values, "float64")
        ids = bb.add_nodes(np.full(len(values), ops.OP_CONST, np.int16), cids)
        return bb.finish([int(ids[0]), int(ids[-1])])

    a, b = graph(False), graph(True)
    seconds = _median(lambda: (ik.structural_equal(a, b), ik.structural_hash(a),
                               ik.structural_hash(b)))
    _report(benchmark, "structural_equal + hash, 2e5 constants", seconds, 1.5)


def test_interpret_1e6_chain(benchmark) -> None:  # tests/irkernel/test_interp_graph.py
    f = _chain_of_adds(1_000_000)
    _report(benchmark, "interpret, 1e6 chain", _median(lambda: ik.interpret(f, np.float64(0.5)),
                                                       1), 15.0)
