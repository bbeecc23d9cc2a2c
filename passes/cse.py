"""EliminateCommonSubexpr: hash-consing in one forward sweep.

Each pure node is keyed by (opcode, canonical operands, attr_id, dtype,
shape_id), or (CONST, const_id, ...) for constants: the pool already interns
equal bytes to one const id. Operands are first mapped to their canonical
(earliest equal) node, so equal subexpressions collapse bottom-up in a single
sweep; commutative ops sort their two operands. The table is open addressing
in an int64 array of capacity >= 1.5n holding a 31-bit fingerprint beside the
node id (numba.typed.Dict measured 3x slower).
A duplicate's uses are redirected through ``rep`` and ``rebuild`` drops it.
Params and impure ops are never merged.

On several threads (large graphs, ``jit.parallel_sweep``) the table is cut
into one region per thread by the hash's top bits; merges are found by hash
and header and their canonical operands checked afterwards in parallel
(``verify_merges_kernel``). The result is the serial kernel's: the first
equal entry of a region is the first equal node, and a hash collision (equal
hashes, different values: never seen in practice) sends the graph to the
serial kernel.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir import jit
from irkernel.ir.ids import ENC_BINARY, ENC_CONST, ENC_PARAM, ENC_UNARY, ENC_VARIADIC
from irkernel.ir.jit import kernel, parallel_kernel, prefetch
from irkernel.ir.rebuild import rebuild

_PREFETCH_DISTANCE = 16


@kernel
def value_hash_kernel(kind, a0, a1, extra, attr_id, dtype, shape_id, op_encoding, op_pure,
                      op_commutative, vh):
    """A Merkle hash per node: equal subexpressions get equal hashes (not conversely).

    Arrays: as in ``hash_cons_kernel``; writes vh uint64[n] (the wrapper's
    buffer). Params and impure ops hash their own id (they are never merged).
    A forward sweep: operands' hashes are final when a node is visited.
    """
    n = kind.shape[0]
    for i in range(n):
        k = kind[i]
        enc = op_encoding[k]
        h = np.uint64(k + 1) * np.uint64(0x9E3779B97F4A7C15)
        if enc == ENC_PARAM or not op_pure[k]:
            h = h ^ np.uint64(i)
        elif enc == ENC_CONST:
            h = h ^ np.uint64(a0[i])
        elif enc == ENC_UNARY:
            h = h ^ vh[a0[i]]
        elif enc == ENC_BINARY:
            p, q = vh[a0[i]], vh[a1[i]]
            if op_commutative[k] and p > q:
                p, q = q, p
            h = (h ^ p) * np.uint64(0xBF58476D1CE4E5B9)
            h = h ^ q
        else:
            for t in range(a0[i], a0[i] + a1[i]):
                h = (h ^ vh[extra[t]]) * np.uint64(0x100000001B3)
        h = (h ^ (np.uint64(attr_id[i]) << np.uint64(32)) ^ np.uint64(shape_id[i])
             ^ (np.uint64(dtype[i]) << np.uint64(56))) * np.uint64(0x94D049BB133111EB)
        vh[i] = h ^ (h >> np.uint64(31))


@kernel
def hash_cons_kernel(vh, kind, a0, a1, extra, attr_id, dtype, shape_id, op_encoding, op_pure,
                     op_commutative, slots, rep):
    """Find, for every node, an earlier node computing the same value.

    Arrays: vh uint64[n] from ``value_hash_kernel``; kind int16[n]; a0, a1,
    attr_id, shape_id int32[n]; dtype int8[n]; extra int32[m]; op_encoding
    int8[n_ops]; op_pure, op_commutative bool[n_ops]. Scratch written (the
    wrapper's buffers): slots int64[cap] (a power of two >= 1.5n, all -1);
    output written: rep int32[n] (all NONE on entry; NONE or the earlier equal
    node). Returns n_merged.
    """
    n = kind.shape[0]
    cap = slots.shape[0]
    mask = np.uint64(cap - 1)
    # A slot holds (fingerprint << 32) | node: a probe that meets another key is
    # rejected by the fingerprint without touching that node's columns.
    n_merged = 0

    def canon(v):  # the earliest node equal to v: a replacement target is never replaced
        r = rep[v]
        return v if r < 0 else r

    for i in range(n):
        if i + _PREFETCH_DISTANCE < n:
            prefetch(slots, vh[i + _PREFETCH_DISTANCE] & mask)
        k = kind[i]
        enc = op_encoding[k]
        if enc == ENC_PARAM or not op_pure[k]:
            continue
        h = vh[i]
        slot = h & mask
        fp = np.int64(h >> np.uint64(33))
        while True:
            entry = slots[slot]
            if entry == -1:
                slots[slot] = (fp << 32) | i
                break
            j = entry & 0xFFFFFFFF
            same = ((entry >> 32) == fp and vh[j] == h and kind[j] == k
                    and attr_id[j] == attr_id[i] and dtype[j] == dtype[i]
                    and shape_id[j] == shape_id[i])
            if same:
                if enc == ENC_CONST:
                    same = a0[j] == a0[i]
                elif enc == ENC_UNARY:
                    same = canon(a0[j]) == canon(a0[i])
                elif enc == ENC_BINARY:
                    p, q = canon(a0[j]), canon(a1[j])
                    x, y = canon(a0[i]), canon(a1[i])
                    if op_commutative[k]:
                        p, q = min(p, q), max(p, q)
                        x, y = min(x, y), max(x, y)
                    same = p == x and q == y
                else:
                    same = a1[j] == a1[i]
                    if same:
                        for t in range(a1[i]):
                            if canon(extra[a0[j] + t]) != canon(extra[a0[i] + t]):
                                same = False
                                break
            if same:
                rep[i] = j
                n_merged += 1
                break
            slot = (slot + np.uint64(1)) & mask
    return n_merged


@parallel_kernel
def hash_cons_split_kernel(vh, kind, a0, a1, attr_id, dtype, shape_id, op_encoding, op_pure,
                           n_parts, slots, rep):
    """``hash_cons_kernel`` with the table cut into ``n_parts`` regions, one per thread.

    A node belongs to the region its hash's top bits name, and only that region's
    thread probes it (each region is its own open-addressing table of
    ``cap / n_parts`` slots; n_parts a power of two). The threads do not read each
    other's ``rep`` entries, so a node whose hash and header (kind, attributes,
    dtype, shape; the const id of a constant) equal an earlier entry's is taken
    as a duplicate without comparing canonical operands: ``verify_merges_kernel``
    checks that afterwards (equal hashes of different values are a hash
    collision: then the caller runs the serial kernel). Returns n_merged.
    """
    n = kind.shape[0]
    region = slots.shape[0] // n_parts
    mask = np.uint64(region - 1)
    shift = np.uint64(64 - int(np.log2(n_parts))) if n_parts > 1 else np.uint64(0)
    merged = np.zeros(n_parts, np.int64)
    for part in numba.prange(n_parts):
        base = np.uint64(part * region)
        count = 0
        for i in range(n):
            h = vh[i]
            if n_parts > 1 and (h >> shift) != part:
                continue
            if i + _PREFETCH_DISTANCE < n:
                prefetch(slots, base + (vh[i + _PREFETCH_DISTANCE] & mask))
            k = kind[i]
            enc = op_encoding[k]
            if enc == ENC_PARAM or not op_pure[k]:
                continue
            slot = h & mask
            fp = np.int64(h >> np.uint64(33))
            while True:
                entry = slots[base + slot]
                if entry == -1:
                    slots[base + slot] = (fp << 32) | i
                    break
                j = entry & 0xFFFFFFFF
                if ((entry >> 32) == fp and vh[j] == h and kind[j] == k
                        and attr_id[j] == attr_id[i] and dtype[j] == dtype[i]
                        and shape_id[j] == shape_id[i]
                        and (enc != ENC_CONST or a0[j] == a0[i])
                        and (enc != ENC_VARIADIC or a1[j] == a1[i])):
                    rep[i] = j
                    count += 1
                    break
                slot = (slot + np.uint64(1)) & mask
        merged[part] = count
    return merged.sum()


@parallel_kernel
def verify_merges_kernel(kind, a0, a1, extra, op_encoding, op_commutative, rep, chunk):
    """True when every merge of ``hash_cons_split_kernel`` joins equal canonical operands.

    Per chunk, independent: ``rep`` is final, and its targets are never replaced.
    """
    n = kind.shape[0]
    n_chunks = -(-n // chunk)
    bad = np.zeros(n_chunks, np.bool_)

    def canon(v):
        r = rep[v]
        return v if r < 0 else r

    for c in numba.prange(n_chunks):
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            j = rep[i]
            if j < 0:
                continue
            k = kind[i]
            enc = op_encoding[k]
            if enc == ENC_UNARY:
                same = canon(a0[j]) == canon(a0[i])
            elif enc == ENC_BINARY:
                p, q = canon(a0[j]), canon(a1[j])
                x, y = canon(a0[i]), canon(a1[i])
                if op_commutative[k]:
                    p, q = min(p, q), max(p, q)
                    x, y = min(x, y), max(x, y)
                same = p == x and q == y
            elif enc == ENC_VARIADIC:
                same = True
                for t in range(a1[i]):
                    if canon(extra[a0[j] + t]) != canon(extra[a0[i] + t]):
                        same = False
                        break
            else:
                same = True
            if not same:
                bad[c] = True
                break
    return not bad.any()


def _hash_cons(vh: np.ndarray, columns: tuple[np.ndarray, ...], cap: int) -> tuple[Any, int]:
    """(rep, n_merged): split across threads for large graphs, else serially."""
    kind, a0, a1, extra, attr_id, dtype, shape_id, encoding, pure, commutative = columns
    n = len(kind)
    with jit.parallel_sweep(n) as chunk:
        n_parts = 1
        while chunk and 2 * n_parts <= numba.get_num_threads() and n_parts < 64:
            n_parts *= 2
        if n_parts > 1:
            rep = np.full(n, -1, np.int32)
            n_merged = hash_cons_split_kernel(vh, kind, a0, a1, attr_id, dtype, shape_id,
                                              encoding, pure, n_parts,
                                              np.full(cap, -1, np.int64), rep)
            if verify_merges_kernel(kind, a0, a1, extra, encoding, commutative, rep, chunk):
                return rep, int(n_merged)
    rep = np.full(n, -1, np.int32)
    return rep, int(hash_cons_kernel(vh, *columns, np.full(cap, -1, np.int64), rep))


def eliminate_common_subexpr(func: Function) -> tuple[Function, int]:
    """(function without duplicate pure nodes or ``func`` itself, number merged)."""
    table = ops.op_arrays()
    columns = (func.kind, func.a0, func.a1, func.extra, func.attr_id, func.dtype, func.shape_id,
               table.encoding, table.pure, table.commutative)
    n = func.num_nodes
    # NOTE: the large buffers come from NumPy, not from inside the kernels: NumPy asks
    # for transparent huge pages and Numba's allocator does not. With 4 KiB pages the
    # first touch of the table alone costs more than the probing (1e7 nodes).
    vh = np.empty(n, np.uint64)
    value_hash_kernel(*columns, vh)
    vh.setflags(write=False)
    # A power of two >= 1.5 n (load <= 2/3 even if nothing merges): halving the table
    # against >= 2n saved 134 MB of fresh memory at 1e7 nodes, and on this VM the first
    # touch of fresh memory costs more than the extra probes.
    cap = 16
    while 2 * cap < 3 * n:
        cap *= 2
    rep, n_merged = _hash_cons(vh, columns, cap)
    if n_merged == 0:
        return func, 0
    return rebuild(func, rep=rep, pass_name="EliminateCommonSubexpr"), int(n_merged)


def EliminateCommonSubexpr() -> transform.FunctionPass:
    """Merge pure nodes that compute the same value (opt level 1).

    Returns
    -------
    FunctionPass
        Reports the statistic ``nodes_merged``; leaves no dead code (the
        duplicates are dropped by the rebuild).
    """

    def eliminate(func: Function, mod: object, ctx: transform.PassContext) -> Function:
        out, n_merged = eliminate_common_subexpr(func)
        if n_merged:
            ctx.stat("nodes_merged", n_merged)
        return out

    return transform.function_pass(eliminate, opt_level=1, name="EliminateCommonSubexpr")


transform.register_pass("EliminateCommonSubexpr", EliminateCommonSubexpr)
