"""Compile time against graph size: irkernel now, a baseline revision, and JAX/XLA.

Usage::

    .venv/bin/python bench/bench_compile_scale.py               # full run (hours; see README)
    .venv/bin/python bench/bench_compile_scale.py --quick       # mixed 1e3, 1e4; chain 200
    .venv/bin/python bench/bench_compile_scale.py --mixed 1e3,1e5 --chain 200 --no-jax
    .venv/bin/python bench/bench_compile_scale.py --from-json bench/results/compile_scale.json

Graph families (both built with ``GraphBuilder``, so ``finish`` marks them verified):

* ``mixed N``: ``random_function(GraphSpec(n_nodes=N, shapes="small", dtypes=("float32",),
  dead_fraction=0.0))``: every op of the default mix on small broadcastable tensors.
* ``chain S``: S steps, step k on a parameter of shape (k + 1,): ``y = exp(a) * a + a``,
  ``s = sum(y)``; outputs ``concat(y_0..y_{S-1})`` and ``concat(reshape(s_k, (1,)))``.
  Every step has its own length, so no two specialized kernels are alike.

Other graph shapes (long-lived values, deep chains, many shapes, constants, outputs or
functions, a large concat) and the build phase by phase: ``bench_build_phases.py``.

Each graph is generated once in this process (``gen s``; ``--graph-dir`` keeps the files
for later runs) and measured in fresh processes (``scale_worker.py``, ``jax_graph.py``):
cold (``runtime.build(mod, cache=False)``), warm for ``--warm`` sizes of ``mixed`` (a
first process fills a fresh ``IRKERNEL_CACHE_DIR``, a second one builds with ``cache=True``
and is reported), the baseline revision (a temporary ``git worktree``, same cold build)
and XLA (``jax.jit(f).lower(*inputs).compile()``). Blocks are separated by 1 s pauses;
run times are medians after warm-up calls. Writes ``bench/results/compile_scale.json``
(after every row), prints markdown tables, saves ``compile_scale.png`` when matplotlib is
importable.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from scale_worker import compare, read_meta, save_graph  # noqa: E402

RESULTS = BENCH / "results"
PHASES = ("GraphLowering", "FoldConstant", "LegalizeOps", "FuseOps", "FuseTIR",
          "CompileKernels", "LowerTIR", "Link", "GraphExecutors")
PREWARM = ("mixed", 300)


# ---------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------

def mixed(n: int, seed: int) -> tuple[Any, list[np.ndarray]]:
    from irkernel.testing import GraphSpec, random_function, random_inputs

    func = random_function(GraphSpec(n_nodes=n, seed=seed, shapes="small",
                                     dtypes=("float32",), dead_fraction=0.0))
    return func, random_inputs(func, seed=seed, special_values=False)


def chain(steps: int, seed: int) -> tuple[Any, list[np.ndarray]]:
    import irkernel as ik

    bb = ik.GraphBuilder("main")
    params = [bb.param(f"a{k}", (k + 1,), "float32") for k in range(steps)]
    ys, ss = [], []
    for a in params:
        y = bb.call("add", bb.call("multiply", bb.call("exp", a), a), a)
        ys.append(y)
        ss.append(bb.call("reshape", bb.call("sum", y), shape=(1,)))
    func = bb.finish([bb.call("concat", *ys, axis=0), bb.call("concat", *ss, axis=0)])
    rng = np.random.default_rng([seed, steps])
    return func, [(rng.standard_normal(k + 1) * 0.5).astype(np.float32) for k in range(steps)]


FAMILIES = {"mixed": mixed, "chain": chain}


def graph_file(graph_dir: Path, family: str, size: int, seed: int) -> tuple[Path, dict]:
    """The saved graph (generated now unless ``graph_dir`` already holds it)."""
    path = graph_dir / f"{family}_{size}_s{seed}.pkl"
    if path.exists():
        meta = read_meta(path)
        meta["reused"] = True
        return path, meta
    log(f"[{family} {size}] generating ...")
    start = time.perf_counter()
    func, inputs = FAMILIES[family](size, seed)
    gen_s = time.perf_counter() - start
    meta = {"family": family, "size": size, "seed": seed, "nodes": int(func.num_nodes),
            "gen_s": gen_s, "rev": git_rev()}
    save_graph(path, func, inputs, meta)
    log(f"[{family} {size}] {meta['nodes']} nodes generated in {gen_s:.1f} s")
    return path, {**meta, "reused": False}


# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------

def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def git_rev(tree: Path = ROOT) -> str:
    try:
        rev = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True).stdout
        return rev + ("+dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


@contextmanager
def baseline_tree(rev: str, given: str) -> Iterator[Path | None]:
    """A checkout of ``rev``: ``given`` if set, else a temporary git worktree (removed after)."""
    if given:
        yield Path(given).resolve()
        return
    tmp = Path(tempfile.mkdtemp(prefix="irk-baseline-"))
    tree = tmp / "tree"
    proc = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
                          capture_output=True, text=True)
    if proc.returncode:
        log(f"baseline: git worktree add failed: {proc.stderr.strip()}")
        shutil.rmtree(tmp, ignore_errors=True)
        yield None
        return
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


class Runner:
    """Runs worker scripts in fresh processes with fixed thread counts and a fresh cache."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.count = 0
        t = args.threads
        self.xla_flags = (f"--xla_cpu_multi_thread_eigen={'true' if t > 1 else 'false'} "
                          f"intra_op_parallelism_threads={t}")

    def run(self, script: str, tree: Path, argv: list[str], timeout: float,
            env_extra: dict[str, str] | None = None) -> dict[str, Any]:
        self.count += 1
        out = self.work / f"result_{self.count}.json"
        env = dict(os.environ, PYTHONPATH=str(tree), IRKERNEL_NUM_THREADS=str(self.args.threads),
                   IRKERNEL_CACHE_DIR=str(self.work / f"cache_{self.count}"),
                   XLA_FLAGS=self.xla_flags, JAX_PLATFORMS="cpu", PYTHONHASHSEED="0")
        env.update(env_extra or {})
        cmd = [sys.executable, str(BENCH / script), "--out", str(out), *argv]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timeout after {timeout:.0f} s"}
        wall = time.perf_counter() - start
        if proc.returncode or not out.exists():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
            return {"error": f"exit {proc.returncode}: {tail}", "process_s": wall}
        res = json.loads(out.read_text())
        res["process_s"] = wall
        where = res.get("irkernel_file")
        if where and not Path(where).resolve().is_relative_to(tree.resolve()):
            res["error"] = f"imported irkernel from {where}, not from {tree}"
        return res


