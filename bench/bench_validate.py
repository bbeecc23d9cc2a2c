"""Cost of the cheap validation every compiled entry runs (``irkernel.ir.validate``).

Run with::

    IRKERNEL_BENCH_REPORT_ONLY=1 PYTHONPATH=. .venv/bin/python -m pytest \\
        bench/bench_validate.py --benchmark-enable -q -s

What is measured, on ``random_function(10**7, seed=0)`` (the graph of
``bench_passes.py``), Numba kernels on one thread (they are serial), medians:

- ``check_function`` on a Function nothing has marked (a Function made with
  ``dataclasses.replace``: the one case that pays the sweep), against
  ``DeadCodeElimination`` on the same graph. Each side is timed in a block of
  its own after two warm-up calls, with a pause between blocks, and the
  blocks alternate three times; the ratio is of the medians. Target: <= 5 %.
- its parts: the node sweep (``scan_structure_kernel``) and the rest
  (columns, tables, const pool, params, outputs).
- what a pass entry pays for a Function that is already marked (built by
  ``GraphBuilder.finish`` or a pass): one WeakSet lookup, in microseconds.

The machine is a shared 2-core VM: figures are medians and ratios come from
the same run.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import irkernel as ik
import passes
from irkernel.ir import ops, validate
from irkernel.ir.validate import (
    _masks,
    check_function,
    scan_structure_kernel,
    validate_function,
    validate_module,
)
from irkernel.testing import random_function

sys.path.insert(0, str(Path(__file__).parent))
from benchutil import check

N = 10**7
ROUNDS = 7
BLOCKS = 3
PAUSE_S = 0.5
TARGET_RATIO = 0.05


def _block(fn: Callable[[], object], rounds: int = ROUNDS) -> list[float]:
    fn()
    fn()  # warm-up: JIT load, first touch of fresh memory
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


@pytest.fixture(scope="module")
def graph() -> ik.Function:
    return random_function(N, seed=0)


def test_validation_against_dce_at_1e7(benchmark, graph: ik.Function) -> None:
    unmarked = dataclasses.replace(graph)  # same columns, never validated
    mod = ik.IRModule({"main": graph})
    dce = passes.DeadCodeElimination()
    check_times: list[float] = []
    dce_times: list[float] = []
    for _ in range(BLOCKS):
        check_times += _block(lambda: check_function(unmarked, "bench"))
        time.sleep(PAUSE_S)
        dce_times += _block(lambda: dce(mod))
        time.sleep(PAUSE_S)
    check_s, dce_s = statistics.median(check_times), statistics.median(dce_times)
    ratio = check_s / dce_s
    benchmark.extra_info.update({"n_nodes": N, "check_function_s": check_s, "dce_s": dce_s,
                                 "ratio": ratio, "target_ratio": TARGET_RATIO})
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are in extra_info
    print(f"\ncheck_function {check_s * 1e3:.1f} ms, DCE {dce_s * 1e3:.1f} ms at 1e7: "
          f"{ratio:.1%} (target {TARGET_RATIO:.0%})")
    check(ratio <= TARGET_RATIO, f"validation at 1e7 is {ratio:.1%} of DCE's time "
                                 f"({check_s * 1e3:.1f} vs {dce_s * 1e3:.1f} ms; target "
                                 f"{TARGET_RATIO:.0%})")


def test_validation_parts_at_1e7(benchmark, graph: ik.Function) -> None:
    masks = _masks()
    assert masks is not None
    arity = ops.op_arrays().arity

    def sweep() -> bool:
        return bool(scan_structure_kernel(
            graph.kind, graph.a0, graph.a1, graph.extra, graph.dtype, graph.shape_id,
            graph.attr_id, masks, arity, len(graph.consts), len(graph.params),
            len(graph.shapes), len(graph.attr_table)))

    def tables() -> None:  # everything but the sweep: columns, const pool, params, outputs
        fail = validate._Report(graph, "main", "bench")
        validate._check_columns(graph, fail)
        validate._check_tables(graph, fail)
        validate._check_params_outputs(graph, fail)

    sweep_s = statistics.median(_block(sweep))
    time.sleep(PAUSE_S)
    rest_s = statistics.median(_block(tables))
    benchmark.extra_info.update({"n_nodes": N, "sweep_s": sweep_s, "rest_s": rest_s})
    benchmark.pedantic(lambda: None, rounds=1)
    print(f"\nnode sweep {sweep_s * 1e3:.1f} ms, columns/tables/params {rest_s * 1e3:.2f} ms")


def test_marked_function_costs_a_lookup(benchmark, graph: ik.Function) -> None:
    mod = ik.IRModule({"main": graph})
    validate_function(graph)  # built by GraphBuilder: already marked, this is a lookup
    calls = 100_000

    def many() -> None:
        for _ in range(calls):
            validate_module(mod, "bench")

    per_call_us = statistics.median(_block(many, 5)) / calls * 1e6
    benchmark.extra_info.update({"validate_module_us": per_call_us})
    benchmark.pedantic(lambda: None, rounds=1)
    print(f"\nvalidate_module of a marked one-function module: {per_call_us:.2f} us")
