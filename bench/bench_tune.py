"""``runtime.tune`` on a model (issue 24): how long tuning takes, what it changes, and the
model's time with the analytic tiles against the tuned ones.

Run with::

    PYTHONPATH=.:tests/frontend .venv/bin/python bench/bench_tune.py [resnet18] [--size 224]

One thread (irkernel's pool), a fresh cache directory. Printed: the cold build, the
tuning time and its table (``TuneReport.render``), the tuned build from the cache, then
the model's median time (15 runs after 3 warm-ups, 0.3 s pause before each block) with
the analytic tiles and with the tuned ones, twice each, alternating.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="resnet18")
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args(argv)
    os.environ["IRKERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="irkernel-bench-tune-")
    from bench_onnx import resized
    from bench_onnx_import import _load, _median_time
    from onnx_helpers import model_inputs

    import runtime
    from irkernel import transform
    from irkernel.frontend.onnx import from_onnx
    from irkernel.target import cpu_target
    from passes.topi.tuned import TUNED_TILES, TileTable

    print(f"CPU: {cpu_target('host').describe()}; 1 thread")
    model = resized(_load(args.model), args.size) if args.size else _load(args.model)
    inputs = list(model_inputs(model).values())
    mod = from_onnx(model)
    runtime.set_num_threads(1)
    start = time.perf_counter()
    runtime.build(mod)
    print(f"{args.model}: cold build {time.perf_counter() - start:.2f} s")
    start = time.perf_counter()
    report = runtime.tune(mod, repeat=7)
    print(f"tune: {time.perf_counter() - start:.1f} s")
    print(report.render())
    start = time.perf_counter()
    tuned = runtime.build(mod)
    print(f"tuned build (from the cache) {time.perf_counter() - start:.2f} s")
    with transform.PassContext(config={TUNED_TILES: TileTable()}):
        analytic = runtime.build(mod)
    for _ in range(2):
        for label, ex in (("analytic", analytic), ("tuned", tuned)):
            time.sleep(0.3)
            graph = ex["main"]
            ms = _median_time(lambda: graph(*inputs), 15, 3) * 1e3  # noqa: B023
            print(f"{label:9s} {ms:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
