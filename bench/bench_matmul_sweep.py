"""Matmul at every shape against NumPy + OpenBLAS (issue 31: no cliffs).

    PYTHONPATH=. .venv/bin/python bench/bench_matmul_sweep.py [--shapes 40] [--seed 0]
        [--threads 1,2] [--max-gflop 4] [--repeat 5] [--json out.json]

The sweep: random M, N, K in [1, 4096] (log-uniform), plus primes, 1, and tile +- 1 for
the target's register tile (6 rows, 16/64 columns); every case is one of the forms
LegalizeOps schedules or lowers: ``a @ W`` with W a constant (a linear layer),
``a @ b`` with both parameters, a batched ``x[B, M, K] @ W[K, N]``, equal batches
``a[B, M, K] @ b[B, K, N]`` (attention), and transposed operands ``a.T @ b`` and
``a @ b.T`` (a transpose in the graph, as exporters write them). Problems above
``--max-gflop`` GFLOP are scaled down in M (the sweep has to finish).

Each side is timed in a block of its own after warm-ups with a pause before every block
(``irkernel.testing.timing.compare``), at each thread count: our pool with
``runtime.set_num_threads(t)``, NumPy's BLAS with ``threadpoolctl`` limited to ``t``.
Reported per case: GFLOP/s of both sides and ratio = NumPy's time / ours (>= 1: we are at
least as fast). Targets (issue 31): every case of at least 1e7 FLOPs >= 0.8, and the
geometric mean over the sweep >= 1.0. The CPU and its ISA are printed first.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import irkernel as ik  # noqa: E402
import runtime  # noqa: E402
from irkernel.target import host_target  # noqa: E402
from irkernel.testing.timing import compare, limit_blas  # noqa: E402

PRIMES = (2, 3, 5, 7, 13, 31, 61, 127, 197, 251, 509, 1021, 1531, 2039, 4093)
FORMS = ("const", "params", "rows", "batch", "a_t", "b_t")


@dataclass(frozen=True)
class Case:
    form: str
    batch: int
    m: int
    k: int
    n: int

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n

    @property
    def label(self) -> str:
        lead = f"{self.batch}x" if self.form in ("rows", "batch") else ""
        return f"{self.form:6s} {lead}{self.m}x{self.k}x{self.n}"


def sweep(count: int, seed: int, max_gflop: float) -> list[Case]:
    """Random shapes, then the edge values of the register tile; deterministic by seed."""
    rng = np.random.default_rng(seed)
    lanes = host_target().lanes("float32")
    edges = (1, 5, 6, 7, 4 * lanes - 1, 4 * lanes, 4 * lanes + 1, lanes + 1)

    def dim() -> int:
        pick = rng.random()
        if pick < 0.25:
            return int(rng.choice(PRIMES))
        if pick < 0.4:
            return int(rng.choice(edges))
        return int(np.exp(rng.uniform(0, math.log(4096))))

    cases = []
    for i in range(count):
        form = FORMS[i % len(FORMS)]
        batch = int(rng.integers(2, 9)) if form in ("rows", "batch") else 1
        m, k, n = dim(), dim(), dim()
        while 2 * batch * m * k * n > max_gflop * 1e9 and m > 1:
            m = max(1, m // 2)
        cases.append(Case(form, batch, m, k, n))
    return cases


def build(case: Case, rng: np.random.Generator):
    """(our callable, NumPy's callable, inputs) for one case."""
    bb = ik.GraphBuilder("main")
    f32 = "float32"
    b, m, k, n = case.batch, case.m, case.k, case.n
    if case.form == "const":
        w = rng.standard_normal((k, n)).astype(np.float32)
        inputs = [rng.standard_normal((m, k)).astype(np.float32)]
        y = bb.matmul(bb.param("a", (m, k), f32), bb.const(w))

        def ref(a):
            return a @ w
    elif case.form == "params":
        inputs = [rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n))]
        y = bb.matmul(bb.param("a", (m, k), f32), bb.param("b", (k, n), f32))
        ref = np.matmul
    elif case.form == "rows":
        w = rng.standard_normal((k, n)).astype(np.float32)
        inputs = [rng.standard_normal((b, m, k)).astype(np.float32)]
        y = bb.matmul(bb.param("a", (b, m, k), f32), bb.const(w))

        def ref(a):
            return a @ w
    elif case.form == "batch":
        inputs = [rng.standard_normal(s).astype(np.float32) for s in ((b, m, k), (b, k, n))]
        y = bb.matmul(bb.param("a", (b, m, k), f32), bb.param("b", (b, k, n), f32))
        ref = np.matmul
    elif case.form == "a_t":
        inputs = [rng.standard_normal(s).astype(np.float32) for s in ((k, m), (k, n))]
        at = bb.call("permute_dims", bb.param("a", (k, m), f32), axes=(1, 0))
        y = bb.matmul(at, bb.param("b", (k, n), f32))

        def ref(a, bm):
            return a.T @ bm
    else:  # b_t
        inputs = [rng.standard_normal(s).astype(np.float32) for s in ((m, k), (n, k))]
        a = bb.param("a", (m, k), f32)
        y = bb.matmul(a, bb.call("permute_dims", bb.param("b", (n, k), f32), axes=(1, 0)))

        def ref(a, bm):
            return a @ bm.T
    fn = runtime.build(ik.IRModule({"main": bb.finish([y])}))["main"]
    got, want = fn(*inputs)[0], ref(*inputs)
    scale = float(np.abs(want).max()) + 1.0
    if not np.allclose(got, want, rtol=1e-3, atol=1e-4 * scale * math.sqrt(k)):
        raise AssertionError(f"{case.label}: wrong result")
    return (lambda: fn(*inputs)), (lambda: ref(*inputs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--max-gflop", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--forms", default=",".join(FORMS),
                    help="comma-separated forms to keep (default: all)")
    ap.add_argument("--case", action="append", default=[],
                    help="an extra case FORM:MxKxN (e.g. b_t:11x902x2914), repeatable")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    print(f"CPU: {host_target().describe()}")
    print(f"threads: irkernel pool = NumPy BLAS = {threads}; float32; ratio = NumPy / ours")
    rng = np.random.default_rng(args.seed)
    rows = []
    forms = set(args.forms.split(","))
    extra = [Case(f, 1, *map(int, mkn.split("x"))) for f, mkn in
             (c.split(":") for c in args.case)]
    for case in [c for c in sweep(args.shapes, args.seed, args.max_gflop)
                 if c.form in forms] + extra:
        ours, ref = build(case, rng)
        for t in threads:
            runtime.set_num_threads(t)
            with limit_blas(t):
                cmp = compare(ours, ref, repeat=args.repeat, warmups=2, pause=0.2, rounds=2)
            ratio = cmp.ref.median / cmp.ours.median
            rows.append({**asdict(case), "threads": t, "ours_s": cmp.ours.median,
                         "numpy_s": cmp.ref.median, "ratio": ratio})
            print(f"{case.label:28s} t={t}  ours {case.flops / cmp.ours.median / 1e9:7.1f}"
                  f"  numpy {case.flops / cmp.ref.median / 1e9:7.1f} GFLOP/s  "
                  f"ratio {ratio:5.2f}", flush=True)
    for t in threads:
        mine = [r for r in rows if r["threads"] == t]
        big = [r for r in mine if 2 * r["batch"] * r["m"] * r["k"] * r["n"] >= 1e7]
        geo = math.exp(statistics.fmean(math.log(r["ratio"]) for r in mine))
        worst = min(big, key=lambda r: r["ratio"]) if big else None
        print(f"threads={t}: geometric mean {geo:.2f} (target >= 1.0); "
              + (f"worst of >= 1e7 FLOPs {worst['ratio']:.2f} at {Case(**{k: worst[k] for k in ('form', 'batch', 'm', 'k', 'n')}).label.strip()} (target >= 0.8)"
                 if worst else "no case of >= 1e7 FLOPs"))
    if args.json:
        args.json.write_text(json.dumps({"cpu": host_target().describe(), "rows": rows},
                                        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
