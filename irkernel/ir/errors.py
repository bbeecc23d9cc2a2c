"""Exception types of irkernel. Imports nothing from the package."""

from __future__ import annotations


class IRError(Exception):
    """Malformed IR: the message names the function, node id, op and rule."""


class ParseError(IRError):
    """Text that is not valid irkernel IR; carries ``line`` and ``column`` (1-based)."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{line}:{column}: {message}")
        self.line = line
        self.column = column
        self.message = message


class TypeInferenceError(ValueError):
    """An op's dtype or shape rule rejected its operands or attributes.

    Raised by the op table's rules without context; the builder re-raises it
    as ValueError naming the op, and ``verify`` as IRError naming the node.
    """
