"""The ``irkernel`` command: demo, opt, run, viz, reduce, print, verify, import (ONNX).

Heavy modules (passes, runtime, the generator) are imported lazily inside the
subcommands so that ``irkernel --help`` stays instant.

Exit codes, one rule for every subcommand (``irkernel/cli/errors.py``, and the
epilog of each ``--help``): 0 success; 1 an error in the input or the run (a
file that is missing, unreadable, a directory, not UTF-8, IR that does not
parse or verify, a bad ``.npy`` input, a wrong shape); 2 a usage error (an
unknown option, a missing argument, an option value the command can not use,
such as ``--repeat 0`` or an unknown pass in ``-p``). Each prints exactly one
line ``irkernel CMD: error: ...`` on stderr (argparse's usage text too is cut
to that line). No traceback unless ``--debug`` is given (before or after the
subcommand), which re-raises instead. An unexpected exception is an internal
error: one line too, exit 1, ``--debug`` for its traceback.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from irkernel.cli.errors import EXIT_ERROR, EXIT_STATUS, EXIT_USAGE, CLIError, UsageError
from irkernel.cli.opt import add_arguments as add_opt_arguments
from irkernel.cli.opt import parse_pipeline_option, run_opt
from irkernel.ir.errors import IRError, ParseError
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from irkernel.cli.demo import run_demo

    if args.repeat < 1 or args.pause < 0:
        raise UsageError("--repeat must be >= 1 and --pause >= 0, got "
                         f"{args.repeat} and {args.pause}")
    parse_pipeline_option(args.pipeline, "--pipeline")
    return run_demo(args.nodes, args.seed, args.pipeline, args.chain_elements, args.hidden, out,
                    args.repeat, args.pause)


def _onnx_options(args: argparse.Namespace) -> Any:
    """``--shape``, ``--dim`` and ``--const`` (usage errors before anything is read)."""
    from irkernel.cli.onnx_cmd import OnnxOptions

    return OnnxOptions.from_args(args)


def cmd_opt(args: argparse.Namespace, out: TextIO) -> int:
    """Like LLVM's opt: read IR (or ONNX) files, run a textual pipeline (on workers), write IR."""
    options = _onnx_options(args)
    return run_opt(args, out, lambda path: _read_module(path, options))


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    """Build an .ir file with runtime.build and run it (exit 1 on an error in the input);
    the symbolic dims of an .onnx model come from --dim or the .npy inputs' shapes."""
    from irkernel.cli.run import run_file

    options = _onnx_options(args)
    inputs = None if getattr(args, "random", False) else args.inputs
    return run_file(args, out, lambda path: _read_module(path, options, inputs))


def cmd_tune(args: argparse.Namespace, out: TextIO) -> int:
    """Time the register tiles of a model's convs on this CPU and store the winners."""
    from irkernel.cli.tune_cmd import run_tune

    options = _onnx_options(args)
    return run_tune(args, out, lambda path: _read_module(path, options))


def cmd_viz(args: argparse.Namespace, out: TextIO) -> int:
    """Draw a graph function (graphviz DOT, SVG, PNG or HTML; --diff before/after -p)."""
    from irkernel.cli.viz import run_viz

    return run_viz(args, out, _read_module)


def cmd_reduce(args: argparse.Namespace, out: TextIO) -> int:
    """Delta-debug an .ir file to the smallest module a test still finds interesting."""
    from irkernel.cli.reduce_cmd import run_reduce

    return run_reduce(args, out, _read_module)


