"""Interned side tables of a Function: shapes, attribute sets and constants.

Design: each table is an immutable value shared by reference between a
Function and the Functions rebuilt from it; adding entries returns a new table
(copy-on-append). The builder keeps a dict per table while it runs (one entry
per *distinct* shape, attribute set or constant, never per node) and freezes
the tables in ``finish``. Reserved ids: shape 0 is ``()`` and attribute set 0
is "no attributes".

ConstPool layout (why): scalar-heavy graphs must fold without touching Python
objects, so every one-element constant keeps its value in ``sval`` (8 raw
bytes: float64 bits of the value for float dtypes, float16 and bfloat16 included,
int64 for ints and bool) and stores no
bytes in ``data``. Larger constants live in ``data`` at 16-byte aligned
offsets so that a typed view of any entry is aligned. Alternatives considered:
a list of small arrays (one Python object per constant, slow to fold) and
storing scalars in ``data`` too (24 bytes per scalar instead of 8).

Large constants by reference (zero-copy): a constant of at least
``LARGE_CONST_BYTES`` that arrives as a NumPy array (model weights: vgg19
holds 575 MB) is not copied into ``data``. The pool keeps a read-only view of
the caller's array in ``external`` (a mapping const id -> array; its entry in
``data`` is an empty range, like a scalar's) and hands that same view out of
:meth:`ConstPool.value`. Every reader goes through ``value`` (FoldConstant,
SimplifyArith, structural equality and hash, the printer, the interpreter,
the executor, which passes the view's pointer to the kernels when it is
aligned enough), and rebuilt pools (FoldConstant, SimplifyArith, the builder
extended from a pool) carry the mapping over by reference, so no pass copies a
large constant. The caller must not write to the array afterwards (as with
``np.frombuffer``); the pool's view is read-only. Large constants are
deduplicated by identity (the same memory is one entry), never by hashing
their bytes. Alternatives considered: hashing the bytes to deduplicate equal
weights (about a second per 500 MB at every pool extension; the frontend
deduplicates what it creates itself) and a memory-mapped ``data`` (still a
second copy of arrays that already exist).
Imports numpy, irkernel.ir.ids, narrow and symbols only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from irkernel.ir import narrow
from irkernel.ir.symbols import EMPTY_SYMBOLS, SymbolTable, expr_of, symbolic_shape_problem
from irkernel.ir.ids import (
    DTYPE_NAMES,
    MAX_ELEMENTS,
    FLOAT_DTYPES,
    NARROW_FLOAT_DTYPES,
    NUMPY_DTYPES,
    dtype_code,
    shape_problem,
)

Shape = tuple[int, ...]
AttrRecord = tuple[tuple[str, Any], ...]

#: Constants of at least this many bytes are held by reference (see the module docstring).
LARGE_CONST_BYTES = 1 << 16
_NO_EXTERNAL: Mapping[int, np.ndarray] = MappingProxyType({})


#: ``ShapeTable.size`` of a symbolic shape: more elements than any static shape may hold
#: (``MAX_ELEMENTS + 1``), so every "small enough to fold / materialize" test of a pass
#: written for static shapes leaves it alone, and bytes (x 8) still fit in int64.
SYMBOLIC_SIZE = MAX_ELEMENTS + 1


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr)
    arr.setflags(write=False)
    return arr


class ShapeTable:
    """Interned shapes; id 0 is the scalar shape ``()``.

    Every shape is checked here (``ids.shape_problem``: rank, non-negative dims, element
    count within ``MAX_ELEMENTS``), so :attr:`size` and every byte size derived from it
    fit in int64; a bad shape is a ValueError naming it. With shape variables
    (``symbols``, :mod:`irkernel.ir.symbols`) a dim may also be a symbolic dim
    ``<= -2`` naming an expression of ``symbols``; such a shape has no static size
    (:attr:`size` is :data:`SYMBOLIC_SIZE` for it). Without variables nothing of this is looked at.
    """

    __slots__ = ("__dict__", "shapes", "symbols")

    def __init__(self, shapes: Sequence[Shape] = ((),),
                 symbols: SymbolTable = EMPTY_SYMBOLS) -> None:
        shapes = tuple(tuple(int(d) for d in s) for s in shapes)
        if not shapes or shapes[0] != ():
            raise ValueError("shape id 0 must be the scalar shape ()")
        if not isinstance(symbols, SymbolTable):
            raise TypeError(f"ShapeTable: symbols must be a SymbolTable, got "
                            f"{type(symbols).__name__}")
        symbolic = bool(symbols)
        for sid, s in enumerate(shapes):  # one step per distinct shape (tables are small)
            problem = symbolic_shape_problem(s, symbols) if symbolic else shape_problem(s)
            if problem is not None:
                raise ValueError(f"shape {sid} {list(s)}: {problem}")
        self.shapes = shapes
        self.symbols = symbols

    def __len__(self) -> int:
        return len(self.shapes)

    def __getitem__(self, shape_id: int) -> Shape:
        return self.shapes[shape_id]

    @cached_property
    def index(self) -> dict[Shape, int]:
        return {s: i for i, s in enumerate(self.shapes)}

    def extended(self, shapes: Iterable[Shape]) -> tuple[ShapeTable, list[int]]:
        """A table holding these shapes too, and their ids; self when none is new."""
        index = dict(self.index)
        added = list(self.shapes)
        ids = []
        for s in shapes:
            s = tuple(int(d) for d in s)
            if s not in index:
                index[s] = len(added)
                added.append(s)
            ids.append(index[s])
        return (self if len(added) == len(self.shapes) else ShapeTable(added, self.symbols)), ids

    @cached_property
    def ndim(self) -> np.ndarray:
        """int32[s]: rank of each shape."""
        return _frozen(np.array([len(s) for s in self.shapes], dtype=np.int32))

    @cached_property
    def is_symbolic(self) -> np.ndarray:
        """bool[s]: whether each shape has a symbolic dim."""
        if not self.symbols:
            return _frozen(np.zeros(len(self.shapes), bool))
        return _frozen(np.array([any(d < 0 for d in s) for s in self.shapes], bool))

    @cached_property
    def size(self) -> np.ndarray:
        """int64[s]: element count of each shape; :data:`SYMBOLIC_SIZE` for a symbolic one."""
        # math.prod is exact; the shapes were checked to fit (np.prod would wrap silently)
        if not self.symbols:
            return _frozen(np.array([math.prod(s) for s in self.shapes], dtype=np.int64))
        size = np.array([math.prod(s) if not sym else SYMBOLIC_SIZE
                         for s, sym in zip(self.shapes, self.is_symbolic.tolist(), strict=True)],
                        dtype=np.int64)
        return _frozen(size)

    @cached_property
    def keys(self) -> tuple[tuple[Any, ...], ...]:
        """Each shape with its symbolic dims as their canonical expression keys, so shapes
        of two functions with the same variables compare by value (structural equality);
        :attr:`shapes` itself without variables."""
        if not self.symbols:
            return self.shapes
        keys = self.symbols.keys
        return tuple(tuple(d if d >= 0 else ("sym", keys[expr_of(d)]) for d in s)
                     for s in self.shapes)

    def decode(self, shape_id: int) -> tuple[Any, ...]:
        """The shape as the type rules see it: ints and symbolic dims (``SymDim``)."""
        shape = self.shapes[shape_id]
        return self.symbols.decode(shape) if self.symbols else shape

    def shape_text(self, shape_id: int) -> str:
        """``2, batch, (h + 1) // 2``: the dims as the text format spells them."""
        shape = self.shapes[shape_id]
        if not self.symbols:
            return ", ".join(map(str, shape))
        return ", ".join(self.symbols.text(d) for d in shape)

    @cached_property
    def ptr(self) -> np.ndarray:
        """int32[s+1]: CSR offsets of each shape's dims in :attr:`dims`."""
        return _frozen(np.concatenate([[0], np.cumsum(self.ndim, dtype=np.int64)]).astype(np.int32))

    @cached_property
    def dims(self) -> np.ndarray:
        """int64[D]: all dims, concatenated (symbolic dims are their values ``<= -2``)."""
        return _frozen(np.array([d for s in self.shapes for d in s], dtype=np.int64))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ShapeTable) and self.shapes == other.shapes
                and self.symbols == other.symbols)

    def __hash__(self) -> int:
        return hash(self.shapes)

    def __repr__(self) -> str:
        sym = f", {self.symbols!r}" if self.symbols else ""
        return f"ShapeTable({len(self.shapes)} shapes{sym})"


