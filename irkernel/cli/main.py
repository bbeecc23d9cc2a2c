"""The ``irkernel`` command: demo, opt, run, viz, print, verify.

Heavy modules (passes, runtime, the generator) are imported lazily inside the
subcommands so that ``irkernel --help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from irkernel.cli.demo import run_demo

    if args.repeat < 1 or args.pause < 0:
        raise ValueError("demo: --repeat must be >= 1 and --pause >= 0")
    return run_demo(args.nodes, args.seed, args.pipeline, args.chain_elements, args.hidden, out,
                    args.repeat, args.pause)


def cmd_opt(args: argparse.Namespace, out: TextIO) -> int:
    """Like LLVM's opt: read IR, run a textual pipeline, write IR."""
    import passes  # noqa: F401  (registers the graph passes)
    from irkernel import instrument, transform

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


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    """Build an .ir file with runtime.build and run it (exit code 2 on a user error)."""
    from irkernel.cli.run import run_file

    return run_file(args, out, _read_module)


def cmd_viz(args: argparse.Namespace, out: TextIO) -> int:
    """Draw a graph function (graphviz DOT, SVG, PNG or HTML; --diff before/after -p)."""
    from irkernel.cli.viz import run_viz

    return run_viz(args, out, _read_module)


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
    demo.add_argument("--repeat", type=int, default=9,
                      help="timed calls per block in the comparisons with NumPy (default 9)")
    demo.add_argument("--pause", type=float, default=0.3,
                      help="seconds of pause before each timed block (default 0.3)")
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
    viz = sub.add_parser("viz", help="draw a graph function (DOT, SVG, PNG, HTML; --diff: "
                         "before and after a pipeline)")
    from irkernel.cli.viz import add_arguments

    add_arguments(viz)
    viz.set_defaults(run=cmd_viz)
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

