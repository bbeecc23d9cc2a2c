"""The ``irkernel`` command: demo, opt, run, print, verify.

Heavy modules (passes, runtime, the generator) are imported lazily inside the
subcommands so that ``irkernel --help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from irkernel.cli.opt import add_arguments as add_opt_arguments
from irkernel.cli.opt import run_opt
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from irkernel.cli.demo import run_demo

    return run_demo(args.nodes, args.seed, args.pipeline, args.chain_elements, args.hidden, out)


def cmd_opt(args: argparse.Namespace, out: TextIO) -> int:
    """Like LLVM's opt: read IR files, run a textual pipeline (on workers), write IR."""
    return run_opt(args, out)


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    """Build an .ir file with runtime.build and run it (exit code 2 on a user error)."""
    from irkernel.cli.run import run_file

    return run_file(args, out, _read_module)


def _read_module(path: str) -> IRModule:
    from irkernel.text.parser import parse

    with open(path, encoding="utf-8") as fh:
        return parse(fh.read())


def cmd_print(args: argparse.Namespace, out: TextIO) -> int:
    out.write(_read_module(args.file).script())
    return 0


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    from irkernel.ir.verify import verify

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
    demo = sub.add_parser("demo", help="optimize a generated graph; compile and run an MLP "
                                       "and a fused chain")
    demo.add_argument("--nodes", type=int, default=1_000_000, help="graph size (default 1e6)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--pipeline", default="O2", help="textual pipeline (default O2)")
    demo.add_argument("--chain-elements", type=int, default=10_000_000,
                      help="length of the fused elementwise chain (default 1e7)")
    demo.add_argument("--hidden", type=int, default=1024,
                      help="MLP width (batch 64, 3 layers; default 1024)")
    demo.set_defaults(run=cmd_demo)
    opt = sub.add_parser("opt", help="run a pass pipeline over .ir files (like LLVM's opt), "
                                     "on local processes (--jobs) or Dask (--scheduler)")
    add_opt_arguments(opt)
    opt.set_defaults(run=cmd_opt)
    run = sub.add_parser("run", help="build an .ir file (runtime.build) and run it on .npy "
                         "inputs")
    run.add_argument("file")
    run.add_argument("--inputs", nargs="*", metavar="NPY", help="one .npy file per parameter")
    run.add_argument("--entry", default="main", help="graph function to run (default main)")
    run.add_argument("-o", "--output", help="write the outputs to this .npz file")
    run.add_argument("-O", "--opt-level", type=int, default=None,
                     help="opt_level of the build (default: the context's, 2)")
    run.add_argument("--time-passes", action="store_true",
                     help="print the timing tree of every pass of the build (stderr)")
    run.set_defaults(run=cmd_run)
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

