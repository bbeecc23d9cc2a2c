"""``irkernel reduce FILE (--test CMD | --predicate MODULE:FUNCTION) [--timeout S] [-o OUT]``.

Delta debugging of an ``.ir`` file with ``transform.reduce``. ``--test CMD`` is
llvm-reduce's interface: CMD (split like a shell would, not run by one) is run
with the candidate's path appended, the candidate written in the text format;
exit status 0 means "still interesting". ``--predicate`` names a Python
callable ``IRModule -> bool`` (``pkg.mod:func``, or ``path/to/file.py:func``).
A test that fails to start, crashes or runs past ``--timeout`` seconds (default
60 for ``--test``; none for ``--predicate`` unless given, then each call runs in a
forked child) counts as not interesting. The smallest module found, verified, is
written to ``-o`` (else stdout). Exit codes: 1 when the input is not
interesting or does not parse; 2 for a bad command line (neither or both of
``--test`` and ``--predicate``, a predicate that can not be imported).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from irkernel.cli.errors import CLIError, UsageError
from irkernel.ir.module import IRModule


def add_arguments(red: argparse.ArgumentParser) -> None:
    red.add_argument("file", help="the interesting .ir file")
    how = red.add_mutually_exclusive_group()
    how.add_argument("--test", metavar="CMD",
                     help="run CMD FILE on each candidate; exit status 0 = interesting")
    how.add_argument("--predicate", metavar="MODULE:FUNCTION",
                     help="a Python callable IRModule -> bool (pkg.mod:fn or file.py:fn)")
    red.add_argument("--timeout", type=float, default=None, metavar="S",
                     help="seconds per test; longer counts as not interesting (default 60 "
                          "for --test, none for --predicate)")
    red.add_argument("-v", "--verbose", action="store_true",
                     help="one line per reduction step on stderr")
    red.add_argument("-o", "--output", metavar="OUT", help="write the result here (default "
                     "stdout)")


def load_predicate(spec: str) -> Callable[[IRModule], Any]:
    """The callable named by ``MODULE:FUNCTION`` (a module path or a ``.py`` file)."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise UsageError(f"--predicate {spec!r}: expected MODULE:FUNCTION")
    try:
        if where.endswith(".py"):
            loader = importlib.util.spec_from_file_location(Path(where).stem, where)
            if loader is None or loader.loader is None:
                raise ImportError(f"can not load {where}")
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            sys.path.insert(0, os.getcwd())
            module = importlib.import_module(where)
    except (ImportError, OSError, SyntaxError) as exc:
        raise UsageError(f"--predicate {spec!r}: {type(exc).__name__}: {exc}") from exc
    func = getattr(module, name, None)
    if not callable(func):
        raise UsageError(f"--predicate {spec!r}: {where} has no callable {name!r}")
    return func


class CommandTest:
    """llvm-reduce's ``--test``: run ``argv + [candidate file]``, exit 0 = interesting."""

    def __init__(self, command: str, timeout: float, workdir: str) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise UsageError("--test: empty command")
        self.timeout = timeout
        self.path = os.path.join(workdir, "candidate.ir")

    def __call__(self, mod: IRModule) -> bool:
        Path(self.path).write_text(mod.script(), encoding="utf-8")
        try:
            proc = subprocess.Popen([*self.argv, self.path], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError:
            return False
        try:
            return proc.wait(self.timeout) == 0
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the test and what it started
            proc.wait()
            return False


def run_reduce(args: argparse.Namespace, out: TextIO,
               read_module: Callable[[str], IRModule]) -> int:
    from irkernel import transform

    if (args.test is None) == (args.predicate is None):
        raise UsageError("give one of --test CMD and --predicate MODULE:FUNCTION")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be > 0 seconds, got {args.timeout}")
    predicate = load_predicate(args.predicate) if args.predicate else None
    mod = read_module(args.file)
    progress = (lambda line: print(f"irkernel reduce: {line}", file=sys.stderr)
                ) if args.verbose else None
    with tempfile.TemporaryDirectory(prefix="irkernel-reduce-") as workdir:
        if predicate is None:
            test: Any = CommandTest(args.test, args.timeout or 60.0, workdir)
            timeout = None  # the subprocess has its own
        else:
            test, timeout = predicate, args.timeout
        try:
            result = transform.reduce(mod, test, timeout=timeout, progress=progress)
        except transform.ReduceError as exc:
            raise CLIError(f"{args.file}: {exc}") from exc
    text = result.script()
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        out.write(text)
    return 0


__all__ = ["CommandTest", "add_arguments", "load_predicate", "run_reduce"]
