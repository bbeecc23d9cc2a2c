"""Operands a kernel wants in its own order, packed once at build time when they are constants.

Why: a kernel that reads a weight in an order other than the graph's (a matmul's column
panels of B, later a conv's channel-blocked filters or Winograd's transformed ones) would
otherwise rearrange it on every call: for a matmul of 16 rows that is a read and a write
of all of B per call, as much memory traffic as the matmul itself. A template that can
read such an operand pre-packed says so with the PrimFunc attribute ``packable``:
``(packer name, operand index, *key)``. The pass ``PackConstantWeights``
(``passes/pack_weights.py``) finds calls whose operand at that index is a constant, asks
the named :class:`Packer` for the packed value (NumPy, once per constant) and for the
PrimFunc reading it, and rewires the call. The packed value is an ordinary constant of
the graph, so it is saved and cached like every other.

Templates register their packers here at import; this module imports nothing of the
project (a plain registry). Imports numpy and irkernel.tir only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from irkernel.tir.function import PrimFunc

#: PrimFunc attribute: ``(packer name, operand index, *key)`` of a packable operand.
PACKABLE = "packable"


@dataclass(frozen=True)
class Packer:
    """How one template packs an operand: ``pack(value, key)`` gives the packed array
    (any shape, the operand's dtype), ``variant(key)`` the PrimFunc reading it at the
    same operand index (its other parameters unchanged). Both run in the build's
    PassContext, so they see the target the template tiled for."""

    pack: Callable[[np.ndarray, tuple[Any, ...]], np.ndarray]
    variant: Callable[[tuple[Any, ...]], PrimFunc]


PACKERS: dict[str, Packer] = {}


def register_packer(name: str, packer: Packer) -> None:
    """Install ``packer`` under ``name`` (the first item of ``packable`` attributes)."""
    if name in PACKERS and PACKERS[name] != packer:
        raise ValueError(f"register_packer: {name!r} is already registered")
    PACKERS[name] = packer


def packer(name: str) -> Packer:
    """The packer named by a ``packable`` attribute."""
    try:
        return PACKERS[name]
    except KeyError:
        raise ValueError(f"packable attribute names packer {name!r}, which is not "
                         f"registered (known: {', '.join(sorted(PACKERS)) or 'none'})") from None


__all__ = ["PACKABLE", "PACKERS", "Packer", "packer", "register_packer"]
