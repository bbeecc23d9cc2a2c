"""Structural hashes of nodes: what ``diff_html`` compares to find the changed nodes.

A node's hash covers its op, type, attributes, constant value or parameter,
and its operands' hashes in order (a Merkle hash over the graph), so two nodes
in two versions of a function hash equal exactly when they compute the same
value from the same inputs, wherever their ids moved. One forward sweep
(:func:`merkle_kernel`, operands precede users); the per-node keys are
gathered from per-table keys (shapes, attribute sets, constants: one Python
step per *distinct* entry). The inputs of a fused ``Primitive`` function can be
given the hashes of the call's operands, so a group's members hash as they did
before fusion. Imports ``irkernel.ir`` only.
"""

from __future__ import annotations

import hashlib

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES, ENC_PARAM
from irkernel.ir.jit import kernel
from irkernel.ir.operands import operand_at, operand_count

_MULT = 0x9E3779B97F4A7C15


@kernel
def merkle_kernel(kind, a0, a1, extra, op_encoding, node_key):
    """Per node: its key mixed with its operands' hashes, in operand order.

    Arrays: kind int16[n]; a0, a1 int32[n]; extra int32[m]; op_encoding int8[n_ops];
    node_key uint64[n] (op, type, attributes, constant; a parameter's key is its hash).
    Returns uint64[n].
    """
    n = kind.shape[0]
    h = np.empty(n, np.uint64)
    for i in range(n):
        x = node_key[i]
        enc = op_encoding[kind[i]]
        if enc == ENC_PARAM:  # a parameter stands for its value: its key is its hash
            h[i] = x
            continue
        for j in range(operand_count(enc, a1[i])):
            v = operand_at(enc, a0[i], a1[i], extra, j)
            x = (x ^ h[v]) * np.uint64(_MULT) + np.uint64(j + 1)
            x ^= x >> np.uint64(31)
        h[i] = x ^ (x >> np.uint64(29))
    return h


def _digest(*parts: object) -> int:
    """A stable 64-bit digest of a few values (their repr)."""
    data = repr(parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _const_keys(func: Function) -> np.ndarray:
    """uint64 per const id: dtype, shape and the value's bytes."""
    pool, shapes = func.consts, func.shapes
    keys = np.zeros(max(len(pool), 1), np.uint64)
    for cid in range(len(pool)):  # one per distinct constant (pools are interned)
        value = pool.value(cid, shapes)
        keys[cid] = _digest("const", int(pool.dtype[cid]), value.shape, value.tobytes())
    return keys


def node_hashes(func: Function, param_hashes: np.ndarray | None = None) -> np.ndarray:
    """uint64[n]: the structural hash of every node of ``func``.

    ``param_hashes`` (uint64, one per parameter) stands for the parameters'
    values; by default a parameter hashes its position, name and type.
    """
    shape_keys = np.array([_digest("shape", s) for s in
                           (func.shapes[k] for k in range(len(func.shapes)))], np.uint64)
    attr_keys = np.array([_digest("attrs", func.attr_table[k])
                          for k in range(len(func.attr_table))], np.uint64)
    op_keys = np.array([_digest("op", op.name) for op in ops.all_ops()], np.uint64)
    dtype_keys = np.array([_digest("dtype", name) for name in DTYPE_NAMES], np.uint64)
    key = (op_keys[func.kind] * np.uint64(3) ^ shape_keys[func.shape_id]
           ^ dtype_keys[func.dtype] * np.uint64(5) ^ attr_keys[func.attr_id] * np.uint64(7))
    is_const = func.kind == ops.OP_CONST
    if is_const.any():
        key[is_const] ^= _const_keys(func)[func.a0[is_const]]
    if len(func.params):
        if param_hashes is None:
            param_hashes = np.array([_digest("param", k, name)
                                     for k, name in enumerate(func.param_names)], np.uint64)
        key[func.params] = param_hashes.astype(np.uint64)
    key.flags.writeable = False
    encoding = ops.op_arrays().encoding
    return merkle_kernel(func.kind, func.a0, func.a1, func.extra, encoding, key)


__all__ = ["merkle_kernel", "node_hashes"]
