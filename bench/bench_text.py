"""Text format at scale: print and parse 1e5 and 1e6 nodes, against the previous version.

Run with::

    IRKERNEL_BENCH_REPORT_ONLY=1 PYTHONPATH=. \
        .venv/bin/python -m pytest bench/bench_text.py --benchmark-enable -q
    PYTHONPATH=. .venv/bin/python bench/bench_text.py        # prints the table

Two graphs per size: ``mixed`` (a chain mixing the forms the printer emits:
unary, binary, scalar constants, attributes, variadic operands) and ``random``
(``irkernel.testing.random_function``: scalar nodes of every dtype, many
constants and attribute sets). The baseline is the previous printer and parser
(``text_baseline.py``: one f-string per node, one regex match per line), timed
in the same run: each side in blocks of its own (``benchutil.fair``; 1 warm-up
+ 3 timed calls per block, 2 blocks per side at 1e5 and 1 at 1e6, a 0.3 s
pause before every block), medians. Both sides must give the same text and
structurally equal modules. Targets: printing >= 1 M nodes/s and parsing
>= 300 k nodes/s, at both sizes. Single-threaded (no pool, no BLAS).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
from irkernel.testing import GraphSpec, random_function
from irkernel.text.parser import parse

sys.path.insert(0, str(Path(__file__).parent))
import text_baseline as previous
from benchutil import Fair, check, fair

SIZES = (10**5, 10**6)
PRINT_TARGET = 1e6  # nodes/s
PARSE_TARGET = 3e5  # nodes/s


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


GRAPHS: dict[str, Callable[[int], ik.IRModule]] = {
    "mixed": mixed_graph,
    "random": lambda n: ik.IRModule({"main": random_function(GraphSpec(n_nodes=n, seed=0))}),
}


@cache
def _module(graph: str, size: int) -> ik.IRModule:
    return GRAPHS[graph](size)


@cache
def _text(graph: str, size: int) -> str:
    return _module(graph, size).script()


def _fair(ours: Callable[[], object], ref: Callable[[], object], size: int) -> Fair:
    return fair(ours, ref, repeat=3, warmups=1, rounds=2 if size < 10**6 else 1)


def measure_print(graph: str, size: int) -> tuple[int, Fair]:
    mod = _module(graph, size)
    assert previous.print_module(mod) == _text(graph, size)
    return mod["main"].num_nodes, _fair(mod.script, lambda: previous.print_module(mod), size)


def measure_parse(graph: str, size: int) -> tuple[int, Fair]:
    text = _text(graph, size)
    assert ik.structural_equal(parse(text), previous.parse(text))
    n = _module(graph, size)["main"].num_nodes
    return n, _fair(lambda: parse(text), lambda: previous.parse(text), size)


def _record(benchmark, n: int, f: Fair, target: float) -> float:
    rate = n / f.ours_s
    benchmark.extra_info.update({
        "nodes": n, "ours_s": f.ours_s, "previous_s": f.ref_s, "nodes_per_s": rate,
        "previous_nodes_per_s": n / f.ref_s, "ratio": f.ratio, "target_nodes_per_s": target,
        "loadavg_1min": os.getloadavg()[0]})
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are in extra_info
    return rate


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_print(benchmark, graph: str, size: int) -> None:
    n, f = measure_print(graph, size)
    rate = _record(benchmark, n, f, PRINT_TARGET)
    check(rate >= PRINT_TARGET, f"print {graph} {n:,}: {rate / 1e6:.2f} M nodes/s "
                                f"(target {PRINT_TARGET / 1e6:.0f} M)")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_parse(benchmark, graph: str, size: int) -> None:
    n, f = measure_parse(graph, size)
    rate = _record(benchmark, n, f, PARSE_TARGET)
    check(rate >= PARSE_TARGET, f"parse {graph} {n:,}: {rate / 1e3:.0f} k nodes/s "
                                f"(target {PARSE_TARGET / 1e3:.0f} k)")


def main() -> None:
    print(f"text format, ours vs the previous version (same run); 1-min load "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for size in SIZES:
        for graph in GRAPHS:
            for what, measure in (("print", measure_print), ("parse", measure_parse)):
                n, f = measure(graph, size)
                print(f"  {what} {graph:<6} {n:>9,} nodes: {f.ours_s * 1e3:8.1f} ms "
                      f"({n / f.ours_s / 1e3:7.0f} k nodes/s) vs previous "
                      f"{f.ref_s * 1e3:8.1f} ms ({n / f.ref_s / 1e3:6.0f} k nodes/s): "
                      f"{f.ratio:5.1f}x", flush=True)


if __name__ == "__main__":
    main()
