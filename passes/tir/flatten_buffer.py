"""FlattenBuffer: n-d buffer accesses become 1-d accesses through element strides.

Every load and store of a buffer with more than one dimension, zero
dimensions or explicit strides is rewritten to index the buffer's 1-d view:
``a[i, j]`` of a C-contiguous ``(m, n)`` buffer reads ``a_flat[i * n + j]``;
with declared strides ``(s0, s1)`` it reads ``a_flat[i * s0 + j * s1]``.
The view keeps the buffer's name, dtype and alignment, with one extent: the
element count (contiguous) or the addressed span ``1 + sum((n_k - 1) * s_k)``.
Allocations are flattened the same way.

Parameters keep their n-d declarations: they are the calling convention
(the runtime checks argument shapes and strides against them). The result
carries the attribute ``tir.flattened = True``, which tells the verifier that
body buffers are 1-d views of the declarations. A PrimFunc whose buffers are
all 1-d and contiguous is returned unchanged. Vector indices flatten the
same way (``Ramp`` arithmetic is left to Simplify).
"""

from __future__ import annotations

from typing import Any

from irkernel import transform
from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.construct import binary, cast
from irkernel.tir.expr import Add as _Add
from irkernel.tir.expr import Broadcast, FloorDiv, FloorMod, IntImm, PrimExpr
from irkernel.tir.expr import Mul as _Mul
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import Mutator
from irkernel.tir.stmt import Allocate, BufferStore, Stmt


def _mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.value * b.value, a.dtype)
    if isinstance(b, IntImm) and b.value == 1:
        return a
    if isinstance(a, IntImm) and a.value == 1:
        return b
    return binary(_Mul, a, b)


def _add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.value + b.value, a.dtype)
    if isinstance(a, IntImm) and a.value == 0:
        return b
    if isinstance(b, IntImm) and b.value == 0:
        return a
    return binary(_Add, a, b)


def element_strides(buf: Buffer) -> tuple[PrimExpr, ...]:
    """The declared strides, or the C-contiguous ones (in elements)."""
    if buf.strides:
        return buf.strides
    out: list[PrimExpr] = []
    step: PrimExpr = IntImm(1, dt.INDEX)
    for extent in reversed(buf.shape):
        out.append(step)
        step = _mul(step, _index(extent))
    return tuple(reversed(out))


def needs_flattening(buf: Buffer) -> bool:
    return buf.ndim != 1 or bool(buf.strides)


def flat_buffer(buf: Buffer) -> Buffer:
    """The 1-d view of ``buf`` (itself if it already is one)."""
    if not needs_flattening(buf):
        return buf
    shape = tuple(_index(s) for s in buf.shape)
    if buf.strides:
        size: PrimExpr = IntImm(1, dt.INDEX)
        for extent, stride in zip(shape, buf.strides, strict=True):
            size = _add(size, _mul(_add(extent, IntImm(-1, dt.INDEX)), _index(stride)))
    else:
        size = IntImm(1, dt.INDEX)
        for extent in shape:
            size = _mul(size, extent)
    return Buffer(buf.name, (size,), buf.dtype, (), buf.align)


def _index(e: PrimExpr) -> PrimExpr:
    """An index expression in int64 (int32 shape vars and indices are widened)."""
    return e if e.dtype.startswith(dt.INDEX) else cast(dt.with_lanes(dt.INDEX, e.lanes), e)


def _split_pair(a: PrimExpr, b: PrimExpr, extent: PrimExpr) -> PrimExpr | None:
    """``x`` when ``(a, b)`` is ``(x // e, x % e)`` with ``e`` the extent of ``b``'s axis."""
    if (isinstance(a, FloorDiv) and isinstance(b, FloorMod) and isinstance(extent, IntImm)
            and isinstance(a.b, IntImm) and isinstance(b.b, IntImm)
            and a.b.value == b.b.value == extent.value > 0
            and a.a == b.a):
        return a.a
    return None


def flat_index(buf: Buffer, indices: tuple[PrimExpr, ...]) -> PrimExpr:
    """``sum(index_k * stride_k)`` in int64 (``0`` for a 0-d buffer).

    A split pair of adjacent axes of a contiguous buffer, ``(x // e, x % e)`` where ``e``
    is the second axis's extent, contributes ``x * stride`` of the second axis: exact
    (``(x // e) * e + x % e == x`` with floor division, for every ``x``), and it keeps a
    flat pixel index contiguous (a vector store stays a vector store after vectorizing).
    Pairs chain from the right: ``(k // 9, (k % 9) // 3, (k % 9) % 3)`` over axes of
    extents ``(C, 3, 3)`` is ``k`` (a flat position in a conv weight's ``(c, kh, kw)``).
    """
    strides = element_strides(buf)
    terms: list[PrimExpr] = []
    k = len(indices) - 1
    while k >= 0:
        x, first = indices[k], k  # the run of axes [first, k] merged into x
        span = buf.shape[k]
        while first > 0 and not buf.strides and isinstance(span, IntImm):
            merged = _split_pair(indices[first - 1], x, span)
            if merged is None:
                break
            x, first = merged, first - 1
            extent = buf.shape[first]
            span = IntImm(span.value * extent.value, span.dtype) \
                if isinstance(extent, IntImm) else None
        terms.append(_mul(_index(x), _index(strides[k])))
        k = first - 1
    total: PrimExpr = IntImm(0, dt.INDEX)
    for term in reversed(terms):
        total = _add(total, term)
    lanes = max((i.lanes for i in indices), default=1)
    if total.lanes != lanes:
        total = Broadcast(total, lanes)
    return total


class _Flattener(Mutator):
    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        e = self.generic(e)
        if not needs_flattening(e.buffer):
            return e
        return BufferLoad(flat_buffer(e.buffer), (flat_index(e.buffer, e.indices),))

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        s = self.generic(s)
        if not needs_flattening(s.buffer):
            return s
        return BufferStore(flat_buffer(s.buffer), s.value, (flat_index(s.buffer, s.indices),))

    def visit_Allocate(self, s: Allocate) -> Stmt:
        body = self.visit(s.body)
        return s.replace(buffer=flat_buffer(s.buffer), body=body)


def flatten_buffer(func: PrimFunc) -> PrimFunc:
    """Flatten every buffer access of ``func`` (see the module docstring).

    Returns
    -------
    PrimFunc
        ``func`` itself when every buffer is already 1-d and contiguous.
    """
    if func.attrs.get("tir.flattened", False):
        return func
    body = _Flattener().visit(func.body)
    if body is func.body:
        return func
    return func.with_body(body).with_attr("tir.flattened", True)


def FlattenBuffer() -> transform.PrimFuncPass:
    """Flatten n-d buffer accesses to 1-d (opt level 0; lowering needs it)."""

    def run(func: PrimFunc, mod: Any, ctx: transform.PassContext) -> PrimFunc:
        del mod, ctx
        return flatten_buffer(func)

    return transform.prim_func_pass(run, opt_level=0, name="FlattenBuffer")


transform.register_pass("FlattenBuffer", FlattenBuffer)

__all__ = ["FlattenBuffer", "element_strides", "flat_buffer", "flat_index", "flatten_buffer"]
