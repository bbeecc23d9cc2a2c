"""``irkernel tune FILE``: time the register tiles of a model's convs on this CPU
(``runtime.tune``) and store the winners, which later builds on this CPU use.

The file is read as ``run`` reads it (``.ir``, or ``.onnx`` with ``--shape``); the table
printed is the report of :func:`runtime.tune.tune`. Imports runtime lazily (the CLI's
other commands must not pay for it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from irkernel.cli.errors import CLIError, UsageError
from irkernel.ir.module import IRModule


def add_tune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="an .ir file or an .onnx model")
    parser.add_argument("--repeat", type=int, default=7,
                        help="timed samples per candidate tile (medians; default 7)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads to tune at (default: the runtime's)")
    parser.add_argument("--no-store", action="store_true",
                        help="measure and print only: keep the cache's tiles as they are")


def run_tune(args: argparse.Namespace, out: TextIO,
             read_module: Callable[[str], IRModule]) -> int:
    """The ``tune`` subcommand; returns 0, or raises CLIError/UsageError."""
    if args.repeat < 1:
        raise UsageError(f"--repeat must be >= 1, got {args.repeat}")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be >= 1, got {args.threads}")
    mod = read_module(args.file)
    import runtime
    from irkernel.ir.errors import IRError

    if args.threads is not None:
        runtime.set_num_threads(args.threads)

    def progress(done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(f"\rtuning conv {done}/{total}", end="" if done < total else "\n",
                  file=sys.stderr, flush=True)

    try:
        report = runtime.tune(mod, repeat=args.repeat, cache=not args.no_store,
                              progress=progress)
    except IRError as exc:
        raise CLIError(f"{args.file}: {exc}") from exc
    print(report.render(), file=out)
    return 0


__all__ = ["add_tune_arguments", "run_tune"]
