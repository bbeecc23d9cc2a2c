"""Static memory planning of a lowered graph Function (TVM's StaticPlanBlockMemory idea).

A lowered graph Function holds ``param``, ``const``, ``call_tir`` and
``call_func`` nodes. Every ``call_tir`` result that is not a function output
is an *intermediate*: its buffer lives from the node that writes it to the
last node that reads it. The plan gives each intermediate a byte offset in
one arena so that two intermediates alive at the same time never overlap and
buffers whose lifetimes do not overlap share storage.

Algorithm (two Numba sweeps plus whole-array NumPy), O(n log n):

1. ``last_use_kernel``: a forward sweep over the operands; the last reader of
   a node is the largest node id reading it (topological order makes node
   ids the execution order).
2. ``plan_tokens_kernel``: a forward sweep over the intermediates in
   execution order. Before node ``i`` is allocated, every token whose value
   was last read before ``i`` returns to the free pool (values read *by* ``i``
   are still live while ``i`` runs: kernels are ``noalias``). The request
   takes the smallest free token that fits (best fit); if none fits, the
   largest free token grows (its offset is only fixed at the end, so growing
   is free); else a new token is made. Sizes are rounded up to 64-byte
   classes, so every offset is 64-byte aligned.
3. Token offsets are the exclusive prefix sum of token sizes (one arena).

The free pool is segregated by size: a token's size is always one of the
requested sizes, so the distinct sizes (``np.unique``) index a stack of free
tokens per size and a Fenwick tree counting them. "Smallest free size >= the
request" and "largest free size" are one prefix sum plus one descent of the
tree: O(log sizes) per request instead of a scan of every token (the scan
made planning O(values x tokens): 50 s at 1e6 nodes when values live long).
Among free tokens of one size the most recently freed one is taken (LIFO,
warm in cache); the old scan took the lowest token id. Tokens of equal size
are interchangeable (the future choices only see sizes), so both rules make
the same token sizes and the same arena; ``tests/runtime/test_memory_plan.py``
checks that against the scan on random request sequences.

Not planned: params and constants (the caller's and the module's memory),
function outputs (the executor returns fresh arrays), and ``call_func``
results (the callee's executor returns a fresh array). Alternatives
considered: TVM's size-matching within a factor of 16 (best fit plus growth
needs no tuning constant); an interval-graph colouring (optimal, for little
gain on chains, which is what fusion produces); a treap keyed by (size,
token) (the same bound with more code: sizes come from a known finite set, so
a static tree over them suffices).
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
from runtime.interrupt import call_kernel

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
def plan_tokens_kernel(node_ids, last, size_rank, class_bytes, free_order, start, stop,
                       token, token_bytes, token_rank, head, next_token, fenwick, cursor):
    """Assign storage tokens to intermediates ``start .. stop - 1`` (best fit, grow, or new).

    Arrays (inputs): node_ids int32[m] intermediates in execution order; last
    int32[m] last reader of each (>= its node id); size_rank int32[m] index of
    each request's size in class_bytes int64[c] (the distinct sizes, ascending,
    multiples of the alignment); free_order int64[m] the intermediates by
    ``last``. Arrays (state, updated in place and carried to the next chunk):
    token int32[m] each intermediate's token; token_bytes int64[m] and
    token_rank int32[m] each token's size and its rank; head int32[c] the top of
    the stack of free tokens of each size (-1: none), next_token int32[m] the
    token below; fenwick int64[c + 1] a Fenwick tree of the number of free
    tokens per size; cursor int64[3] = (tokens made, releases done, free tokens).

    NOTE: a chunked kernel mutating its state breaks the pure-kernel rule on
    purpose: the wrapper calls it on slices of ~2**18 requests, so a Ctrl-C
    (handled between calls) stops a 1e7-node plan within milliseconds.
    """
    n_class = class_bytes.shape[0]
    top_bit = 1
    while top_bit * 2 <= n_class:
        top_bit *= 2
    n_tok = cursor[0]
    next_free = cursor[1]
    n_free = cursor[2]
    m = node_ids.shape[0]
    for k in range(start, stop):
        node = node_ids[k]
        # Release every value last read before this node (it is dead by now).
        while next_free < m and last[free_order[next_free]] < node:
            t = token[free_order[next_free]]
            r = token_rank[t]
            next_token[t] = head[r]
            head[r] = t
            i = r + 1
            while i <= n_class:
                fenwick[i] += 1
                i += i & -i
            n_free += 1
            next_free += 1
        want = size_rank[k]
        if n_free == 0:  # nothing free: a new token
            t = n_tok
            n_tok += 1
            token_bytes[t] = class_bytes[want]
            token_rank[t] = want
            token[k] = t
            continue
        # Free tokens smaller than the request: the prefix count below its rank.
        smaller = 0
        i = want
        while i > 0:
            smaller += fenwick[i]
            i -= i & -i
        # The rank holding the (smaller + 1)-th free token (the smallest that fits) or,
        # when none fits, the n_free-th (the largest, which grows): a Fenwick descent.
        target = smaller + 1 if smaller < n_free else n_free
        r = 0
        step = top_bit
        while step > 0:
            if r + step <= n_class and fenwick[r + step] < target:
                r += step
                target -= fenwick[r]
            step //= 2
        t = head[r]  # r is 0-based: the descent stops one below the 1-based position
        head[r] = next_token[t]
        i = r + 1
        while i <= n_class:
            fenwick[i] -= 1
            i += i & -i
        n_free -= 1
        if r < want:  # the largest free token is too small: grow it (offsets come later)
            token_bytes[t] = class_bytes[want]
            token_rank[t] = want
        token[k] = t
    cursor[0] = n_tok
    cursor[1] = next_free
    cursor[2] = n_free


#: Requests planned per kernel call: short enough for a Ctrl-C to land within
#: milliseconds, long enough that the Python loop around the calls costs nothing.
PLAN_CHUNK = 1 << 18


def plan_tokens(node_ids: np.ndarray, last: np.ndarray,
                sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Storage tokens for intermediates in execution order: ``(token int32[m], token_bytes int64[t])``.

    ``last`` is each one's last reader (>= its node id) and ``sizes`` its bytes,
    a multiple of the alignment. O(m log m): a sort of the releases, and a
    Fenwick descent over the distinct sizes per request.
    """
    m = len(node_ids)
    class_bytes, size_rank = np.unique(np.asarray(sizes, np.int64), return_inverse=True)
    n_class = len(class_bytes)
    free_order = np.argsort(last, kind="stable").astype(np.int64)
    token = np.empty(m, np.int32)
    token_bytes = np.zeros(m, np.int64)
    token_rank = np.zeros(m, np.int32)
    head = np.full(n_class, -1, np.int32)
    next_token = np.full(m, -1, np.int32)
    fenwick = np.zeros(n_class + 1, np.int64)
    cursor = np.zeros(3, np.int64)
    node_ids = np.asarray(node_ids, np.int32)
    last = np.asarray(last, np.int32)
    size_rank = size_rank.astype(np.int32).reshape(-1)
    for start in range(0, m, PLAN_CHUNK):
        # a Ctrl-C during a chunk is a KeyboardInterrupt, never the dispatcher's SystemError
        call_kernel(plan_tokens_kernel, node_ids, last, size_rank, class_bytes, free_order,
                    start, min(start + PLAN_CHUNK, m), token, token_bytes, token_rank, head,
                    next_token, fenwick, cursor)
    return token, token_bytes[:cursor[0]].copy()


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
    token, token_bytes = plan_tokens(node_ids, last_use, sizes)
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


__all__ = ["ALIGN", "PLAN_CHUNK", "MemoryPlan", "last_use_kernel", "plan_memory", "plan_tokens",
           "plan_tokens_kernel"]