class AttrTable:
    """Interned attribute sets: sorted ``(name, value)`` tuples; id 0 is ``()``."""

    __slots__ = ("__dict__", "records")

    def __init__(self, records: Sequence[AttrRecord] = ((),)) -> None:
        records = tuple(records)
        if not records or records[0] != ():
            raise ValueError("attribute id 0 must be the empty attribute set")
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, attr_id: int) -> AttrRecord:
        return self.records[attr_id]

    def as_dict(self, attr_id: int) -> dict[str, Any]:
        return dict(self.records[attr_id])

    @cached_property
    def index(self) -> dict[AttrRecord, int]:
        return {r: i for i, r in enumerate(self.records)}

    def extended(self, records: Iterable[AttrRecord]) -> tuple[AttrTable, list[int]]:
        index = dict(self.index)
        added = list(self.records)
        ids = []
        for r in records:
            if r not in index:
                index[r] = len(added)
                added.append(r)
            ids.append(index[r])
        return (self if len(added) == len(self.records) else AttrTable(added)), ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AttrTable) and self.records == other.records

    def __hash__(self) -> int:
        return hash(self.records)

    def __repr__(self) -> str:
        return f"AttrTable({len(self.records)} attribute sets)"


def scalar_bits(value: object, code: int) -> int:
    """The 8 raw bytes a one-element constant of dtype ``code`` keeps in ``sval``
    (float64 bits of the value for every float dtype, bfloat16 included)."""
    arr = narrow.to_storage(value, code).reshape(())
    if code in FLOAT_DTYPES:
        with np.errstate(invalid="ignore"):  # a signaling NaN is kept quiet, as float64 holds it
            return int(np.asarray(narrow.widen(arr, code), np.float64).view(np.int64))
    return int(np.asarray(arr, np.int64))


