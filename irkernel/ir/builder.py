"""GraphBuilder: incremental (one call per node) and bulk (whole arrays) construction.

Columns grow in ``array.array`` buffers (amortized over-allocation in C, fast
appends and int reads for the per-node path); NumPy views of them feed the
kernels on the bulk path. Types are inferred as nodes arrive: per node through
a dict keyed by (opcode, attr_id, operand types), in bulk through the
signature sweep. ``finish`` trims the columns into read-only arrays.
"""

from __future__ import annotations

import math
import traceback
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.ir import narrow, ops
from irkernel.ir.checks import STRUCTURE_RULES, check_structure_kernel
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.function import Function
from irkernel.ir.ids import (
    DTYPE_NAMES,
    ENC_BINARY,
    ENC_PARAM,
    ENC_UNARY,
    ENC_VARIADIC,
    MAX_NODES,
    NARROW_FLOAT_DTYPES,
    NONE,
    NUMPY_DTYPES,
    dtype_code,
    shape_problem,
)
from irkernel.ir.operands import operand_list
from irkernel.ir.ops.registry import find_op
from irkernel.ir.pools import AttrTable, ConstPoolBuilder, ShapeTable
from irkernel.ir.symbols import SymbolBuilder
from irkernel.ir.symdim import DEFAULT_LOWER, SymDim
from irkernel.ir.symtypes import encode_dims_attrs, map_dims_attrs, refuse_symbolic
from irkernel.ir.typecheck import SignatureTable
from irkernel.ir.validate import mark_validated
from irkernel.ir.verify import mark_verified

Shape = tuple[int, ...]


def _fmt_type(code: int, shape: tuple[Any, ...]) -> str:
    return f"{DTYPE_NAMES[code]}[{', '.join(map(str, shape))}]"


def _raw(arr: np.ndarray) -> memoryview:
    """The bytes of a C-contiguous array without a copy (array.frombytes copies once)."""
    return memoryview(arr).cast("B")


def _check_bulk(name: str, arr: object, dtype: type, n: int | None) -> np.ndarray:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"add_nodes: {name} must be a numpy array of {np.dtype(dtype).name}")
    if arr.dtype != dtype:
        raise TypeError(f"add_nodes: {name} must have dtype {np.dtype(dtype).name}, got {arr.dtype}")
    if arr.ndim != 1 or not arr.flags.c_contiguous:
        raise ValueError(f"add_nodes: {name} must be a 1-D C-contiguous array")
    if n is not None and len(arr) != n:
        raise ValueError(f"add_nodes: {name} has length {len(arr)}, expected {n} (len(kind))")
    return arr


def _convert_exact(what: str, arr: np.ndarray, code: int) -> np.ndarray:
    """``arr`` as a C-contiguous array of dtype ``code`` (0-d stays 0-d).

    An int or bool constant must hold the given values exactly: no rounding,
    wrapping or NaN (float targets round to nearest, as NumPy does).
    """
    if code in NARROW_FLOAT_DTYPES:  # rounded to nearest even; bfloat16 stored as uint16 bits
        return np.asarray(narrow.to_storage(arr, code), order="C")
    target = NUMPY_DTYPES[code]
    with np.errstate(invalid="ignore", over="ignore"):
        # asarray: an array already of the target dtype and C-contiguous is not copied
        # (large constants are then held by reference, see irkernel.ir.pools)
        converted = np.asarray(arr, dtype=target, order="C")
        if target.kind not in "iub" or arr.dtype == target:
            return converted
        lost = converted.astype(arr.dtype) != arr
    if np.any(lost):
        bad = arr.reshape(-1)[np.argmax(lost.reshape(-1))]
        raise ValueError(f"{what}: value {bad!r} is not exactly representable as "
                         f"{DTYPE_NAMES[code]}")
    return converted


