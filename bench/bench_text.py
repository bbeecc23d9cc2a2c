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
>= 300 k nodes/s, at both sizes; for ``consts`` (a third of the nodes constants
of every dtype, scalars and 4-element arrays with float specials and NaN payloads,
attributes, four functions) printing >= 2 M nodes/s and parsing >= 1 M nodes/s. Single-threaded (no pool, no BLAS).
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
CONSTS_PRINT_TARGET = 2e6  # nodes/s, the ``consts`` graph
CONSTS_PARSE_TARGET = 1e6


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


#: Float specials every ``consts`` graph spells: NaN payloads, signed zero, infinities.
_SPECIALS = np.array([np.nan, -0.0, np.inf, -np.inf, 0.1, 1e-300, 3.4e38],
                     np.float64)
_DTYPES = ("float32", "float64", "int32", "int64", "bool")


def _const_value(rng: np.random.Generator, dtype: str, size: int) -> np.ndarray:
    """``size`` random values of ``dtype`` (floats: normals and the specials, with NaNs of
    random payloads; ints over their whole range; bools)."""
    if dtype == "bool":
        return rng.integers(0, 2, size).astype(bool)
    if dtype.startswith("int"):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    values = rng.standard_normal(size) * 10.0 ** rng.integers(-5, 6, size)
    special = rng.random(size) < 0.2
    values[special] = rng.choice(_SPECIALS, int(special.sum()))
    values = values.astype(dtype)
    nan_payload = rng.random(size) < 0.05
    if nan_payload.any():
        raw = values.view(np.uint32 if dtype == "float32" else np.uint64)
        width = 23 if dtype == "float32" else 52
        top = raw.dtype.type((1 << (8 if dtype == "float32" else 11)) - 1) << raw.dtype.type(width)
        payload = rng.integers(1, 1 << min(width, 62), int(nan_payload.sum()), dtype=np.int64)
        raw[nan_payload] = top | payload.astype(raw.dtype)
    return values


def _consts_function(n_nodes: int, seed: int) -> ik.Function:
    """One function of about ``n_nodes`` nodes, a third of them constants: one lane per
    dtype over ``[4]``, each step combining the lane with a scalar or a 4-element
    constant of its dtype; every 8th step a reduction with attributes."""
    rng = np.random.default_rng(seed)
    bb = ik.GraphBuilder("main")
    lanes = {d: bb.param(f"x_{d}", (4,), d) for d in _DTYPES}
    step = 0
    while len(bb) < n_nodes:
        step += 1
        dtype = _DTYPES[step % len(_DTYPES)]
        y = lanes[dtype]
        c = bb.const(_const_value(rng, dtype, 4 if step % 2 else 1).reshape((4,) if step % 2
                                                                               else ()))
        if dtype == "bool":
            y = bb.logical_xor(y, c)
        else:
            y = bb.maximum(y, c) if step % 3 else bb.add(y, c)
        if step % 8 == 0 and dtype != "bool":
            s = bb.sum(y, axis=0, keepdims=True)
            y = bb.add(y, s)
        lanes[dtype] = y
    return bb.finish(list(lanes.values()))


def consts_graph(n_nodes: int, n_functions: int = 4) -> ik.IRModule:
    """``n_functions`` functions of ``n_nodes`` nodes in all, with constants of every
    dtype (scalars and 4-element arrays, float specials and NaN payloads) in a third
    of the nodes, and attribute sets."""
    return ik.IRModule({f"f{k}": _consts_function(n_nodes // n_functions, k)
                        for k in range(n_functions)})


GRAPHS: dict[str, Callable[[int], ik.IRModule]] = {
    "mixed": mixed_graph,
    "consts": consts_graph,
    "random": lambda n: ik.IRModule({"main": random_function(GraphSpec(n_nodes=n, seed=0))}),
}


@cache
def _module(graph: str, size: int) -> ik.IRModule:
    return GRAPHS[graph](size)


@cache
def _text(graph: str, size: int) -> str:
    return _module(graph, size).script()


def _num_nodes(mod: ik.IRModule) -> int:
    return sum(f.num_nodes for f in mod.functions.values())


def _fair(ours: Callable[[], object], ref: Callable[[], object], size: int) -> Fair:
    return fair(ours, ref, repeat=3, warmups=1, rounds=2 if size < 10**6 else 1)


def measure_print(graph: str, size: int) -> tuple[int, Fair]:
    mod = _module(graph, size)
    assert previous.print_module(mod) == _text(graph, size)
    return _num_nodes(mod), _fair(mod.script, lambda: previous.print_module(mod), size)


def measure_parse(graph: str, size: int) -> tuple[int, Fair]:
    text = _text(graph, size)
    assert ik.structural_equal(parse(text), previous.parse(text))
    n = _num_nodes(_module(graph, size))
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
    rate = _record(benchmark, n, f, CONSTS_PRINT_TARGET if graph == "consts" else PRINT_TARGET)
    target = CONSTS_PRINT_TARGET if graph == "consts" else PRINT_TARGET
    check(rate >= target, f"print {graph} {n:,}: {rate / 1e6:.2f} M nodes/s "
                          f"(target {target / 1e6:.0f} M)")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_parse(benchmark, graph: str, size: int) -> None:
    n, f = measure_parse(graph, size)
    target = CONSTS_PARSE_TARGET if graph == "consts" else PARSE_TARGET
    rate = _record(benchmark, n, f, target)
    check(rate >= target, f"parse {graph} {n:,}: {rate / 1e3:.0f} k nodes/s "
                          f"(target {target / 1e3:.0f} k)")


def main(sizes: tuple[int, ...] = SIZES) -> None:
    print(f"text format, ours vs the previous version (same run); 1-min load "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for size in sizes:
        for graph in GRAPHS:
            for what, measure in (("print", measure_print), ("parse", measure_parse)):
                n, f = measure(graph, size)
                print(f"  {what} {graph:<6} {n:>9,} nodes: {f.ours_s * 1e3:8.1f} ms "
                      f"({n / f.ours_s / 1e3:7.0f} k nodes/s) vs previous "
                      f"{f.ref_s * 1e3:8.1f} ms ({n / f.ref_s / 1e3:6.0f} k nodes/s): "
                      f"{f.ratio:5.1f}x", flush=True)


if __name__ == "__main__":
    main(tuple(int(float(a)) for a in sys.argv[1:]) or SIZES)  # e.g. ``1e5`` for one size