def scalar_from_bits(bits: np.ndarray, code: int) -> np.ndarray:
    """The storage array of one-element values kept as ``sval`` bits (int64[k])."""
    bits = np.asarray(bits, np.int64)
    if code in NARROW_FLOAT_DTYPES:  # exact: the float64 holds a narrow value
        return narrow.narrow(bits.view(np.float64), code)
    if code in FLOAT_DTYPES:
        return bits.view(np.float64).astype(NUMPY_DTYPES[code])
    return bits.astype(NUMPY_DTYPES[code])


class ConstPool:
    """Immutable constant pool (see the module docstring for the layout).

    Columns (length k = number of constants): ``dtype`` int8, ``shape_id``
    int32, ``sval`` int64 raw scalar bits, ``offset`` int64[k+1] byte offsets
    into ``data`` uint8 (entry i starts at ``offset[i]``; one-element constants
    occupy an empty range, larger ones are padded to 16 bytes). ``external``
    maps the const ids of large constants held by reference to their read-only
    arrays (their range in ``data`` is empty too).
    """

    __slots__ = ("__dict__", "data", "dtype", "external", "offset", "shape_id", "sval")

    ALIGN = 16

    def __init__(self, dtype: np.ndarray, shape_id: np.ndarray, sval: np.ndarray,
                 offset: np.ndarray, data: np.ndarray,
                 external: Mapping[int, np.ndarray] | None = None) -> None:
        self.dtype = _frozen(np.asarray(dtype, np.int8))
        self.shape_id = _frozen(np.asarray(shape_id, np.int32))
        self.sval = _frozen(np.asarray(sval, np.int64))
        self.offset = _frozen(np.asarray(offset, np.int64))
        self.data = _frozen(np.asarray(data, np.uint8))
        k = len(self.dtype)
        if not (len(self.shape_id) == len(self.sval) == k and len(self.offset) == k + 1):
            raise ValueError("ConstPool columns have inconsistent lengths")
        if not external:
            self.external = _NO_EXTERNAL
        else:
            for cid, arr in external.items():
                if not (isinstance(arr, np.ndarray) and 0 <= cid < k):
                    raise ValueError(f"ConstPool: external entry {cid!r} is not an array "
                                     f"of a const id in [0, {k})")
                if arr.flags.writeable or not arr.flags.c_contiguous:
                    raise ValueError(f"ConstPool: external constant {cid} must be a read-only "
                                     "C-contiguous array")
            self.external = (external if isinstance(external, MappingProxyType)
                             else MappingProxyType(dict(external)))

    @classmethod
    def empty(cls) -> ConstPool:
        z = np.zeros(0, np.int64)
        return cls(z, z, z, np.zeros(1, np.int64), np.zeros(0, np.uint8))

    def __len__(self) -> int:
        return len(self.dtype)

    def with_tensors(self, values: Sequence[np.ndarray], shape_ids: Sequence[int]
                     ) -> tuple[ConstPool, np.ndarray]:
        """A pool with ``values`` (tensors of more than one element) appended, and their
        const ids (int32). No deduplication against the existing entries: for passes
        that add constants they have already made distinct (whole-array work; the
        existing bytes are copied once; constants held by reference stay so)."""
        k = len(self)
        if not values:
            return self, np.zeros(0, np.int32)
        blobs = [np.ascontiguousarray(v).view(np.uint8).reshape(-1) for v in values]
        if any(v.size <= 1 for v in values):
            raise ValueError("with_tensors: one-element constants belong in sval")
        sizes = np.array([len(b) for b in blobs], np.int64)
        padded = -(-sizes // self.ALIGN) * self.ALIGN
        offset = np.concatenate([self.offset, self.offset[-1] + np.cumsum(padded)])
        data = np.zeros(int(offset[-1]), np.uint8)
        data[: len(self.data)] = self.data
        for start, blob in zip(offset[k:-1].tolist(), blobs, strict=True):
            data[start: start + len(blob)] = blob
        codes = np.array([dtype_code(v.dtype) for v in values], np.int8)
        pool = ConstPool(np.concatenate([self.dtype, codes]),
                         np.concatenate([self.shape_id, np.asarray(shape_ids, np.int32)]),
                         np.concatenate([self.sval, np.zeros(len(values), np.int64)]),
                         offset, data, self.external)
        return pool, np.arange(k, k + len(values), dtype=np.int32)

    @property
    def sval_f(self) -> np.ndarray:
        """float64 view of ``sval`` (meaningful for float constants)."""
        return self.sval.view(np.float64)

    @property
    def sval_i(self) -> np.ndarray:
        """int64 view of ``sval`` (meaningful for int and bool constants)."""
        return self.sval

    @property
    def nbytes(self) -> int:
        """Bytes of the columns, ``data`` and the constants held by reference."""
        return sum(a.nbytes for a in (self.dtype, self.shape_id, self.sval, self.offset, self.data)
                   ) + self.external_nbytes

    @property
    def external_nbytes(self) -> int:
        """Bytes of the large constants held by reference (not in ``data``)."""
        return sum(a.nbytes for a in self.external.values())

    def value(self, const_id: int, shapes: ShapeTable) -> np.ndarray:
        """The constant as a read-only array of its dtype and shape (a view, never a copy,
        except for one-element constants, which are made from ``sval``)."""
        held = self.external.get(const_id)
        if held is not None:
            return held
        code = int(self.dtype[const_id])
        shape = shapes[int(self.shape_id[const_id])]
        dt = NUMPY_DTYPES[code]
        count = int(shapes.size[int(self.shape_id[const_id])])
        if count == 1:
            arr = scalar_from_bits(self.sval[const_id: const_id + 1], code).reshape(shape)
        else:
            start = int(self.offset[const_id])
            arr = self.data[start: start + count * dt.itemsize].view(dt).reshape(shape)
        arr.setflags(write=False)
        return arr


class ConstPoolBuilder:
    """Growable pool with deduplication by (dtype, shape_id, bytes); freezes to a ConstPool."""

    def __init__(self, base: ConstPool | None = None, shapes: ShapeTable | None = None) -> None:
        """Start empty, or from ``base`` (whose shape ids refer to ``shapes``)."""
        self._dtype: list[np.ndarray] = []
        self._shape_id: list[np.ndarray] = []
        self._sval: list[np.ndarray] = []
        self._blobs: list[bytes] = []
        self._index: dict[tuple[Any, ...], int] = {}
        self._n = 0
        self._blob_ids: list[int] = []  # const ids of the entries stored in data, ascending
        self._external: dict[int, np.ndarray] = {}  # const id -> read-only array (by reference)
        if base is not None:
            if shapes is None:
                raise ValueError("ConstPoolBuilder(base) needs the base's ShapeTable")
            self._extend_from(base, shapes)

    def __len__(self) -> int:
        return self._n

    def _extend_from(self, pool: ConstPool, shapes: ShapeTable) -> None:
        k = len(pool)
        self._dtype.append(np.array(pool.dtype))
        self._shape_id.append(np.array(pool.shape_id))
        self._sval.append(np.array(pool.sval))
        is_scalar = shapes.size[pool.shape_id] == 1
        scalars = np.nonzero(is_scalar)[0][::-1]  # reversed: the first id of equal keys wins
        self._index.update(zip(zip(pool.dtype[scalars].tolist(), pool.shape_id[scalars].tolist(),
                                   pool.sval[scalars].tolist()), scalars.tolist()))
        for cid, arr in pool.external.items():  # carried over by reference, never copied
            self._external[cid] = arr
            self._index.setdefault(_identity_key(arr, int(pool.shape_id[cid])), cid)
        for cid in np.nonzero(~is_scalar)[0].tolist():  # one iteration per tensor constant
            if cid in self._external:
                continue
            blob = pool.value(cid, shapes).tobytes()
            self._add_blob(cid, blob)
            self._index.setdefault((int(pool.dtype[cid]), int(pool.shape_id[cid]), blob), cid)
        self._n = k

    def _add_blob(self, const_id: int, blob: bytes) -> None:
        self._blob_ids.append(const_id)
        self._blobs.append(blob)

    def add(self, value: np.ndarray, shape_id: int, code: int | None = None) -> int:
        """Intern one constant (already of a supported dtype); returns its const id.

        A constant of ``LARGE_CONST_BYTES`` or more is held by reference: the pool
        keeps a read-only view of ``value`` (C-contiguous ones are not copied).
        ``code`` is the dtype when ``value.dtype`` does not say it: bfloat16 values
        come as their uint16 storage (``irkernel.ir.narrow``).
        """
        code = dtype_code(value.dtype) if code is None else code
        if value.dtype != NUMPY_DTYPES[code]:
            raise ValueError(f"ConstPoolBuilder.add: a {DTYPE_NAMES[code]} constant is stored "
                             f"as {NUMPY_DTYPES[code]}, got {value.dtype}")
        key: tuple[Any, ...]
        if value.size != 1 and value.nbytes >= LARGE_CONST_BYTES:
            held = np.ascontiguousarray(value).view()
            held.setflags(write=False)
            key = _identity_key(held, shape_id)
            cid = self._index.get(key)
            if cid is None:
                cid = self._index[key] = self._n
                self._dtype.append(np.array([code], np.int8))
                self._shape_id.append(np.array([shape_id], np.int32))
                self._sval.append(np.zeros(1, np.int64))
                self._external[cid] = held
                self._n += 1
            return cid
        if value.size == 1:  # scalars key on their sval bits (an int), tensors on bytes
            bits = scalar_bits(value, code)
            key = (code, shape_id, bits)
        else:
            blob = np.ascontiguousarray(value).tobytes()
            key = (code, shape_id, blob)
            bits = 0
        cid = self._index.get(key)
        if cid is not None:
            return cid
        cid = self._n
        self._index[key] = cid
        self._dtype.append(np.array([code], np.int8))
        self._shape_id.append(np.array([shape_id], np.int32))
        self._sval.append(np.array([bits], np.int64))
        if value.size != 1:
            self._add_blob(cid, blob)
        self._n += 1
        return cid

    def add_scalars(self, values: np.ndarray, code: int) -> np.ndarray:
        """Intern many scalars of one dtype at NumPy speed; returns int32 const ids."""
        values = narrow.to_storage(values, code).ravel()
        with np.errstate(invalid="ignore"):  # signaling NaNs become quiet, as in scalar_bits
            bits = (narrow.widen(values, code).astype(np.float64).view(np.int64)
                    if code in FLOAT_DTYPES else values.astype(np.int64))
        uniq, inverse = np.unique(bits, return_inverse=True)
        keys = [(code, 0, b) for b in uniq.tolist()]  # C-speed loops over distinct values
        index = self._index
        ids = np.array([index.get(key, -1) for key in keys], np.int64)
        new = np.nonzero(ids < 0)[0]
        if len(new):
            m = len(new)
            ids[new] = np.arange(self._n, self._n + m, dtype=np.int64)
            index.update(zip([keys[j] for j in new.tolist()], ids[new].tolist()))
            self._dtype.append(np.full(m, code, np.int8))
            self._shape_id.append(np.zeros(m, np.int32))
            self._sval.append(uniq[new].astype(np.int64))
            self._n += m
        return ids[inverse].astype(np.int32, copy=False)

    def add_tensors(self, flat: np.ndarray, code: int, shape_ids: np.ndarray,
                    sizes: np.ndarray) -> np.ndarray:
        """Intern many constants of one dtype given back to back in ``flat`` (constant j
        has ``sizes[j]`` elements and shape ``shape_ids[j]``); returns int32 const ids.

        One dictionary step per constant and no array per constant (the text parser's
        bulk path); one-element and large constants go through :meth:`add`.
        """
        flat = np.ascontiguousarray(narrow.to_storage(flat, code)).ravel()
        item = flat.dtype.itemsize
        ends = np.cumsum(sizes.astype(np.int64))
        starts = ends - sizes
        raw = flat.tobytes()
        ids = np.empty(len(sizes), np.int32)
        index = self._index
        big = LARGE_CONST_BYTES // item
        pending: list[int] = []  # shape ids of the new entries whose columns are not yet added

        def flush() -> None:
            if pending:
                self._dtype.append(np.full(len(pending), code, np.int8))
                self._shape_id.append(np.array(pending, np.int32))
                self._sval.append(np.zeros(len(pending), np.int64))
                pending.clear()

        for j, (a, b, sid) in enumerate(zip(starts.tolist(), ends.tolist(),
                                            shape_ids.tolist(), strict=True)):
            if b - a == 1 or b - a >= big:
                flush()
                ids[j] = self.add(flat[a:b].copy(), sid, code)
                continue
            key = (code, sid, raw[a * item: b * item])
            cid = index.get(key)
            if cid is None:
                cid = index[key] = self._n
                self._blob_ids.append(cid)
                self._blobs.append(key[2])
                pending.append(sid)
                self._n += 1
            ids[j] = cid
        flush()
        return ids

    def freeze_types(self) -> tuple[np.ndarray, np.ndarray]:
        """(dtype int8[k], shape_id int32[k]) of the constants so far."""
        if not self._n:
            return np.zeros(0, np.int8), np.zeros(0, np.int32)
        self._dtype[:] = [np.concatenate(self._dtype)]
        self._shape_id[:] = [np.concatenate(self._shape_id)]
        return self._dtype[0], self._shape_id[0]

    def freeze(self) -> ConstPool:
        k = self._n
        if not k:
            return ConstPool.empty()
        dtype = np.concatenate(self._dtype)
        shape_id = np.concatenate(self._shape_id)
        sval = np.concatenate(self._sval)
        padded = np.zeros(k, np.int64)
        align = ConstPool.ALIGN
        if self._blobs:
            lens = np.fromiter(map(len, self._blobs), np.int64, len(self._blobs))
            padded[np.array(self._blob_ids, np.int64)] = -(-lens // align) * align
        offset = np.zeros(k + 1, np.int64)
        np.cumsum(padded, out=offset[1:])
        # blob ids ascend and other entries take no bytes: data is the padded blobs in order
        data = np.frombuffer(b"".join([blob + bytes(-len(blob) % align) for blob in self._blobs]),
                             np.uint8) if self._blobs else np.zeros(0, np.uint8)
        return ConstPool(dtype, shape_id, sval, offset, data, self._external)


def _identity_key(arr: np.ndarray, shape_id: int) -> tuple[Any, ...]:
    """Dedup key of a constant held by reference: the memory it views (held alive by the
    pool, so the address cannot be reused while the key exists) and its type."""
    return ("@", arr.__array_interface__["data"][0], arr.dtype.str, shape_id)


def describe_dtype(code: int) -> str:
    return DTYPE_NAMES[code]
