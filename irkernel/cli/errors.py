"""The errors of the ``irkernel`` command and its one rule for exit codes.

Every subcommand exits 0 on success, 1 on an error in its input or its run
(:class:`CLIError`: a missing or unreadable file, a directory, IR that does not
parse or verify, a bad ``.npy``, an input of the wrong dtype or shape, a
failed build), 2 on a usage error (:class:`UsageError`, and argparse's own:
an unknown option, a missing argument, an option value the command can not
use). Either way stderr gets exactly one line ``irkernel CMD: error: ...``.
"""

from __future__ import annotations

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2

#: The epilog of every ``--help``: the rule above, in short.
EXIT_STATUS = ("exit status: 0 success; 1 an error in the input or the run (a missing or "
               "unreadable file, bad IR, a bad .npy, a wrong shape); 2 a usage error (an "
               "unknown option, a missing argument, a bad option value). Errors are one "
               "line on stderr: 'irkernel CMD: error: ...' (--debug: the traceback).")


class CLIError(Exception):
    """A user error of a subcommand: the message is the whole line (file and problem)."""


class UsageError(CLIError):
    """A command line the subcommand can not use (an option value, a combination): exit 2."""


__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_STATUS", "EXIT_USAGE", "CLIError", "UsageError"]
