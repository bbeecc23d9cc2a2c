"""Preallocated outputs: a single ``add`` over 1e7 float32 through the graph executor.

Run with::

    IRKERNEL_BENCH_REPORT_ONLY=1 PYTHONPATH=. \
        .venv/bin/python -m pytest bench/bench_out.py --benchmark-enable -q
    PYTHONPATH=. .venv/bin/python bench/bench_out.py      # prints the figures

``main(x, y) = add(x, y)`` built by ``runtime.build`` and called as
``ex["main"](x, y, out=[z])`` (the output preallocated and reused) and as
``ex["main"](x, y)`` (a fresh output per call: ``np.empty``, first touched by the
kernel's parallel loop). What is measured, NumPy's time over ours:

- with ``out=`` against ``np.add(x, y, out=z)``: target >= 1.2x;
- without against ``x + y`` (NumPy allocates too): target >= 1.0x;
- for scale, the compiled kernel called directly (``ex["add_float32_..."](x, y, z)``,
  the executor's launch table skipped) against ``np.add(x, y, out=z)``: recorded.

Each side is timed in blocks of its own (``benchutil.fair``: 2 blocks per side,
2 warm-ups + 11 timed calls each, a 0.3 s pause before every block), medians.
Threads: irkernel's pool at 2 (the targets) and at 1 (recorded); NumPy's ufuncs
run on one thread. Inputs are 64-byte aligned and touched before timing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
import runtime

sys.path.insert(0, str(Path(__file__).parent))
from benchutil import Fair, check, fair, pool_threads

N = 10**7
REPEAT = 11
WITH_OUT_TARGET = 1.2
FRESH_TARGET = 1.0


def add_module(n: int = N) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (n,), "float32")
    y = bb.param("y", (n,), "float32")
    return ik.IRModule({"main": bb.finish([bb.add(x, y)])})


def _inputs(n: int = N) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x, y in [0, 1), and two outputs (ours, NumPy's), all allocated aligned and touched."""
    rng = np.random.default_rng(0)
    arrays = []
    for _ in range(4):
        a = runtime.empty(n, np.float32, align=64)
        a[...] = rng.random(n, dtype=np.float32)
        arrays.append(a)
    return arrays[0], arrays[1], arrays[2], arrays[3]


def measure(threads: int, repeat: int = REPEAT) -> dict[str, Fair]:
    """Both comparisons at ``threads`` pool threads."""
    ex = runtime.build(add_module())
    main = ex["main"]
    kernel = next(ex[name] for name in ex if name != "main")
    x, y, z, z_np = _inputs()
    np.testing.assert_array_equal(main(x, y, out=[z])[0], x + y)
    assert main(x, y, out=[z])[0] is z
    np.testing.assert_array_equal(main(x, y)[0], x + y)
    with pool_threads(threads):
        with_out = fair(lambda: main(x, y, out=[z]), lambda: np.add(x, y, out=z_np), repeat)
        fresh = fair(lambda: main(x, y), lambda: x + y, repeat)
        direct = fair(lambda: kernel(x, y, z), lambda: np.add(x, y, out=z_np), repeat)
    return {"with_out": with_out, "fresh": fresh, "kernel": direct}


def _extra(figures: dict[str, Fair], threads: int) -> dict[str, float]:
    out: dict[str, float] = {"threads": threads, "numpy_threads": 1,
                             "loadavg_1min": os.getloadavg()[0]}
    for key, f in figures.items():
        out.update({f"{key}_ours_s": f.ours_s, f"{key}_numpy_s": f.ref_s,
                    f"{key}_ratio": f.ratio, f"{key}_best_ratio": f.best_ratio,
                    f"{key}_ours_GB_per_s": 3 * 4 * N / f.ours_s / 1e9})
    return out


@pytest.mark.parametrize("threads", [2, 1])
def test_add_1e7_with_and_without_out(benchmark, threads: int) -> None:
    figures = measure(threads)
    benchmark.extra_info.update(_extra(figures, threads))
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are in extra_info
    if threads != 2:
        return
    w, f = figures["with_out"], figures["fresh"]
    check(w.ratio >= WITH_OUT_TARGET,
          f"add 1e7 with out=: {w.ratio:.2f}x np.add(out=) ({w.ours_s * 1e3:.2f} vs "
          f"{w.ref_s * 1e3:.2f} ms; target {WITH_OUT_TARGET}x)")
    check(f.ratio >= FRESH_TARGET,
          f"add 1e7, fresh output: {f.ratio:.2f}x x + y ({f.ours_s * 1e3:.2f} vs "
          f"{f.ref_s * 1e3:.2f} ms; target {FRESH_TARGET}x)")


def main() -> None:
    print(f"add over {N:,} float32 through ex['main']; NumPy on 1 thread; "
          f"1-min load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for threads in (2, 1):
        figures = measure(threads)
        for key, label, ref in (("with_out", "out=[z]", "np.add(x, y, out=z)"),
                                ("fresh", "fresh output", "x + y"),
                                ("kernel", "kernel(x,y,z)", "np.add(x, y, out=z)")):
            f = figures[key]
            print(f"  {threads} pool thread(s), {label:<13} {f.ours_s * 1e3:7.2f} ms vs "
                  f"{ref:<20} {f.ref_s * 1e3:7.2f} ms: {f.ratio:5.2f}x "
                  f"(best calls {f.best_ratio:.2f}x)")


if __name__ == "__main__":
    main()
