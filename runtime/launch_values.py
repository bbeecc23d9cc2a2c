"""The distinct values a launch table's arguments take (``runtime/launch_table.py``).

A table stores each launch argument as an ``int32`` index into one short ``int64``
array; these helpers make the parts of it that are not per call: the addresses of
constants (the pool's own bytes where aligned enough), and the distinct values of
other static arguments (shape vars), found in linear time where their range allows
(``np.unique`` sorts, and the table is built for graphs of 1e7 nodes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.ir.function import Function
from irkernel.ir.ids import FLOAT32, NARROW_FLOAT_DTYPES
from irkernel.ir.pools import scalar_from_bits


def const_addresses(func: Function, nodes: np.ndarray, align: np.ndarray,
                     keep: list[Any]) -> np.ndarray:
    """Addresses of const nodes' data: the pool's own bytes (zero copy) where aligned
    enough; one-element constants, which the pool keeps as 8 raw bytes in ``sval``
    (float64 bits for floats), from one array holding each in its own dtype; a
    private aligned copy for the rare kernel that wants more alignment. Large constants
    the pool holds by reference (``pool.external``) are passed as their own arrays."""
    pool = func.consts
    cids = func.a0[nodes].astype(np.int64)
    data = pool.data
    base = data.ctypes.data if len(data) else 0
    addr = base + pool.offset[cids].astype(np.int64)
    keep.append(data)
    if pool.external:  # large constants held by reference (zero-copy imports): their arrays
        ext = np.fromiter(pool.external, np.int64, len(pool.external))
        held = np.isin(cids, ext)
        for k in np.nonzero(held)[0].tolist():
            arr = pool.external[int(cids[k])]
            addr[k] = arr.ctypes.data if arr.size else 0
            keep.append(arr)
    scalar = func.shapes.size[pool.shape_id[cids]] == 1
    if np.any(scalar):
        ids, where = np.unique(cids[scalar], return_inverse=True)
        values = pool.sval[ids].copy()  # int64 and bool: the value; float64: its bits
        f32 = pool.dtype[ids] == FLOAT32
        values[f32] = pool.sval_f[ids[f32]].astype(np.float32).view(np.uint32)
        for code in NARROW_FLOAT_DTYPES:  # float16/bfloat16: their 16 bits (sval: float64)
            sel = pool.dtype[ids] == code
            if np.any(sel):
                values[sel] = scalar_from_bits(pool.sval[ids[sel]], code).view(np.uint16)
        keep.append(values)
        addr[scalar] = values.ctypes.data + 8 * where.astype(np.int64)
    bad = np.nonzero(addr % np.maximum(align, 1) != 0)[0]
    for k in bad.tolist():
        value = func.const_value(int(nodes[k]))
        copy = _aligned(value.shape, value.dtype, int(align[k]))
        copy[...] = value
        keep.append(copy)
        addr[k] = copy.ctypes.data if copy.size else 0
    return addr


def _distinct_small(ids: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct ids ascending, each id's index among them) of ids in ``[0, bound)``, by a
    dense mark over the range (linear; ``np.unique`` sorts)."""
    present = np.zeros(bound, bool)
    present[ids] = True
    rank = np.cumsum(present, dtype=np.int64) - 1
    return np.flatnonzero(present), rank[ids]


def distinct_ints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_distinct_small` of any int64 values: dense over their range when it is at
    most a few times their count (extents, shape var values), else by sort."""
    if not len(values):
        return values, values
    lo, hi = int(values.min()), int(values.max())
    if hi - lo > 4 * len(values) + 1024:
        uniq, inverse = np.unique(values, return_inverse=True)
        return uniq, inverse.reshape(-1)
    uniq, of = _distinct_small(values - lo, hi - lo + 1)
    return uniq + lo, of


def _aligned(shape: tuple[int, ...], dtype: np.dtype, align: int) -> np.ndarray:
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


__all__ = ["const_addresses", "distinct_ints"]
