"""``irkernel opt --run-reproducer FILE``: replay a reproducer written by a failing pass.

Reads the file (``transform.reproducer``), re-creates the context (opt level,
config, the checking instruments it recorded) and runs the recorded pass on the
recorded module. A pass that is not registered is a phase of ``runtime.build``
(CompileKernels, Link, ...): the replay then builds the module. The error is
reported as the other errors of ``irkernel opt`` (one line, exit 1); a replay
that runs clean prints the module and a note, exit 0.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from irkernel.cli.errors import CLIError
from irkernel.ir.errors import ParseError


def run_reproducer(path: str, out: TextIO) -> int:
    from irkernel import instrument, transform
    from irkernel.transform.reproducer import read_reproducer

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"{path}: {exc}") from exc
    try:
        rep = read_reproducer(text)
    except ParseError as exc:
        raise CLIError(f"{path}:{exc.line}:{exc.column}: {exc.message}") from exc
    except ValueError as exc:
        raise CLIError(f"{path}: {exc}") from exc
    try:
        step = transform.parse_pipeline(rep.pass_text)
    except ValueError:
        step = None  # a build phase, not a pass: the build replays it
    instruments = [getattr(instrument, name)() for name in rep.instruments]
    try:
        with transform.PassContext(opt_level=rep.opt_level, config=rep.config,
                                   instruments=instruments):
            if step is not None:
                result = step(rep.module)
            else:
                import runtime

                runtime.build(rep.module)
                result = rep.module
    except Exception as exc:  # noqa: BLE001 - the replayed failure, reported as recorded
        print(f"irkernel opt: error: {path}: replayed {rep.pass_text}: "
              f"{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    out.write(result.script())
    print(f"irkernel opt: {path}: the replay of {rep.pass_text} ran without error "
          f"(recorded: {rep.error})", file=sys.stderr)
    return 0


__all__ = ["run_reproducer"]
