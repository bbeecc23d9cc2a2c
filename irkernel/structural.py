"""Structural equality and hashing of Functions and IRModules.

Two graph Functions are structurally equal when they have the same nodes in
the same order with the same ops, operands, types, attributes and constant
bytes, the same params (and names), outputs and function attributes. Interned
ids are compared through the values they name, so tables interned in a
different order (a parsed module vs. a built one) still compare equal.
Everything runs as whole-array NumPy operations: no per-node Python.
The hash is stable across processes (blake2b, no Python ``hash``), so it can
key on-disk caches.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from . import ops
from .graph import Function
from .ids import ENC_CONST, ENC_VARIADIC
from .module import IRModule


def _const_keys(func: Function) -> list[tuple[int, tuple[int, ...], bytes]]:
    """(dtype, shape, bytes) of every constant (one entry per distinct constant)."""
    pool, shapes = func.consts, func.shapes
    return [(int(pool.dtype[c]), shapes[int(pool.shape_id[c])],
             pool.value(c, shapes).tobytes()) for c in range(len(pool))]


def _canonical(keys_a: list[Any], keys_b: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Map two id spaces onto one by the values their ids name."""
    joint: dict[Any, int] = {}
    map_a = np.array([joint.setdefault(k, len(joint)) for k in keys_a], dtype=np.int64)
    map_b = np.array([joint.setdefault(k, len(joint)) for k in keys_b], dtype=np.int64)
    return map_a, map_b


def _variadic_operands(func: Function, is_variadic: np.ndarray) -> np.ndarray:
    """All variadic operand lists, concatenated in node order."""
    nodes = np.nonzero(is_variadic)[0]
    counts = func.a1[nodes].astype(np.int64)
    total = int(counts.sum())
    starts = np.repeat(func.a0[nodes].astype(np.int64) - (np.cumsum(counts) - counts), counts)
    return func.extra[starts + np.arange(total, dtype=np.int64)]


def _operand_columns(func: Function) -> tuple[np.ndarray, np.ndarray]:
    """a0 with const ids and extra offsets blanked (compared separately), and is_const."""
    enc = ops.op_arrays().encoding[func.kind]
    a0 = np.where((enc == ENC_CONST) | (enc == ENC_VARIADIC), -1, func.a0)
    return a0, enc


def _function_equal(a: Function, b: Function) -> bool:
    if a is b:
        return True
    if (a.num_nodes != b.num_nodes or a.param_names != b.param_names
            or dict(a.attrs) != dict(b.attrs)):
        return False
    for col in ("kind", "a1", "dtype", "params", "outputs"):
        if not np.array_equal(getattr(a, col), getattr(b, col)):
            return False
    a0a, enc = _operand_columns(a)
    a0b, _ = _operand_columns(b)
    if not np.array_equal(a0a, a0b):
        return False
    sa, sb = _canonical(list(a.shapes.shapes), list(b.shapes.shapes))
    if not np.array_equal(sa[a.shape_id], sb[b.shape_id]):
        return False
    ra, rb = _canonical(list(a.attr_table.records), list(b.attr_table.records))
    if not np.array_equal(ra[a.attr_id], rb[b.attr_id]):
        return False
    is_const = enc == ENC_CONST
    if np.any(is_const):
        ca, cb = _canonical(_const_keys(a), _const_keys(b))
        if not np.array_equal(ca[a.a0[is_const]], cb[b.a0[is_const]]):
            return False
    is_variadic = enc == ENC_VARIADIC
    return bool(np.array_equal(_variadic_operands(a, is_variadic),
                               _variadic_operands(b, is_variadic)))


def structural_equal(a: Any, b: Any) -> bool:
    """True when two modules, Functions or PrimFuncs have the same structure."""
    if isinstance(a, IRModule) and isinstance(b, IRModule):
        return set(a.functions) == set(b.functions) and dict(a.attrs) == dict(b.attrs) and all(
            structural_equal(a.functions[k], b.functions[k]) for k in a.functions)
    if isinstance(a, Function) and isinstance(b, Function):
        return _function_equal(a, b)
    if isinstance(a, (IRModule, Function)) or isinstance(b, (IRModule, Function)):
        return False
    return bool(a == b)  # TIR dataclasses compare structurally


def _digest_values(values: list[Any]) -> np.ndarray:
    """A stable uint64 per table entry."""
    return np.array([int.from_bytes(hashlib.blake2b(repr(v).encode(), digest_size=8).digest(),
                                    "little") for v in values], dtype=np.uint64)


def _function_hash(func: Function) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    a0, enc = _operand_columns(func)
    shape_h = _digest_values(list(func.shapes.shapes))[func.shape_id]
    attr_h = _digest_values(list(func.attr_table.records))[func.attr_id]
    is_const = enc == ENC_CONST
    const_h = _digest_values([(d, s, hashlib.blake2b(data).hexdigest())
                              for d, s, data in _const_keys(func)])
    for arr in (func.kind, a0, func.a1, func.dtype, shape_h, attr_h, const_h[func.a0[is_const]],
                _variadic_operands(func, enc == ENC_VARIADIC), func.params, func.outputs):
        h.update(np.ascontiguousarray(arr).tobytes())
        h.update(b"|")
    h.update(repr((func.param_names, sorted((k, repr(v)) for k, v in func.attrs.items())))
             .encode())
    return h.digest()


def structural_hash(obj: Any) -> int:
    """A 64-bit hash, equal for structurally equal objects and stable across processes."""
    h = hashlib.blake2b(digest_size=8)
    if isinstance(obj, IRModule):
        for name in sorted(obj.functions):
            h.update(name.encode() + b"=")
            h.update(structural_hash(obj.functions[name]).to_bytes(8, "little"))
    elif isinstance(obj, Function):
        h.update(_function_hash(obj))
    elif hasattr(obj, "structural_digest"):
        h.update(obj.structural_digest())
    else:
        h.update(repr(obj).encode())
    return int.from_bytes(h.digest(), "little")