class GraphBuilder:
    """Builds one graph :class:`Function`.

    Parameters
    ----------
    name : str
        The function's name; sets the ``global_symbol`` attribute unless ``private``.
    private : bool
        Leave ``global_symbol`` unset (the function is internal to its module).
    attrs : mapping, optional
        Extra function attributes.

    Examples
    --------
    >>> bb = GraphBuilder("main")
    >>> x = bb.param("x", (4,), "float32")
    >>> y = bb.exp(x)
    >>> f = bb.finish([y])
    """

    def __init__(self, name: str = "main", private: bool = False,
                 attrs: Mapping[str, Any] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError("GraphBuilder: name must be a non-empty str")
        self.name = name
        self._attrs = dict(attrs or {})
        if not private:
            self._attrs.setdefault("global_symbol", name)
        self._kind = array("h")
        self._a0 = array("i")
        self._a1 = array("i")
        self._dtype = array("b")
        self._shape_id = array("i")
        self._attr_id = array("i")
        self._extra = array("i")
        self._params: list[int] = []
        self._param_names: list[str] = []
        self._shapes: list[Shape] = [()]
        self._shape_index: dict[Shape, int] = {(): 0}
        self._records: list[tuple[tuple[str, Any], ...]] = [()]
        self._record_index: dict[tuple[tuple[str, Any], ...], int] = {(): 0}
        self._default_attr_id: dict[int, int] = {}
        self._consts = ConstPoolBuilder()
        self._type_cache: dict[tuple[Any, ...], tuple[int, int]] = {}
        # shape variables and the symbolic dims interned so far (irkernel.ir.symbols)
        self._sym = SymbolBuilder()
        self._dims = self._sym.dims
        self._sigs = SignatureTable()
        self._finished = False

    # -- tables -------------------------------------------------------------
    def intern_shape(self, shape: Iterable[Any]) -> int:
        """Shape id of ``shape`` in this function's table.

        A dim is a non-negative int, a symbolic dim of this builder (:meth:`dim`, and
        arithmetic on it) or a variable's name (declared with the default bounds if new).
        """
        key = tuple(shape)
        sid = self._shape_index.get(key)
        if sid is None:
            if not all(isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_))
                       for d in key):
                key = self._encode_symbolic(key)
                sid = self._shape_index.get(key)
                if sid is not None:
                    return sid
            else:
                key = tuple(int(d) for d in key)
                if any(d < 0 for d in key):
                    raise ValueError(f"shape {key} has a negative dimension")
            problem = (shape_problem(key) if not self._dims.names else
                       shape_problem(tuple(d for d in key if d >= 0)))
            if problem is not None:
                raise ValueError(f"shape {key}: {problem}")
            sid = self._shape_index.setdefault(key, len(self._shapes))
            if sid == len(self._shapes):
                self._shapes.append(key)
        return sid

    def dim(self, name: str, lower: int = DEFAULT_LOWER, upper: int | None = None) -> SymDim:
        """Declare the shape variable ``name`` with inclusive bounds (``upper`` None:
        unbounded) and return it as a symbolic dim for shapes (``2 * b``, ``h // 2``...).

        Declaring a name again with the same bounds returns the same variable.
        """
        return self._sym.declare(name, lower, upper)

    def find_dim(self, name: str) -> SymDim | None:
        """The declared shape variable ``name`` as a symbolic dim, or None."""
        return self._dims.var(name) if name in self._dims.index else None

    def _encode_symbolic(self, dims: tuple[Any, ...]) -> tuple[int, ...]:
        """A shape with symbolic dims as the table stores it (``symbols.SYM_BASE - e``)."""
        try:
            return tuple(self._sym.encode(d) for d in dims)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"shape {dims}: {exc}") from None

    def _decoded(self, shape_id: int) -> tuple[Any, ...]:
        """A shape with its symbolic dims as :class:`SymDim` (the type rules' view)."""
        shape = self._shapes[shape_id]
        if not self._dims.names or all(d >= 0 for d in shape):
            return shape
        return tuple(self._sym.decode(d) for d in shape)

    def intern_attrs(self, op: str | int, **attrs: Any) -> int:
        """Attribute id of ``attrs`` (checked and normalized for ``op``)."""
        opdef = ops.get_op(op)
        if self._dims.names:
            attrs = encode_dims_attrs(opdef, attrs, self._sym)
        record = opdef.normalize_attrs(attrs)
        aid = self._record_index.get(record)
        if aid is None:
            aid = self._record_index[record] = len(self._records)
            self._records.append(record)
        return aid

    # -- incremental API ----------------------------------------------------
    def __len__(self) -> int:
        return self._n_finished if self._finished else len(self._kind)

    def node_type(self, node_id: int) -> tuple[str, Shape]:
        """(dtype name, shape) of a node added so far (frontends read types as they build)."""
        if not isinstance(node_id, (int, np.integer)) or not 0 <= node_id < len(self._kind):
            raise ValueError(f"node_type: {node_id!r} is not a node id in [0, {len(self._kind)})")
        return DTYPE_NAMES[self._dtype[node_id]], self._decoded(self._shape_id[node_id])

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError(f"GraphBuilder({self.name!r}) is finished")
        if len(self._kind) >= MAX_NODES:
            raise OverflowError(f"a Function holds at most {MAX_NODES} nodes")

    def _unshare(self) -> None:
        """Give the builder private copies of its columns. A column a NumPy view still
        exports can not grow (``BufferError``): a view from an earlier sweep can outlive it
        in a reference cycle until the garbage collector runs (seen intermittently after a
        failed ``add_nodes``). The views keep the old buffers; the builder grows the new."""
        for name in ("_kind", "_a0", "_a1", "_dtype", "_shape_id", "_attr_id", "_extra"):
            col = getattr(self, name)
            setattr(self, name, array(col.typecode, col))

    def _append(self, kind: int, a0: int, a1: int, dtype: int, shape_id: int, attr_id: int) -> int:
        node = len(self._kind)
        try:
            self._kind.append(kind)
        except BufferError:
            self._unshare()
            self._kind.append(kind)
        self._a0.append(a0)
        self._a1.append(a1)
        self._dtype.append(dtype)
        self._shape_id.append(shape_id)
        self._attr_id.append(attr_id)
        return node

    def param(self, name: str, shape: Sequence[int], dtype: object = "float32") -> int:
        """Add a parameter (the next position in the signature); returns its node id."""
        self._check_open()
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"param: name must be an identifier, got {name!r}")
        if name in self._param_names:
            raise ValueError(f"param: duplicate parameter name {name!r}")
        code = dtype_code(dtype)
        try:
            sid = self.intern_shape(shape)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"param {name!r}: {exc}") from None
        node = self._append(ops.OP_PARAM, len(self._params), NONE, code, sid, 0)
        self._params.append(node)
        self._param_names.append(name)
        return node

    def const(self, value: object, dtype: object = None) -> int:
        """Add a constant (interned: equal bytes share one pool entry); returns its node id.

        A NumPy array of ``irkernel.ir.pools.LARGE_CONST_BYTES`` or more that already
        has the dtype and is C-contiguous is held by reference, without a copy (the
        pool keeps a read-only view; do not write to the array afterwards).
        """
        self._check_open()
        arr = np.asarray(value)
        try:
            code = dtype_code(arr.dtype if dtype is None else dtype)
        except ValueError as exc:
            raise ValueError(f"const: {exc}") from None
        arr = _convert_exact("const", arr, code)
        sid = self.intern_shape(arr.shape)
        cid = self._consts.add(arr, sid, code)
        return self._append(ops.OP_CONST, cid, NONE, code, sid, 0)

    def call(self, op: str, *operands: int, **attrs: Any) -> int:
        """Add an op node; attributes by keyword. Returns its node id."""
        # NOTE: this is the per-node hot path of incremental building (>= 3e5 nodes/s);
        # the checks are ordered so that the common case does only dict lookups.
        if self._finished or len(self._kind) >= MAX_NODES:
            self._check_open()
        opdef = find_op(op) if op.__class__ is str else None
        if opdef is None:
            opdef = ops.get_op(op if isinstance(op, str) else int(op))
        code = opdef.opcode
        n = len(self._kind)
        for v in operands:
            if v.__class__ is not int or not 0 <= v < n:
                self._check_operands(opdef, operands)
        if attrs:
            attr_id = self.intern_attrs(code, **attrs)
        else:
            attr_id = self._default_attr_id.get(code)
            if attr_id is None:
                self._check_leaf(opdef)
                attr_id = self._default_attr_id[code] = self.intern_attrs(code)
        dtype, shape = self._dtype, self._shape_id
        if len(operands) == 2:
            x, y = operands
            key: tuple[Any, ...] = (code, attr_id, dtype[x], shape[x], dtype[y], shape[y])
        elif len(operands) == 1:
            x = operands[0]
            key = (code, attr_id, dtype[x], shape[x])
        else:
            key = (code, attr_id, *[(dtype[v], shape[v]) for v in operands])
        result = self._type_cache.get(key)
        if result is None:
            self._check_leaf(opdef)
            if opdef.arity >= 0 and len(operands) != opdef.arity:
                raise TypeError(f"{opdef.name} takes {opdef.arity} operands, got {len(operands)}")
            result = self._type_cache[key] = self._infer(opdef, attr_id, operands)
        enc = opdef.encoding
        if enc == ENC_BINARY:
            a0, a1 = operands
        elif enc == ENC_UNARY:
            a0, a1 = operands[0], NONE
        elif enc == ENC_VARIADIC:
            a0, a1 = len(self._extra), len(operands)
            self._extra.extend(int(v) for v in operands)
        else:
            a0 = a1 = NONE
        return self._append(code, int(a0), int(a1), result[0], result[1], attr_id)

    @staticmethod
    def _check_leaf(opdef: ops.OpDef) -> None:
        if opdef.encoding == ENC_PARAM or opdef.opcode == ops.OP_CONST:
            raise ValueError(f"{opdef.name}: use GraphBuilder.{opdef.name}() instead of call()")

    def _check_operands(self, opdef: ops.OpDef, operands: Sequence[object]) -> None:
        n = len(self._kind)
        for pos, v in enumerate(operands):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 0 <= v < n:
                raise ValueError(f"{opdef.name}: operand {pos} must be a node id in [0, {n}), "
                                 f"got {v!r}")

    def _infer(self, opdef: ops.OpDef, attr_id: int, operands: Sequence[int]) -> tuple[int, int]:
        if self._dims.names:
            types = [(self._dtype[v], self._decoded(self._shape_id[v])) for v in operands]
        else:
            types = [(self._dtype[v], self._shapes[self._shape_id[v]]) for v in operands]
        try:
            attrs = dict(self._records[attr_id])
            if self._dims.names:
                refuse_symbolic(opdef, types)
                attrs = map_dims_attrs(opdef, attrs, self._sym.decode)
            code, shape = opdef.infer(types, attrs)
        except TypeInferenceError as exc:
            args = ", ".join(f"%{v}: {_fmt_type(*t)}" for v, t in zip(operands, types))
            raise ValueError(f"{opdef.name}: {exc} (operands {args})") from None
        try:
            return code, self.intern_shape(shape)
        except ValueError as exc:  # a result too large to address (e.g. broadcast_to)
            raise ValueError(f"{opdef.name}: result {exc}") from None

    def call_func(self, callee: str, *args: int, dtype: object, shape: Sequence[int]) -> int:
        """Call graph function ``callee`` of the module, whose one output is dtype[shape]."""
        return self.call("call_func", *args, callee=callee, dtype=dtype, shape=tuple(shape))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            ops.get_op(name)
        except ValueError:
            raise AttributeError(f"GraphBuilder has no attribute or op {name!r}") from None

        def call_op(*operands: int, **attrs: Any) -> int:
            return self.call(name, *operands, **attrs)

        call_op.__name__ = name
        object.__setattr__(self, name, call_op)  # later lookups skip __getattr__
        return call_op

    # -- bulk API -----------------------------------------------------------
    def add_scalar_consts(self, values: np.ndarray, dtype: object) -> np.ndarray:
        """Intern scalar constants at NumPy speed; returns their int32 const ids."""
        self._check_open()
        code = dtype_code(dtype)
        return self._consts.add_scalars(
            _convert_exact("add_scalar_consts", np.asarray(values), code), code)

    def add_tensor_consts(self, flat: np.ndarray, dtype: object, shape_ids: np.ndarray
                          ) -> np.ndarray:
        """Intern many constants of one dtype at once; returns their int32 const ids.

        ``flat`` holds their elements back to back, row-major; constant j has the
        shape ``shape_ids[j]`` (from :meth:`intern_shape`). Equal constants share an
        entry, as with :meth:`const`. For CONST nodes of :meth:`add_nodes`.
        """
        self._check_open()
        code = dtype_code(dtype)
        shape_ids = _check_bulk("shape_ids", shape_ids, np.int32, None)
        if len(shape_ids) and not 0 <= int(shape_ids.min()) <= int(shape_ids.max()) < len(
                self._shapes):
            raise ValueError("add_tensor_consts: shape_ids holds an unknown shape id")
        distinct, inverse = np.unique(shape_ids, return_inverse=True)
        if self._dims.names and any(d < 0 for s in distinct.tolist() for d in self._shapes[s]):
            raise ValueError("add_tensor_consts: a constant can not have a symbolic shape")
        sizes = np.array([math.prod(self._shapes[s]) for s in distinct.tolist()] or [0],
                         np.int64)[inverse]
        flat = _convert_exact("add_tensor_consts", np.asarray(flat).ravel(), code)
        if int(sizes.sum()) != len(flat):
            raise ValueError(f"add_tensor_consts: the shapes hold {int(sizes.sum())} elements, "
                             f"flat has {len(flat)}")
        return self._consts.add_tensors(flat, code, shape_ids, sizes)

    def add_nodes(self, kind: np.ndarray, a0: np.ndarray | None = None,
                  a1: np.ndarray | None = None, *, attr_id: np.ndarray | None = None,
                  extra: np.ndarray | None = None, dtype: np.ndarray | None = None,
                  shape_id: np.ndarray | None = None) -> np.ndarray:
        """Append whole columns at once; returns the new node ids (int32).

        ``kind`` is int16, the others int32 (``dtype`` int8), all 1-D C-contiguous.
        Operands are absolute node ids that must precede each node; a variadic
        node's ``a0`` is an offset into *this call's* ``extra``. CONST nodes name
        const ids from :meth:`add_scalar_consts`. ``attr_id`` defaults to each
        op's default attributes (intern others with :meth:`intern_attrs`). Types are inferred when
        ``dtype``/``shape_id`` are omitted and checked when given. PARAM nodes
        come only from :meth:`param`.
        """
        self._check_open()
        kind = _check_bulk("kind", kind, np.int16, None)
        n_new = len(kind)
        fill = np.full(n_new, NONE, np.int32)
        a0 = fill if a0 is None else _check_bulk("a0", a0, np.int32, n_new)
        a1 = fill if a1 is None else _check_bulk("a1", a1, np.int32, n_new)
        attr_id = (self._default_attr_ids(kind) if attr_id is None
                   else _check_bulk("attr_id", attr_id, np.int32, n_new))
        extra = (np.zeros(0, np.int32) if extra is None
                 else _check_bulk("extra", extra, np.int32, None))
        if (dtype is None) != (shape_id is None):
            raise ValueError("add_nodes: give both dtype and shape_id, or neither")
        if dtype is not None:  # checked before anything is appended
            dtype = _check_bulk("dtype", dtype, np.int8, n_new)
            shape_id = _check_bulk("shape_id", shape_id, np.int32, n_new)
        start = len(self._kind)
        if start + n_new > MAX_NODES:
            raise OverflowError(f"a Function holds at most {MAX_NODES} nodes")
        table = ops.op_arrays()
        if n_new and (int(kind.min()) < 0 or int(kind.max()) >= len(table.encoding)):
            raise ValueError("add_nodes: kind holds an unknown opcode")
        if n_new and np.any(table.encoding[kind] == ENC_PARAM):
            raise ValueError("add_nodes: PARAM nodes come only from GraphBuilder.param()")
        is_variadic = table.encoding[kind] == ENC_VARIADIC
        if np.any(is_variadic):
            starts, counts = a0[is_variadic].astype(np.int64), a1[is_variadic].astype(np.int64)
            bad = np.nonzero((starts < 0) | (counts < 0) | (starts + counts > len(extra)))[0]
            if len(bad):
                i = int(np.nonzero(is_variadic)[0][bad[0]])
                raise ValueError(f"add_nodes: node {start + i} ({ops.get_op(int(kind[i])).name}): "
                                 f"operands [{int(a0[i])}, {int(a0[i]) + int(a1[i])}) lie outside "
                                 f"this call's extra (length {len(extra)})")
            a0 = a0.copy()
            a0[is_variadic] += len(self._extra)
        try:
            self._kind.frombytes(_raw(kind))
        except BufferError:  # an exported column (see _unshare): grow private copies
            self._unshare()
            self._kind.frombytes(_raw(kind))
        self._a0.frombytes(_raw(a0))
        self._a1.frombytes(_raw(a1))
        self._attr_id.frombytes(_raw(attr_id))
        self._extra.frombytes(_raw(extra))
        if dtype is None:
            self._dtype.frombytes(bytes(n_new))
            self._shape_id.frombytes(bytes(4 * n_new))
        else:
            self._dtype.frombytes(_raw(dtype))
            self._shape_id.frombytes(_raw(shape_id))  # type: ignore[union-attr]
        try:
            self._type_new_nodes(start, check=dtype is not None)
        except Exception as exc:
            # The failed sweep's frames hold NumPy views of the columns; clear them
            # so the columns can shrink back and the builder stays usable.
            traceback.clear_frames(exc.__traceback__)
            self._truncate(start, len(self._extra) - len(extra))
            raise
        return np.arange(start, start + n_new, dtype=np.int32)

    def _default_attr_ids(self, kind: np.ndarray) -> np.ndarray:
        """Each node's op's default attribute set (one interning per distinct opcode)."""
        table = ops.op_arrays()
        if not len(kind) or int(kind.min()) < 0 or int(kind.max()) >= len(table.encoding):
            return np.zeros(len(kind), np.int32)  # bad opcodes are reported by add_nodes
        by_opcode = np.zeros(len(table.encoding), np.int32)
        for code in np.unique(kind).tolist():
            opdef = ops.get_op(code)
            if opdef.opcode != ops.OP_PARAM and opdef.opcode != ops.OP_CONST and all(
                    not spec.required for spec in opdef.attrs):
                by_opcode[code] = self.intern_attrs(code)
        return by_opcode[kind]

    def _truncate(self, n: int, n_extra: int) -> None:
        """Drop the nodes from ``n`` on (a failed ``add_nodes``); exported columns are
        unshared first (see ``_unshare``)."""
        try:
            for col in (self._kind, self._a0, self._a1, self._dtype, self._shape_id,
                        self._attr_id):
                del col[n:]
            del self._extra[n_extra:]
        except BufferError:
            self._unshare()
            self._truncate(n, n_extra)

    def _views(self) -> dict[str, np.ndarray]:
        """NumPy views of the columns, read-only as a finished Function's (so each kernel
        compiles one specialization); ``dtype_w``/``shape_id_w`` are the writeable ones."""
        v = {"kind": np.frombuffer(self._kind, np.int16), "a0": np.frombuffer(self._a0, np.int32),
             "a1": np.frombuffer(self._a1, np.int32), "dtype": np.frombuffer(self._dtype, np.int8),
             "shape_id": np.frombuffer(self._shape_id, np.int32),
             "attr_id": np.frombuffer(self._attr_id, np.int32),
             "extra": np.frombuffer(self._extra, np.int32)}
        v["dtype_w"], v["shape_id_w"] = v["dtype"], v["shape_id"]
        v["dtype"], v["shape_id"] = v["dtype"].view(), v["shape_id"].view()
        for name in ("kind", "a0", "a1", "dtype", "shape_id", "attr_id", "extra"):
            v[name].flags.writeable = False
        return v

    def _type_new_nodes(self, start: int, check: bool) -> None:
        v = self._views()
        pool = tuple(a.view() for a in self._consts.freeze_types())
        for a in pool:
            a.flags.writeable = False
        try:
            table = ops.op_arrays()
            bad, rule, detail = check_structure_kernel(
                v["kind"], v["a0"], v["a1"], v["extra"], v["dtype"], v["shape_id"], v["attr_id"],
                table.encoding, table.arity, len(pool[0]), len(self._params), len(self._shapes),
                len(self._records), start)
            if bad >= 0:
                raise ValueError(f"add_nodes: node {bad} ({ops.get_op(int(v['kind'][bad])).name}"
                                 f" if valid): {STRUCTURE_RULES[rule]} ({detail})")

            def type_of(i: int) -> tuple[int, int]:
                opdef = ops.get_op(int(v["kind"][i]))
                aid = int(v["attr_id"][i])
                record = self._records[aid]
                try:
                    normalized = opdef.normalize_attrs(dict(record))
                except TypeError:
                    normalized = None
                if normalized != record:
                    raise ValueError(f"add_nodes: node {i} ({opdef.name}): attribute set {aid} "
                                     f"{dict(record)} does not belong to {opdef.name}")
                operands = self._operands(v, opdef, i)
                try:
                    return self._infer(opdef, aid, operands)
                except ValueError as exc:
                    raise ValueError(f"add_nodes: node {i}: {exc}") from None

            bad = self._sigs.sweep(v["kind"], v["a0"], v["a1"], v["extra"], v["attr_id"],
                                   v["dtype_w"], v["shape_id_w"], pool[0], pool[1], start, check,
                                   type_of)
            if bad >= 0:
                got = _fmt_type(int(v["dtype"][bad]), self._decoded(int(v["shape_id"][bad])))
                raise ValueError(f"add_nodes: node {bad} ({ops.get_op(int(v['kind'][bad])).name})"
                                 f": given type {got} differs from the inferred one")
        finally:
            del v  # release the buffer exports so the arrays can grow again

    @staticmethod
    def _operands(v: dict[str, np.ndarray], opdef: ops.OpDef, i: int) -> list[int]:
        return operand_list(opdef.encoding, int(v["a0"][i]), int(v["a1"][i]), v["extra"])

    # -- finish -------------------------------------------------------------
    def _shape_table(self) -> ShapeTable:
        if not self._dims.names:
            return ShapeTable(self._shapes)
        return ShapeTable(self._shapes, self._sym.freeze())

    def finish(self, outputs: int | Sequence[int]) -> Function:
        """Freeze the graph with these outputs into an immutable Function."""
        self._check_open()
        outs = [outputs] if isinstance(outputs, (int, np.integer)) else list(outputs)
        n = len(self._kind)
        if not outs:
            raise ValueError(f"finish: function {self.name!r} needs at least one output")
        for o in outs:
            if not isinstance(o, (int, np.integer)) or isinstance(o, bool) or not 0 <= o < n:
                raise ValueError(f"finish: output {o!r} is not a node id in [0, {n})")
        self._finished = True
        self._n_finished = n

        def col(buf: array, dtype: type) -> np.ndarray:
            # The finished builder hands its buffers over (no copy); nothing can append now.
            arr = np.frombuffer(buf, dtype)
            arr.setflags(write=False)
            return arr

        func = Function(
            kind=col(self._kind, np.int16), a0=col(self._a0, np.int32),
            a1=col(self._a1, np.int32), dtype=col(self._dtype, np.int8),
            shape_id=col(self._shape_id, np.int32), attr_id=col(self._attr_id, np.int32),
            extra=col(self._extra, np.int32), params=np.array(self._params, np.int32),
            outputs=np.array(outs, np.int32), param_names=tuple(self._param_names),
            shapes=self._shape_table(), attr_table=AttrTable(self._records),
            consts=self._consts.freeze(), attrs=self._attrs)
        # The Function holds the only reference to the buffers: the builder lets go of
        # them, so nothing can write to a finished Function's columns through it.
        self._kind, self._a0, self._a1 = array("h"), array("i"), array("i")
        self._dtype, self._shape_id = array("b"), array("i")
        self._attr_id, self._extra = array("i"), array("i")
        # Every node passed the structural rules as it was added (call checks operands,
        # add_nodes runs check_structure_kernel, params and consts are built here), so
        # the cheap validation of passes and the interpreter has nothing left to do; every
        # node's type was inferred or checked as it was appended, so verify has none either.
        mark_verified(func)
        return mark_validated(func)
