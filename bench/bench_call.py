"""Per-call overhead of a one-kernel graph against NumPy (issue 31).

    PYTHONPATH=. .venv/bin/python bench/bench_call.py [--repeat 9] [--calls 2000]

A graph of one small kernel (an 8 x 8 matmul, a 16-element add) is called ``--calls``
times per sample, ``ex["main"](x, y)`` and ``ex["main"](x, y, out=[o])``, beside NumPy's
``x @ y`` / ``x + y`` (``irkernel.testing.timing.compare``: blocks of their own, after
warm-ups): the kernels run in nanoseconds, so the time is the Python call path (argument
checks, output allocation, binding the addresses, the ctypes launch). Reported: us per
call and the ratio to NumPy's.
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--calls", type=int, default=2000)
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

        for label, side in (("call", ours), ("call(out=)", ours_out)):
            cmp = compare(side, numpy, repeat=args.repeat, warmups=2, pause=0.1)
            us, ref_us = (cmp.ours.median / args.calls * 1e6, cmp.ref.median / args.calls * 1e6)
            print(f"{op:6s} {label:11s} ours {us:6.2f} us  numpy {ref_us:5.2f} us  "
                  f"ratio {us / ref_us:5.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
