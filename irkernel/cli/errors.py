"""The error type of the ``irkernel`` command's user errors (imported by every subcommand)."""

from __future__ import annotations


class CLIError(Exception):
    """A user error of a subcommand: the message is the whole line (file and problem)."""


__all__ = ["CLIError"]
