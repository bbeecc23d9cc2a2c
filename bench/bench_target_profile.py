"""Per-kernel time of a model built for several CPU targets, side by side (issue 24's AVX2 cliff).

Run as a script (it is not a pytest suite):

    PYTHONPATH=. .venv/bin/python bench/bench_target_profile.py [--targets host,avx2] \\
        [--size 224] [--rounds 5] [--repeat 10] [--top 15] [--json out.json] [model ...]

Per model (default efficientnet_b0 and mobilenet_v2, loaded as ``bench/bench_onnx.py``
loads them): one ``runtime.build`` per target (config ``target``: ``host``, ``avx2``,
``sse4.2``, ...) in one process, then ``--rounds`` rounds that profile each build in turn
(``Executable.profile``, ``--repeat`` runs each, one thread). A kernel's time is the
least over the rounds of its per-round median: on a shared machine the least disturbed
round. The kernel names agree between the builds (fusion does not depend on the target),
so the tables compare the first target with each other one, kernel by kernel: per schedule (``conv_implicit_gemm``,
``depthwise``, ...), then the kernels whose time grows most from the first target to the
second. On AVX-512 cores that split 512-bit operations in two (AMD Zen 4) a
compute-bound kernel should take about as long with AVX2 as with AVX-512; on cores with
two 512-bit FMA units about twice as long; memory-bound kernels the same on both.
No figures are recorded here: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "frontend"), str(ROOT / "bench")]


def profile_targets(name: str, targets: list[str], size: int, rounds: int,
                    repeat: int) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """``({target: {kernel: seconds}}, {kernel: schedule})`` of model ``name``."""
    from bench_onnx import resized
    from bench_onnx_import import _load
    from onnx_helpers import model_inputs as _inputs

    import runtime
    from irkernel import transform
    from irkernel.frontend.onnx import from_onnx

    model = _load(name)
    if size:
        model = resized(model, size)
    args = list(_inputs(model).values())
    runtime.set_num_threads(1)
    builds = {}
    for target in targets:
        with transform.PassContext(config={"target": target}):
            builds[target] = runtime.build(from_onnx(model))
    times: dict[str, dict[str, list[float]]] = {t: defaultdict(list) for t in targets}
    schedules: dict[str, str] = {}
    for _ in range(rounds):
        for target in targets:
            for row in builds[target].profile(*args, repeat=repeat).rows:
                times[target][row.kernel].append(row.time)
                schedules[row.kernel] = row.schedule
    return ({t: {k: min(v) for k, v in d.items()} for t, d in times.items()}, schedules)


def render(name: str, times: dict[str, dict[str, float]], schedules: dict[str, str],
           top: int) -> str:
    first, second = list(times)[:2]
    a, b = times[first], times[second]
    lines = [f"## {name}: {first} against {second} (us; ratio = {second} / {first})", "",
             f"| schedule | {first} | {second} | ratio |", "|---|---|---|---|"]
    per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for kernel in a.keys() & b.keys():
        per[schedules[kernel]][0] += a[kernel]
        per[schedules[kernel]][1] += b[kernel]
    for sched, (x, y) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {sched} | {x * 1e6:.0f} | {y * 1e6:.0f} | {y / x:.2f} |")
    x, y = sum(a.values()), sum(b.values())
    lines += [f"| all kernels | {x * 1e6:.0f} | {y * 1e6:.0f} | {y / x:.2f} |", "",
              f"| kernel | schedule | {first} | {second} | ratio |", "|---|---|---|---|---|"]
    growth = sorted(a.keys() & b.keys(), key=lambda k: a[k] - b[k])[:top]
    for k in growth:
        lines.append(f"| {k} | {schedules[k]} | {a[k] * 1e6:.0f} | {b[k] * 1e6:.0f} | "
                     f"{b[k] / a[k]:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["efficientnet_b0", "mobilenet_v2"])
    parser.add_argument("--targets", default="host,avx2")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", help="also write every kernel's times here")
    args = parser.parse_args(argv)
    targets = args.targets.split(",")
    if len(targets) < 2:
        parser.error("--targets needs two targets or more, e.g. host,avx2")
    os.environ["IRKERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="irkernel-bench-target-")
    from irkernel.target import cpu_target

    for target in targets:
        print(f"target {target}: {cpu_target(target).describe()}")
    saved = {}
    for name in args.models:
        times, schedules = profile_targets(name, targets, args.size, args.rounds,
                                           args.repeat)
        saved[name] = {"times": times, "schedules": schedules}
        for other in targets[1:]:  # the first target against each of the others
            pair = {targets[0]: times[targets[0]], other: times[other]}
            print("\n" + render(name, pair, schedules, args.top), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(saved))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
