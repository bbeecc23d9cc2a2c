"""Cache blocking of the conv schedules, old against new, inside a model (issue 24).

Run as a script (it is not a pytest suite):

    PYTHONPATH=.:tests/frontend:bench .venv/bin/python bench/bench_blocking.py \\
        [--model mobilenet_v2] [--threads 1] [--rounds 6] [--repeat 15] [--top 20]

Two blocked forms are timed against the orders they replaced, in the model rather than
one layer at a time: on its own, a layer's output is a fresh array whose pages the
kernel faults in (so its lines are in cache) and the two orders time the same, while in
a model the output is an arena slot last touched long before, whose lines miss.

- ``tile_run`` (``passes/topi/conv.py``): implicit-GEMM tasks of several pixel tiles,
  row block by row block, for short reductions; the old order is one tile a task.
- ``band_rows`` (``passes/topi/depthwise_flat.py``): depthwise planes whose phase planes
  overflow half of L1 in bands of output rows; the old order copies the whole plane.

The model (224x224, batch 1) is built twice in one process, once with both functions
replaced by the old choice, and the two executables are profiled in alternating blocks
(``Executable.profile``: every kernel timed in place, ``--repeat`` runs a block). Printed:
the sum of the kernels' medians of each side, then per kernel (the ``--top`` slowest of
the old build) new ms, old ms and new / old; then the whole runs of new, old and
onnxruntime (CPU provider, ``intra_op_num_threads`` = ours) through
``irkernel.testing.timing.compare``. Figures are noisy on a shared machine: read ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "frontend")]


def build_both(model):
    """(new, old) executables of ``model``: the second built with the blocked forms off."""
    import passes.legalize_ops as legalize
    import passes.topi.conv as conv
    import passes.topi.depthwise_flat as flat
    import passes.topi.templates as templates
    import runtime
    from irkernel.frontend.onnx import from_onnx

    def forget() -> None:  # the templates and LegalizeOps memoize per signature
        for memo in (conv._conv, flat._depthwise_flat, legalize._digested,
                     templates._legalize_cached):
            memo.cache_clear()

    new = runtime.build(from_onnx(model))
    saved = conv.tile_run, flat.band_rows
    conv.tile_run, flat.band_rows = (lambda *a: 1), (lambda *a: 0)
    forget()
    try:
        old = runtime.build(from_onnx(model))
    finally:
        conv.tile_run, flat.band_rows = saved
        forget()
    tir_new, tir_old = new.get_source("tir"), old.get_source("tir")
    if tir_new == tir_old or "for ri in" in tir_old:
        raise RuntimeError("the old build has the new schedules: a memo was not cleared")
    return new, old


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6, help="profile blocks per side")
    parser.add_argument("--repeat", type=int, default=15, help="runs per profile block")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    os.environ.setdefault("IRKERNEL_CACHE_DIR", tempfile.mkdtemp(prefix="irkernel-blocking-"))
    import onnxruntime as ort
    from bench_onnx import resized
    from bench_onnx_import import _load
    from benchutil import cpu_name
    from onnx_helpers import model_inputs

    import runtime
    from irkernel.testing.timing import compare

    runtime.set_num_threads(args.threads)
    model = resized(_load(args.model), 224)
    feeds = model_inputs(model)
    inputs = list(feeds.values())
    new, old = build_both(model)
    print(f"CPU: {cpu_name()}; {args.model} 224x224, {args.threads} thread(s)")
    times: dict[str, dict[str, list[float]]] = {"new": {}, "old": {}}
    sums: dict[str, list[float]] = {"new": [], "old": []}
    for r in range(args.rounds):
        for side in (("new", "old") if r % 2 == 0 else ("old", "new")):
            time.sleep(0.2)
            rows = (new if side == "new" else old).profile(*inputs, repeat=args.repeat).rows
            for row in rows:
                times[side].setdefault(row.kernel, []).append(row.time * 1e3)
            sums[side].append(sum(row.time for row in rows) * 1e3)
    med = statistics.median
    a, b = med(sums["new"]), med(sums["old"])
    print(f"kernels: new {a:.3f} ms, old {b:.3f} ms, new / old {a / b:.3f}")
    print(f"{'kernel':48} {'new ms':>8} {'old ms':>8} {'ratio':>6}")
    for k in sorted(times["old"], key=lambda k: -med(times["old"][k]))[:args.top]:
        a, b = med(times["new"].get(k, [float("nan")])), med(times["old"][k])
        print(f"{k:48} {a:8.3f} {b:8.3f} {a / b:6.2f}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = args.threads, 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    f_new, f_old = new["main"], old["main"]
    vs_old = compare(lambda: f_new(*inputs), lambda: f_old(*inputs), repeat=args.repeat,
                     warmups=3, rounds=args.rounds)
    vs_ort = compare(lambda: f_new(*inputs), lambda: sess.run(None, feeds),
                     repeat=args.repeat, warmups=3, rounds=args.rounds)
    print(f"whole run: new {vs_old.ours.median * 1e3:.3f} ms, old "
          f"{vs_old.ref.median * 1e3:.3f} ms (new / old "
          f"{vs_old.ours.median / vs_old.ref.median:.3f}); new {vs_ort.ours.median * 1e3:.3f}"
          f" ms, onnxruntime {vs_ort.ref.median * 1e3:.3f} ms (new / ort "
          f"{vs_ort.ours.median / vs_ort.ref.median:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
