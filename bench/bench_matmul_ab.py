"""Matmul schedules of this round against the previous decisions, in one process (issue 31).

    PYTHONPATH=. .venv/bin/python bench/bench_matmul_ab.py [--threads 1] [--rounds 6]
        [--repeat 15] [--case FORM:[B x]MxKxN ...] [--json out.json]

Each case is built twice, with the previous decisions (``PREVIOUS``: no short-K row
split, packing of narrow B rows, no whole-row narrow tile, a row-at-a-time unpacked
tail, dot products only up to 8 rows, 16-lane dot products whatever K) and with the
current ones, then timed in alternating blocks beside NumPy
(``irkernel.testing.timing.compare``, same BLAS thread count). Reported: old / new
(> 1: the new schedule is faster) and NumPy / new, per case. The default cases are the
weak shapes of the sixth round's sweep (bench/README.md) and the forms each change
targets; ``--case`` replaces them (``bench_matmul_sweep.Case`` forms).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import passes.legalize_ops as legalize_ops  # noqa: E402
import passes.topi.matmul as matmul  # noqa: E402
import passes.topi.matmul_dot as matmul_dot  # noqa: E402
import passes.topi.matmul_tiles as matmul_tiles  # noqa: E402
import runtime  # noqa: E402
from bench_matmul_sweep import Case, build  # noqa: E402
from irkernel.testing.timing import compare, limit_blas  # noqa: E402

CASES = ("b_t:54x2039x9", "b_t:25x197x13", "b_t:6x17x628", "b_t:300x500x3",
         "const:9x3x1982", "a_t:3502x3x1639", "a_t:1466x9x1531", "a_t:1021x5x2",
         "batch:5x107x6x6", "batch:2x44x1079x20", "a_t:154x189x17", "params:3000x300x40",
         "params:500x16x500", "rows:6x125x697x1021", "params:173x2678x545")


def _previous_dot_lanes(k: int, lanes: int) -> int:
    while k < lanes and lanes > 4:
        lanes //= 2
    return lanes


#: (module, attribute, previous value): the decisions this round changed.
PREVIOUS = ((matmul, "SHORT_K", 0), (matmul_tiles, "SHORT_K", 0),
            (matmul_tiles, "NARROW_ROW_BYTES", 0), (matmul, "TAIL_TILE", False),
            (matmul_tiles, "NARROW_PIECES", 1),
            (matmul_dot, "NARROW_VECTORS", 0), (matmul_dot, "dot_lanes", _previous_dot_lanes))


def _clear() -> None:
    for cached in (matmul._cached, matmul._cached_batched, matmul._cached_packed,
                   legalize_ops._transposed):
        cached.cache_clear()


@contextmanager
def previous_decisions():
    """The schedules as the previous round chose them (templates are cached per shape:
    the caches are emptied on the way in and out)."""
    saved = [(mod, name, getattr(mod, name)) for mod, name, _ in PREVIOUS]
    _clear()
    try:
        for mod, name, value in PREVIOUS:
            setattr(mod, name, value)
        yield
    finally:
        for mod, name, value in saved:
            setattr(mod, name, value)
        _clear()


def parse_case(text: str) -> Case:
    form, dims = text.split(":")
    d = [int(x) for x in dims.split("x")]
    if len(d) not in (3, 4):
        raise ValueError(f"--case {text!r}: want FORM:MxKxN or FORM:BxMxKxN")
    return Case(form, d[0] if len(d) == 4 else 1, *d[-3:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    runtime.set_num_threads(args.threads)
    rows = []
    print(f"threads {args.threads}; old/new > 1: the new schedule is faster")
    for case in map(parse_case, args.case or CASES):
        with previous_decisions():
            old, _ = build(case, np.random.default_rng(0))
        new, ref = build(case, np.random.default_rng(0))
        with limit_blas(args.threads):
            ab = compare(new, old, repeat=args.repeat, pause=0.05, rounds=args.rounds)
            vs = compare(new, ref, repeat=args.repeat, pause=0.05, rounds=args.rounds)
        t_new, t_old, t_np = ab.ours.median, ab.ref.median, vs.ref.median
        rows.append({"case": case.label.strip(), "new_s": t_new, "old_s": t_old,
                     "numpy_s": t_np, "old_over_new": t_old / t_new,
                     "numpy_over_new": t_np / vs.ours.median})
        print(f"{case.label:28s} new {t_new * 1e6:9.1f} us  old/new {t_old / t_new:5.2f}"
              f"  numpy/new {t_np / vs.ours.median:5.2f}", flush=True)
    geo = statistics.geometric_mean(r["old_over_new"] for r in rows)
    print(f"geometric mean old/new {geo:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
