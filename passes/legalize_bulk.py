"""LegalizeOps' bulk path: elementwise signatures on shape-generic kernels, many at a time.

Why: LegalizeOps runs Python once per distinct signature (``legalize_ops.py``). A
generated graph with a new shape per lane has a signature per (op, shape): 350,000 of
them in the ``shapes`` family at 1e6 nodes, at about 35 us each (type rule, generic
kernel lookup, meta array) - 12 s. But an elementwise op whose operands and result all
have one shape runs the generic ``map`` kernel of its op and dtypes whatever that shape
is, with the meta of a flat contiguous loop over ``size`` elements
(``passes.topi.generic``)::

    meta = [1, 1, 1, size] + [0, 0, 0, 1] * operands

So such signatures are grouped by *kernel key* (the signature without its shape
columns): the first of each key goes through the per-signature path (type rule, kernel,
meta, call record), and the others reuse its kernel and record with their own shape
and the flat meta of their size. The type rule of an elementwise or broadcasting op
over one shape depends on its dtypes and attributes only, which the key fixes, so the
lead's check stands for its key. The lead's own meta and record are compared with the
formula; a key whose lead disagrees (a generic kernel that changed its meta layout)
goes back to the per-signature path, so the bulk path can be slow, never wrong.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import ENC_BINARY, ENC_UNARY

#: Signature columns that hold shape ids (result, first and second operand); the
#: other columns make the kernel key.
SHAPE_COLUMNS = (3, 5, 7)


def flat_map_groups(func: Function, reps: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """bool per signature group (``reps``: a node of each; ``limits``: the largest tensor
    the group may run generically, 0 for none): an elementwise or broadcasting unary or
    binary op whose operands and result share one shape of at least 2 elements."""
    kind = func.kind[reps]
    arrays = ops.op_arrays()
    enc = arrays.encoding[kind]
    sid = func.shape_id[reps]
    size = func.shapes.size[sid]
    ok = (arrays.pattern[kind] <= ops.BROADCAST) & ((enc == ENC_UNARY) | (enc == ENC_BINARY))
    ok &= (size >= 2) & (size <= limits)
    ok &= func.shape_id[np.where(ok, func.a0[reps], reps)] == sid
    binary = ok & (enc == ENC_BINARY)
    ok[binary] &= func.shape_id[func.a1[reps[binary]]] == sid[binary]
    return ok


def flat_meta(operands: int, size: int) -> np.ndarray:
    """The meta of a generic ``map`` kernel over ``size`` contiguous elements."""
    return np.array([1, 1, 1, size] + [0, 0, 0, 1] * operands, np.int64)


def kernel_keys(signatures: np.ndarray) -> np.ndarray:
    """``signatures`` without their shape columns."""
    return np.delete(signatures, SHAPE_COLUMNS, axis=1)


def lead_agrees(record: tuple[tuple[str, Any], ...], meta: np.ndarray | None,
                operands: int, size: int, shape: tuple[int, ...]) -> bool:
    """Whether a key's lead, lowered the per-signature way, is what the bulk path would
    have made: a generic kernel with the flat meta, and a record naming ``shape``."""
    return (meta is not None and np.array_equal(meta, flat_meta(operands, size))
            and dict(record).get("shape") == shape)


def with_shape(record: tuple[tuple[str, Any], ...],
               shape: tuple[int, ...]) -> tuple[tuple[str, Any], ...]:
    """The call_tir record ``record`` with another result shape."""
    return tuple((name, shape if name == "shape" else value) for name, value in record)


__all__ = ["flat_map_groups", "flat_meta", "kernel_keys", "lead_agrees", "with_shape"]
