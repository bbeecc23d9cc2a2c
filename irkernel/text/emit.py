"""Kernels of the printer: node lines written as bytes straight from the columns.

The printer formats every *distinct* piece of text once in Python (op names,
``{attrs} : type`` tails, constant literals, parameter names) into byte tables
(``bytes`` as uint8 plus an int64 ``ptr`` of length k+1), and these kernels
write one line per node from the columns and the tables: a sizing sweep, a
prefix sum, a writing sweep. No Python runs per node, so printing is bound by
the bytes written (about 40 per node). Imports ``irkernel.ir`` only.

Line forms (the text format of :mod:`irkernel.text.parser`)::

    "  %<i> = <op> %<a>, %<b><tail>\\n"      unary, binary, variadic, nullary
    "  %<i> = const <literal><tail>\\n"
    "  %<i> = param <name><tail>\\n"
"""

from __future__ import annotations

import numpy as np

from irkernel.ir.ids import ENC_CONST, ENC_PARAM
from irkernel.ir.jit import inline, kernel
from irkernel.ir.operands import operand_at, operand_count

_PERCENT, _SPACE, _COMMA, _NEWLINE, _EQ = 37, 32, 44, 10, 61


@inline
def n_digits(x):
    """Decimal digits of ``x >= 0``."""
    d = 1
    while x >= 10:
        x //= 10
        d += 1
    return d


@inline
def put_int(out, pos, x):
    """Write ``x >= 0`` in decimal at ``out[pos:]``; returns the position after it."""
    end = pos + n_digits(x)
    p = end - 1
    out[p] = 48 + x % 10
    x //= 10
    while x > 0:
        p -= 1
        out[p] = 48 + x % 10
        x //= 10
    return end


@inline
def put_entry(out, pos, table, ptr, k):
    """Copy entry ``k`` of a byte table to ``out[pos:]``; returns the position after it."""
    start = ptr[k]
    size = ptr[k + 1] - start
    for j in range(size):
        out[pos + j] = table[start + j]
    return pos + size


@kernel
def line_sizes_kernel(kind, a0, a1, extra, tail_of, op_encoding, op_ptr, tail_ptr, lit_ptr,
                      name_ptr, start):
    """Where each node's line starts, its newline included.

    Arrays: kind int16[n]; a0, a1 int32[n]; extra int32[m]; tail_of int32[n] (tail
    table entry of each node); op_encoding int8[n_ops]; op_ptr, tail_ptr, lit_ptr,
    name_ptr int64[k+1] (the byte tables' offsets: op names, tails, literals of the
    const pool, parameter names); ``start``: where the first line goes. Returns
    int64[n + 1]: the line offsets (a prefix sum from ``start``).
    """
    n = kind.shape[0]
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = start
    for i in range(n):
        k = kind[i]
        enc = op_encoding[k]
        size = 2 + 1 + n_digits(i) + 3  # "  %i = "
        if enc == ENC_CONST:
            size += 6 + lit_ptr[a0[i] + 1] - lit_ptr[a0[i]]
        elif enc == ENC_PARAM:
            size += 6 + name_ptr[a0[i] + 1] - name_ptr[a0[i]]
        else:
            size += op_ptr[k + 1] - op_ptr[k]
            count = operand_count(enc, a1[i])
            for j in range(count):
                size += 2 + n_digits(operand_at(enc, a0[i], a1[i], extra, j))  # " %v" / ",%v"
            if count > 1:
                size += count - 1  # the space after each comma
        size += tail_ptr[tail_of[i] + 1] - tail_ptr[tail_of[i]] + 1
        offsets[i + 1] = offsets[i] + size
    return offsets


