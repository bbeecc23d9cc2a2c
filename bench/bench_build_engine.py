"""Distributed build: a many-kernel module built in-process against on a process pool.

Usage::

    PYTHONPATH=. .venv/bin/python bench/bench_build_engine.py [--nodes 3000] [--workers 2]

The module is ``random_function(n, shapes="small")`` built with
``runtime.generic_max_elements = 0`` (a specialized kernel per op signature: hundreds
of kernels, the case where LLVM dominates a build). Each side is timed in a block of
its own (cold, ``cache=False``; one warm-up build per block, then ``--rounds`` timed
builds, medians; 1 s pause between blocks). The pool is started (and warmed) before its
block, as a user keeps one: ``transform.local_executor(n)``. Outputs are compared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.testing import GraphSpec, random_function, random_inputs


def _timed(mod, inputs, engine, rounds: int) -> tuple[float, list[np.ndarray]]:
    """Median seconds of ``rounds`` cold builds after one warm-up build, and the outputs."""
    times = []
    out: list[np.ndarray] = []
    for k in range(rounds + 1):
        start = time.perf_counter()
        ex = runtime.build(mod, cache=False, engine=engine)
        if k:
            times.append(time.perf_counter() - start)
        out = ex["main"](*inputs)
    return statistics.median(times), out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=3000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    func = random_function(GraphSpec(n_nodes=a.nodes, seed=0, shapes="small",
                                     dtypes=("float32",), dead_fraction=0.0))
    mod = ik.IRModule({"main": func})
    inputs = random_inputs(func, seed=0, special_values=False)
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        here, out_here = _timed(mod, inputs, None, a.rounds)
        time.sleep(1.0)
        with transform.local_executor(a.workers) as pool:
            runtime.build(mod, cache=False, engine=pool)  # warm the workers
            there, out_there = _timed(mod, inputs, pool, a.rounds)
    same = all(np.array_equal(x, y, equal_nan=True) for x, y in zip(out_here, out_there, strict=True))
    print(f"load {os.getloadavg()[0]:.1f}; {a.nodes} nodes, cold builds, medians of {a.rounds}")
    print(f"in-process (lowering here, LLVM on one thread): {here:.2f} s")
    print(f"local_executor({a.workers}) (LLVM on worker processes): {there:.2f} s "
          f"-> speedup {here / there:.2f}x; outputs equal: {same}")


if __name__ == "__main__":
    main()
