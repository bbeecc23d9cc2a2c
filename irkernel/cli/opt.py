"""``irkernel opt DIR_OR_FILES... -p PIPELINE [--jobs N | --scheduler ADDR]``, like LLVM's opt.

Inputs are ``.ir`` or ``.onnx`` files and directories (every ``*.ir`` and
``*.onnx`` below them, sorted; an ONNX result is written as ``NAME.ir``).
One file: the result goes to stdout or ``-o FILE``. Several: ``-o DIR`` is
required and each result is written under it with the input's name (its
path relative to a directory input). Files are parsed here; the modules are
optimized by ``transform.map_modules``: serially (``--jobs 1``, the
default), on N local processes (``--jobs N``) or on a Dask cluster
(``--scheduler tcp://host:8786``, needs ``irkernel[dask]``). ``--time-passes``
prints the timing tree merged over all workers (summed CPU time).

A file that is missing, does not parse or whose optimization fails is reported
on stderr as one line ``irkernel opt: error: FILE: ...``; the other files are
still written and the exit code is 1. A command line it can not use (an
unknown pass in ``-p``, several inputs without ``-o DIR``, two inputs written
to one place) exits 2 (``irkernel/cli/errors.py``). Imported by
``irkernel.cli.main``.

``--reproducer DIR`` writes, for a pass that fails, one file with its input
module, the pass, pipeline, opt level and config (``transform.reproducer``);
the error line names it. ``--run-reproducer FILE`` replays such a file and
fails with the same error (``irkernel.cli.replay``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any, TextIO

from irkernel.cli.errors import CLIError, UsageError
from irkernel.ir.errors import IRError
from irkernel.ir.module import IRModule


class OptError(UsageError):
    """A usage error of ``irkernel opt`` (printed as one line, exit code 2)."""


def parse_pipeline_option(text: str, option: str = "-p") -> Any:
    """The pipeline of a ``-p``/``--pipeline`` value; a UsageError when it does not parse."""
    import passes  # noqa: F401  (registers the graph passes)
    from irkernel import transform

    try:
        return transform.parse_pipeline(text)
    except ValueError as exc:
        raise UsageError(f"{option} {text!r}: {exc}") from exc


def add_arguments(opt: argparse.ArgumentParser) -> None:
    """The arguments of the ``opt`` subcommand."""
    opt.add_argument("inputs", nargs="*", metavar="DIR_OR_FILE",
                     help=".ir files, or directories of them")
    opt.add_argument("-p", "--passes",
                     help='textual pipeline, e.g. "FoldConstant,fixpoint(SimplifyArith,'
                          'EliminateCommonSubexpr,DeadCodeElimination)"')
    opt.add_argument("-O", "--opt-level", type=int, default=2)
    opt.add_argument("--time-passes", action="store_true",
                     help="print the timing tree (merged over workers; stderr)")
    opt.add_argument("--print-changed", action="store_true",
                     help="print a diff after every pass that changed the module (stderr; "
                          "--jobs 1 only)")
    opt.add_argument("-o", "--output",
                     help="the result file (one input) or directory (several inputs)")
    opt.add_argument("-j", "--jobs", type=_positive, default=None, metavar="N",
                     help="optimize on N local processes (default 1: in this process)")
    opt.add_argument("--reproducer", metavar="DIR",
                     help="when a pass fails, write a reproducer file (its input module, the "
                          "pass, pipeline, config) into DIR (--jobs 1 only)")
    opt.add_argument("--run-reproducer", metavar="FILE",
                     help="replay a reproducer file: run its pass on its module, as recorded")
    opt.add_argument("--scheduler", metavar="ADDRESS",
                     help="optimize on the Dask cluster of this scheduler, e.g. "
                          "tcp://host:8786 (needs irkernel[dask])")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def collect_inputs(paths: list[str]) -> list[tuple[Path, Path]]:
    """``(input file, output path relative to -o DIR)`` for every input, in order."""
    found: list[tuple[Path, Path]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file()
                           and p.suffix in (".ir", ".onnx"))
            if not files:
                raise CLIError(f"{raw}: no .ir or .onnx files in this directory")
            found.extend((f, f.relative_to(path).with_suffix(".ir")) for f in files)
        elif path.exists():
            found.append((path, Path(path.name).with_suffix(".ir")))
        else:
            raise CLIError(f"{raw}: no such file or directory")
    seen: dict[Path, Path] = {}
    for source, rel in found:
        if rel in seen:
            raise OptError(f"{seen[rel]} and {source} would both be written to {rel}")
        seen[rel] = source
    return found


def _engine(args: argparse.Namespace) -> tuple[Any, int | None]:
    if args.scheduler:
        return args.scheduler, args.jobs
    if args.jobs is None or args.jobs == 1:
        return "serial", None
    return "local", args.jobs


def run_opt(args: argparse.Namespace, out: TextIO,
            read_module: Callable[[str], IRModule]) -> int:
    """The ``opt`` subcommand (see the module docstring); returns the exit code.
    ``read_module`` reads one input file (CLIError/IRError naming the file)."""
    import passes  # noqa: F401  (registers the graph passes)
    from irkernel import instrument, transform

    if args.run_reproducer is not None:
        if args.inputs or args.passes or args.reproducer:
            raise OptError("--run-reproducer FILE takes no inputs, -p or --reproducer")
        from irkernel.cli.replay import run_reproducer

        return run_reproducer(args.run_reproducer, out)
    if not args.inputs or not args.passes:
        raise OptError("give input files and -p PIPELINE (or --run-reproducer FILE)")
    pipeline = parse_pipeline_option(args.passes)  # a bad pipeline stops everything here
    inputs = collect_inputs(args.inputs)
    engine, workers = _engine(args)
    single = len(inputs) == 1 and not Path(args.inputs[0]).is_dir()
    if not single and not args.output:
        raise OptError("several inputs need -o DIR (the results are written there)")
    if args.print_changed and engine != "serial":
        raise OptError("--print-changed prints from this process: use it with --jobs 1")
    if args.reproducer and engine != "serial":
        raise OptError("--reproducer writes from this process: use it with --jobs 1")
    modules: list[Any] = []
    kept: list[tuple[Path, Path]] = []
    failed = 0
    for source, rel in inputs:
        try:
            modules.append(read_module(str(source)))
            kept.append((source, rel))
        except (CLIError, ValueError) as exc:  # already names the file (.ir or .onnx)
            print(f"irkernel opt: error: {exc}", file=sys.stderr)
            failed += 1
        except IRError as exc:
            print(f"irkernel opt: error: {source}: {exc}", file=sys.stderr)
            failed += 1
    instruments: list[Any] = []
    timing = instrument.PassTimingInstrument() if args.time_passes else None
    if timing is not None:
        instruments.append(timing)
    if args.print_changed:
        instruments.append(instrument.PrintChanged(file=sys.stderr))
    try:
        with transform.PassContext(opt_level=args.opt_level, instruments=instruments,
                                   reproducer_dir=args.reproducer):
            results = transform.map_modules(pipeline, modules, engine=engine,
                                            max_workers=workers, on_error="return")
    except ImportError as exc:  # --scheduler without Dask: the run can not happen
        print(f"irkernel opt: error: {exc}", file=sys.stderr)
        return 1
    for (source, rel), result in zip(kept, results, strict=True):
        if isinstance(result, transform.TaskError):
            exc = result.exception  # IRErrors read as the other commands' errors; others
            kind = "" if isinstance(exc, IRError) else f"{type(exc).__name__}: "  # named
            where = getattr(exc, "irkernel_reproducer", None)
            note = f" (reproducer: {where})" if where else ""
            print(f"irkernel opt: error: {source}: {kind}{exc}{note}", file=sys.stderr)
            failed += 1
            continue
        _write(result.script(), args.output, rel, single, out)
    if timing is not None:
        print(timing.render(), file=sys.stderr)
    return 1 if failed else 0


def _write(text: str, output: str | None, rel: Path, single: bool, out: TextIO) -> None:
    if single and not output:
        out.write(text)
        return
    target = Path(output) if single else Path(output or ".") / rel  # type: ignore[arg-type]
    if not single:
        os.makedirs(target.parent, exist_ok=True)
    target.write_text(text, encoding="utf-8")


__all__ = ["OptError", "add_arguments", "collect_inputs", "parse_pipeline_option", "run_opt"]
