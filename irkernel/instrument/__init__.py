"""Instrument layer (TVM's ``tvm.ir.instrument``): PassInstrument and the built-in instruments.

The public facade. Modules: ``base`` (PassInstrument, ``@pass_instrument``),
``timing`` (PassTimingInstrument), ``printing`` (PrintBeforeAll, PrintAfterAll,
PrintBefore/After, PassPrintingInstrument), ``dump`` (PrintChanged, DumpIR)
and ``checks`` (VerifyEach, CheckSemantics, CheckImmutable). May import the
ir, testing and transform layers; never ``passes`` or ``runtime``.
"""

from __future__ import annotations

from irkernel.instrument.base import PassInstrument, pass_instrument
from irkernel.instrument.checks import CheckImmutable, CheckSemantics, PassCheckError, VerifyEach
from irkernel.instrument.dump import DumpIR, PrintChanged
from irkernel.instrument.printing import (
    PassPrintingInstrument,
    PrintAfter,
    PrintAfterAll,
    PrintBefore,
    PrintBeforeAll,
)
from irkernel.instrument.timing import PassTimingInstrument
from irkernel.transform.instrument_protocol import HOOK_NAMES

__all__ = [
    "HOOK_NAMES",
    "CheckImmutable",
    "CheckSemantics",
    "DumpIR",
    "PassCheckError",
    "PassInstrument",
    "PassPrintingInstrument",
    "PassTimingInstrument",
    "PrintAfter",
    "PrintAfterAll",
    "PrintBefore",
    "PrintBeforeAll",
    "PrintChanged",
    "VerifyEach",
    "pass_instrument",
]
