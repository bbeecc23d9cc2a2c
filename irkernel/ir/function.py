"""The graph ``Function``: a dataflow graph stored as typed NumPy columns.

A Function holds no Python object per node. Per-node columns (length n):
``kind`` int16 opcode, ``a0``/``a1`` int32 operand slots whose meaning is the
op's encoding (see ``irkernel.ir.ops``), ``dtype`` int8, ``shape_id`` int32 and
``attr_id`` int32. ``extra`` int32 holds variadic operand lists; ``params`` and
``outputs`` are int32 node ids. Operands always precede their user
(topological order), so every analysis is a forward or reverse sweep.
Finished columns are read-only; passes build new Functions. Equality is
identity (``out is inp`` means "unchanged"); use ``structural_equal`` to
compare contents. A Function pickles (protocol 5: columns and constants out
of band, see ``irkernel.ir.pickling``) and is validated when it loads.
Imports numpy and irkernel internals only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.errors import IRError
from irkernel.ir.hooks import Hook
from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.operands import operand_list
from irkernel.ir.pickling import (
    pool_from_state,
    pool_state,
    readonly,
    tables_from_state,
    tables_state,
)
from irkernel.ir.pools import AttrTable, ConstPool, ShapeTable

#: ``print_function(func, name) -> str``, installed by the text layer.
PRINT_FUNCTION = Hook("print a graph Function", "irkernel.text.printer")
#: ``check_loaded(func)``: validate an unpickled Function, installed by ``irkernel.ir.validate``.
CHECK_LOADED = Hook("validate an unpickled Function", "irkernel.ir.validate")

_COLUMNS = {"kind": np.int16, "a0": np.int32, "a1": np.int32, "dtype": np.int8,
            "shape_id": np.int32, "attr_id": np.int32, "extra": np.int32,
            "params": np.int32, "outputs": np.int32}


def freeze_column(name: str, arr: object) -> np.ndarray:
    """The column as a read-only C-contiguous array of its fixed dtype.

    Copies only when the dtype or layout is wrong; never aliases a writeable array.
    """
    want = _COLUMNS[name]
    out = np.asarray(arr)
    if out.dtype != want:
        raise TypeError(f"column {name!r} must be {np.dtype(want).name}, got {out.dtype}")
    if out.ndim != 1:
        raise ValueError(f"column {name!r} must be 1-D, got shape {out.shape}")
    if out.flags.writeable or not out.flags.c_contiguous:
        out = np.array(out, order="C")
        out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False, slots=True, weakref_slot=True)
class Function:
    """An immutable graph function. Build one with :class:`irkernel.GraphBuilder`."""

    kind: np.ndarray
    a0: np.ndarray
    a1: np.ndarray
    dtype: np.ndarray
    shape_id: np.ndarray
    attr_id: np.ndarray
    extra: np.ndarray
    params: np.ndarray
    outputs: np.ndarray
    param_names: tuple[str, ...]
    shapes: ShapeTable
    attr_table: AttrTable
    consts: ConstPool
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in _COLUMNS:
            object.__setattr__(self, name, freeze_column(name, getattr(self, name)))
        # Lists become tuples so attribute values are hashable and round-trip through text.
        attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in self.attrs.items()}
        object.__setattr__(self, "attrs", MappingProxyType(attrs))
        object.__setattr__(self, "param_names", tuple(self.param_names))
        n = len(self.kind)
        for name in ("a0", "a1", "dtype", "shape_id", "attr_id"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"column {name!r} has length {len(getattr(self, name))}, "
                                 f"expected {n} (length of 'kind')")
        if len(self.param_names) != len(self.params):
            raise ValueError("param_names and params differ in length")

    # -- size ---------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return len(self.kind)

    def __len__(self) -> int:
        return len(self.kind)

    @property
    def nbytes(self) -> int:
        """Bytes held by the columns and the constant pool (the graph's own arrays)."""
        cols = sum(getattr(self, name).nbytes for name in _COLUMNS)
        return cols + self.consts.nbytes

    # -- attributes ---------------------------------------------------------
    def with_attr(self, key: str, value: Any) -> Function:
        """A Function sharing every array, with one function attribute set."""
        return self.with_attrs({key: value})

    def with_attrs(self, attrs: Mapping[str, Any]) -> Function:
        if all(k in self.attrs and self.attrs[k] is v for k, v in attrs.items()):
            return self
        return replace(self, attrs={**self.attrs, **attrs})

    def without_attr(self, key: str) -> Function:
        if key not in self.attrs:
            return self
        return replace(self, attrs={k: v for k, v in self.attrs.items() if k != key})

    # -- per-node views (debugging, printing, tests; not for hot paths) ------
    def op(self, node_id: int) -> ops.OpDef:
        return ops.get_op(int(self.kind[node_id]))

    def operands(self, node_id: int) -> tuple[int, ...]:
        """The node's operand ids, read from its slots as its op's encoding says.

        Plain Python over NumPy slices, never a kernel: it is safe on a Function that
        has not been validated (a malformed node gives its slots' values, or an
        IRError for an unknown opcode), and costs O(1) per call.
        """
        n = len(self.kind)
        if not isinstance(node_id, (int, np.integer)) or not 0 <= node_id < n:
            raise ValueError(f"operands: node id must be in [0, {n}), got {node_id!r}")
        k = int(self.kind[node_id])
        encoding = ops.op_arrays().encoding
        if not 0 <= k < len(encoding):
            raise IRError(f"operands: node {node_id} has opcode {k}, not in the op table")
        return tuple(operand_list(int(encoding[k]), int(self.a0[node_id]),
                                  int(self.a1[node_id]), self.extra))

    def node_attrs(self, node_id: int) -> dict[str, Any]:
        return self.attr_table.as_dict(int(self.attr_id[node_id]))

    def node_type(self, node_id: int) -> tuple[str, tuple[Any, ...]]:
        """(dtype name, shape) of a node's value; symbolic dims are ``SymDim`` objects."""
        return (DTYPE_NAMES[int(self.dtype[node_id])],
                self.shapes.decode(int(self.shape_id[node_id])))

    def const_value(self, node_id: int) -> np.ndarray:
        """The value of a CONST node."""
        if int(self.kind[node_id]) != ops.OP_CONST:
            raise ValueError(f"node {node_id} is not a const")
        return self.consts.value(int(self.a0[node_id]), self.shapes)

    def signature(self) -> tuple[list[tuple[str, tuple[int, ...]]], list[tuple[str, tuple[int, ...]]]]:
        """([(dtype, shape) of each param], [(dtype, shape) of each output])."""
        return ([self.node_type(int(p)) for p in self.params],
                [self.node_type(int(o)) for o in self.outputs])

    # -- pickling -----------------------------------------------------------
    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """``(load_function, state)``: columns as arrays (out of band with protocol 5)."""
        return (load_function, (*(getattr(self, name) for name in _COLUMNS), self.param_names,
                                *tables_state(self.shapes, self.attr_table),
                                pool_state(self.consts), dict(self.attrs)))

    # -- text ---------------------------------------------------------------
    def script(self, name: str | None = None) -> str:
        return PRINT_FUNCTION(self, name or str(self.attrs.get("global_symbol", "main")))

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        name = self.attrs.get("global_symbol", "<private>")
        return (f"<Function {name}: {self.num_nodes} nodes, {len(self.params)} params, "
                f"{len(self.outputs)} outputs>")


def load_function(*state: Any) -> Function:
    """Rebuild a pickled Function (:meth:`Function.__reduce__`) and validate it.

    The columns keep the memory they were unpickled into (read-only, no copy
    unless misaligned, see ``irkernel.ir.pickling``).

    Raises
    ------
    TypeError
        When the state does not have the shape of a pickled Function.
    irkernel.IRError
        When the loaded Function breaks an invariant (``irkernel.ir.validate``: the
        cheap column check every compiled entry relies on; types are ``verify``'s).
    """
    if len(state) != len(_COLUMNS) + 5:
        raise TypeError(f"a pickled Function has {len(_COLUMNS) + 5} fields, got {len(state)}")
    columns = {name: readonly(arr, _COLUMNS[name], f"column {name!r}")
               for name, arr in zip(_COLUMNS, state, strict=False)}
    param_names, shapes, records, pool, attrs = state[len(_COLUMNS):]
    shape_table, attr_table = tables_from_state(shapes, records)
    func = Function(**columns, param_names=param_names, shapes=shape_table,
                    attr_table=attr_table, consts=pool_from_state(pool), attrs=attrs)
    CHECK_LOADED(func)
    return func
