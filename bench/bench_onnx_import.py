"""ONNX models: import, build and run time of irkernel against onnxruntime.

Run as a script (it is not a pytest suite):

    PYTHONPATH=.:tests/frontend .venv/bin/python bench/bench_onnx_import.py [--threads 1] \
        [--runs 10] [model ...]

Models: the PyTorch exports of ``tests/frontend/models`` (random weights regenerated from
seed 0, reduced input sizes as in the tests) and the light models of the onnx wheel with
random weights (``light:<name>``). For each model, in this order and each in a block of
its own: ``from_onnx`` (import), ``runtime.build`` (build, with a cold in-process kernel
cache: the on-disk cache is pointed at a fresh directory), then irkernel's runs and
onnxruntime's runs (session creation excluded), each after ``--warmups`` runs, with a
pause between blocks; times are medians of ``--runs`` runs. Both sides use the same
thread count (``runtime.set_num_threads`` and ORT's ``intra_op_num_threads``; ORT's
inter-op pool is 1). The ratio is ORT time / irkernel time (> 1: irkernel is faster).
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "frontend")]

LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
         "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def _load(name: str):
    import onnx
    if name.startswith("light:"):
        from test_onnx_models import LIGHT_DIR, random_weights
        return random_weights(onnx.load(os.path.join(LIGHT_DIR, f"light_{name[6:]}.onnx")))
    from model_weights import load
    return load(name)


def _median_time(fn, runs: int, warmups: int) -> float:  # noqa: ANN001
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ort_time(model, inputs: dict, threads: int, runs: int, warmups: int) -> float:
    """Median seconds of onnxruntime running ``model`` (CPU provider, default graph
    optimizations, ``threads`` intra-op threads, one inter-op thread)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return _median_time(lambda: sess.run(None, inputs), runs, warmups)


def bench(name: str, threads: int, runs: int, warmups: int, pause: float) -> dict[str, float]:
    from onnx_helpers import model_inputs as _inputs

    import runtime
    from irkernel.frontend.onnx import from_onnx

    model = _load(name)
    inputs = _inputs(model)
    args = list(inputs.values())
    start = time.perf_counter()
    mod = from_onnx(model)
    t_import = time.perf_counter() - start
    time.sleep(pause)
    start = time.perf_counter()
    graph = runtime.build(mod)["main"]
    t_build = time.perf_counter() - start
    time.sleep(pause)
    runtime.set_num_threads(threads)
    t_ours = _median_time(lambda: graph(*args), runs, warmups)
    time.sleep(pause)
    t_ort = ort_time(model, inputs, threads, runs, warmups)
    return {"import": t_import, "build": t_build, "ours": t_ours, "ort": t_ort,
            "nodes": mod["main"].num_nodes}


def main(argv: list[str] | None = None) -> int:
    from model_weights import MODEL_NAMES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="model names (default: all; light:<name>)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between blocks")
    args = parser.parse_args(argv)
    os.environ["IRKERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="irkernel-bench-cache-")
    names = args.models or [*MODEL_NAMES, *(f"light:{n}" for n in LIGHT)]
    print(f"threads={args.threads}, medians of {args.runs} runs after {args.warmups} "
          "warm-up(s)\n")
    print("| model | graph nodes | import s | build s | irkernel run ms | onnxruntime run ms "
          "| ratio (ort / irkernel) |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        try:
            r = bench(name, args.threads, args.runs, args.warmups, args.pause)
        except Exception as exc:  # a benchmark table row per model, whatever fails
            print(f"| {name} | failed: {type(exc).__name__}: {str(exc)[:80]} | | | | | |")
            continue
        print(f"| {name} | {r['nodes']} | {r['import']:.2f} | {r['build']:.1f} | "
              f"{r['ours'] * 1e3:.2f} | {r['ort'] * 1e3:.2f} | {r['ort'] / r['ours']:.3f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
