"""The ``irkernel`` command: demo, print, verify.

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


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from .structural import structural_hash
    from .testing import GraphSpec, random_function
    from .verify import verify

    timings: list[tuple[str, float]] = []
    print(f"irkernel demo: a generated {args.nodes:,}-node graph (seed {args.seed})", file=out)
    with _step("generate (bulk GraphBuilder)", out, timings):
        func = random_function(GraphSpec(n_nodes=args.nodes, seed=args.seed))
    mod = IRModule({"main": func})
    with _step("verify", out, timings):
        verify(mod)
    with _step("structural_hash", out, timings):
        digest = structural_hash(mod)
    print(f"\nStatistics (structural hash {digest:016x}):", file=out)
    _print_stats(function_stats(func), out)
    rate = func.num_nodes / max(timings[1][1], 1e-9)
    print(f"\nverify: {rate / 1e6:.1f} M nodes/s; total {sum(t for _, t in timings):.2f} s",
          file=out)
    print("\nRead more: README.md (quick start) and the design in DESIGN.md.", file=out)
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
    demo.set_defaults(run=cmd_demo)
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
