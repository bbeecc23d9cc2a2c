"""What the per-kernel profiler costs and how much of a run it accounts for (issue 31).

Run as a script (it is not a pytest suite):

    PYTHONPATH=. .venv/bin/python bench/bench_profile.py [--runs 15] [--rounds 2] \\
        [--size 0] [--threads 0] [model ...]

Per model (default resnet18, from ``tests/frontend/models`` with the weights of
``tests/frontend/model_weights.py``, as ``bench/bench_onnx.py`` loads them): one
``runtime.build``, then a profiled call (``GraphExecutor.profiled_call``: every
launch run alone between two clock reads) against an unprofiled one
(``ex["main"](*inputs)``), timed in alternating blocks by ``testing.timing.compare``.
Printed per model:

* ``overhead``: profiled median / unprofiled median - 1 (target: at most 5%);
* ``kernels/run``: the profile's kernel time (sum of each kernel's median) over the
  unprofiled median run (target: within 5% of 1: the kernels are the run);
* ``kernels/profiled run``: the same over the profiled run's median;
* the profile's five slowest kernels (``Profile.render``, cut).

No figures are recorded here: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "frontend"), str(ROOT / "bench")]

OVERHEAD_TARGET = 0.05
COVERAGE_TARGET = 0.05


def bench_model(name: str, runs: int, rounds: int, size: int) -> dict[str, float]:
    from bench_onnx import resized
    from bench_onnx_import import _load
    from onnx_helpers import model_inputs as _inputs

    import runtime
    from irkernel.frontend.onnx import from_onnx
    from irkernel.testing import timing
    from runtime.profile import LaunchTimer

    model = _load(name)
    if size:
        model = resized(model, size)
    args = list(_inputs(model).values())
    ex = runtime.build(from_onnx(model))
    graph = ex["main"]
    cmp = timing.compare(lambda: graph.profiled_call(LaunchTimer(), *args),
                         lambda: graph(*args), repeat=runs, rounds=rounds)
    profile = ex.profile(*args, repeat=runs)
    plain = cmp.ref.median
    row = {"overhead": cmp.ours.median / plain - 1.0,
           "kernels_per_run": profile.kernel_time / plain,
           "kernels_per_profiled_run": profile.kernel_time / profile.run_time,
           "plain_ms": plain * 1e3, "profiled_ms": cmp.ours.median * 1e3,
           "launches": graph.num_kernels}
    print(f"{name}: {graph.num_kernels} launches, unprofiled {plain * 1e3:.3f} ms, profiled "
          f"{cmp.ours.median * 1e3:.3f} ms: overhead {row['overhead']:+.1%} (target <= "
          f"{OVERHEAD_TARGET:.0%}); kernels {profile.kernel_time * 1e3:.3f} ms = "
          f"{row['kernels_per_run']:.1%} of the unprofiled run, "
          f"{row['kernels_per_profiled_run']:.1%} of the profiled run (target within "
          f"{COVERAGE_TARGET:.0%} of 100%)")
    print("\n".join(profile.render().splitlines()[:7]))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18"])
    parser.add_argument("--runs", type=int, default=15, help="timed calls per block")
    parser.add_argument("--rounds", type=int, default=2, help="blocks per side")
    parser.add_argument("--size", type=int, default=0,
                        help="image size of the model's input (0: the exported 64x64)")
    parser.add_argument("--threads", type=int, default=0,
                        help="irkernel threads (runtime.set_num_threads; 0: the default)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.rounds < 1 or args.size < 0 or args.threads < 0:
        parser.error("--runs and --rounds must be >= 1, --size and --threads >= 0")
    import runtime

    if args.threads:
        runtime.set_num_threads(args.threads)
    for name in args.models:
        bench_model(name, args.runs, args.rounds, args.size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
