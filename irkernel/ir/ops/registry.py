"""The op registry: the append-only list of op rows, lookup by name or opcode, and the
table as columns (:class:`OpArrays`) that kernels take as arguments.

One of the three module-level registries the style allows (passes, pass configs,
ops): appended under a lock, never reordered, so an opcode once handed out stays
valid. The built-in rows are registered by :mod:`irkernel.ir.ops.table` (the
package imports it first, so every lookup sees them); a user op comes through
:func:`register_op`. Imports numpy and the ``ids``/``opcodes``/``opdef`` modules only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from irkernel.ir.ids import ENC_CONST, ENC_PARAM
from irkernel.ir.ops.opcodes import BUILTIN_OP_NAMES
from irkernel.ir.ops.opdef import OpDef


@dataclass(frozen=True)
class OpArrays:
    """The table as columns that kernels take as arguments (index = opcode)."""

    encoding: np.ndarray  # int8[n_ops]
    arity: np.ndarray  # int8[n_ops], -1 = variadic
    pattern: np.ndarray  # int8[n_ops]
    pure: np.ndarray  # bool[n_ops]
    commutative: np.ndarray  # bool[n_ops]


_lock = threading.Lock()
_ops: list[OpDef] = []
_by_name: dict[str, OpDef] = {}
_arrays: list[OpArrays] = []  # cache of one, reset on registration


def register_op(op: OpDef) -> OpDef:
    """Append an op to the table (append-only); returns it with its opcode set."""
    with _lock:
        if op.name in _by_name:
            raise ValueError(f"op {op.name!r} is already registered")
        if len(_ops) >= len(BUILTIN_OP_NAMES) and op.encoding in (ENC_PARAM, ENC_CONST):
            raise ValueError(f"op {op.name!r}: only the built-in param and const are leaves")
        op = OpDef(**{**op.__dict__, "opcode": len(_ops)})
        _ops.append(op)
        _by_name[op.name] = op
        _arrays.clear()
        return op


def set_legalize(name: str, legalize: Callable[..., Any] | None) -> OpDef:
    """Install the TIR template (LegalizeOps hook) of a registered op; returns the new row."""
    with _lock:
        op = _by_name.get(name)
        if op is None:
            raise ValueError(f"set_legalize: unknown op {name!r}")
        if legalize is not None and not callable(legalize):
            raise TypeError(f"set_legalize: legalize of {name!r} must be callable")
        op = OpDef(**{**op.__dict__, "legalize": legalize})
        _ops[op.opcode] = op
        _by_name[name] = op
        return op


def find_op(name: str) -> OpDef | None:
    """The op called ``name``, or None (the builder's lookup: no exception to build)."""
    return _by_name.get(name)


def get_op(name_or_opcode: str | int) -> OpDef:
    """Look an op up by name or opcode; ValueError naming it when unknown."""
    if isinstance(name_or_opcode, str):
        op = _by_name.get(name_or_opcode)
        if op is None:
            raise ValueError(f"unknown op {name_or_opcode!r}")
        return op
    if 0 <= name_or_opcode < len(_ops):
        return _ops[name_or_opcode]
    raise ValueError(f"unknown opcode {name_or_opcode}")


def all_ops() -> tuple[OpDef, ...]:
    """Every registered op, in opcode order."""
    return tuple(_ops)


def num_ops() -> int:
    """How many ops are registered (the next opcode)."""
    return len(_ops)


def op_arrays() -> OpArrays:
    """The table as read-only columns, cached until the next registration."""
    cached = _arrays[:1]
    if cached:
        return cached[0]
    ops = list(_ops)

    def col(attr: str, dtype: type) -> np.ndarray:
        arr = np.array([getattr(op, attr) for op in ops], dtype=dtype)
        arr.setflags(write=False)
        return arr

    arrays = OpArrays(col("encoding", np.int8), col("arity", np.int8), col("pattern", np.int8),
                      col("pure", np.bool_), col("commutative", np.bool_))
    with _lock:
        if len(ops) == len(_ops):
            _arrays[:] = [arrays]
    return arrays


__all__ = ["OpArrays", "all_ops", "find_op", "get_op", "num_ops", "op_arrays", "register_op",
           "set_legalize"]
