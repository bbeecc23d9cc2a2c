"""Printing instruments: PrintBeforeAll, PrintAfterAll, PassPrintingInstrument, PrintBefore/After.

They write ``mod.script()`` to a ``file=`` stream that defaults to
``sys.stdout`` at print time; nothing else in the package prints.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import sys
from collections.abc import Iterable
from typing import TextIO

from irkernel.instrument.base import PassInstrument
from irkernel.ir.module import IRModule
from irkernel.transform.pass_info import PassInfo


def _names(arg: str, names: Iterable[str] | None) -> frozenset[str]:
    if names is None:
        return frozenset()
    if isinstance(names, str) or not isinstance(names, (list, tuple, set, frozenset)):
        raise TypeError(f"{arg} must be a list/tuple/set of pass names, "
                        f"got {type(names).__name__}")
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{arg} must hold str pass names, got {name!r}")
    return frozenset(names)


class _Printer(PassInstrument):
    def __init__(self, file: TextIO | None) -> None:
        self.file = file

    def _print(self, header: str, mod: IRModule) -> None:
        out = sys.stdout if self.file is None else self.file
        out.write(f"{header}\n{mod.script()}\n\n")


class PrintBeforeAll(_Printer):
    """Print the module before every pass (``Before Running Pass: transform.PassInfo(...)``).

    Parameters
    ----------
    file : text stream, optional
        Defaults to ``sys.stdout`` at print time.
    """

    def __init__(self, file: TextIO | None = None) -> None:
        super().__init__(file)

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._print(f"Before Running Pass: {info}", mod)


class PrintAfterAll(_Printer):
    """Print the module after every pass (``After Running Pass: transform.PassInfo(...)``).

    Parameters
    ----------
    file : text stream, optional
        Defaults to ``sys.stdout`` at print time.
    """

    def __init__(self, file: TextIO | None = None) -> None:
        super().__init__(file)

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._print(f"After Running Pass: {info}", mod)


class PassPrintingInstrument(_Printer):
    """Print the module before the passes in one list and after those in another.

    Parameters
    ----------
    print_before_pass_names, print_after_pass_names : list/tuple/set of str
        Pass names (``info.name``); a bare str is a TypeError.
    file : text stream, optional
        Defaults to ``sys.stdout`` at print time.
    """

    def __init__(self, print_before_pass_names: Iterable[str] | None,
                 print_after_pass_names: Iterable[str] | None,
                 file: TextIO | None = None) -> None:
        super().__init__(file)
        self.print_before_pass_names = _names("print_before_pass_names", print_before_pass_names)
        self.print_after_pass_names = _names("print_after_pass_names", print_after_pass_names)

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if info.name in self.print_before_pass_names:
            self._print(f"Print IR before: {info.name}", mod)

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if info.name in self.print_after_pass_names:
            self._print(f"Print IR after: {info.name}", mod)


class PrintBefore(PassPrintingInstrument):
    """Print the module before each pass named in ``names``."""

    def __init__(self, names: Iterable[str], file: TextIO | None = None) -> None:
        super().__init__(_names("names", names), (), file)


class PrintAfter(PassPrintingInstrument):
    """Print the module after each pass named in ``names``."""

    def __init__(self, names: Iterable[str], file: TextIO | None = None) -> None:
        super().__init__((), _names("names", names), file)
