"""Text layer: the printer and the parser of the irkernel IR format (they round-trip).

``lexer`` (tokens, literals, types), ``printer`` (``mod.script()``; installs the
``Function.script`` / ``IRModule.script`` hooks of the IR layer) and ``parser``
(``parse(text) -> IRModule``, every error a ParseError with line:column).
May import ``irkernel.ir`` only.
"""

from __future__ import annotations

from irkernel.text.parser import parse
from irkernel.text.printer import print_function, print_module

__all__ = ["parse", "print_function", "print_module"]
