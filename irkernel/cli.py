"""The ``irkernel`` command: demo, opt, print, verify.

Heavy modules (passes, runtime, the generator) are imported lazily inside the
subcommands so that ``irkernel --help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

import numpy as np

from . import ops
from .errors import IRError
from .graph import Function
from .ids import DTYPE_NAMES
from .module import IRModule


@contextmanager
def _step(label: str, out: TextIO, timings: list[tuple[str, float]]) -> Iterator[None]:
    start = time.perf_counter()
    yield
    elapsed = time.perf_counter() - start
    timings.append((label, elapsed))
    print(f"  {label:<38} {elapsed * 1e3:9.1f} ms", file=out)


def function_stats(func: Function) -> dict[str, Any]:
    """Node counts per op and dtype, sizes and bytes per node (whole-array work only)."""
    by_op = np.bincount(func.kind.astype(np.int64), minlength=ops.num_ops())
    by_dtype = np.bincount(func.dtype.astype(np.int64), minlength=len(DTYPE_NAMES))
    return {
        "nodes": func.num_nodes,
        "params": len(func.params),
        "outputs": len(func.outputs),
        "constants in pool": len(func.consts),
        "distinct shapes": len(func.shapes),
        "distinct attribute sets": len(func.attr_table),
        "bytes": func.nbytes,
        "bytes/node": func.nbytes / max(func.num_nodes, 1),
        "by op": {ops.get_op(k).name: int(c) for k, c in enumerate(by_op) if c},
        "by dtype": {DTYPE_NAMES[k]: int(c) for k, c in enumerate(by_dtype) if c},
    }


def _print_stats(stats: dict[str, Any], out: TextIO) -> None:
    for key, value in stats.items():
        if isinstance(value, dict):
            items = sorted(value.items(), key=lambda kv: -kv[1])
            print(f"  {key:<24} " + ", ".join(f"{k} {v}" for k, v in items), file=out)
        elif isinstance(value, float):
            print(f"  {key:<24} {value:.1f}", file=out)
        else:
            print(f"  {key:<24} {value:,}", file=out)


class _NodeCounts:
    """Instrument recording graph node counts and wall time around each pass."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, float]] = []
        self._stack: list[tuple[int, float]] = []

    @staticmethod
    def _count(mod: IRModule) -> int:
        return sum(f.num_nodes for f in mod.functions.values() if isinstance(f, Function))

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        self._stack.append((self._count(mod), time.perf_counter()))

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        before, start = self._stack.pop()
        self.rows.append((info.name, before, self._count(mod), time.perf_counter() - start))


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    import passes  # noqa: F401  (registers the graph passes)

    from . import instrument, transform
    from .testing import GraphSpec, random_function
    from .verify import verify

    timings: list[tuple[str, float]] = []
    print(f"irkernel demo: a generated {args.nodes:,}-node graph (seed {args.seed})\n", file=out)
    with _step("generate (bulk GraphBuilder)", out, timings):
        func = random_function(GraphSpec(n_nodes=args.nodes, seed=args.seed))
    mod = IRModule({"main": func})
    with _step("verify", out, timings):
        verify(mod)
    print("\nStatistics of the generated graph:", file=out)
    _print_stats(function_stats(func), out)

    counts = instrument.pass_instrument(_NodeCounts)()
    timing = instrument.PassTimingInstrument()
    print(f"\nOptimizing with {args.pipeline} (first call includes Numba JIT or cache load):",
          file=out)
    with transform.PassContext(opt_level=3, instruments=[timing, counts]):
        pipeline = transform.parse_pipeline(args.pipeline)
        with _step(f"{args.pipeline}, first call", out, timings):
            optimized = pipeline(mod)
    counts.rows.clear()
    with transform.PassContext(opt_level=3, instruments=[timing, counts]):
        with _step(f"{args.pipeline}, warm", out, timings):
            optimized = pipeline(mod)
    print(f"\n  {'pass':<26} {'ms':>9} {'M nodes/s':>10} {'nodes before':>14} "
          f"{'nodes after':>13}", file=out)
    for name, before, after, seconds in counts.rows:
        rate = before / max(seconds, 1e-9) / 1e6
        print(f"  {name:<26} {seconds * 1e3:9.1f} {rate:10.1f} {before:14,} {after:13,}",
              file=out)
    print("\nPass timing tree (warm run):\n" + timing.render(), file=out)
    with _step("verify optimized", out, timings):
        verify(optimized)
    print("\nRead more: README.md (quick start), docs/pass_infra.md (passes and "
          "instruments), bench/README.md (measured figures).", file=out)
    return 0


def cmd_opt(args: argparse.Namespace, out: TextIO) -> int:
    """Like LLVM's opt: read IR, run a textual pipeline, write IR."""
    import passes  # noqa: F401  (registers the graph passes)

    from . import instrument, transform

    mod = _read_module(args.file)
    instruments: list[Any] = []
    timing = instrument.PassTimingInstrument() if args.time_passes else None
    if timing is not None:
        instruments.append(timing)
    if args.print_changed:
        instruments.append(instrument.PrintChanged(file=sys.stderr))
    with transform.PassContext(opt_level=args.opt_level, instruments=instruments):
        result = transform.parse_pipeline(args.passes)(mod)
    text = result.script()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        out.write(text)
    if timing is not None:
        print(timing.render(), file=sys.stderr)
    return 0


def _read_module(path: str) -> IRModule:
    from .text.parser import parse

    with open(path, encoding="utf-8") as fh:
        return parse(fh.read())


def cmd_print(args: argparse.Namespace, out: TextIO) -> int:
    out.write(_read_module(args.file).script())
    return 0


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    from .verify import verify

    mod = _read_module(args.file)
    verify(mod)
    nodes = sum(f.num_nodes for f in mod.functions.values() if isinstance(f, Function))
    print(f"{args.file}: OK ({len(mod)} functions, {nodes:,} graph nodes)", file=out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="irkernel", description="JIT-accelerated array-IR optimizer: "
        "struct-of-arrays graphs, Numba passes, llvmlite kernels.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", help="generate, verify and describe a large random graph")
    demo.add_argument("--nodes", type=int, default=1_000_000, help="graph size (default 1e6)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--pipeline", default="O2", help="textual pipeline (default O2)")
    demo.set_defaults(run=cmd_demo)
    opt = sub.add_parser("opt", help="run a pass pipeline over an .ir file (like LLVM's opt)")
    opt.add_argument("file")
    opt.add_argument("-p", "--passes", required=True,
                     help='textual pipeline, e.g. "FoldConstant,fixpoint(SimplifyArith,'
                          'EliminateCommonSubexpr,DeadCodeElimination)"')
    opt.add_argument("-O", "--opt-level", type=int, default=2)
    opt.add_argument("--time-passes", action="store_true", help="print the timing tree")
    opt.add_argument("--print-changed", action="store_true",
                     help="print a diff after every pass that changed the module (stderr)")
    opt.add_argument("-o", "--output", help="write the result here instead of stdout")
    opt.set_defaults(run=cmd_opt)
    show = sub.add_parser("print", help="parse an .ir file and print it normalized")
    show.add_argument("file")
    show.set_defaults(run=cmd_print)
    check = sub.add_parser("verify", help="parse an .ir file and check every invariant")
    check.add_argument("file")
    check.set_defaults(run=cmd_verify)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the ``irkernel`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace, TextIO], int] = args.run
    try:
        return run(args, out or sys.stdout)
    except (IRError, OSError, ValueError, TypeError) as exc:
        print(f"irkernel {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
