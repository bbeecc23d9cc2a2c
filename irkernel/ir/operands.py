"""The one operand walker: how a node's operands are read from its columns.

An op's encoding says where its operands are: ``a0`` (unary), ``a0`` and
``a1`` (binary), or ``extra[a0 : a0 + a1]`` (variadic). That rule is written
once, here, in two forms:

- For kernels: :func:`operand_count` and :func:`operand_at`, inlined into the
  caller by Numba, so a sweep reads operands in place at no cost::

      enc = op_encoding[kind[i]]
      for j in range(operand_count(enc, a1[i])):
          v = operand_at(enc, a0[i], a1[i], extra, j)

- For one node at a time in Python: :func:`operand_list`.
- For NumPy and Python code: :func:`operand_csr`, a uniform CSR view
  ``(ptr int64[n+1], ids int32[k])`` built by one kernel and cached on the
  Function (it is immutable), and :func:`operand_edges` for a subset of nodes.

Why both: a sweep that only reads operands once (DCE, use counts) would pay
more to build the CSR than to walk the slots; vectorized NumPy code cannot
walk slots at all. Callers must have checked the structure first
(``irkernel.ir.validate``): these functions index without bounds checks.
Imports the op table and ids; ``irkernel.ir.function`` imports it.
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple, Protocol

import numpy as np

from irkernel.ir import ops
from irkernel.ir.ids import ENC_BINARY, ENC_UNARY, ENC_VARIADIC
from irkernel.ir.jit import inline, kernel


@inline
def operand_count(enc, a1_i):
    """Number of operands of a node with encoding ``enc`` and ``a1`` slot ``a1_i``."""
    if enc == ENC_VARIADIC:
        return a1_i
    if enc == ENC_BINARY:
        return 2
    if enc == ENC_UNARY:
        return 1
    return 0


@inline
def operand_at(enc, a0_i, a1_i, extra, j):
    """Operand ``j`` (``0 <= j < operand_count``) of a node."""
    if enc == ENC_VARIADIC:
        return extra[a0_i + j]
    return a0_i if j == 0 else a1_i


def operand_list(enc: int, a0_i: int, a1_i: int, extra: np.ndarray) -> list[int]:
    """The operands of one node as Python ints: the twin of :func:`operand_at` for the
    Python code that evaluates one op rule at a time (builder, verifier)."""
    if enc == ENC_VARIADIC:
        return [int(v) for v in extra[a0_i: a0_i + a1_i]]
    return [int(a0_i), int(a1_i)][: operand_count.py_func(enc, a1_i)]


@kernel
def operand_csr_kernel(kind, a0, a1, extra, op_encoding):
    """Every node's operands as CSR.

    Arrays: kind int16[n]; a0, a1 int32[n]; extra int32[m]; op_encoding int8[n_ops].
    Returns (ptr int64[n+1], ids int32[k]); node i reads ids[ptr[i]:ptr[i+1]].
    """
    n = kind.shape[0]
    ptr = np.empty(n + 1, np.int64)
    ptr[0] = 0
    for i in range(n):
        ptr[i + 1] = ptr[i] + operand_count(op_encoding[kind[i]], a1[i])
    ids = np.empty(ptr[n], np.int32)
    for i in range(n):
        enc = op_encoding[kind[i]]
        base = ptr[i]
        for j in range(ptr[i + 1] - base):
            ids[base + j] = operand_at(enc, a0[i], a1[i], extra, j)
    return ptr, ids


class Columns(Protocol):
    """What the walker reads of a graph Function (which imports this module)."""

    kind: np.ndarray
    a0: np.ndarray
    a1: np.ndarray
    extra: np.ndarray
    outputs: np.ndarray

    @property
    def num_nodes(self) -> int: ...


class OperandCSR(NamedTuple):
    """Operands of every node: node ``i`` reads ``ids[ptr[i]:ptr[i + 1]]`` (read-only)."""

    ptr: np.ndarray  # int64[n + 1]
    ids: np.ndarray  # int32[k]

    def of(self, node_id: int) -> np.ndarray:
        return self.ids[self.ptr[node_id]: self.ptr[node_id + 1]]


#: One CSR per live Function (weak keys: it goes when the Function goes). Functions are
#: immutable, so an entry never goes stale.
_CSR_CACHE: weakref.WeakKeyDictionary[Any, OperandCSR] = weakref.WeakKeyDictionary()


def operand_csr(func: Columns) -> OperandCSR:
    """The CSR view of ``func``'s operands, built once per Function and cached."""
    cached = _CSR_CACHE.get(func)
    if cached is None:
        ptr, ids = operand_csr_kernel(func.kind, func.a0, func.a1, func.extra,
                                      ops.op_arrays().encoding)
        ptr.setflags(write=False)
        ids.setflags(write=False)
        cached = _CSR_CACHE[func] = OperandCSR(ptr, ids)
    return cached


def operand_edges(func: Columns, node_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(consumer, operand)`` int64 pairs of every operand read of ``node_ids``, in node
    then operand order (whole-array work on the CSR, no per-node Python)."""
    csr = operand_csr(func)
    nodes = np.asarray(node_ids, np.int64)
    starts = csr.ptr[nodes]
    counts = csr.ptr[nodes + 1] - starts
    consumer = np.repeat(nodes, counts)
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(counts) - counts, counts)
    operand = csr.ids[np.repeat(starts, counts) + within].astype(np.int64)
    return consumer, operand


def use_counts(func: Columns) -> np.ndarray:
    """int64[n]: how many times each node is read, as an operand or as an output."""
    reads = np.concatenate([operand_csr(func).ids, func.outputs])
    return np.bincount(reads, minlength=func.num_nodes)
