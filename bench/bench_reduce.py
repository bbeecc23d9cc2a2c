"""The reducer on a planted miscompile: ``transform.reduce`` and ``irkernel reduce --test``.

Run with::

    PYTHONPATH=. .venv/bin/python bench/bench_reduce.py [--nodes 100000] [--seed 0]
        [--jobs N] [--skip-cli]

What is measured: a ``testing.miscompile.planted_module(n)`` (random float32
graph, 16 outputs) holds the pattern ``tanh(add(multiply(a, b), c))`` that
``buggy_rewrite`` miscompiles (the add becomes a subtract). The predicate
``shows_miscompile`` compares the interpreter's outputs before and after the
rewrite. Reported: wall time, predicate calls and the node count of the result,

1. in-process: ``transform.reduce(mod, shows_miscompile)``;
2. ``irkernel reduce FILE --test interesting.sh`` in a child process, the shell
   script running a Python one-liner on each candidate file (so each call pays a
   process start and ``import irkernel``: about 1.5 s here), with ``-j N`` tests at
   once (``--jobs``; default the CLI's, the number of cores).

The last progress line counts the calls that ran past the answer ("unused": the
price of running candidates concurrently) and the candidates answered from the
reducer's cache of answers by structural hash (no call).

Target (issue 30): <= 20 nodes in <= 60 s on 2 cores, both ways. The result
must verify and keep the predicate true; this script checks both and exits 1
otherwise. Timing figures from a shared machine are noisy: rerun before
quoting them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import irkernel as ik
from irkernel import transform
from irkernel.testing.miscompile import planted_module, shows_miscompile

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """#!/bin/sh
exec "{python}" -c 'import sys, irkernel as ik
from irkernel.testing.miscompile import shows_miscompile
sys.exit(0 if shows_miscompile(ik.parse(open(sys.argv[1]).read())) else 1)' "$1"
"""


def _check(mod: ik.IRModule) -> int:
    ik.verify(mod)
    if not shows_miscompile(mod):
        raise SystemExit("bench_reduce: the result no longer shows the miscompile")
    return mod["main"].num_nodes


def in_process(mod: ik.IRModule) -> None:
    calls = []
    start = time.perf_counter()
    out = transform.reduce(mod, shows_miscompile, progress=calls.append)
    seconds = time.perf_counter() - start
    print(f"transform.reduce: {mod['main'].num_nodes:,} -> {_check(out)} nodes in "
          f"{seconds:.1f} s ({calls[-1].split(']')[0].split(', ')[1]})")
    for line in calls:
        print("   ", line)


def with_test_script(mod: ik.IRModule, jobs: int | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp, "big.ir"), Path(tmp, "small.ir")
        src.write_text(mod.script())
        script = Path(tmp, "interesting.sh")
        script.write_text(SCRIPT.format(python=sys.executable))
        script.chmod(0o755)
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        start = time.perf_counter()
        jobs_args = [] if jobs is None else ["-j", str(jobs)]
        done = subprocess.run([sys.executable, "-m", "irkernel.cli", "reduce", str(src),
                               "--test", str(script), *jobs_args, "-v", "-o", str(out)], env=env,
                              capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if done.returncode:
            raise SystemExit(f"bench_reduce: irkernel reduce failed: {done.stderr}")
        last = done.stderr.strip().splitlines()[-1]
        print(f"irkernel reduce --test -j {jobs or os.cpu_count()}: {mod['main'].num_nodes:,} -> "
              f"{_check(ik.parse(out.read_text()))} nodes in {seconds:.1f} s ({last})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=None,
                        help="-j for irkernel reduce (default: its own, the number of cores)")
    parser.add_argument("--skip-cli", action="store_true")
    args = parser.parse_args()
    mod = planted_module(args.nodes, args.seed)
    if not shows_miscompile(mod):
        raise SystemExit(f"bench_reduce: seed {args.seed} hides the miscompile; try another")
    in_process(mod)
    if not args.skip_cli:
        with_test_script(mod, args.jobs)


if __name__ == "__main__":
    main()