def pause() -> None:
    time.sleep(1.0)


def measure_row(family: str, size: int, graph: Path, meta: dict, runner: Runner,
                base: Path | None, have_jax: bool) -> dict[str, Any]:
    a = runner.args
    nodes = meta["nodes"]
    row: dict[str, Any] = {"family": family, "size": size, "nodes": nodes,
                           "gen_s": meta["gen_s"], "gen_reused": meta["reused"]}
    tag = f"[{family} {size}]"
    outs = {k: runner.work / f"{family}_{size}_{k}.npz" for k in ("new", "base", "jax")}
    common = ["--graph", str(graph), "--threads", str(a.threads), "--min-time", str(a.min_time)]

    check = ["--check"] if nodes <= a.check_max else []
    row["new"] = runner.run("scale_worker.py", ROOT, [
        *common, *check, "--save-outputs", str(outs["new"])], a.timeout)
    log(f"{tag} irkernel cold: {_brief(row['new'], 'build_s')}")
    pause()
    if family == "mixed" and size in a.warm:
        cache = {"IRKERNEL_CACHE_DIR": str(runner.work / f"warm_{family}_{size}")}
        fill = runner.run("scale_worker.py", ROOT, [*common, "--cache"], a.timeout, cache)
        pause()
        row["warm"] = (runner.run("scale_worker.py", ROOT, [*common, "--cache"], a.timeout, cache)
                       if "error" not in fill else {"error": f"filling run: {fill['error']}"})
        row["warm_fill_build_s"] = fill.get("build_s")
        log(f"{tag} irkernel warm cache: {_brief(row['warm'], 'build_s')}")
        pause()
    if base is not None and nodes <= a.baseline_max:
        row["base"] = runner.run("scale_worker.py", base, [
            *common, "--save-outputs", str(outs["base"])], a.baseline_timeout)
        log(f"{tag} baseline {a.baseline_rev} cold: {_brief(row['base'], 'build_s')}")
        if outs["new"].exists() and outs["base"].exists():
            row["base_vs_new"] = compare(_npz(outs["new"]), _npz(outs["base"]))
        pause()
    if have_jax and nodes <= a.jax_max:
        node_check = ["--node-check"] if nodes <= a.node_check_max else []
        row["jax"] = runner.run("jax_graph.py", ROOT, [
            "--graph", str(graph), "--min-time", str(a.min_time),
            "--save-outputs", str(outs["jax"]), *node_check], a.jax_timeout)
        log(f"{tag} XLA: {_brief(row['jax'], 'compile_s')}")
        if outs["new"].exists() and outs["jax"].exists():
            row["jax_vs_new"] = compare(_npz(outs["new"]), _npz(outs["jax"]))
        pause()
    return row


