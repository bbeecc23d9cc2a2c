"""One cold (or warm-cache) build of a saved graph, in a fresh process (``bench_compile_scale.py``).

Usage (the driver runs it; by hand only to debug one size)::

    PYTHONPATH=<tree> python bench/scale_worker.py --graph G.pkl --out R.json [--cache]
        [--threads N] [--check] [--save-outputs O.npz] [--prewarm]

``<tree>`` is the irkernel checkout to measure: this tree, or a git worktree of the
baseline revision (whose graph classes live at ``irkernel.graph`` / ``irkernel.pools``
instead of ``irkernel.ir.function`` / ``irkernel.ir.pools``; :func:`load_graph` takes
both). The worker times, in this order: imports, loading the graph, a tiny warm-up build
(``init_s``: Numba kernels loaded from Numba's cache, LLVM target, first engine; paid once
per process), the build itself under a ``PassTimingInstrument`` (``build_s``, per-pass
totals and the counters passes report), the first call and the median of many calls.
Peak RSS is ``ru_maxrss`` after the timed calls (before the optional interpreter check).

Graphs travel as a pickled dict of the Function's columns and tables (an IRModule does
not pickle): :func:`save_graph` / :func:`load_graph`. Opcodes are stored with their op
names and remapped on load, so a baseline whose op table is numbered differently still
reads the same graph (its own verify catches anything else that differs).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

_COLUMNS = ("kind", "a0", "a1", "dtype", "shape_id", "attr_id", "extra", "params", "outputs")


def isolate() -> None:
    """Import irkernel, passes and runtime only from ``PYTHONPATH`` (the tree to measure).

    The venv's editable install adds a meta-path finder that maps every ``irkernel.*``
    module to this checkout; under a baseline tree it would hand out modules the baseline
    does not have (``irkernel.ir`` ...) instead of raising ImportError. Drop it.
    """
    sys.meta_path[:] = [f for f in sys.meta_path
                        if "_EditableFinder" not in getattr(f, "__name__", type(f).__name__)]


# ---------------------------------------------------------------------------
# Graph files (the driver saves with this tree's irkernel; workers load with theirs)
# ---------------------------------------------------------------------------

def save_graph(path: Path, func: Any, inputs: list[np.ndarray], meta: dict[str, Any]) -> None:
    """Pickle ``func`` (a graph Function) as plain columns and tables, with its inputs."""
    from irkernel.ir import ops

    d: dict[str, Any] = {k: np.asarray(getattr(func, k)) for k in _COLUMNS}
    d["op_names"] = [ops.get_op(int(k)).name for k in range(int(func.kind.max()) + 1)]
    d["param_names"] = list(func.param_names)
    d["shapes"] = list(func.shapes.shapes)
    d["records"] = list(func.attr_table.records)
    c = func.consts
    d["consts"] = (c.dtype, c.shape_id, c.sval, c.offset, c.data)
    d["attrs"] = dict(func.attrs)
    d["inputs"] = [np.ascontiguousarray(x) for x in inputs]
    d["meta"] = dict(meta)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        pickle.dump(d, fh, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)


def read_meta(path: Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return pickle.load(fh)["meta"]


def load_graph(path: Path) -> tuple[Any, list[np.ndarray], dict[str, Any]]:
    """(Function, inputs, meta) from :func:`save_graph`'s file, for whichever irkernel is
    importable (this tree's or the baseline's layout)."""
    import irkernel

    if (Path(irkernel.__file__).parent / "ir" / "function.py").exists():
        from irkernel.ir.function import Function
        from irkernel.ir.pools import AttrTable, ConstPool, ShapeTable
    else:  # the baseline revision: flat modules
        from irkernel.graph import Function  # type: ignore[no-redef]
        from irkernel.pools import AttrTable, ConstPool, ShapeTable  # type: ignore[no-redef]
    from irkernel import ops

    with open(path, "rb") as fh:
        d = pickle.load(fh)
    lut = np.array([ops.get_op(name).opcode for name in d["op_names"]], np.int16)
    kind = lut[d["kind"]]
    func = Function(kind=kind, a0=d["a0"], a1=d["a1"], dtype=d["dtype"],
                    shape_id=d["shape_id"], attr_id=d["attr_id"], extra=d["extra"],
                    params=d["params"], outputs=d["outputs"], param_names=d["param_names"],
                    shapes=ShapeTable(d["shapes"]), attr_table=AttrTable(d["records"]),
                    consts=ConstPool(*d["consts"]), attrs=d["attrs"])
    return func, d["inputs"], d["meta"]


def mark_builder_made(func: Any) -> bool:
    """Mark a loaded graph verified, as ``GraphBuilder.finish`` marked the original.

    The driver built every graph with ``GraphBuilder`` (whose ``finish`` marks the
    Function verified, so a real build skips the module-independent checks); the
    Function rebuilt from columns here is a new object and would be verified again
    inside the timed build. The baseline has no such mark (it always verifies):
    returns False there.
    """
    import irkernel

    if not (Path(irkernel.__file__).parent / "ir" / "verify.py").exists():
        return False
    from irkernel.ir import verify

    verify.mark_verified(func)
    return bool(getattr(verify, "is_verified", lambda f: True)(func))


# ---------------------------------------------------------------------------
# Output comparison (shared with the driver and the JAX worker)
# ---------------------------------------------------------------------------

def compare(ref: list[np.ndarray], got: list[np.ndarray], rtol: float = 1e-3,
            atol_frac: float = 1e-4) -> dict[str, Any]:
    """Compare outputs element by element: NaN where the reference has NaN, the same
    infinities, finite values within ``atol_frac * max|finite ref| + rtol * |ref|``."""
    res: dict[str, Any] = {"ok": True, "bit_exact": True, "elements": 0, "finite": 0,
                           "mismatched": 0, "max_rel_err": 0.0, "first_bad": None}
    if len(ref) != len(got):
        res.update(ok=False, bit_exact=False, first_bad=f"{len(got)} outputs, expected {len(ref)}")
        return res
    for k, (r, g) in enumerate(zip(ref, got, strict=True)):
        r, g = np.asarray(r), np.asarray(g)
        if r.shape != g.shape or r.dtype != g.dtype:
            res.update(ok=False, bit_exact=False,
                       first_bad=res["first_bad"] or f"output {k}: {g.dtype}{g.shape} vs "
                                                     f"{r.dtype}{r.shape}")
            continue
        res["elements"] += r.size
        if not np.array_equal(r, g, equal_nan=r.dtype.kind in "fc"):
            res["bit_exact"] = False
        if r.dtype.kind not in "fc":
            bad = r != g
            res["finite"] += r.size
        else:
            r64, g64 = r.astype(np.float64), g.astype(np.float64)
            fin = np.isfinite(r64)
            res["finite"] += int(fin.sum())
            atol = atol_frac * float(np.abs(r64[fin]).max(initial=0.0))
            with np.errstate(invalid="ignore", over="ignore"):
                err = np.abs(g64 - r64)
                bad = np.where(fin, ~(err <= atol + rtol * np.abs(r64)),
                               ~((np.isnan(r64) & np.isnan(g64)) | (r64 == g64)))
                rel = np.where(fin & np.isfinite(g64), err / np.maximum(np.abs(r64), atol or 1e-30),
                               0.0)
            if rel.size:
                res["max_rel_err"] = max(res["max_rel_err"], float(rel.max()))
        n_bad = int(np.count_nonzero(bad))
        if n_bad:
            res["ok"] = False
            res["mismatched"] += n_bad
            if res["first_bad"] is None:
                i = int(np.flatnonzero(np.ravel(bad))[0])
                res["first_bad"] = (f"output {k}[{i}]: {np.ravel(g)[i]!r} vs "
                                    f"{np.ravel(r)[i]!r}")
    return res


# ---------------------------------------------------------------------------
# The measurement
# ---------------------------------------------------------------------------

def _tiny_module() -> Any:
    """A few ops of a dtype and shapes the benchmark graphs do not use (float64, (5, 3)),
    with a foldable constant: touches the passes' Numba kernels, LLVM and the engine."""
    import irkernel as ik

    bb = ik.GraphBuilder("main")
    x = bb.param("x", (5, 3), "float64")
    c = bb.call("multiply", bb.const(np.full((5, 3), 0.5)), bb.const(np.float64(3.0)))
    y = bb.call("add", bb.call("multiply", bb.call("exp", x), c), x)
    s = bb.call("sum", y, axis=(1,))
    z = bb.call("concat", bb.call("reshape", s, shape=(5, 1)), y, axis=1)
    return ik.IRModule({"main": bb.finish([z, bb.call("max", y)])})


