"""Helpers shared by the graph passes: op-table columns and the function-pass loop."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from irkernel.ir import ops
from irkernel.ir.ids import ENC_PARAM


@lru_cache(maxsize=8)
def _pinned(n_ops: int) -> np.ndarray:
    table = ops.op_arrays()
    pinned = (~table.pure) | (table.encoding == ENC_PARAM)
    pinned.setflags(write=False)
    return pinned


def op_pinned() -> np.ndarray:
    """bool[n_ops]: nodes that are live even when unused (params, impure ops)."""
    return _pinned(ops.num_ops())


def graph_function_names(mod: object, predicate: Callable[[object], bool]) -> list[str]:
    return [name for name, f in mod.functions.items() if predicate(f)]  # type: ignore[attr-defined]
