"""Benchmarks of graph construction: bulk random graphs and one builder call per node.

Run with ``pytest bench/bench_build.py --benchmark-enable``. Targets (DESIGN:
"building 1e7 nodes is a NumPy-speed operation"): a 1e7-node random scalar
graph of the default op mix in well under 2 s at <= 40 bytes per node, and
>= 3e5 nodes/s for incremental ``GraphBuilder.call``. Figures land in
``extra_info`` (``bytes_per_node``, ``nodes_per_s``) for ``bench/report.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
from irkernel.testing import random_function

N_BULK = 10**7
N_INCREMENTAL = 3 * 10**5


def _median(benchmark) -> float | None:
    stats = getattr(benchmark, "stats", None)
    return None if stats is None else float(stats.stats.median)


def test_bulk_random_scalar_graph_1e7(benchmark) -> None:
    random_function(1000)  # compile (or load) the wiring kernel outside the timing
    funcs = []

    def build() -> ik.Function:
        funcs[:] = []  # drop the previous round's graph before building the next
        funcs.append(random_function(N_BULK, seed=0))
        return funcs[0]

    func = benchmark.pedantic(build, rounds=3, iterations=1)
    bytes_per_node = func.nbytes / func.num_nodes
    benchmark.extra_info["nodes"] = func.num_nodes
    benchmark.extra_info["bytes_per_node"] = bytes_per_node
    median = _median(benchmark)
    if median is not None:
        benchmark.extra_info["seconds"] = median
        benchmark.extra_info["nodes_per_s"] = func.num_nodes / median
    assert func.num_nodes == N_BULK
    assert bytes_per_node <= 40


def _incremental(n_nodes: int, operands: np.ndarray, kinds: list[str]) -> ik.Function:
    """One ``bb.call`` per node: binary and unary float ops on recent nodes."""
    bb = ik.GraphBuilder("main")
    bb.param("x", (), "float32")
    last = bb.param("y", (), "float32")
    call = bb.call
    for i in range(n_nodes):
        op = kinds[i]
        last = call(op, last) if op == "exp" else call(op, last, int(operands[i]))
    return bb.finish([last])


def test_incremental_builder_calls(benchmark) -> None:
    rng = np.random.default_rng(0)
    node = np.arange(2, N_INCREMENTAL + 2)
    operands = np.maximum(node - 1 - rng.geometric(0.2, N_INCREMENTAL), 0)
    kinds = rng.choice(["add", "multiply", "subtract", "maximum", "exp"], N_INCREMENTAL).tolist()
    func = benchmark.pedantic(_incremental, args=(N_INCREMENTAL, operands, kinds), rounds=3,
                              iterations=1)
    benchmark.extra_info["nodes"] = func.num_nodes
    median = _median(benchmark)
    if median is not None:
        benchmark.extra_info["nodes_per_s"] = N_INCREMENTAL / median
    ik.verify(func)


@pytest.mark.parametrize("shapes", ["small"])
def test_small_tensor_graph_1e4(benchmark, shapes: str) -> None:
    func = benchmark.pedantic(random_function, args=(10**4,), kwargs={"seed": 0, "shapes": shapes},
                              rounds=3, iterations=1)
    median = _median(benchmark)
    if median is not None:
        benchmark.extra_info["nodes_per_s"] = func.num_nodes / median
    ik.verify(func)
