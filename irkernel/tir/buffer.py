"""TIR buffers and buffer loads.

A :class:`Buffer` names an n-d array: its element dtype, its shape (ints or
int vars, for symbolic shapes), optional element strides (empty means
C-contiguous) and the byte alignment its data pointer is guaranteed to have.
Buffers are identified by name inside a PrimFunc (the verifier checks that
every use matches the declaration); ``buf[i, j]`` builds a
:class:`BufferLoad`, and ``buf[i, j] = v`` appends a store to the PrimFunc
being traced by :func:`irkernel.tir.script.prim_func`.
The store goes through the ``STORE`` hook, which ``irkernel.tir.script`` installs.
Imports ``irkernel.tir.expr``, ``construct``, ``dtype`` and ``irkernel.ir.hooks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from irkernel.ir.hooks import Hook
from irkernel.tir import dtype as dt
from irkernel.tir.construct import as_expr
from irkernel.tir.expr import IntImm, Node, PrimExpr, _depth, _set

#: ``store(buffer, indices, value)``: append ``buffer[indices] = value`` to the PrimFunc being
#: traced (RuntimeError outside a trace); installed by ``irkernel.tir.script``.
STORE = Hook("store to a buffer inside a @T.prim_func trace", "irkernel.tir.script")


def _as_index(value: Any, what: str) -> PrimExpr:
    expr = as_expr(value, dt.INDEX) if not isinstance(value, PrimExpr) else value
    if not dt.is_int(expr.dtype):
        raise TypeError(f"{what} must be an int expression, got {expr.dtype} ({expr!r})")
    return expr


@dataclass(frozen=True, slots=True)
class Buffer(Node):
    """An n-d array of ``dtype`` elements.

    Parameters
    ----------
    name : str
        An identifier, unique among the buffers of a PrimFunc.
    shape : tuple of int or PrimExpr
        Extents; ints become int64 immediates, ``Var``s make the shape symbolic
        (bound from the argument's shape when the kernel is called).
    dtype : str
        Element dtype (float32, float64, int32, int64, bool).
    strides : tuple of int or PrimExpr, optional
        Element strides per dimension; empty (the default) means C-contiguous.
    align : int, optional
        Guaranteed byte alignment of the data pointer; 0 means the element size.
    """

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str
    strides: tuple[PrimExpr, ...] = ()
    align: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"Buffer: name must be an identifier, got {self.name!r}")
        dtype = dt.normalize(self.dtype)
        if dt.lanes(dtype) != 1:
            raise TypeError(f"Buffer {self.name}: dtype must be an element dtype, got {dtype}")
        shape = self.shape if isinstance(self.shape, (tuple, list)) else (self.shape,)
        shape = tuple(_as_index(s, f"Buffer {self.name}: shape entry") for s in shape)
        for s in shape:
            if isinstance(s, IntImm) and s.value < 0:
                raise ValueError(f"Buffer {self.name}: negative extent {s.value}")
            if s.lanes != 1:
                raise TypeError(f"Buffer {self.name}: shape entries must be scalars")
        strides = tuple(_as_index(s, f"Buffer {self.name}: stride")
                        for s in (self.strides or ()))
        if strides and len(strides) != len(shape):
            raise ValueError(f"Buffer {self.name}: {len(strides)} strides for "
                             f"{len(shape)} dimensions")
        align = self.align or dt.ELEMENT_BYTES[dtype]
        if not isinstance(align, int) or align < dt.ELEMENT_BYTES[dtype] or align & (align - 1):
            raise ValueError(f"Buffer {self.name}: align must be a power of two >= the element "
                             f"size {dt.ELEMENT_BYTES[dtype]}, got {self.align!r}")
        _set(self, "dtype", dtype)
        _set(self, "shape", shape)
        _set(self, "strides", strides)
        _set(self, "align", align)
        _depth(self, *shape, *strides)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, index: Any) -> BufferLoad:
        return BufferLoad(self, _indices(index))

    def __setitem__(self, index: Any, value: Any) -> None:
        STORE(self, _indices(index), value)


def _indices(index: Any) -> tuple[Any, ...]:
    return index if isinstance(index, tuple) else (index,)


@dataclass(frozen=True, slots=True)
class BufferLoad(PrimExpr):
    """``buffer[indices]``; a vector index (``Ramp``) gives a vector of that many lanes."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    dtype: str = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.buffer, Buffer):
            raise TypeError(f"BufferLoad: expected a Buffer, got {self.buffer!r}")
        indices = index_tuple(self.buffer, self.indices, "BufferLoad")
        _set(self, "indices", indices)
        _set(self, "dtype", dt.with_lanes(self.buffer.dtype, index_lanes(indices)))
        _depth(self, *indices)


def index_tuple(buffer: Buffer, indices: Any, what: str) -> tuple[PrimExpr, ...]:
    """Indices as int expressions with one common vector width (checked)."""
    out = tuple(_as_index(i, f"{what} {buffer.name}: index") for i in indices)
    if len(out) != buffer.ndim:
        raise IndexError(f"{what} {buffer.name}: {len(out)} indices for a "
                         f"{buffer.ndim}-d buffer")
    widths = {i.lanes for i in out if i.lanes > 1}
    if len(widths) > 1:
        raise TypeError(f"{what} {buffer.name}: vector indices of different widths {widths}")
    return out


def index_lanes(indices: tuple[PrimExpr, ...]) -> int:
    return max((i.lanes for i in indices), default=1)


__all__ = ["Buffer", "BufferLoad", "index_lanes", "index_tuple"]