@kernel
def write_lines_kernel(kind, a0, a1, extra, tail_of, op_encoding, offsets, op_bytes, op_ptr,
                       tail_bytes, tail_ptr, lit_bytes, lit_ptr, name_bytes, name_ptr, head,
                       foot):
    """``head``, every node's line, then ``foot``, in one new uint8 buffer.

    Arrays: as :func:`line_sizes_kernel`, plus ``offsets`` (its result, started at
    ``len(head)``), the byte tables (uint8) of op names, tails, literals and parameter
    names, and ``head``, ``foot`` uint8 (the function's first and last lines).
    """
    n = kind.shape[0]
    out = np.empty(offsets[n] + foot.shape[0], np.uint8)
    for j in range(head.shape[0]):
        out[j] = head[j]
    for j in range(foot.shape[0]):
        out[offsets[n] + j] = foot[j]
    const_word = np.array([99, 111, 110, 115, 116, 32], np.uint8)  # "const "
    param_word = np.array([112, 97, 114, 97, 109, 32], np.uint8)  # "param "
    for i in range(n):
        pos = offsets[i]
        out[pos] = _SPACE
        out[pos + 1] = _SPACE
        out[pos + 2] = _PERCENT
        pos = put_int(out, pos + 3, i)
        out[pos] = _SPACE
        out[pos + 1] = _EQ
        out[pos + 2] = _SPACE
        pos += 3
        k = kind[i]
        enc = op_encoding[k]
        if enc == ENC_CONST or enc == ENC_PARAM:
            word = const_word if enc == ENC_CONST else param_word
            for j in range(6):
                out[pos + j] = word[j]
            if enc == ENC_CONST:
                pos = put_entry(out, pos + 6, lit_bytes, lit_ptr, a0[i])
            else:
                pos = put_entry(out, pos + 6, name_bytes, name_ptr, a0[i])
        else:
            pos = put_entry(out, pos, op_bytes, op_ptr, k)
            for j in range(operand_count(enc, a1[i])):
                if j > 0:
                    out[pos] = _COMMA
                    pos += 1
                out[pos] = _SPACE
                out[pos + 1] = _PERCENT
                pos = put_int(out, pos + 2, operand_at(enc, a0[i], a1[i], extra, j))
        pos = put_entry(out, pos, tail_bytes, tail_ptr, tail_of[i])
        out[pos] = _NEWLINE
    return out


@inline
def _row_slot(kind_i, attr_i, shape_i, dtype_i, cap):
    """Home slot of one (kind, attr_id, shape_id, dtype) row in a table of ``cap`` slots."""
    h = (np.uint64(kind_i) * np.uint64(0x9E3779B97F4A7C15)
         ^ np.uint64(attr_i) * np.uint64(0xC2B2AE3D27D4EB4F)
         ^ np.uint64(shape_i) * np.uint64(0x165667B19E3779F9)
         ^ np.uint64(dtype_i + 8) * np.uint64(0x27D4EB2F165667C5))
    return np.int64((h ^ (h >> np.uint64(29))) & np.uint64(cap - 1))


@kernel
def distinct_rows_kernel(kind, attr_id, shape_id, dtype):
    """Distinct (kind, attr_id, shape_id, dtype) rows, by an open-addressing hash table.

    Arrays: kind int16[n]; attr_id, shape_id int32[n]; dtype int8[n].
    Returns (inverse int32[n]: each row's distinct index, first int32[k]: the first
    row of each distinct index, in order of first appearance). The table doubles
    when half full, so its size follows the number of distinct rows, not n.
    """
    n = kind.shape[0]
    cap = 1024
    slots = np.full(cap, -1, np.int32)
    first = np.empty(64, np.int32)
    inverse = np.empty(n, np.int32)
    k = 0
    for i in range(n):
        s = _row_slot(kind[i], attr_id[i], shape_id[i], dtype[i], cap)
        while True:
            d = slots[s]
            if d < 0:
                if k == first.shape[0]:
                    first = np.concatenate((first, np.empty(k, np.int32)))
                first[k] = i
                slots[s] = k
                inverse[i] = k
                k += 1
                break
            r = first[d]
            if (kind[r] == kind[i] and attr_id[r] == attr_id[i] and shape_id[r] == shape_id[i]
                    and dtype[r] == dtype[i]):
                inverse[i] = d
                break
            s = (s + 1) & (cap - 1)
        if 2 * k > cap:  # grow: rehash the distinct rows into a table twice as large
            cap *= 2
            slots = np.full(cap, -1, np.int32)
            for d in range(k):
                r = first[d]
                s = _row_slot(kind[r], attr_id[r], shape_id[r], dtype[r], cap)
                while slots[s] >= 0:
                    s = (s + 1) & (cap - 1)
                slots[s] = d
    return inverse, first[:k].copy()


_INT64_MIN = -(2**63)