def _npz(path: Path) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[f"arr_{i}"] for i in range(len(z.files))]


def _brief(res: dict[str, Any], key: str) -> str:
    if "error" in res:
        return "ERROR " + res["error"].replace("\n", " | ")[:300]
    return f"{key[:-2]} {res[key]:.3f} s, run {res['run_s'] * 1e3:.3f} ms"


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def _size(n: int) -> str:
    short = f"{n:.0e}".replace("e+0", "e")
    return short if n >= 1000 and float(short) == n else str(n)


def _f(x: Any, fmt: str = ".3g") -> str:
    return "—" if x is None else format(x, fmt)


def _get(res: dict | None, key: str, scale: float = 1.0) -> float | None:
    if not res or "error" in res or res.get(key) is None:
        return None
    return res[key] * scale


def _ratio(x: float | None, y: float | None) -> float | None:
    return None if x is None or y is None or y == 0 else x / y


def _checks(row: dict[str, Any]) -> str:
    parts = []
    for key, label in (("new", "interp"), ("base_vs_new", "base"), ("jax_vs_new", "xla")):
        cmp = row.get(key, {}).get("check") if key == "new" else row.get(key)
        if not cmp:
            continue
        if cmp["bit_exact"]:
            parts.append(f"{label} exact")
        elif cmp["ok"]:
            parts.append(f"{label} ok ({cmp['max_rel_err']:.1e})")
        else:
            parts.append(f"{label} MISMATCH {cmp['mismatched']}/{cmp['elements']}")
        if key == "jax_vs_new":
            parts[-1] += f", {cmp['finite']}/{cmp['elements']} finite"
    nc = (row.get("jax") or {}).get("node_check")
    if nc:
        parts.append(f"xla nodes {'ok' if nc['ok'] else 'BAD ' + str(nc['bad_by_op'])}"
                     f" ({nc['nodes']})")
    for key in ("new", "warm", "base", "jax"):
        if row.get(key, {}).get("error"):
            parts.append(f"{key} ERROR: {row[key]['error'].splitlines()[0][:80]}")
    return "; ".join(parts)


def tables(rows: list[dict[str, Any]]) -> str:
    head = ("| family | size | nodes | gen s | build s | init s | kernels | launches | run ms "
            "| µs/launch | peak RSS GB | warm build s | base build s | new/base build "
            "| base run ms | new/base run | XLA compile s | XLA run ms | irk/XLA compile "
            "| irk/XLA run | checks |")
    lines = [head, "|" + "|".join("---" for _ in range(head.count("|") - 1)) + "|"]
    for r in rows:
        new, base, jx = r.get("new"), r.get("base"), r.get("jax")
        b, bb = _get(new, "build_s"), _get(base, "build_s")
        run, brun, jrun = (_get(new, "run_s", 1e3), _get(base, "run_s", 1e3),
                           _get(jx, "run_s", 1e3))
        jc = _get(jx, "compile_s")
        lines.append("| " + " | ".join([
            r["family"], _size(r["size"]), str(r["nodes"]), _f(r["gen_s"], ".1f"), _f(b),
            _f(_get(new, "init_s")), str((new or {}).get("kernels", "—")),
            str((new or {}).get("launches", "—")), _f(run), _f(_get(new, "us_per_launch")),
            _f(_get(new, "peak_rss_gb"), ".2f"), _f(_get(r.get("warm"), "build_s")), _f(bb),
            _f(_ratio(b, bb), ".2f"), _f(brun), _f(_ratio(run, brun), ".2f"), _f(jc), _f(jrun),
            _f(_ratio(b, jc), ".2f"), _f(_ratio(run, jrun), ".2f"), _checks(r)]) + " |")
    phase_head = ("| family | size | " + " | ".join(PHASES) +
                  " | compiled | batches | llvm s | warm: cached |")
    plines = [phase_head, "|" + "|".join("---" for _ in range(phase_head.count("|") - 1)) + "|"]
    for r in rows:
        new = r.get("new") or {}
        if "error" in new or "phases" not in new:
            continue
        st = new.get("stats", {}).get("CompileKernels", {})
        warm = (r.get("warm") or {}).get("stats", {}).get("CompileKernels", {})
        plines.append("| " + " | ".join(
            [r["family"], _size(r["size"])] + [_f(new["phases"].get(p)) for p in PHASES]
            + [_f(st.get("compiled"), "g"), _f(st.get("batches"), "g"), _f(st.get("llvm_s")),
               _f(warm.get("cached"), "g")]) + " |")
    return "\n".join(lines) + "\n\nPer-phase totals (s, PassTimingInstrument):\n\n" + \
        "\n".join(plines) + "\n"


