"""Static memory planning of a lowered graph Function (TVM's StaticPlanBlockMemory idea).

A lowered graph Function holds ``param``, ``const``, ``call_tir`` and
``call_func`` nodes. Every ``call_tir`` result that is not a function output
is an *intermediate*: its buffer lives from the node that writes it to the
last node that reads it. The plan gives each intermediate a byte offset in
one arena so that two intermediates alive at the same time never overlap and
buffers whose lifetimes do not overlap share storage.

Algorithm (two Numba sweeps plus whole-array NumPy):

1. ``last_use_kernel``: a forward sweep over the operands; the last reader of
   a node is the largest node id reading it (topological order makes node
   ids the execution order).
2. ``plan_tokens_kernel``: a forward sweep over the intermediates in
   execution order. Before node ``i`` is allocated, every token whose value
   was last read before ``i`` returns to the free list (values read *by* ``i``
   are still live while ``i`` runs: kernels are ``noalias``). The request
   takes the smallest free token that fits (best fit); if none fits, the
   largest free token grows (its offset is only fixed at the end, so growing
   is free); else a new token is made. Sizes are rounded up to 64-byte
   classes, so every offset is 64-byte aligned.
3. Token offsets are the exclusive prefix sum of token sizes (one arena).

Not planned: params and constants (the caller's and the module's memory),
function outputs (the executor returns fresh arrays), and ``call_func``
results (the callee's executor returns a fresh array). Alternatives
considered: TVM's size-matching within a factor of 16 (best fit plus growth
needs no tuning constant); an interval-graph colouring (optimal, but
O(n log n) with a heap per size class for little gain on chains, which is
what fusion produces). The free-list scan is O(live tokens) per request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import NONE, NUMPY_DTYPES
from irkernel.ir.jit import kernel
from irkernel.ir.operands import operand_at, operand_count
from irkernel.ir.validate import validate_function

ALIGN = 64  # bytes: arena offsets and size classes (a cache line, AVX-512 friendly)

_ITEMSIZE = np.array([d.itemsize for d in NUMPY_DTYPES], dtype=np.int64)


@kernel
def last_use_kernel(kind, a0, a1, extra, op_encoding):
    """The id of the last node reading each node (NONE when nothing reads it).

    Arrays: kind int16[n]; a0, a1 int32[n]; extra int32[m]; op_encoding int8[n_ops].
    Returns last int32[n]. Relies on topological order (operands < node id).
    """
    n = kind.shape[0]
    last = np.full(n, -1, np.int32)
    for i in range(n):
        enc = op_encoding[kind[i]]
        for j in range(operand_count(enc, a1[i])):
            last[operand_at(enc, a0[i], a1[i], extra, j)] = i
    return last


@kernel
def plan_tokens_kernel(node_ids, last, sizes):
    """Assign a storage token to each intermediate (best fit, grow, or new).

    Arrays: node_ids int32[m] intermediates in execution order; last int32[m]
    last reader of each (>= its node id); sizes int64[m] bytes, multiples of
    the alignment. Returns (token int32[m], token_bytes int64[t]).
    """
    m = node_ids.shape[0]
    token = np.empty(m, np.int32)
    token_bytes = np.zeros(max(m, 1), np.int64)
    is_free = np.zeros(max(m, 1), np.bool_)
    free_order = np.argsort(last, kind="mergesort")
    n_tok = 0
    next_free = 0
    for k in range(m):
        node = node_ids[k]
        # Release every value last read before this node (it is dead by now).
        while next_free < m and last[free_order[next_free]] < node:
            is_free[token[free_order[next_free]]] = True
            next_free += 1
        need = sizes[k]
        best = -1
        largest = -1
        for t in range(n_tok):
            if not is_free[t]:
                continue
            if token_bytes[t] >= need and (best < 0 or token_bytes[t] < token_bytes[best]):
                best = t
            if largest < 0 or token_bytes[t] > token_bytes[largest]:
                largest = t
        if best < 0:
            if largest >= 0:
                best = largest
                token_bytes[best] = need
            else:
                best = n_tok
                token_bytes[best] = need
                n_tok += 1
        is_free[best] = False
        token[k] = best
    return token, token_bytes[:n_tok].copy()


@dataclass(frozen=True)
class MemoryPlan:
    """Where every intermediate of one graph Function lives in the arena.

    Attributes
    ----------
    node_ids : int32[m]
        Planned nodes (intermediate ``call_tir`` results), in execution order.
    offsets, nbytes : int64[m]
        Byte offset in the arena (64-byte aligned) and exact size of each.
    last_use : int32[m]
        The last node reading each one (its own id when nothing reads it).
    token : int32[m]
        The storage token each one shares; ``token_bytes[t]`` its size.
    naive_bytes : int
        Sum of all intermediates, each in its 64-byte size class: the memory
        without planning (so ``planned_bytes <= naive_bytes`` always: every
        token's size is one of the requests it served).
    planned_bytes : int
        The arena size: peak intermediate memory with planning.
    peak_live_bytes : int
        The largest sum of intermediates alive at one node (a lower bound for
        any plan, up to alignment).
    """

    node_ids: np.ndarray
    offsets: np.ndarray
    nbytes: np.ndarray
    last_use: np.ndarray
    token: np.ndarray
    token_bytes: np.ndarray
    naive_bytes: int
    planned_bytes: int
    peak_live_bytes: int

    @property
    def num_buffers(self) -> int:
        return len(self.node_ids)

    def offset_of(self) -> dict[int, int]:
        """``{node id: arena offset}`` (for the executor; one entry per intermediate)."""
        return dict(zip(self.node_ids.tolist(), self.offsets.tolist(), strict=True))

    def summary(self) -> str:
        saved = 1.0 - self.planned_bytes / self.naive_bytes if self.naive_bytes else 0.0
        return (f"{self.num_buffers} intermediates in {len(self.token_bytes)} buffers: "
                f"{self.naive_bytes:,} B naive -> {self.planned_bytes:,} B planned "
                f"({saved:.0%} saved; live peak {self.peak_live_bytes:,} B)")

    def __repr__(self) -> str:
        return f"<MemoryPlan {self.summary()}>"


def plan_memory(func: Function) -> MemoryPlan:
    """Plan the arena of the intermediates of a lowered graph Function.

    Parameters
    ----------
    func : Function
        A graph Function; every ``call_tir`` node that is not an output is planned.

    Returns
    -------
    MemoryPlan

    Raises
    ------
    TypeError
        When ``func`` is not a graph Function.
    IRError
        When it is malformed (``irkernel.ir.validate``).
    ValueError
        When its intermediates together exceed a 64-bit address space.
    """
    if not isinstance(func, Function):
        raise TypeError(f"plan_memory: func must be a graph Function, got {type(func).__name__}")
    validate_function(func, "plan_memory")
    table = ops.op_arrays()
    last = last_use_kernel(func.kind, func.a0, func.a1, func.extra, table.encoding)
    planned = func.kind == ops.OP_CALL_TIR
    planned[func.outputs] = False
    node_ids = np.nonzero(planned)[0].astype(np.int32)
    last_use = last[node_ids]
    last_use = np.where(last_use == NONE, node_ids, last_use).astype(np.int32)
    nbytes = (func.shapes.size[func.shape_id[node_ids]]
              * _ITEMSIZE[func.dtype[node_ids]]).astype(np.int64)
    sizes = np.maximum((nbytes + ALIGN - 1) // ALIGN * ALIGN, ALIGN).astype(np.int64)
    token, token_bytes = plan_tokens_kernel(node_ids, last_use, sizes)
    # Each size is <= 2**62 (shapes hold <= 2**59 elements); their sum may not be.
    if len(token_bytes) and int(token_bytes.max()) > (2**62) // len(token_bytes):
        total = sum(token_bytes.tolist())  # exact Python ints
        if total > 2**62:
            raise ValueError(f"plan_memory: the intermediates need {total} bytes, more than "
                             "a 64-bit address space")
    token_offsets = np.zeros(len(token_bytes) + 1, np.int64)
    np.cumsum(token_bytes, out=token_offsets[1:])
    offsets = token_offsets[token] if len(node_ids) else np.zeros(0, np.int64)
    # Live bytes over time: +size at the defining node, -size after the last use.
    n = func.num_nodes + 1
    delta = (np.bincount(node_ids, weights=nbytes, minlength=n)
             - np.bincount(last_use + 1, weights=nbytes, minlength=n))
    peak = int(np.cumsum(delta).max()) if len(node_ids) else 0
    return MemoryPlan(node_ids=node_ids, offsets=offsets.astype(np.int64), nbytes=nbytes,
                      last_use=last_use, token=token, token_bytes=token_bytes,
                      naive_bytes=int(sizes.sum()), planned_bytes=int(token_offsets[-1]),
                      peak_live_bytes=peak)


__all__ = ["ALIGN", "MemoryPlan", "last_use_kernel", "plan_memory", "plan_tokens_kernel"]