@kernel
def int_texts_kernel(values, as_bool):
    """Decimal texts of int64 ``values`` (``true``/``false`` when ``as_bool``) as a byte
    table: (bytes uint8[B], ptr int64[e + 1])."""
    e = values.shape[0]
    ptr = np.empty(e + 1, np.int64)
    ptr[0] = 0
    for i in range(e):
        v = values[i]
        if as_bool:
            size = 4 if v != 0 else 5
        elif v == _INT64_MIN:
            size = 20
        elif v < 0:
            size = 1 + n_digits(-v)
        else:
            size = n_digits(v)
        ptr[i + 1] = ptr[i] + size
    out = np.empty(ptr[e], np.uint8)
    true_word = np.array([116, 114, 117, 101], np.uint8)
    false_word = np.array([102, 97, 108, 115, 101], np.uint8)
    min_word = np.array([45, 57, 50, 50, 51, 51, 55, 50, 48, 51, 54, 56, 53, 52, 55, 55, 53, 56,
                         48, 56], np.uint8)  # "-9223372036854775808"
    for i in range(e):
        v = values[i]
        pos = ptr[i]
        if as_bool or v == _INT64_MIN:
            word = (true_word if v != 0 else false_word) if as_bool else min_word
            for j in range(word.shape[0]):
                out[pos + j] = word[j]
        elif v < 0:
            out[pos] = 45
            put_int(out, pos + 1, -v)
        else:
            put_int(out, pos, v)
    return out, ptr


@kernel
def literal_table_kernel(elem_bytes, elem_ptr, const_ptr, is_list):
    """The literal of every constant as a byte table: its elements (entries
    ``const_ptr[c]:const_ptr[c + 1]`` of the element table) as ``[a, b, ...]``, or the
    lone element when ``is_list[c]`` is false. Returns (bytes uint8[B], ptr int64[k + 1])."""
    k = const_ptr.shape[0] - 1
    ptr = np.empty(k + 1, np.int64)
    ptr[0] = 0
    for c in range(k):
        a = const_ptr[c]
        b = const_ptr[c + 1]
        size = elem_ptr[b] - elem_ptr[a]
        if is_list[c]:
            size += 2 + 2 * max(b - a - 1, 0)  # brackets, ", " between elements
        ptr[c + 1] = ptr[c] + size
    out = np.empty(ptr[k], np.uint8)
    for c in range(k):
        pos = ptr[c]
        if is_list[c]:
            out[pos] = 91
            pos += 1
        for g in range(const_ptr[c], const_ptr[c + 1]):
            if is_list[c] and g > const_ptr[c]:
                out[pos] = _COMMA
                out[pos + 1] = _SPACE
                pos += 2
            pos = put_entry(out, pos, elem_bytes, elem_ptr, g)
        if is_list[c]:
            out[pos] = 93
    return out, ptr


@kernel
def scatter_entries_kernel(sizes, parts_bytes, parts_ptr, parts_at):
    """One byte table from several: entry ``parts_at[j]`` of the result is entry ``j`` of
    the concatenated parts (``parts_bytes``/``parts_ptr``, offsets rebased per part).

    Arrays: sizes int64[e] (every result entry's length); parts_* as one table whose
    entry j goes to ``parts_at[j]``. Returns (bytes uint8[B], ptr int64[e + 1])."""
    e = sizes.shape[0]
    ptr = np.empty(e + 1, np.int64)
    ptr[0] = 0
    for g in range(e):
        ptr[g + 1] = ptr[g] + sizes[g]
    out = np.empty(ptr[e], np.uint8)
    for j in range(parts_at.shape[0]):
        put_entry(out, ptr[parts_at[j]], parts_bytes, parts_ptr, j)
    return out, ptr


def byte_table(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``texts`` as one UTF-8 byte array and int64 offsets (entry k is bytes[ptr[k]:ptr[k+1]])."""
    encoded = [t.encode("utf-8") for t in texts]
    ptr = np.zeros(len(encoded) + 1, np.int64)
    if encoded:
        np.cumsum([len(b) for b in encoded], out=ptr[1:])
    data = np.frombuffer(b"".join(encoded), np.uint8) if encoded else np.zeros(0, np.uint8)
    return readonly(data), readonly(ptr)


def readonly(arr: np.ndarray) -> np.ndarray:
    """A read-only view: every kernel argument is read-only (one specialization)."""
    view = arr.view()
    view.flags.writeable = False
    return view


__all__ = ["byte_table", "distinct_rows_kernel", "int_texts_kernel", "line_sizes_kernel",
           "literal_table_kernel", "readonly", "scatter_entries_kernel", "write_lines_kernel"]