def read_text(path: str) -> str:
    """The UTF-8 text of ``path``, or a CLIError naming the file and the problem."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CLIError(f"{path}: {_os_problem(exc)}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise CLIError(f"{path}: is {kind}")
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read()
        except OSError as exc:
            raise CLIError(f"{path}: {_os_problem(exc)}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CLIError(f"{path}: not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})"
                       ) from None


def _os_problem(exc: OSError) -> str:
    from irkernel.cli.npy import describe_os_error

    return describe_os_error(exc)


def _read_module(path: str, onnx_options: Any = None,
                 inputs: Sequence[str] | None = None) -> IRModule:
    """An .ir file, or an .onnx file imported with the frontend at the binding of its
    symbolic dims that ``--shape``, ``--dim`` or the ``.npy`` inputs give
    (``onnx_options``: ``onnx_cmd.OnnxOptions``)."""
    from irkernel.cli import onnx_cmd

    if onnx_cmd.is_onnx(path):
        return onnx_cmd.read_onnx(path, onnx_options, inputs=inputs)
    from irkernel.text.parser import parse

    text = read_text(path)
    try:
        return parse(text)
    except ParseError as exc:
        raise CLIError(f"{path}:{exc.line}:{exc.column}: {exc.message}") from exc


def cmd_print(args: argparse.Namespace, out: TextIO) -> int:
    """Print a module; an .onnx model with symbolic dims and no --dim: the graph over its
    dims (the symbolic import), or only the dims when that import fails."""
    from irkernel.cli import onnx_cmd

    options = _onnx_options(args)
    header = ""
    if onnx_cmd.is_onnx(args.file):
        model = onnx_cmd.open_onnx(args.file, options)
        if model.dims and not options.dims:
            header = (f"# symbolic dims: {', '.join(model.dims)} "
                      f"({model.symbolic.describe()})\n")
            mod = model.symbolic_module
            if mod is None:
                out.write(f"{header}# the graph can not be imported with symbolic dims: "
                          f"{model.symbolic_error}\n# give --dim NAME=VALUE for each to "
                          "print the graph at that binding\n")
                return 0
            header += "# give --dim NAME=VALUE for each to print the graph at that binding\n"
        else:
            values = onnx_cmd.binding(model, args.file, options.dims)
            mod = onnx_cmd.bind_model(model, args.file, values)
            header = onnx_cmd.dims_header(model, values)
    else:
        mod = _read_module(args.file)
    try:
        text = header + mod.script()
    except IRError as exc:
        raise CLIError(f"{args.file}: {exc}") from exc
    out.write(text)
    return 0


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    from irkernel.ir.verify import verify

    mod = _read_module(args.file)
    try:
        verify(mod)
    except IRError as exc:
        raise CLIError(f"{args.file}: {exc}") from exc
    nodes = sum(f.num_nodes for f in mod.functions.values() if isinstance(f, Function))
    print(f"{args.file}: OK ({len(mod)} functions, {nodes:,} graph nodes)", file=out)
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error of one line, ``PROG: error: ...`` (exit 2), like the
    command's other errors; ``--help`` shows the usage. Subcommand parsers are of this
    class too (``add_subparsers`` makes its parsers of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {' '.join(message.split())} "
                              f"(see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="irkernel", description="JIT-accelerated array-IR optimizer: "
        "struct-of-arrays graphs, Numba passes, llvmlite kernels.", epilog=EXIT_STATUS)
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error instead of one line")
    # The same flag after the subcommand; SUPPRESS keeps a subparser from resetting it.
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error instead of one line")
    from irkernel.cli.onnx_cmd import add_import_parser, add_shape_option

    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser("demo", parents=[common],
                          help="optimize a generated graph; compile and run an MLP and a "
                               "fused chain")
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
    opt = sub.add_parser("opt", parents=[common],
                         help="run a pass pipeline over .ir files (like LLVM's opt), on local "
                              "processes (--jobs) or Dask (--scheduler)")
    add_opt_arguments(opt)
    add_shape_option(opt)
    opt.set_defaults(run=cmd_opt)
    run = sub.add_parser("run", parents=[common],
                         help="build an .ir or .onnx file (runtime.build) and run it on .npy "
                         "inputs")
    run.add_argument("file")
    run.add_argument("--inputs", nargs="*", metavar="NPY", help="one .npy file per parameter")
    run.add_argument("--random", action="store_true",
                     help="run on random inputs of the parameters' types (seed 0)")
    run.add_argument("--repeat", type=int, default=1,
                     help="run this many times and report the median time per run")
    add_shape_option(run)
    run.add_argument("--entry", default="main", help="graph function to run (default main)")
    run.add_argument("-o", "--output", help="write the outputs to this .npz file")
    run.add_argument("-O", "--opt-level", type=int, default=None,
                     help="opt_level of the build (default: the context's, 2)")
    run.add_argument("--time-passes", action="store_true",
                     help="print the timing tree of every pass of the build (stderr)")
    run.add_argument("--profile", action="store_true",
                     help="time every kernel over the --repeat runs; print a table per kernel")
    run.add_argument("--profile-json", metavar="FILE",
                     help="write the kernel profile as a Chrome trace (implies --profile)")
    run.set_defaults(run=cmd_run)
    tune = sub.add_parser("tune", parents=[common],
                          help="time register tiles of an .ir or .onnx file's convs on this "
                               "CPU; later builds here use the fastest")
    from irkernel.cli.tune_cmd import add_tune_arguments

    add_tune_arguments(tune)
    add_shape_option(tune)
    tune.set_defaults(run=cmd_tune)
    viz = sub.add_parser("viz", parents=[common], help="draw a graph function (DOT, SVG, PNG, HTML; --diff: "
                         "before and after a pipeline)")
    from irkernel.cli.viz import add_arguments

    add_arguments(viz)
    viz.set_defaults(run=cmd_viz)
    red = sub.add_parser("reduce", parents=[common], help="shrink an .ir file while a test "
                         "(--test CMD, --predicate MOD:FN) still finds it interesting")
    from irkernel.cli.reduce_cmd import add_arguments as add_reduce_arguments

    add_reduce_arguments(red)
    red.set_defaults(run=cmd_reduce)
    show = sub.add_parser("print", parents=[common],
                          help="parse an .ir (or import an .onnx) file and print it")
    show.add_argument("file")
    add_shape_option(show)
    show.set_defaults(run=cmd_print)
    check = sub.add_parser("verify", parents=[common],
                           help="parse an .ir file and check every invariant")
    check.add_argument("file")
    check.set_defaults(run=cmd_verify)
    add_import_parser(sub, [common])
    for name, command in sub.choices.items():
        command.epilog = EXIT_STATUS
        command.set_defaults(parser=command, command=name)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the ``irkernel`` console script; returns the exit code."""
    args, extra = build_parser().parse_known_args(argv)  # usage errors exit 2 here
    if extra:  # named by the subcommand they were given to, not by "irkernel"
        args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    run: Callable[[argparse.Namespace, TextIO], int] = args.run
    try:
        return run(args, out or sys.stdout)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"irkernel {args.command}: interrupted", file=sys.stderr)
        return 130
    except UsageError as exc:
        if args.debug:
            raise
        print(f"irkernel {args.command}: error: {_one_line(exc)} (see irkernel "
              f"{args.command} --help)", file=sys.stderr)
        return EXIT_USAGE
    except (CLIError, IRError, OSError, ValueError, TypeError, MemoryError) as exc:
        if args.debug:
            raise
        print(f"irkernel {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # the CLI boundary: never a stray traceback (STYLE 9.9)
        if args.debug:
            raise
        print(f"irkernel {args.command}: internal error: {type(exc).__name__}: "
              f"{_one_line(exc)} (run with --debug for the traceback)", file=sys.stderr)
        return EXIT_ERROR


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, MemoryError):
        text = f"out of memory ({text})"
    return " ".join(text.split())

