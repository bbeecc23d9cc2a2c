"""The MLP of issue 16 against NumPy + OpenBLAS, each side in its own quiet process.

    PYTHONPATH=. .venv/bin/python bench/bench_mlp.py [--runs 41] [--rounds 3] [--batch 64]

The module is the demo's (``irkernel.cli.workloads.mlp_module``: ``layers`` x
``relu(x @ W + b)``, float32, batch 64, hidden 1024, 3 layers). Each measurement is a
fresh process that builds (ours) or allocates (NumPy), warms up, then times ``--runs``
calls and prints the median; the sides alternate (ours, NumPy, ours, ...) for
``--rounds`` rounds with a pause between processes, so neither side inherits the other's
spinning threads or caches. Thread counts: ours ``runtime.set_num_threads(t)``; NumPy's
BLAS ``threadpoolctl.threadpool_limits(t)``; both at 1 and 2. Reported: the median over
rounds of each side's medians, and ratio = ours / NumPy (<= 1.0: ours is at least as
fast; the issue's target at 2 threads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, {root!r})
import numpy as np
from threadpoolctl import threadpool_limits
from irkernel.cli.workloads import mlp_inputs, mlp_module, mlp_numpy
side, threads, runs, batch, hidden, layers = {args!r}
inputs = mlp_inputs(batch, hidden, layers)
with threadpool_limits(threads):
    if side == "irkernel":
        import runtime
        runtime.set_num_threads(threads)
        fn = runtime.build(mlp_module(batch, hidden, layers))["main"]
        call = lambda: fn(*inputs)
    else:
        call = lambda: mlp_numpy(*inputs)
    for _ in range(10):
        call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
print(json.dumps(statistics.median(times)))
"""


def measure(side: str, threads: int, runs: int, batch: int, hidden: int, layers: int) -> float:
    code = _CHILD.format(root=str(ROOT), args=(side, threads, runs, batch, hidden, layers))
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=41)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--pause", type=float, default=1.0)
    args = parser.parse_args(argv)
    shape = (args.batch, args.hidden, args.layers)
    print(f"MLP batch {args.batch}, hidden {args.hidden}, {args.layers} layers, float32; "
          f"median of {args.runs} calls per process, {args.rounds} rounds")
    print("| threads | irkernel ms | NumPy + OpenBLAS ms | ratio (irkernel / NumPy) |")
    print("|---|---|---|---|")
    for threads in (1, 2):
        ours, theirs = [], []
        for _ in range(args.rounds):
            for side, into in (("irkernel", ours), ("numpy", theirs)):
                time.sleep(args.pause)
                into.append(measure(side, threads, args.runs, *shape))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"| {threads} | {a * 1e3:.2f} | {b * 1e3:.2f} | {a / b:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
