"""Kernels shared by the builder, the verifier and the passes.

``check_structure_kernel`` validates ids before anything indexes with them;
``type_sweep_kernel`` assigns or checks every node's (dtype, shape_id) through a
table of *signatures*: (opcode, attr_id, operand types). Distinct signatures
are few even in 1e7-node graphs, so Python evaluates each op rule once per
signature and the kernel handles the nodes. The sweep is resumable: it stops at
a node whose signature is new, Python computes the rule, and it resumes there.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir.ids import DTYPE_NAMES, ENC_CONST, ENC_NULLARY, ENC_PARAM, ENC_VARIADIC

_N_DTYPES = len(DTYPE_NAMES)  # an immutable int: kernels may read it as a global
from irkernel.ir.jit import inline, kernel
from irkernel.ir.operands import operand_at, operand_count

# Rule codes returned by check_structure_kernel (index into STRUCTURE_RULES).
STRUCTURE_RULES = (
    "ok",
    "unknown opcode",
    "operand out of range",
    "operand not earlier (topological order)",
    "wrong arity",
    "unused operand slot is not NONE",
    "variadic operand range outside extra",
    "const id out of range",
    "param position out of range",
    "shape id out of range",
    "attribute id out of range",
    "dtype code out of range",
)

# A signature key: opcode, attr_id, n_operands, (dtype, shape_id) x SIG_MAX_OPERANDS.
# Eight operands cover concat/where/call_tir of common graphs; a node with more is typed
# by Python, one call per node.
SIG_MAX_OPERANDS = 8
SIG_WIDTH = 3 + 2 * SIG_MAX_OPERANDS
# type_sweep_kernel statuses
SWEEP_DONE, SWEEP_NEW_SIGNATURE, SWEEP_NEEDS_PYTHON, SWEEP_MISMATCH, SWEEP_TABLE_FULL = range(5)


@inline
def check_node(i, k, x, y, d, s, at, extra, op_encoding, op_arity, n, n_consts, n_params,
               n_shapes, n_attrs):
    """The structural rules of node ``i`` with opcode ``k``, slots ``x``/``y``, dtype ``d``,
    shape id ``s`` and attribute id ``at``: (rule, detail), rule 0 when it is well-formed.

    ``n`` is the node count; operands must lie in [0, i). Shared by the sweep over a
    Function and the check of ``rebuild``'s patch rows, so both apply the same rules.
    """
    if k < 0 or k >= op_encoding.shape[0]:
        return 1, k
    if d < 0 or d >= _N_DTYPES:
        return 11, d
    if s < 0 or s >= n_shapes:
        return 9, s
    if at < 0 or at >= n_attrs:
        return 10, at
    enc = op_encoding[k]
    if enc == ENC_VARIADIC:
        if x < 0 or y < 0 or x + y > extra.shape[0]:
            return 6, x
        if op_arity[k] >= 0 and y != op_arity[k]:
            return 4, y
    elif enc == ENC_CONST or enc == ENC_PARAM:
        if y != -1:
            return 5, y
        if enc == ENC_CONST and (x < 0 or x >= n_consts):
            return 7, x
        if enc == ENC_PARAM and (x < 0 or x >= n_params):
            return 8, x
        return 0, 0
    else:
        n_used = operand_count(enc, y)
        if n_used < 2 and y != -1:
            return 5, y
        if n_used < 1 and x != -1:
            return 5, x
    for j in range(operand_count(enc, y)):
        v = operand_at(enc, x, y, extra, j)
        if v < 0 or v >= n:
            return 2, v
        if v >= i:
            return 3, v
    return 0, 0


@kernel
def check_structure_kernel(kind, a0, a1, extra, dtype, shape_id, attr_id, op_encoding, op_arity,
                           n_consts, n_params, n_shapes, n_attrs, start):
    """First node from ``start`` breaking a structural rule, as (node, rule, detail).

    Arrays: kind int16[n]; a0, a1, shape_id, attr_id int32[n]; dtype int8[n];
    extra int32[m]; op_encoding, op_arity int8[n_ops]. Returns (-1, 0, 0) when
    every node is well-formed; ``detail`` is the offending operand or id.
    """
    n = kind.shape[0]
    for i in range(start, n):
        rule, detail = check_node(i, kind[i], a0[i], a1[i], dtype[i], shape_id[i], attr_id[i],
                                  extra, op_encoding, op_arity, n, n_consts, n_params,
                                  n_shapes, n_attrs)
        if rule != 0:
            return i, rule, detail
    return -1, 0, 0


@kernel
def check_rows_kernel(rows, kind, a0, a1, attr_id, dtype, shape_id, extra, op_encoding,
                      op_arity, n, n_consts, n_params, n_shapes, n_attrs):
    """:func:`check_node` on listed rows with given slots: (index into rows, rule, detail).

    Arrays: rows int32[p] (node ids); kind int16[p]; a0, a1, attr_id int32[p] (the
    rows' new values); dtype int8[n], shape_id int32[n] (the Function's, read at
    each row); extra int32[m]. Returns (-1, 0, 0) when every row is well-formed.
    """
    for t in range(rows.shape[0]):
        i = rows[t]
        rule, detail = check_node(i, kind[t], a0[t], a1[t], dtype[i], shape_id[i], attr_id[t],
                                  extra, op_encoding, op_arity, n, n_consts, n_params,
                                  n_shapes, n_attrs)
        if rule != 0:
            return t, rule, detail
    return -1, 0, 0


@kernel
def type_sweep_kernel(kind, a0, a1, extra, attr_id, dtype, shape_id, op_encoding,
                      const_dtype, const_shape_id, start, check,
                      sig_keys, sig_slots, sig_dtype, sig_shape_id, n_sigs):
    """Assign (check=False) or compare (check=True) node types from ``start`` on.

    Arrays: kind int16[n]; a0, a1, attr_id int32[n]; extra int32[m];
    dtype int8[n] and shape_id int32[n] (written in assign mode: the builder's
    scratch, never a finished Function's column); const_dtype int8[k],
    const_shape_id int32[k]; sig_keys int32[cap, SIG_WIDTH]; sig_slots int32[2^p]
    (open addressing, -1 = empty); sig_dtype int8[cap], sig_shape_id int32[cap].
    Operands must already be valid (check_structure_kernel). Returns
    (node, status): SWEEP_NEW_SIGNATURE means the node's key was stored at
    ``sig_keys[n_sigs]`` and Python must fill its result; SWEEP_NEEDS_PYTHON is
    a node with more than SIG_MAX_OPERANDS operands; SWEEP_TABLE_FULL asks for a bigger table.
    PARAM and NULLARY nodes are skipped (their type is given, not derived).
    """
    n = kind.shape[0]
    mask = sig_slots.shape[0] - 1
    key = np.empty(SIG_WIDTH, np.int32)
    for i in range(start, n):
        k = kind[i]
        enc = op_encoding[k]
        if enc == ENC_PARAM or enc == ENC_NULLARY:
            continue
        if enc == ENC_CONST:
            want_d, want_s = const_dtype[a0[i]], const_shape_id[a0[i]]
        else:
            if 2 * (n_sigs + 1) > sig_slots.shape[0] or n_sigs >= sig_keys.shape[0]:
                return i, 4
            key[:] = -1
            key[0] = k
            key[1] = attr_id[i]
            n_operands = operand_count(enc, a1[i])
            if n_operands > SIG_MAX_OPERANDS:
                return i, 2
            key[2] = n_operands
            for j in range(n_operands):
                v = operand_at(enc, a0[i], a1[i], extra, j)
                key[3 + 2 * j] = dtype[v]
                key[4 + 2 * j] = shape_id[v]
            h = np.uint64(14695981039346656037)
            for j in range(SIG_WIDTH):
                h = (h ^ np.uint64(key[j] & 0xFFFFFFFF)) * np.uint64(1099511628211)
            slot = np.int64(h >> np.uint64(17)) & mask
            found = -1
            while sig_slots[slot] != -1:
                s = sig_slots[slot]
                same = True
                for j in range(SIG_WIDTH):
                    if sig_keys[s, j] != key[j]:
                        same = False
                        break
                if same:
                    found = s
                    break
                slot = (slot + 1) & mask
            if found == -1:
                sig_keys[n_sigs, :] = key
                sig_slots[slot] = n_sigs
                return i, 1
            want_d, want_s = sig_dtype[found], sig_shape_id[found]
        if check:
            if dtype[i] != want_d or shape_id[i] != want_s:
                return i, 3
        else:
            dtype[i] = want_d
            shape_id[i] = want_s
    return n, 0
