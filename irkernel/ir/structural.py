"""Structural equality and hashing of Functions and IRModules.

Two graph Functions are structurally equal when they have the same nodes in
the same order with the same ops, operands, types, attributes and constant
bytes, the same params (and names), outputs and function attributes. Interned
ids are compared through the values they name, so tables interned in a
different order (a parsed module vs. a built one) still compare equal.
Everything runs as whole-array NumPy operations: no per-node Python. Both
validate their Functions first (``irkernel.ir.validate``): a bad id is an
IRError, not an IndexError.
The hash is stable across processes (blake2b, no Python ``hash``), so it can
key on-disk caches.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import BOOL, ENC_CONST, ENC_VARIADIC, FLOAT32, INT32
from irkernel.ir.module import IRModule
from irkernel.ir.validate import validate_function


def _const_columns(func: Function, is_const: np.ndarray,
                   shape_key: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per CONST node: const id, dtype, shape key, scalar bits, and whether it is a blob.

    One-element constants are fully described by (dtype, shape, ``sval``), so they
    compare as whole arrays; only larger constants (blobs) need their bytes.
    """
    pool = func.consts
    cids = func.a0[is_const]
    sid = pool.shape_id[cids]
    dtype, big = pool.dtype[cids], func.shapes.size[sid] != 1
    return cids, dtype, shape_key[sid], _element_bits(dtype, pool.sval[cids], big), big


def _element_bits(dtype: np.ndarray, sval: np.ndarray, big: np.ndarray) -> np.ndarray:
    """The bits of each scalar constant's element in its own dtype (0 for blobs), so that
    ``sval`` entries naming the same value compare equal whoever wrote them."""
    out = np.where(big, 0, sval)
    with np.errstate(all="ignore"):
        f32 = dtype == FLOAT32
        out[f32] = out[f32].view(np.float64).astype(np.float32).view(np.int32)
        i32 = dtype == INT32
        out[i32] = out[i32].astype(np.int32)
        b = dtype == BOOL
        out[b] = out[b] != 0
    return out


def _blob(func: Function, const_id: int) -> memoryview:
    """The bytes of a tensor constant, as a view (a large constant is never copied)."""
    arr = func.consts.value(const_id, func.shapes)
    return memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))


_CHUNK = 1 << 20  # bytes compared at a time: no temporary as large as a constant


def _bytes_equal(x: memoryview, y: memoryview) -> bool:
    if len(x) != len(y):
        return False
    ax, ay = np.frombuffer(x, np.uint8), np.frombuffer(y, np.uint8)
    if ax.__array_interface__["data"][0] == ay.__array_interface__["data"][0]:
        return True  # the same memory (a constant shared by reference)
    return all(np.array_equal(ax[k:k + _CHUNK], ay[k:k + _CHUNK])
               for k in range(0, len(ax), _CHUNK))


def _consts_equal(a: Function, b: Function, is_const: np.ndarray, sa: np.ndarray,
                  sb: np.ndarray) -> bool:
    ca, cb = _const_columns(a, is_const, sa), _const_columns(b, is_const, sb)
    if not all(np.array_equal(x, y) for x, y in zip(ca[1:], cb[1:], strict=True)):
        return False
    big = ca[4]
    pairs = np.unique(np.stack([ca[0][big], cb[0][big]]), axis=1)
    # one comparison per distinct pair of large constants (never per scalar)
    return all(_bytes_equal(_blob(a, int(x)), _blob(b, int(y))) for x, y in pairs.T.tolist())


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


def _variables(func: Function) -> tuple[Any, ...]:
    """The shape variables (names and bounds, in order) that symbolic shape keys index."""
    sym = func.shapes.symbols
    if not sym:
        return ()
    return sym.var_names, tuple(sym.var_lower.tolist()), tuple(sym.var_upper.tolist())


def _function_equal(a: Function, b: Function) -> bool:
    if a is b:
        return True
    validate_function(a, "structural_equal")  # every id below indexes its table
    validate_function(b, "structural_equal")
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
    if _variables(a) != _variables(b):
        return False
    sa, sb = _canonical(list(a.shapes.keys), list(b.shapes.keys))
    if not np.array_equal(sa[a.shape_id], sb[b.shape_id]):
        return False
    ra, rb = _canonical(list(a.attr_table.records), list(b.attr_table.records))
    if not np.array_equal(ra[a.attr_id], rb[b.attr_id]):
        return False
    is_const = enc == ENC_CONST
    if np.any(is_const) and not _consts_equal(a, b, is_const, sa, sb):
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
    validate_function(func, "structural_hash")  # every id below indexes its table
    h = hashlib.blake2b(digest_size=16)
    a0, enc = _operand_columns(func)
    shape_d = _digest_values(list(func.shapes.keys))
    attr_h = _digest_values(list(func.attr_table.records))[func.attr_id]
    is_const = enc == ENC_CONST
    cids, c_dtype, c_shape, c_sval, big = _const_columns(func, is_const, shape_d)
    blob_ids, inverse = np.unique(cids[big], return_inverse=True)
    blob_h = _digest_values([hashlib.blake2b(_blob(func, int(c))).hexdigest()
                             for c in blob_ids.tolist()])[inverse]  # one per large constant
    for arr in (func.kind, a0, func.a1, func.dtype, shape_d[func.shape_id], attr_h,
                c_dtype, c_shape, c_sval, blob_h,
                _variadic_operands(func, enc == ENC_VARIADIC), func.params, func.outputs):
        h.update(np.ascontiguousarray(arr).tobytes())
        h.update(b"|")
    h.update(repr((func.param_names, sorted((k, repr(v)) for k, v in func.attrs.items())))
             .encode())
    if func.shapes.symbols:
        h.update(repr(_variables(func)).encode())
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
