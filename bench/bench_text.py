"""Benchmarks of the text format: print and parse a 1e5-node graph.

Run with ``pytest bench/bench_text.py --benchmark-enable``. The graph mixes the
node forms the printer emits (unary, binary, scalar constants, attributes,
variadic operands) so both the printer's tables and the parser's regex fast
path are exercised.
"""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
from irkernel.text.parser import parse

N_NODES = 10**5


def mixed_graph(n_nodes: int) -> ik.IRModule:
    """A chain of about ``n_nodes`` nodes: exp, add, multiply by a constant, concat, sum."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    y = x
    step = 0
    while len(bb) < n_nodes:
        step += 1
        y = bb.exp(y)
        y = bb.add(y, x)
        if step % 8 == 0:
            y = bb.multiply(y, bb.const(np.float32(step / 7)))
        if step % 16 == 0:
            s = bb.sum(y, axis=0, keepdims=True)
            y = bb.subtract(y, bb.concat(s, s, s, s, axis=0))
    return ik.IRModule({"main": bb.finish([y])})


@pytest.fixture(scope="module")
def module() -> ik.IRModule:
    return mixed_graph(N_NODES)


@pytest.fixture(scope="module")
def text(module: ik.IRModule) -> str:
    return module.script()


def test_print_1e5_nodes(benchmark, module: ik.IRModule) -> None:
    benchmark.extra_info["nodes"] = module["main"].num_nodes
    benchmark.pedantic(module.script, rounds=3)


def test_parse_1e5_nodes(benchmark, text: str) -> None:
    benchmark.extra_info["nodes"] = text.count("\n")
    benchmark.pedantic(parse, args=(text,), rounds=3)
