"""``irkernel reduce FILE (--test CMD | --predicate MODULE:FUNCTION) [--timeout S] [-j N]``.

Delta debugging of an ``.ir`` file with ``transform.reduce``. ``--test CMD`` is
llvm-reduce's interface: CMD (split like a shell would, not run by one) is run
with the candidate's path appended, the candidate written in the text format;
exit status 0 means "still interesting". ``--predicate`` names a Python
callable ``IRModule -> bool`` (``pkg.mod:func``, or ``path/to/file.py:func``).
A test that fails to start, crashes or runs past ``--timeout`` seconds (default
60 for ``--test``; none for ``--predicate`` unless given, then each call runs in a
forked child) counts as not interesting. ``-j N`` runs up to N tests at once
(default: the number of cores for ``--test``, 1 for ``--predicate``), each
``--test`` in its own process group with its own candidate file; the result does
not depend on N. The smallest module found, verified, is
written to ``-o`` (else stdout). Exit codes: 1 when the input is not
interesting or does not parse; 2 for a bad command line (neither or both of
``--test`` and ``--predicate``, a predicate that can not be imported).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import itertools
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from irkernel.cli.errors import CLIError, UsageError
from irkernel.ir.module import IRModule
from irkernel.transform.reduce_oracle import PredicateCall


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
    red.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                     help="tests run at once (default: the number of cores for --test, 1 for "
                          "--predicate); the result does not depend on N")
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


class _CommandCall(PredicateCall):
    """One run of the test command on a candidate file: its own process group, killed
    (with what it started) at the deadline or when its answer is no longer needed."""

    def __init__(self, argv: list[str], path: str, timeout: float) -> None:
        self.path = path
        self.deadline = time.monotonic() + timeout
        self.answer: bool | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            self.proc = subprocess.Popen([*argv, path], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
        except OSError:  # the test does not start: not interesting
            self.answer = False
            self.kill()
            return
        with contextlib.suppress(AttributeError, OSError):  # Linux: wait on the process
            self.waitable = os.pidfd_open(self.proc.pid)

    def poll(self) -> bool | None:
        if self.answer is None:
            code = self.proc.poll() if self.proc is not None else 1
            if code is not None:
                self.answer = code == 0
            elif time.monotonic() > self.deadline:
                self.answer = False
            if self.answer is not None:
                self.kill()
        return self.answer

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # the test and what it started
            self.proc.wait()
        if isinstance(self.waitable, int):
            os.close(self.waitable)
            self.waitable = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class CommandTest:
    """llvm-reduce's ``--test``: run ``argv + [candidate file]``, exit 0 = interesting.
    ``start`` runs it without waiting (the reducer's concurrent calls); each call
    writes its candidate to a file of its own in ``workdir``."""

    def __init__(self, command: str, timeout: float, workdir: str) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise UsageError("--test: empty command")
        self.timeout = timeout
        self.workdir = workdir
        self.count = itertools.count()

    def start(self, mod: IRModule) -> PredicateCall:
        path = os.path.join(self.workdir, f"candidate-{next(self.count)}.ir")
        Path(path).write_text(mod.script(), encoding="utf-8")
        return _CommandCall(self.argv, path, self.timeout)

    def __call__(self, mod: IRModule) -> bool:
        call = self.start(mod)
        while (answer := call.poll()) is None:
            time.sleep(0.01)
        return answer


def run_reduce(args: argparse.Namespace, out: TextIO,
               read_module: Callable[[str], IRModule]) -> int:
    from irkernel import transform

    if (args.test is None) == (args.predicate is None):
        raise UsageError("give one of --test CMD and --predicate MODULE:FUNCTION")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be > 0 seconds, got {args.timeout}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")
    predicate = load_predicate(args.predicate) if args.predicate else None
    mod = read_module(args.file)
    progress = (lambda line: print(f"irkernel reduce: {line}", file=sys.stderr)
                ) if args.verbose else None
    with tempfile.TemporaryDirectory(prefix="irkernel-reduce-") as workdir:
        if predicate is None:
            test: Any = CommandTest(args.test, args.timeout or 60.0, workdir)
            timeout = None  # the subprocess has its own
            jobs = args.jobs or os.cpu_count() or 1
        else:
            test, timeout, jobs = predicate, args.timeout, args.jobs or 1
        try:
            result = transform.reduce(mod, test, timeout=timeout, jobs=jobs, progress=progress)
        except transform.ReduceError as exc:
            raise CLIError(f"{args.file}: {exc}") from exc
    text = result.script()
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        out.write(text)
    return 0


__all__ = ["CommandTest", "add_arguments", "load_predicate", "run_reduce"]
