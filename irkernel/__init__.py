"""irkernel: a JIT-accelerated array-IR optimizer.

Graph Functions are struct-of-arrays dataflow graphs; passes are Numba sweeps
over their columns; loop kernels (TIR PrimFuncs) lower to LLVM. This package
holds the IR and the pass infrastructure and never imports ``passes`` or
``runtime`` at module level.
"""

from __future__ import annotations

from . import instrument, ops, transform
from .builder import GraphBuilder
from .errors import IRError, ParseError, TypeInferenceError
from .graph import Function
from .ids import DTYPE_NAMES, NONE
from .interp import interpret
from .module import IRModule
from .structural import structural_equal, structural_hash
from .verify import verify


def parse(text: str) -> IRModule:
    """Parse the text format (``mod.script()``) back into an IRModule; ParseError on bad text."""
    from .text.parser import parse as _parse

    return _parse(text)


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
    "ops",
    "parse",
    "structural_equal",
    "structural_hash",
    "transform",
    "verify",
]
