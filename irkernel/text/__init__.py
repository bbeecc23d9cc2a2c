"""Text layer: the printer and the parser of the irkernel IR format (they round-trip).

``lexer`` (tokens, literals, types), ``printer`` (``mod.script()``; installs the
``Function.script`` / ``IRModule.script`` hooks of the IR layer) with ``emit``
(its kernels: node lines written as bytes from the columns) and ``float_text``
(float32/float64 literals written as NumPy spells them; float64 digits by
``ryu``), and ``parser``
(``parse(text) -> IRModule``, every error a ParseError with line:column) with
``scan`` (its kernels: lines classified and names resolved as bytes) and
``fastpath`` (runs of printer-form lines taken as whole columns) and ``literals``
(constant literals read in bulk).
May import ``irkernel.ir`` only.
"""

from __future__ import annotations

from irkernel.text.parser import parse
from irkernel.text.printer import print_function, print_module

__all__ = ["parse", "print_function", "print_module"]
