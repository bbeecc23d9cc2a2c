"""Build phases against graph size, per graph family (``graph_families.py``), and the arena.

Usage::

    .venv/bin/python bench/bench_build_phases.py                        # all families, 1e5 1e6
    .venv/bin/python bench/bench_build_phases.py --sizes 1e5,1e6,1e7 --families wide,fanin
    .venv/bin/python bench/bench_build_phases.py --from-json bench/results/build_phases.json

Each (family, size) is generated and built in a fresh process (this script with
``--worker``), after a tiny warm-up build that loads Numba's caches and LLVM. The worker
reports the graph's generation time, the cold ``runtime.build(mod, cache=False)`` time
with every phase's total (``PassTimingInstrument``; nested passes are listed under their
own names too, so phases do not add up), ``plan_memory`` timed alone on the lowered
graphs, and per module the arena (``planned_bytes``, summed over graph functions) against
the live peak (the largest sum of live intermediates at one node) exact and with each
value in its 64-byte class (the arena's own lower bound; the gap to it is fragmentation),
the executors' own state per graph node (``GraphExecutor.state_nbytes``: the launch
table and one binding without its arena; target <= 64 B) and the process's peak RSS.

The report prints one table per family: seconds per phase and size, then the growth per
decade between consecutive sizes as ``k``, the exponent of ``t ~ n**k`` (1.0 linear,
2.0 quadratic; only for times above 50 ms, noise below). Ctrl-C stops the run (the
worker gets the signal too) and prints what was measured. Results go to JSON after
every point.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from bench_compile_scale import PHASES, RESULTS, git_rev, log  # noqa: E402
from graph_families import FAMILIES  # noqa: E402

MIN_GROWTH_S = 0.05  # growth exponents of shorter times are noise


# ---------------------------------------------------------------------------
# Worker (one fresh process per point)
# ---------------------------------------------------------------------------

def _live_peaks(plan: Any, num_nodes: int) -> tuple[int, int]:
    """(exact, 64-byte-class) peak of the sum of live intermediates over the nodes."""
    from runtime.memory_plan import ALIGN

    if not plan.num_buffers:
        return 0, 0
    rounded = np.maximum(-(-plan.nbytes // ALIGN) * ALIGN, ALIGN)
    peaks = []
    for size in (plan.nbytes, rounded):
        delta = np.zeros(num_nodes + 1, np.int64)
        np.add.at(delta, plan.node_ids, size)
        np.subtract.at(delta, plan.last_use + 1, size)
        peaks.append(int(np.cumsum(delta).max()))
    return peaks[0], peaks[1]


def work(family: str, size: int, seed: int) -> dict[str, Any]:
    import irkernel as ik
    import passes  # noqa: F401  (registers the built-in passes)
    import runtime
    from irkernel import transform
    from irkernel.instrument import PassTimingInstrument
    from runtime.memory_plan import plan_memory
    from scale_worker import _tiny_module

    res: dict[str, Any] = {"family": family, "size": size, "seed": seed,
                           "load_before": os.getloadavg()[0], "irkernel_file": ik.__file__}
    tiny = runtime.build(_tiny_module(), cache=False)
    tiny["main"](np.ones((5, 3)))
    del tiny
    start = time.perf_counter()
    mod = FAMILIES[family](size, seed)
    res["gen_s"] = time.perf_counter() - start
    graphs = {name: f for name, f in mod.functions.items() if isinstance(f, ik.Function)}
    res["nodes"] = sum(int(f.num_nodes) for f in graphs.values())
    res["functions"] = len(graphs)
    timing = PassTimingInstrument()
    with transform.PassContext(instruments=[timing]):
        start = time.perf_counter()
        ex = runtime.build(mod, cache=False)
        res["build_s"] = time.perf_counter() - start
    res["phases"] = timing.totals()
    lowered = {name: ex[name].func for name in graphs}  # what the executors planned
    start = time.perf_counter()
    plans = {name: plan_memory(func) for name, func in lowered.items()}
    res["plan_s"] = time.perf_counter() - start
    arena = {"intermediates": 0, "buffers": 0, "planned": 0, "naive": 0, "live_peak": 0,
             "live_peak_aligned": 0}
    for name, plan in plans.items():
        exact, aligned = _live_peaks(plan, int(lowered[name].num_nodes))
        for key, value in (("intermediates", plan.num_buffers),
                           ("buffers", len(plan.token_bytes)), ("planned", plan.planned_bytes),
                           ("naive", plan.naive_bytes), ("live_peak", exact),
                           ("live_peak_aligned", aligned)):
            arena[key] += int(value)
    res["arena"] = arena
    res["launches"] = sum(int(ex[name].num_kernels) for name in graphs)
    state = [ex[name].state_nbytes for name in graphs]  # launch table, one binding
    res["executor_bytes_per_node"] = sum(t + b for t, b in state) / max(res["nodes"], 1)
    res["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    res["load_after"] = os.getloadavg()[0]
    return res


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def run_point(family: str, size: int, args: argparse.Namespace, work_dir: Path) -> dict[str, Any]:
    out = work_dir / f"{family}_{size}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--families", family,
           "--sizes", str(size), "--seed", str(args.seed), "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED="0",
               IRKERNEL_CACHE_DIR=str(work_dir / "cache"),
               IRKERNEL_NUM_THREADS=str(args.threads))
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"family": family, "size": size, "error": f"timeout after {args.timeout:.0f} s"}
    if proc.returncode or not out.exists():
        tail = " | ".join(proc.stderr.strip().splitlines()[-4:])
        return {"family": family, "size": size, "error": f"exit {proc.returncode}: {tail}"}
    res = json.loads(out.read_text())
    res["process_s"] = time.perf_counter() - start
    if not Path(res["irkernel_file"]).resolve().is_relative_to(ROOT):
        res["error"] = f"imported irkernel from {res['irkernel_file']}, not from {ROOT}"
    return res


def _size(n: int) -> str:
    short = f"{n:.0e}".replace("e+0", "e")
    return short if float(short) == n else str(n)


def _growth(t1: float | None, t2: float | None, n1: int, n2: int) -> str:
    if t1 is None or t2 is None or min(t1, t2) < MIN_GROWTH_S or n2 <= n1:
        return "—"
    return f"{math.log(t2 / t1) / math.log(n2 / n1):.2f}"


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    seen = {p for r in rows for p in r.get("phases", {})}
    return (["gen", "build", "plan_memory"] + [p for p in PHASES if p in seen]
            + sorted(seen - set(PHASES)))


def _value(row: dict[str, Any], col: str) -> float | None:
    if "error" in row:
        return None
    return {"gen": row.get("gen_s"), "build": row.get("build_s"),
            "plan_memory": row.get("plan_s")}.get(col, row.get("phases", {}).get(col))


def family_table(family: str, rows: list[dict[str, Any]]) -> str:
    rows = sorted(rows, key=lambda r: r["size"])
    cols = _columns(rows)
    head = ("| size | nodes | " + " | ".join(cols) + " | arena / live peak (aligned) | "
            "executor B/node | peak RSS GB | notes |")
    lines = [f"### {family}", "", head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        a = r.get("arena", {})
        arena = (f"{a['planned']:,} B / {a['live_peak']:,} B ({a['live_peak_aligned']:,} B); "
                 f"{a['intermediates']:,} values in {a['buffers']:,}" if a else "—")
        cells = [_f(_value(r, c)) for c in cols]
        lines.append(f"| {_size(r['size'])} | {r.get('nodes', '—')} | " + " | ".join(cells)
                     + f" | {arena} | {_f(r.get('executor_bytes_per_node'))} | "
                     f"{_f(r.get('peak_rss_gb'))} | {r.get('error', '')[:120]} |")
    for r1, r2 in zip(rows, rows[1:], strict=False):
        cells = [_growth(_value(r1, c), _value(r2, c), r1["size"], r2["size"]) for c in cols]
        lines.append(f"| k {_size(r1['size'])}→{_size(r2['size'])} | | " + " | ".join(cells)
                     + " | | | | |")
    return "\n".join(lines) + "\n"


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def report(data: dict[str, Any]) -> str:
    meta = data["meta"]
    text = (f"irkernel {meta.get('rev', '?')}; {meta.get('nproc')} CPUs, load average at start "
            f"{meta.get('load_start', float('nan')):.1f}; {meta.get('date', '')}. Seconds; "
            f"k = growth exponent per decade (t ~ n**k).\n\n")
    families = dict.fromkeys(r["family"] for r in data["rows"])
    return text + "\n".join(family_table(f, [r for r in data["rows"] if r["family"] == f])
                            for f in families)


def _sizes(text: str) -> list[int]:
    return [int(float(s)) for s in text.split(",") if s.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--families", default=",".join(FAMILIES),
                   help=f"comma-separated, of: {', '.join(FAMILIES)}")
    p.add_argument("--sizes", default="1e5,1e6", help="node counts (1e7 works; slow)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="IRKERNEL_NUM_THREADS of the workers")
    p.add_argument("--timeout", type=float, default=3600.0, help="per point (s)")
    p.add_argument("--json", default=str(RESULTS / "build_phases.json"))
    p.add_argument("--from-json", default="", help="only print an earlier run's report")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.families = [f for f in args.families.split(",") if f]
    unknown = [f for f in args.families if f not in FAMILIES]
    if unknown:
        p.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    args.sizes = _sizes(args.sizes)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        res = work(args.families[0], args.sizes[0], args.seed)
        Path(args.out).write_text(json.dumps(res, indent=1, default=float))
        return 0
    if args.from_json:
        print(report(json.loads(Path(args.from_json).read_text())))
        return 0
    data: dict[str, Any] = {"meta": {"rev": git_rev(), "nproc": os.cpu_count(),
                                     "load_start": os.getloadavg()[0], "argv": sys.argv[1:],
                                     "date": time.strftime("%Y-%m-%d %H:%M:%S")},
                            "rows": []}
    out_json = Path(args.json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="irk-phases-") as tmp:
        try:
            for family in args.families:
                for size in args.sizes:
                    log(f"[{family} {_size(size)}] ...")
                    row = run_point(family, size, args, Path(tmp))
                    log(f"[{family} {_size(size)}] " + (row.get("error") or
                        f"build {row['build_s']:.3f} s, {row['nodes']} nodes"))
                    data["rows"].append(row)
                    out_json.write_text(json.dumps(data, indent=1, default=float))
        except KeyboardInterrupt:
            log("interrupted: the report covers what was measured")
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
