"""Instruments that show what passes did: PrintChanged (a diff per change) and DumpIR.

Both lean on change tracking: a pass that changed nothing returned its input
object, so "changed?" is ``out is inp`` and unchanged passes cost nothing.
Passes nest (a Sequential's hooks surround its inner passes'), so the
before/after pairs keep a stack. Imports the IR and transform layers.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import difflib
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from irkernel.instrument.base import PassInstrument
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule
from irkernel.transform.context import running_frame
from irkernel.transform.pass_info import PassInfo


def _value_text(name: str, value: object) -> str:
    """The text of one module entry (graph Function or PrimFunc)."""
    if isinstance(value, Function):
        return value.script(name)
    script = getattr(value, "script", None)
    return str(script()) if callable(script) else repr(value)

def _name_set(arg: str, names: Iterable[str] | None) -> frozenset[str] | None:
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, (list, tuple, set, frozenset)):
        raise TypeError(f"{arg} must be a list/tuple/set of names or None, "
                        f"got {type(names).__name__}")
    return frozenset(names)

# ---------------------------------------------------------------------------
# PrintChanged
# ---------------------------------------------------------------------------


class PrintChanged(PassInstrument):
    """After each pass that changed the module, print a unified diff of what changed.

    LLVM's ``-print-changed=diff``: one diff per changed function (identity
    tells which), nothing for passes that returned their input. Containers
    (Sequential, fixpoint) are skipped, since their inner passes already
    printed the same changes.

    Parameters
    ----------
    pass_names : list/tuple/set of str, optional
        Only report these passes (default: all).
    function_names : list/tuple/set of str, optional
        Only diff these functions (default: all).
    file : text stream, optional
        Defaults to ``sys.stdout`` at print time.
    context : int
        Lines of context in the diff (default 3).
    """

    def __init__(self, pass_names: Iterable[str] | None = None,
                 function_names: Iterable[str] | None = None,
                 file: TextIO | None = None, context: int = 3) -> None:
        self.pass_names = _name_set("pass_names", pass_names)
        self.function_names = _name_set("function_names", function_names)
        self.file = file
        self.context = context
        self._inputs: list[IRModule] = []

    def enter_pass_ctx(self) -> None:
        self._inputs = []

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._inputs.append(mod)

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if not self._inputs:
            return
        before = self._inputs.pop()
        if mod is before or (self.pass_names is not None and info.name not in self.pass_names):
            return
        frame = running_frame()
        if frame is not None and frame.pass_._is_container:  # pyright: ignore[reportPrivateUsage]
            return
        chunks: list[str] = []
        for name in dict.fromkeys([*before.functions, *mod.functions]):
            if self.function_names is not None and name not in self.function_names:
                continue
            old, new = before.functions.get(name), mod.functions.get(name)
            if old is new:
                continue
            old_lines = [] if old is None else _value_text(name, old).splitlines(keepends=True)
            new_lines = [] if new is None else _value_text(name, new).splitlines(keepends=True)
            diff = difflib.unified_diff(old_lines, new_lines, f"{name} (before {info.name})",
                                        f"{name} (after {info.name})", n=self.context)
            chunks.append("".join(line if line.endswith("\n") else line + "\n" for line in diff))
        if not chunks and self.function_names is not None:
            return
        out = sys.stdout if self.file is None else self.file
        body = "".join(chunks) or "(module attributes changed)\n"
        out.write(f"*** IR Dump After {info.name} (changed) ***\n{body}")

# ---------------------------------------------------------------------------
# DumpIR
# ---------------------------------------------------------------------------

_DUMP_RE = re.compile(r"^\d{3,}_.*\.ir$")


class DumpIR(PassInstrument):
    """Write the module after every pass to ``<dump_dir>/NNN_<pass>.ir`` (as in TVM 0.27).

    ``NNN`` counts from 000 over the instrument's life; the files parse back
    with ``ik.parse``.

    Parameters
    ----------
    dump_dir : str or Path
        Created when the first file is written.
    refresh : bool
        Delete earlier ``NNN_*.ir`` files in ``dump_dir`` first (other files
        are left alone).
    """

    def __init__(self, dump_dir: str | Path, refresh: bool = False) -> None:
        self.dump_dir = Path(dump_dir)
        self.counter = 0
        if refresh and self.dump_dir.is_dir():
            for item in self.dump_dir.iterdir():
                if item.is_file() and _DUMP_RE.match(item.name):
                    item.unlink()

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.dump_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.\-]", "_", info.name)
        path = self.dump_dir / f"{self.counter:03d}_{safe}.ir"
        self.counter += 1
        path.write_text(mod.script(), encoding="utf-8")