def header(meta: dict[str, Any]) -> str:
    return (f"irkernel {meta['rev']} vs baseline {meta['baseline_rev']}; "
            f"{meta['cpu']} ({meta['nproc']} CPUs), load average at start "
            f"{meta['load_start']:.1f}, at end {meta.get('load_end', float('nan')):.1f}; "
            f"threads: irkernel pool {meta['threads']} (IRKERNEL_NUM_THREADS), XLA_FLAGS="
            f"\"{meta['xla_flags']}\"; jax {meta.get('jax') or 'not installed'}; "
            f"{meta['date']}. build s = cold `runtime.build(mod, cache=False)` in a fresh "
            f"process after a tiny warm-up build (init s: one-time process cost); run = median "
            f"of `ex['main'](*inputs)`; XLA compile = `jit(f).lower(*x).compile()` after a tiny "
            f"warm-up jit. Ratios < 1: irkernel (new) is faster.\n")


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 5))
    styles = {"mixed": "o-", "chain": "s--"}
    for fam in sorted({r["family"] for r in rows}):
        fr = sorted((r for r in rows if r["family"] == fam), key=lambda r: r["nodes"])
        for key, field, color, label in (("new", "build_s", "C0", "irkernel"),
                                         ("base", "build_s", "C1", "baseline"),
                                         ("jax", "compile_s", "C2", "XLA compile")):
            pts = [(r["nodes"], _get(r.get(key), field)) for r in fr]
            pts = [(n, t) for n, t in pts if t is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), styles.get(fam, "^-"), color=color,
                        label=f"{label}, {fam}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("graph nodes")
    ax.set_ylabel("build / compile time (s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def report(data: dict[str, Any], args: argparse.Namespace) -> None:
    text = header(data["meta"]) + "\n" + tables(data["rows"])
    print(text)
    if args.output_md:
        Path(args.output_md).write_text(text)
    png = Path(args.json).with_suffix(".png")
    if plot(data["rows"], png):
        log(f"plot: {png}")
    else:
        log("plot: matplotlib not importable, no plot")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def _sizes(text: str) -> list[int]:
    return [int(float(s)) for s in text.split(",") if s.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="compile time against graph size",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true", help="mixed 1e3,1e4; chain 200; warm 1e4")
    p.add_argument("--mixed", default=None, help="mixed sizes (nodes), default 1e3,3e3,1e4,1e5,1e6")
    p.add_argument("--chain", default=None, help="chain sizes (steps), default 200,2000")
    p.add_argument("--warm", default=None, help="mixed sizes also measured from a warm cache "
                   "(default 1e5; --quick: 1e4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="irkernel pool and XLA intra-op")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds of timed calls")
    p.add_argument("--check-max", type=float, default=2e4,
                   help="compare with irkernel.interpret up to this many nodes")
    p.add_argument("--baseline-rev", default="ab25246")
    p.add_argument("--baseline-tree", default="", help="an existing checkout of the baseline "
                   "(default: a temporary git worktree of --baseline-rev)")
    p.add_argument("--baseline-max", type=float, default=1e4, help="baseline up to this many "
                   "nodes")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--jax-max", type=float, default=1e4, help="XLA up to this many nodes")
    p.add_argument("--node-check-max", type=float, default=1e3,
                   help="per-node JAX translation check up to this many nodes")
    p.add_argument("--no-jax", action="store_true")
    p.add_argument("--timeout", type=float, default=3600.0, help="per irkernel run (s)")
    p.add_argument("--baseline-timeout", type=float, default=900.0)
    p.add_argument("--jax-timeout", type=float, default=900.0)
    p.add_argument("--graph-dir", default="", help="keep generated graphs here and reuse them")
    p.add_argument("--json", default=str(RESULTS / "compile_scale.json"))
    p.add_argument("--output-md", default="", help="also write the tables to this file")
    p.add_argument("--from-json", default="", help="only print/plot an earlier run's JSON")
    args = p.parse_args(argv)
    args.mixed = _sizes(args.mixed if args.mixed is not None else
                        ("1e3,1e4" if args.quick else "1e3,3e3,1e4,1e5,1e6"))
    args.chain = _sizes(args.chain if args.chain is not None else
                        ("200" if args.quick else "200,2000"))
    args.warm = set(_sizes(args.warm if args.warm is not None else
                           ("1e4" if args.quick else "1e5")))
    return args


def _jax_version() -> str | None:
    proc = subprocess.run([sys.executable, "-c", "import jax; print(jax.__version__)"],
                          capture_output=True, text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    return proc.stdout.strip() if proc.returncode == 0 else None


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        args.json = args.from_json
        report(json.loads(Path(args.from_json).read_text()), args)
        return 0
    started = time.perf_counter()
    jax_version = None if args.no_jax else _jax_version()
    if not args.no_jax and jax_version is None:
        log("jax: not importable, no XLA column (pip install jax jaxlib into a bench venv)")
    work = Path(tempfile.mkdtemp(prefix="irk-scale-"))
    graph_dir = Path(args.graph_dir) if args.graph_dir else work / "graphs"
    graph_dir.mkdir(parents=True, exist_ok=True)
    runner = Runner(args, work)
    meta = {"rev": git_rev(), "baseline_rev": args.baseline_rev, "cpu": _cpu(),
            "nproc": os.cpu_count(), "load_start": os.getloadavg()[0], "threads": args.threads,
            "xla_flags": runner.xla_flags, "jax": jax_version, "python": sys.version.split()[0],
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv[1:]}
    data: dict[str, Any] = {"meta": meta, "rows": []}
    out_json = Path(args.json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    plan = [("mixed", n) for n in args.mixed] + [("chain", s) for s in args.chain]
    try:
        with (_none() if args.no_baseline else
              baseline_tree(args.baseline_rev, args.baseline_tree)) as base:
            prewarm, _ = graph_file(graph_dir, *PREWARM, seed=1)
            for tree, name in ((ROOT, "irkernel"), (base, "baseline")):
                if tree is None:
                    continue
                log(f"prewarm {name}: filling Numba's caches of {tree} ...")
                res = runner.run("scale_worker.py", tree, ["--graph", str(prewarm), "--prewarm",
                                                           "--threads", str(args.threads)],
                                 args.baseline_timeout)
                meta[f"prewarm_{name}_s"] = res.get("process_s")
                if "error" in res:
                    log(f"prewarm {name}: {res['error']}")
                    if tree is base:
                        base = None
                        meta["baseline_error"] = res["error"]
            for family, size in plan:
                graph, gmeta = graph_file(graph_dir, family, size, args.seed)
                data["rows"].append(measure_row(family, size, graph, gmeta, runner, base,
                                                jax_version is not None))
                meta["load_end"] = os.getloadavg()[0]
                out_json.write_text(json.dumps(data, indent=1, default=float))
    finally:
        meta["load_end"] = os.getloadavg()[0]
        meta["total_s"] = time.perf_counter() - started
        out_json.write_text(json.dumps(data, indent=1, default=float))
        shutil.rmtree(work, ignore_errors=True)
    log(f"total {meta['total_s']:.0f} s; raw results: {out_json}")
    report(data, args)
    return 0


@contextmanager
def _none() -> Iterator[None]:
    yield None


if __name__ == "__main__":
    sys.exit(main())
