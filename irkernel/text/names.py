"""Name tables of the parser's fast path: node numbering, operand resolution, interning.

For one function body scanned by :mod:`irkernel.text.scan` (line classes and byte spans):

- :func:`resolve_names_kernel` - node numbering, the name table (open addressing over
  FNV-1a hashes of the names' bytes) and every operand's node id;
  :func:`canonical_names_kernel` the same for bodies whose names are the printer's
  ``%0, %1, ...``; :func:`lookup_name_kernel` answers the careful path's single lookups
  from the same table;
- :func:`intern_spans_kernel` - distinct byte strings (op names, attribute texts, types,
  literals), so Python parses each distinct text once;
- :func:`distinct_keys_kernel` - distinct int64 keys (forms of nodes).

Imports ``irkernel.ir`` and ``irkernel.text.scan`` only.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir.jit import helper, kernel
from irkernel.text.scan import CONST, DEF, NAME, NODE, OK, REDEFINED, RETURN, UNKNOWN_OPERAND


@helper
def _hash_bytes(data, s, n):
    """FNV-1a of ``data[s:s + n]``."""
    h = np.uint64(0xCBF29CE484222325)
    for j in range(n):
        h = (h ^ np.uint64(data[s + j])) * np.uint64(0x100000001B3)
    return h


@helper
def _same_bytes(a, sa, b, sb, n):
    for j in range(n):
        if a[sa + j] != b[sb + j]:
            return False
    return True


@helper
def _find(buf, slots, ent_start, ent_len, data, s, n):
    """(slot, entry) of ``data[s:s + n]`` in a name table; entry -1 when absent (the slot is
    then where it would go)."""
    mask = slots.shape[0] - 1
    slot = np.int64(_hash_bytes(data, s, n) & np.uint64(mask))
    while True:
        ent = slots[slot]
        if ent < 0 or (ent_len[ent] == n and _same_bytes(buf, ent_start[ent], data, s, n)):
            return slot, ent
        slot = (slot + 1) & mask


@kernel
def resolve_names_kernel(buf, start, first, cls, span, opnd_ptr, opnd):
    """Number the nodes of a body, build its name table and resolve every operand.

    Arrays: as returned by :func:`scan_body_kernel` (``start`` from
    :func:`line_bounds_kernel`, ``first`` the body's first line). A NODE, CONST or
    DEF line defines the next node. An operand names the first definition of its
    name, which must be an earlier node. Returns (def_node int32[m]: the node of each
    defining line, -1 for others; status int8[m]: OK, REDEFINED or UNKNOWN_OPERAND;
    ids int32[k]: each operand's node, -1 when unknown; the table: slots int32[cap],
    ent_start int64[e], ent_len int32[e], ent_node int32[e]).
    """
    m = cls.shape[0]
    n_def = 0
    for i in range(m):
        if cls[i] == NODE or cls[i] == CONST or cls[i] == DEF:
            n_def += 1
    cap = 16
    while cap < 2 * n_def:
        cap *= 2
    slots = np.full(cap, -1, np.int32)
    ent_start = np.empty(n_def, np.int64)
    ent_len = np.empty(n_def, np.int32)
    ent_node = np.empty(n_def, np.int32)
    def_node = np.full(m, -1, np.int32)
    status = np.zeros(m, np.int8)
    ids = np.full(opnd.shape[0], -1, np.int32)
    node = 0
    n_ent = 0
    for i in range(m):
        c = cls[i]
        line_start = start[first + i]
        for j in range(opnd_ptr[i], opnd_ptr[i + 1]):  # NODE and RETURN lines
            _, ent = _find(buf, slots, ent_start, ent_len, buf, line_start + opnd[j, 0],
                           opnd[j, 1])
            if ent >= 0:
                ids[j] = ent_node[ent]
            else:
                status[i] = UNKNOWN_OPERAND
        if c != NODE and c != CONST and c != DEF:
            continue
        def_node[i] = node
        n = span[i, NAME + 1]
        if n > 0:
            slot, ent = _find(buf, slots, ent_start, ent_len, buf, line_start + span[i, NAME], n)
            if ent >= 0:
                status[i] = REDEFINED
            else:
                slots[slot] = n_ent
                ent_start[n_ent] = line_start + span[i, NAME]
                ent_len[n_ent] = n
                ent_node[n_ent] = node
                n_ent += 1
        node += 1
    return def_node, status, ids, slots, ent_start[:n_ent].copy(), ent_len[:n_ent].copy(), \
        ent_node[:n_ent].copy()


@helper
def _decimal(buf, s, n):
    """The value of ``buf[s:s + n]`` when it is a canonical decimal (digits, no leading
    zero, at most 10 of them), else -1."""
    if n == 0 or n > 10 or (n > 1 and buf[s] == 48):
        return -1
    value = 0
    for j in range(n):
        c = buf[s + j]
        if not (48 <= c <= 57):
            return -1
        value = value * 10 + (c - 48)
    return value


@kernel
def canonical_names_kernel(buf, start, first, cls, span, opnd_ptr, opnd):
    """:func:`resolve_names_kernel` for a body whose every definition is named by its
    node id in decimal (the printer's ``%<id>``): no table, an operand ``%k`` is node k.

    Arrays: as :func:`resolve_names_kernel`. Returns (canonical: whether every
    definition is so named; def_node int32[m]; status int8[m]; ids int32[k]), the last
    three meaningful only when ``canonical``.
    """
    m = cls.shape[0]
    def_node = np.full(m, -1, np.int32)
    status = np.zeros(m, np.int8)
    ids = np.full(opnd.shape[0], -1, np.int32)
    node = 0
    for i in range(m):
        c = cls[i]
        line_start = start[first + i]
        for j in range(opnd_ptr[i], opnd_ptr[i + 1]):  # NODE and RETURN lines
            v = _decimal(buf, line_start + opnd[j, 0], opnd[j, 1])
            if 0 <= v < node:
                ids[j] = v
            else:
                status[i] = UNKNOWN_OPERAND
        if c != NODE and c != CONST and c != DEF:
            continue
        if _decimal(buf, line_start + span[i, NAME], span[i, NAME + 1]) != node:
            return False, def_node, status, ids
        def_node[i] = node
        node += 1
    return True, def_node, status, ids


@kernel
def lookup_name_kernel(buf, slots, ent_start, ent_len, ent_node, query):
    """The node of name ``query`` (uint8[q]) in a table of :func:`resolve_names_kernel`,
    or -1."""
    _, ent = _find(buf, slots, ent_start, ent_len, query, 0, query.shape[0])
    return ent_node[ent] if ent >= 0 else -1


@kernel
def intern_spans_kernel(buf, pos, size):
    """Distinct byte strings among the spans ``buf[pos[i]:pos[i] + size[i]]``.

    Arrays: buf uint8[B]; pos int64[k]; size int32[k] (0: no span). Returns (sym
    int32[k]: each span's distinct index, -1 for no span; first int32[d]: the first
    span of each distinct string). The hash table grows with the distinct strings.
    """
    k = pos.shape[0]
    sym = np.full(k, -1, np.int32)
    first = np.empty(64, np.int32)
    cap = 1024
    slots = np.full(cap, -1, np.int32)
    d = 0
    for i in range(k):
        n = size[i]
        if n == 0:
            continue
        slot = np.int64(_hash_bytes(buf, pos[i], n) & np.uint64(cap - 1))
        while True:
            t = slots[slot]
            if t < 0:
                if d == first.shape[0]:
                    first = np.concatenate((first, np.empty(d, np.int32)))
                first[d] = i
                slots[slot] = d
                sym[i] = d
                d += 1
                break
            f = first[t]
            if size[f] == n and _same_bytes(buf, pos[f], buf, pos[i], n):
                sym[i] = t
                break
            slot = (slot + 1) & (cap - 1)
        if 2 * d > cap:
            cap *= 2
            slots = np.full(cap, -1, np.int32)
            for t in range(d):
                f = first[t]
                slot = np.int64(_hash_bytes(buf, pos[f], size[f]) & np.uint64(cap - 1))
                while slots[slot] >= 0:
                    slot = (slot + 1) & (cap - 1)
                slots[slot] = t
    return sym, first[:d].copy()


@kernel
def distinct_keys_kernel(keys):
    """Distinct values of ``keys`` (int64[n]): (inverse int32[n], first int32[d]), in order
    of first appearance; the hash table grows with the distinct values."""
    n = keys.shape[0]
    inverse = np.empty(n, np.int32)
    first = np.empty(64, np.int32)
    cap = 1024
    slots = np.full(cap, -1, np.int32)
    d = 0
    for i in range(n):
        h = np.uint64(keys[i]) * np.uint64(0x9E3779B97F4A7C15)
        slot = np.int64((h ^ (h >> np.uint64(31))) & np.uint64(cap - 1))
        while True:
            t = slots[slot]
            if t < 0:
                if d == first.shape[0]:
                    first = np.concatenate((first, np.empty(d, np.int32)))
                first[d] = i
                slots[slot] = d
                inverse[i] = d
                d += 1
                break
            if keys[first[t]] == keys[i]:
                inverse[i] = t
                break
            slot = (slot + 1) & (cap - 1)
        if 2 * d > cap:
            cap *= 2
            slots = np.full(cap, -1, np.int32)
            for t in range(d):
                h = np.uint64(keys[first[t]]) * np.uint64(0x9E3779B97F4A7C15)
                slot = np.int64((h ^ (h >> np.uint64(31))) & np.uint64(cap - 1))
                while slots[slot] >= 0:
                    slot = (slot + 1) & (cap - 1)
                slots[slot] = t
    return inverse, first[:d].copy()
