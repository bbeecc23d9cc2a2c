"""Per-token time of the transformer encoder at sequence lengths that are and are not tile
multiples (issue 31, item 5): one ``DynamicModel`` build per length, against onnxruntime.

Run with::

    PYTHONPATH=.:tests/frontend .venv/bin/python bench/bench_seq_lengths.py [--runs 31]

The model is the exported ``tests/frontend/models/transformer_encoder_dynamic.onnx``
(symbolic batch and sequence, a padding mask) at batch 1. Per length, in one process:
irkernel's build for that binding (``irkernel.frontend.onnx.dynamic.DynamicModel``),
then each side timed in a block of its own after warm-ups, with a pause between blocks
(medians; one and two threads: irkernel's pool, onnxruntime's intra-op threads).
Printed per length: microseconds per token of each side, their ratio, and irkernel's
per-token time relative to the nearest tile-multiple length measured (64 for 50 and 77,
192 for 197, ...): the target is that a length off the tiles costs no more per token.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "frontend")]

LENGTHS = (50, 64, 77, 128, 192, 197)
ROUND = (64, 128, 192)
THREADS = (1, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--warmups", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.3)
    parser.add_argument("--lengths", type=int, nargs="*", default=list(LENGTHS))
    args = parser.parse_args(argv)
    os.environ.setdefault("IRKERNEL_CACHE_DIR", tempfile.mkdtemp(prefix="irkernel-bench-seq-"))
    from bench_onnx_import import _median_time, ort_time
    from model_weights import load
    from onnx_helpers import model_inputs

    import runtime
    from irkernel.frontend.onnx.dynamic import DynamicModel
    from irkernel.target import cpu_target

    model_name = next((line.split(":", 1)[1].strip() for line in
                       Path("/proc/cpuinfo").read_text().splitlines()
                       if line.startswith("model name")), "unknown CPU")
    print(f"CPU: {model_name}; {cpu_target('host').describe()}")
    print(f"transformer_encoder_dynamic, batch 1; medians of {args.runs} runs after "
          f"{args.warmups} warm-ups; us per token")
    model = load("transformer_encoder_dynamic")
    built = DynamicModel(model).build(max_builds=len(args.lengths))
    rows = {}
    for seq in args.lengths:
        inputs = model_inputs(model, sizes={"batch": 1, "seq": seq})
        arrays = list(inputs.values())
        ex = built.executable_for(*arrays)["main"]
        row = {}
        for threads in THREADS:
            time.sleep(args.pause)
            runtime.set_num_threads(threads)
            ours = _median_time(lambda: ex(*arrays), args.runs, args.warmups)  # noqa: B023
            time.sleep(args.pause)
            theirs = ort_time(model, inputs, threads, args.runs, args.warmups)
            row[threads] = (ours / seq * 1e6, theirs / seq * 1e6)
        rows[seq] = row
    print("\n| seq | " + " | ".join(f"{t}T ours us/token | {t}T ort us/token | {t}T ratio "
                                     f"| {t}T per token vs round length" for t in THREADS)
          + " |")
    print("|---|" + "---|---|---|---|" * len(THREADS))
    for seq, row in rows.items():
        near = min((r for r in ROUND if r in rows), key=lambda r: abs(r - seq), default=None)
        cells = []
        for t in THREADS:
            ours, theirs = row[t]
            rel = f"{ours / rows[near][t][0]:.2f} (vs {near})" if near else "-"
            cells.append(f"{ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} | {rel}")
        print(f"| {seq} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
