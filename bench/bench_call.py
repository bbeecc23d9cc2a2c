"""Per-call overhead of a one-kernel graph against NumPy (issue 31).

    PYTHONPATH=. .venv/bin/python bench/bench_call.py [--repeat 9] [--calls 2000]

A graph of one small kernel (an 8 x 8 matmul, a 16-element add) is called ``--calls``
times per sample, ``ex["main"](x, y)`` and ``ex["main"](x, y, out=[o])``, beside NumPy's
``x @ y`` / ``x + y`` (``irkernel.testing.timing.compare``: blocks of their own, after
warm-ups): the kernels run in nanoseconds, so the time is the Python call path (argument
checks, output allocation, binding the addresses, the ctypes launch). Reported: us per
call and the ratio to NumPy's.

``--baseline REV`` compares instead against the executor of git revision ``REV``
(``runtime/executor.py`` as it was there, loaded beside today's and run on the same
compiled kernels), in alternating blocks: the old/new ratio of the call path.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import irkernel as ik  # noqa: E402
import runtime  # noqa: E402
from irkernel.testing.timing import compare  # noqa: E402


def _graph(op: str, shape: tuple[int, ...]):
    bb = ik.GraphBuilder("main")
    x, y = bb.param("x", shape, "float32"), bb.param("y", shape, "float32")
    out = bb.matmul(x, y) if op == "matmul" else bb.call(op, x, y)
    return runtime.build(ik.IRModule({"main": bb.finish([out])}))["main"]


def _baseline_executor(rev: str, fn):
    """``fn`` (a GraphExecutor) rebuilt with ``runtime/executor.py`` of git revision ``rev``."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(["git", "show", f"{rev}:runtime/executor.py"], cwd=root,
                            check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader(f"runtime._executor_{rev}", loader=None)
    old = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{rev}:runtime/executor.py", "exec"), old.__dict__)
    return old.GraphExecutor(fn.name, fn.func, fn._kernels, {})  # noqa: SLF001


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--baseline", metavar="REV", default=None,
                    help="compare against the executor of this git revision, not NumPy")
    args = ap.parse_args(argv)
    runtime.set_num_threads(1)
    for op, shape, ref in (("matmul", (8, 8), np.matmul), ("add", (16,), np.add)):
        fn = _graph(op, shape)
        x = np.ones(shape, np.float32)
        y = np.ones(shape, np.float32)
        o = [np.empty(shape, np.float32)]
        calls = range(args.calls)

        def ours(fn=fn, x=x, y=y):
            for _ in calls:
                fn(x, y)

        def ours_out(fn=fn, x=x, y=y, o=o):
            for _ in calls:
                fn(x, y, out=o)

        def numpy(ref=ref, x=x, y=y):
            for _ in calls:
                ref(x, y)

        old = None if args.baseline is None else _baseline_executor(args.baseline, fn)

        def old_call(old=old, x=x, y=y):
            for _ in calls:
                old(x, y)

        def old_out(old=old, x=x, y=y, o=o):
            for _ in calls:
                old(x, y, out=o)

        for label, side, base in (("call", ours, old_call), ("call(out=)", ours_out, old_out)):
            cmp = compare(side, numpy if old is None else base, repeat=args.repeat,
                          warmups=2, pause=0.1)
            us, ref_us = (cmp.ours.median / args.calls * 1e6, cmp.ref.median / args.calls * 1e6)
            name = "numpy" if old is None else args.baseline[:7]
            print(f"{op:6s} {label:11s} ours {us:6.2f} us  {name} {ref_us:5.2f} us  "
                  f"ratio {us / ref_us:5.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