def _tree_stats(timing: Any) -> dict[str, dict[str, float]]:
    """Counters passes reported (``ctx.stat``) per pass name; walks the instrument's tree
    (a private attribute: {} if its layout differs)."""
    out: dict[str, dict[str, float]] = {}
    root = getattr(timing, "_root", None)
    pending = list(getattr(root, "children", {}).values())
    while pending:
        node = pending.pop()
        if node.stats:
            agg = out.setdefault(node.name, {})
            for k, v in node.stats.items():
                agg[k] = agg.get(k, 0) + v
        pending.extend(node.children.values())
    return out


def _time_calls(fn: Any, inputs: list[np.ndarray], min_time: float, min_calls: int,
                max_calls: int) -> tuple[float, int]:
    times: list[float] = []
    total = 0.0
    while len(times) < max_calls and (len(times) < min_calls or total < min_time):
        start = time.perf_counter()
        fn(*inputs)
        times.append(time.perf_counter() - start)
        total += times[-1]
    return statistics.median(times), len(times)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {"pid": os.getpid(), "load_before": os.getloadavg()[0]}
    isolate()
    start = time.perf_counter()
    import irkernel
    import passes  # noqa: F401  (registers the built-in passes)
    import runtime
    from irkernel import transform
    from irkernel.instrument import PassTimingInstrument

    res["import_s"] = time.perf_counter() - start
    res["irkernel_file"] = irkernel.__file__
    runtime.set_num_threads(args.threads)
    res["threads"] = runtime.get_num_threads()

    start = time.perf_counter()
    func, inputs, _meta = load_graph(Path(args.graph))
    res["load_s"] = time.perf_counter() - start
    res["marked_verified"] = mark_builder_made(func)
    res["nodes"] = int(func.num_nodes)
    mod = irkernel.IRModule({"main": func})

    start = time.perf_counter()
    tiny = runtime.build(_tiny_module(), cache=False)
    tiny["main"](np.ones((5, 3)))
    res["init_s"] = time.perf_counter() - start
    del tiny
    if args.prewarm:  # only fill Numba's caches of this tree: build the graph once, untimed
        runtime.build(mod, cache=False)
        return res

    timing = PassTimingInstrument()
    with transform.PassContext(instruments=[timing]):
        start = time.perf_counter()
        ex = runtime.build(mod, cache=bool(args.cache))
        res["build_s"] = time.perf_counter() - start
    res["phases"] = timing.totals()
    res["stats"] = _tree_stats(timing)
    res["prim_funcs"] = len(getattr(ex, "_kernels", {}))
    res["kernels"] = res["stats"].get("CompileKernels", {}).get("kernels")
    res["rss_after_build_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    main = ex["main"]
    res["launches"] = int(main.num_kernels)
    start = time.perf_counter()
    outputs = main(*inputs)
    res["first_call_s"] = time.perf_counter() - start
    for _ in range(2):
        main(*inputs)
    res["run_s"], res["run_calls"] = _time_calls(main, inputs, args.min_time, 5, 2000)
    res["us_per_launch"] = res["run_s"] * 1e6 / max(res["launches"], 1)
    res["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if args.save_outputs:
        np.savez(args.save_outputs, *outputs)
    if args.check:
        start = time.perf_counter()
        ref = irkernel.interpret(func, *inputs)
        res["check_s"] = time.perf_counter() - start
        res["check"] = compare(ref, outputs)
    res["load_after"] = os.getloadavg()[0]
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--cache", action="store_true", help="use the on-disk cache "
                   "($IRKERNEL_CACHE_DIR); default: cache=False")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--check", action="store_true", help="compare with irkernel.interpret")
    p.add_argument("--save-outputs", default="")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds of timed calls")
    p.add_argument("--prewarm", action="store_true")
    args = p.parse_args(argv)
    res = measure(args)
    Path(args.out).write_text(json.dumps(res, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
