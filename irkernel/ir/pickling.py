"""Pickle state of graph Functions: columns and constants as buffers, no copy.

``Function.__reduce__`` (in ``irkernel.ir.function``) returns
``(load_function, state)`` with the state built here. The state is flat: the
nine NumPy columns, the parameter names, the shape and attribute tables as
tuples, the constant pool as its public columns, and the function attributes
as a dict. NumPy pickles a C-contiguous array with protocol 5 as a
``pickle.PickleBuffer``, so ``pickle.dumps(mod, protocol=5,
buffer_callback=...)`` hands every column and the constant bytes to the
caller out of band (Dask sends them as separate frames, a shared-memory
transport can map them) and ``pickle.loads(..., buffers=...)`` wraps the
given memory without copying. With protocol 5 in band the data is one copy
inside the stream; protocols below 5 fall back to NumPy's in-band bytes.

On load (:func:`readonly`) an array that arrived writeable (an out-of-band
buffer the receiver owns) is flagged read-only, which costs nothing; one that
arrived misaligned for its dtype (a frame sliced out of a larger receive
buffer) is copied once, because Numba compiles a second, slower
specialization for unaligned arrays. The caller must not write to buffers it
passed to ``pickle.loads`` afterwards: the Function shares them (the rule of
``np.frombuffer``).

The constant pool goes through its public fields only: ``dtype``,
``shape_id``, ``sval``, ``offset``, ``data`` and the constructor
``ConstPool(dtype, shape_id, sval, offset, data)``; when the pool has a
non-empty ``external`` mapping (constants held by reference) those arrays
travel out of band too and come back through ``ConstPool(...,
external=...)``. Shape and attribute tables travel as their tuples and are
re-interned on load (a few entries, not per node).

Loading untrusted pickles is as unsafe as pickle always is: a pickle can run
any code while it loads. The validation of a loaded Function (``verify``,
through the ``CHECK_LOADED`` hook) protects the kernels from malformed
columns, not the process from a malicious pickle.
Imports numpy and ``irkernel.ir.pools`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from irkernel.ir.pools import AttrTable, ConstPool, ShapeTable
from irkernel.ir.symbols import SymbolTable

#: Byte alignment the constant pool's ``data`` needs (its entries are 16-byte aligned).
_DATA_ALIGN = ConstPool.ALIGN

PoolState = tuple[Any, ...]


def readonly(arr: Any, dtype: Any, what: str, align: int | None = None) -> np.ndarray:
    """``arr`` (an unpickled array) as a read-only, aligned 1-D array of ``dtype``.

    No copy unless the array is misaligned. Raises TypeError naming ``what``
    when the dtype or rank is not the expected one (a corrupt or foreign pickle).
    """
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"unpickled {what} is {type(arr).__name__}, not a NumPy array")
    if arr.dtype != np.dtype(dtype) or arr.ndim != 1:
        raise TypeError(f"unpickled {what} is {arr.dtype}{list(arr.shape)}, expected 1-D "
                        f"{np.dtype(dtype).name}")
    return _settle(arr, align or arr.dtype.alignment)


def _settle(arr: np.ndarray, align: int) -> np.ndarray:
    if arr.ctypes.data % align or not arr.flags.c_contiguous:
        out = np.empty(arr.shape, arr.dtype)  # NumPy allocations are 16-byte aligned
        out[...] = arr
        arr = out
    if arr.flags.writeable:
        arr.setflags(write=False)
    return arr


def pool_state(pool: ConstPool) -> PoolState:
    """The pool's public columns (and its constants held by reference, if any)."""
    external: Mapping[int, np.ndarray] = getattr(pool, "external", None) or {}
    return (pool.dtype, pool.shape_id, pool.sval, pool.offset, pool.data,
            tuple((int(cid), arr) for cid, arr in external.items()))


def pool_from_state(state: PoolState) -> ConstPool:
    """Rebuild a pool from :func:`pool_state` (no copy of aligned arrays)."""
    dtype, shape_id, sval, offset, data, external = state
    columns = (readonly(dtype, np.int8, "const pool dtype"),
               readonly(shape_id, np.int32, "const pool shape_id"),
               readonly(sval, np.int64, "const pool sval"),
               readonly(offset, np.int64, "const pool offset"),
               readonly(data, np.uint8, "const pool data", _DATA_ALIGN))
    if not external:
        return ConstPool(*columns)
    held = {}
    for cid, arr in external:
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"unpickled external constant {cid} is {type(arr).__name__}")
        held[int(cid)] = _settle(arr, max(arr.dtype.alignment, 1))
    return ConstPool(*columns, external=held)  # type: ignore[call-arg]  (pools with references)


def tables_state(shapes: ShapeTable, attr_table: AttrTable) -> tuple[Any, Any]:
    """The shape and attribute tables as the tuples they intern; a shape table with
    shape variables is a dict that holds its symbol table's columns too."""
    if shapes.symbols:
        return {"shapes": shapes.shapes, "symbols": shapes.symbols.state()}, attr_table.records
    return shapes.shapes, attr_table.records


def tables_from_state(shapes: Any, records: Any) -> tuple[ShapeTable, AttrTable]:
    if isinstance(shapes, dict):
        if set(shapes) != {"shapes", "symbols"}:
            raise TypeError(f"a pickled shape table has the keys shapes and symbols, got "
                            f"{sorted(shapes)}")
        return ShapeTable(shapes["shapes"], SymbolTable(*shapes["symbols"])), AttrTable(records)
    return ShapeTable(shapes), AttrTable(records)


__all__ = ["pool_from_state", "pool_state", "readonly", "tables_from_state", "tables_state"]
