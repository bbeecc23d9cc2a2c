"""irkernel: a JIT-accelerated array-IR optimizer.

Graph Functions are struct-of-arrays dataflow graphs; passes are Numba sweeps
over their columns; loop kernels (TIR PrimFuncs) lower to LLVM. This is the
public facade over the layers (``ir``, ``text``, ``tir``, ``testing``,
``transform``, ``viz``, ``instrument``; see docs/design.md). Importing it loads
every layer but ``testing`` and ``cli``, and never ``passes`` or ``runtime``.
"""

from __future__ import annotations

from irkernel import instrument, tir, transform, viz
from irkernel.ir import ids, ops
from irkernel.ir.builder import GraphBuilder
from irkernel.ir.errors import IRError, ParseError, TypeInferenceError
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES, NONE
from irkernel.ir.interp import interpret
from irkernel.ir.module import IRModule
from irkernel.ir.structural import structural_equal, structural_hash
from irkernel.ir.verify import verify
from irkernel.text import parse

__version__ = "0.1.0"

__all__ = [
    "DTYPE_NAMES",
    "NONE",
    "Function",
    "GraphBuilder",
    "IRError",
    "IRModule",
    "ParseError",
    "TypeInferenceError",
    "__version__",
    "instrument",
    "interpret",
    "ids",
    "ops",
    "parse",
    "structural_equal",
    "structural_hash",
    "tir",
    "transform",
    "verify",
    "viz",
]
