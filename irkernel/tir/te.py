"""A small tensor-expression layer (TVM's ``te``) that writes PrimFuncs in canonical form.

Why: op templates (LegalizeOps) describe *what* each output element is, and
FuseTIR needs to read that description back to compose kernels. Both sides
agree on one shape of PrimFunc, the **canonical compute form**:

* injective (elementwise, broadcast, injective ops): a perfect nest of serial
  ``For`` loops over the output axes (one per axis, extent = the static dim,
  ``min`` 0, distinct vars ``i0, i1, ...``) whose innermost body is exactly
  one ``BufferStore(out, value, (i0, i1, ...))``; ``value`` reads the input
  buffers with ``BufferLoad`` at index expressions of the loop vars. A 0-d
  output has no loops.
* reduction: the nest over the output axes holds ``out[idx] = init``, then a
  nest of serial loops over the reduction axes (``k0, k1, ...``) with
  ``out[idx] = combine(out[idx], source)`` (or any ``update(out[idx])`` that
  reads ``out`` only at ``idx``: argmax compares a source element with the one
  at the index stored so far), then optionally a finishing store
  ``out[idx] = finish(out[idx])`` (mean divides by the count; average pooling
  by a count that depends on ``idx``; LRN rescales an input element).

:func:`create_prim_func` builds this form from :func:`placeholder` /
:func:`compute` tensors; :func:`extract_compute` is its inverse (None for any
PrimFunc that is not canonical, e.g. a scheduled matmul).

Composition: indexing a *non-reducing* compute tensor inlines its
expression (``b = compute(..., lambda i: a[i] * 2); c = compute(...,
lambda i: b[i] + 1)`` gives one store of ``a[i] * 2 + 1``), so templates can be
written in stages without intermediate buffers. Indexing a reduction tensor
is an error (a reduction is always the last stage).
Imports the TIR node modules only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.construct import as_expr, const
from irkernel.tir.expr import GT, LT, NE, Add, FloatImm, IntImm, Mul, Or, PrimExpr, Select, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import post_order, substitute
from irkernel.tir.stmt import BufferStore, For, SeqStmt, Stmt, seq

#: Names of the output axis vars and the reduction axis vars (canonical, deterministic).
AXIS_PREFIX, REDUCE_PREFIX = "i", "k"


@dataclass(frozen=True)
class ReduceAxis:
    """A reduction axis: an index var over ``[0, extent)`` (made by :func:`reduce_axis`)."""

    var: Var
    extent: int


@dataclass(frozen=True)
class Reduce:
    """A reduction, returned by :func:`sum`/:func:`max`/:func:`min`/:func:`prod`/
    :func:`mean`/:func:`reduce` inside an fcompute."""

    combiner: str  # "sum", "max", "min", "prod" or "custom" (``update`` gives the step)
    source: PrimExpr
    axes: tuple[ReduceAxis, ...]
    init: PrimExpr
    divisor: int | None = None  # mean: divide the finished sum by this count
    #: custom step: the accumulator's next value from its current one (a load of the output)
    update: Callable[[PrimExpr], PrimExpr] | None = None
    #: finishing expression of the accumulator (after the reduction nest), or None
    finish: Callable[[PrimExpr], PrimExpr] | None = None


@dataclass(frozen=True, eq=False)
class Tensor:
    """A placeholder (an input buffer) or the result of :func:`compute`."""

    buffer: Buffer
    axes: tuple[Var, ...] = ()
    body: PrimExpr | Reduce | None = None  # None: a placeholder

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s.value) for s in self.buffer.shape)  # type: ignore[attr-defined]

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def ndim(self) -> int:
        return self.buffer.ndim

    def __getitem__(self, index: Any) -> PrimExpr:
        idx = index if isinstance(index, tuple) else (index,)
        idx = tuple(as_expr(i, dt.INDEX) for i in idx)
        if len(idx) != self.ndim:
            raise IndexError(f"te tensor {self.buffer.name}: {len(idx)} indices for a "
                             f"{self.ndim}-d tensor")
        if self.body is None:
            return BufferLoad(self.buffer, idx)
        if isinstance(self.body, Reduce):
            raise ValueError(f"te tensor {self.buffer.name}: a reduction cannot be read by "
                             "another compute (it must be the output)")
        return substitute(self.body, {v.name: e for v, e in zip(self.axes, idx, strict=True)})


def _static_shape(shape: Sequence[int], what: str) -> tuple[int, ...]:
    out = []
    for d in shape:
        if isinstance(d, bool) or (not isinstance(d, int) and not hasattr(d, "__index__")):
            raise TypeError(f"{what}: shape entries must be ints, got {d!r}")
        if int(d) < 0:
            raise ValueError(f"{what}: negative extent {d}")
        out.append(int(d))
    return tuple(out)


def placeholder(shape: Sequence[int], dtype: str, name: str) -> Tensor:
    """An input tensor of static ``shape`` and ``dtype`` (becomes a buffer parameter)."""
    return Tensor(Buffer(name, _static_shape(shape, f"placeholder {name}"), dtype))


def compute(shape: Sequence[int], fcompute: Callable[..., PrimExpr | Reduce], name: str,
            dtype: str | None = None) -> Tensor:
    """The tensor whose element at ``(i0, i1, ...)`` is ``fcompute(i0, i1, ...)``.

    ``fcompute`` returns a PrimExpr (or a :class:`Reduce`); ``dtype`` (default:
    the expression's) converts nothing, it is checked.
    """
    shape = _static_shape(shape, f"compute {name}")
    axes = tuple(Var(f"{AXIS_PREFIX}{k}", dt.INDEX) for k in range(len(shape)))
    body = fcompute(*axes)
    if isinstance(body, Reduce):
        got = body.init.dtype
    else:
        body = as_expr(body)
        got = body.dtype
    if dtype is not None and dt.normalize(dtype) != got:
        raise TypeError(f"compute {name}: expression is {got}, expected {dtype}")
    return Tensor(Buffer(name, shape, got), axes, body)


def reduce_axis(extent: int, index: int = 0) -> ReduceAxis:
    """A reduction axis over ``[0, extent)``; ``index`` numbers it (var ``k<index>``)."""
    return ReduceAxis(Var(f"{REDUCE_PREFIX}{index}", dt.INDEX), int(extent))


def reduce_axes(extents: Sequence[int]) -> tuple[ReduceAxis, ...]:
    """Reduction axes ``k0, k1, ...`` over ``extents``."""
    return tuple(reduce_axis(e, k) for k, e in enumerate(extents))


def _axes(axis: ReduceAxis | Sequence[ReduceAxis]) -> tuple[ReduceAxis, ...]:
    return (axis,) if isinstance(axis, ReduceAxis) else tuple(axis)


def min_value(dtype: str) -> PrimExpr:
    """The identity of ``max``: -inf for floats, the smallest int otherwise."""
    if dt.is_float(dtype):
        return FloatImm(float("-inf"), dtype)
    return IntImm(dt.int_range(dtype)[0], dtype)


def max_value(dtype: str) -> PrimExpr:
    """The identity of ``min``: +inf for floats, the largest int otherwise."""
    if dt.is_float(dtype):
        return FloatImm(float("inf"), dtype)
    return IntImm(dt.int_range(dtype)[1], dtype)


def sum(source: PrimExpr, axis: ReduceAxis | Sequence[ReduceAxis]) -> Reduce:
    """Sum of ``source`` over the reduction axes, accumulated in its dtype (ints wrap)."""
    return Reduce("sum", source, _axes(axis), const(0, source.dtype))


def max(source: PrimExpr, axis: ReduceAxis | Sequence[ReduceAxis]) -> Reduce:
    """NaN-propagating max of ``source`` over the reduction axes."""
    return Reduce("max", source, _axes(axis), min_value(source.dtype))


def min(source: PrimExpr, axis: ReduceAxis | Sequence[ReduceAxis]) -> Reduce:
    """NaN-propagating min of ``source`` over the reduction axes."""
    return Reduce("min", source, _axes(axis), max_value(source.dtype))


def prod(source: PrimExpr, axis: ReduceAxis | Sequence[ReduceAxis]) -> Reduce:
    """Product of ``source`` over the reduction axes, in its dtype (ints wrap)."""
    return Reduce("prod", source, _axes(axis), const(1, source.dtype))


def reduce(update: Callable[[PrimExpr], PrimExpr], init: PrimExpr,
           axis: ReduceAxis | Sequence[ReduceAxis],
           finish: Callable[[PrimExpr], PrimExpr] | None = None) -> Reduce:
    """A general reduction: ``acc = init``, then ``acc = update(acc)`` at every point of the
    reduction axes (in row-major order), then ``acc = finish(acc)``.

    ``update`` and ``finish`` receive the accumulator as an expression (a load of the
    output at the output axes); they may read inputs anywhere, the output only there.
    """
    init = as_expr(init)
    return Reduce("custom", init, _axes(axis), init, update=update, finish=finish)


def with_finish(red: Reduce, finish: Callable[[PrimExpr], PrimExpr]) -> Reduce:
    """``red`` with a finishing expression of its accumulator (after any mean divisor)."""
    if red.divisor is not None:
        count = red.divisor
        return Reduce(red.combiner, red.source, red.axes, red.init, update=red.update,
                      finish=lambda acc: finish(acc / const(count, acc.dtype)))
    if red.finish is not None:
        inner = red.finish
        return Reduce(red.combiner, red.source, red.axes, red.init, update=red.update,
                      finish=lambda acc: finish(inner(acc)))
    return Reduce(red.combiner, red.source, red.axes, red.init, update=red.update,
                  finish=finish)


def mean(source: PrimExpr, axis: ReduceAxis | Sequence[ReduceAxis]) -> Reduce:
    """Float sum divided by the element count (np.mean's arithmetic, in the input dtype)."""
    axes = _axes(axis)
    if not dt.is_float(source.dtype):
        raise TypeError(f"te.mean: float sources only, got {source.dtype}")
    count = 1
    for ax in axes:
        count *= ax.extent
    return Reduce("sum", source, axes, const(0, source.dtype), divisor=count)


def combine(combiner: str, acc: PrimExpr, value: PrimExpr) -> PrimExpr:
    """One reduction step. max/min: ``value`` when it is greater/smaller or NaN (so NaN
    sticks)."""
    if combiner == "sum":
        return Add(acc, value)
    if combiner == "prod":
        return Mul(acc, value)
    if combiner in ("max", "min"):
        cond = GT(value, acc) if combiner == "max" else LT(value, acc)
        if dt.is_float(value.dtype):
            cond = Or(cond, NE(value, value))
        return Select(cond, value, acc)
    raise ValueError(f"te: unknown combiner {combiner!r}")


# ---------------------------------------------------------------------------
# Tensor -> PrimFunc
# ---------------------------------------------------------------------------


def _nest(vars_: Sequence[Var], extents: Sequence[int], body: Stmt) -> Stmt:
    for v, n in zip(reversed(vars_), reversed(extents), strict=True):
        body = For(v, IntImm(0, dt.INDEX), IntImm(n, dt.INDEX), "serial", body)
    return body


def _reduction_stores(red: Reduce, acc: BufferLoad
                      ) -> tuple[PrimExpr, PrimExpr, PrimExpr | None]:
    """The values a reduction stores: init, the step (reads ``acc``), the finish or None."""
    step = red.update(acc) if red.update is not None else combine(red.combiner, acc, red.source)
    finish = None
    if red.divisor is not None:
        finish = acc / const(red.divisor, acc.dtype)
    elif red.finish is not None:
        finish = as_expr(red.finish(acc))
    return red.init, step, finish


def _check_stored(e: PrimExpr, out: Buffer, acc: BufferLoad, names: set[str],
                  reads_acc: bool) -> None:
    """A stored value has the output's dtype and reads inputs (and, in a reduction's step
    or finish, the accumulator ``acc``) only."""
    if e.dtype != out.dtype:
        raise TypeError(f"create_prim_func: a stored expression is {e.dtype}, "
                        f"the output {out.dtype}")
    for node in post_order(e):
        if not isinstance(node, BufferLoad) or node.buffer.name in names:
            continue
        if not reads_acc or node != acc:
            raise ValueError(f"create_prim_func: the output reads {node.buffer.name}, "
                             "which is not among the inputs")


def create_prim_func(inputs: Sequence[Tensor], output: Tensor,
                     attrs: Mapping[str, Any] | None = None) -> PrimFunc:
    """The canonical-form PrimFunc computing ``output`` from ``inputs`` (params: inputs, out).

    Raises ValueError when the output reads a placeholder that is not listed.
    """
    if output.body is None:
        raise ValueError(f"create_prim_func: output {output.buffer.name} is a placeholder")
    for t in inputs:
        if t.body is not None:
            raise ValueError(f"create_prim_func: input {t.buffer.name} is not a placeholder")
    params = tuple(t.buffer for t in inputs)
    names = {b.name for b in params}
    out = output.buffer
    if out.name in names:
        raise ValueError(f"create_prim_func: output name {out.name!r} repeats an input's")
    body_expr = output.body
    idx = output.axes
    acc = BufferLoad(out, idx)
    if isinstance(body_expr, Reduce):
        init, step, finish = _reduction_stores(body_expr, acc)
        _check_stored(init, out, acc, names, reads_acc=False)
        for e in (step, finish) if finish is not None else (step,):
            _check_stored(e, out, acc, names, reads_acc=True)
    else:
        _check_stored(body_expr, out, acc, names, reads_acc=False)
    if isinstance(body_expr, Reduce):
        red = body_expr
        inner = [BufferStore(out, init, idx),
                 _nest([a.var for a in red.axes], [a.extent for a in red.axes],
                       BufferStore(out, step, idx))]
        if finish is not None:
            inner.append(BufferStore(out, finish, idx))
        stmt: Stmt = SeqStmt(tuple(inner))
    else:
        stmt = BufferStore(out, body_expr, idx)
    body = _nest(idx, output.shape, stmt)
    return PrimFunc((*params, out), body, dict(attrs or {}))


# ---------------------------------------------------------------------------
# PrimFunc -> description (the inverse, for FuseTIR)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ComputeDesc:
    """What a canonical PrimFunc computes.

    ``axes`` are the output loop vars (``extents`` their dims). Injective:
    ``value`` is the stored expression and the reduction fields are empty.
    Reduction: ``init`` is stored first, ``update`` (which reads ``output`` at
    ``axes``) for every point of ``reduce_axes``, then ``finish`` (or None);
    ``combiner``/``source`` are set when ``update`` is a te ``sum``/``max``/``min``/``prod``
    step.
    """

    inputs: tuple[Buffer, ...]
    output: Buffer
    axes: tuple[Var, ...]
    extents: tuple[int, ...]
    value: PrimExpr | None = None
    init: PrimExpr | None = None
    reduce_axes: tuple[tuple[Var, int], ...] = ()
    update: PrimExpr | None = None
    finish: PrimExpr | None = None
    combiner: str | None = None
    source: PrimExpr | None = None

    @property
    def is_reduction(self) -> bool:
        return self.update is not None


def _peel(stmt: Stmt, count: int | None, taken: set[str]) -> tuple[list[For], Stmt] | None:
    """Serial loops with min 0 and constant extent from the top of ``stmt`` (``count`` of them
    exactly, or as many as there are)."""
    loops: list[For] = []
    while isinstance(stmt, For) and (count is None or len(loops) < count):
        if (stmt.kind != "serial" or not isinstance(stmt.min, IntImm) or stmt.min.value != 0
                or not isinstance(stmt.extent, IntImm) or stmt.loop_var.name in taken
                or stmt.annotations):
            return None
        taken.add(stmt.loop_var.name)
        loops.append(stmt)
        stmt = stmt.body
    if count is not None and len(loops) != count:
        return None
    return loops, stmt


def _reads(expr: PrimExpr, buf: Buffer) -> list[BufferLoad]:
    return [n for n in post_order(expr) if isinstance(n, BufferLoad) and n.buffer.name == buf.name]


def _is_store_at(s: Stmt, out: Buffer, idx: tuple[Var, ...]) -> bool:
    return isinstance(s, BufferStore) and s.buffer == out and s.indices == idx


def _match_combine(update: PrimExpr, acc: BufferLoad) -> tuple[str, PrimExpr] | None:
    for cls, name in ((Add, "sum"), (Mul, "prod")):
        if isinstance(update, cls) and update.a == acc and not _reads(update.b, acc.buffer):
            return name, update.b
    if isinstance(update, Select) and update.false_value == acc:
        src = update.true_value
        if _reads(src, acc.buffer):
            return None
        for name in ("max", "min"):
            if combine(name, acc, src) == update:
                return name, src
    return None


def extract_compute(func: PrimFunc) -> ComputeDesc | None:
    """The :class:`ComputeDesc` of a canonical-form PrimFunc, or None when it is not one."""
    if not isinstance(func, PrimFunc) or not func.params:
        return None
    bufs = func.params
    if not all(isinstance(b, Buffer) and not b.strides for b in bufs):
        return None
    if not all(isinstance(s, IntImm) for b in bufs for s in b.shape):
        return None
    out = bufs[-1]
    inputs = tuple(bufs[:-1])
    peeled = _peel(func.body, out.ndim, set())
    if peeled is None:
        return None
    loops, inner = peeled
    extents = tuple(int(s.value) for s in out.shape)  # type: ignore[attr-defined]
    if tuple(int(f.extent.value) for f in loops) != extents:  # type: ignore[attr-defined]
        return None
    axes = tuple(f.loop_var for f in loops)
    taken = {v.name for v in axes}
    if _is_store_at(inner, out, axes):
        assert isinstance(inner, BufferStore)
        if _reads(inner.value, out):
            return None
        return ComputeDesc(inputs, out, axes, extents, value=inner.value)
    return _reduction_desc(inputs, out, axes, extents, inner, taken)


def _reduction_desc(inputs: tuple[Buffer, ...], out: Buffer, axes: tuple[Var, ...],
                    extents: tuple[int, ...], inner: Stmt, taken: set[str]) -> ComputeDesc | None:
    """The reduction part of :func:`extract_compute`: init; reduce nest; optional finish."""
    if not isinstance(inner, SeqStmt) or len(inner.stmts) not in (2, 3):
        return None
    first, nest = inner.stmts[0], inner.stmts[1]
    if not _is_store_at(first, out, axes) or _reads(first.value, out):  # type: ignore[union-attr]
        return None
    red = _peel(nest, None, taken)
    if red is None or not red[0]:
        return None
    rloops, step = red
    if not _is_store_at(step, out, axes):
        return None
    assert isinstance(step, BufferStore)
    assert isinstance(first, BufferStore)
    acc = BufferLoad(out, axes)
    if any(r != acc for r in _reads(step.value, out)):
        return None
    finish = None
    if len(inner.stmts) == 3:
        last = inner.stmts[2]
        if not _is_store_at(last, out, axes):
            return None
        assert isinstance(last, BufferStore)
        if any(r != acc for r in _reads(last.value, out)):
            return None
        finish = last.value
    matched = _match_combine(step.value, acc)
    return ComputeDesc(inputs, out, axes, extents, init=first.value,
                       reduce_axes=tuple((f.loop_var, int(f.extent.value))  # type: ignore
                                         for f in rloops),
                       update=step.value, finish=finish,
                       combiner=matched[0] if matched else None,
                       source=matched[1] if matched else None)


def prim_func_from_desc(desc: ComputeDesc, attrs: Mapping[str, Any] | None = None) -> PrimFunc:
    """Rebuild the canonical PrimFunc of a description (``extract``'s inverse)."""
    out, idx = desc.output, desc.axes
    if desc.update is None:
        assert desc.value is not None
        stmt: Stmt = BufferStore(out, desc.value, idx)
    else:
        assert desc.init is not None
        rvars = [v for v, _ in desc.reduce_axes]
        parts = [BufferStore(out, desc.init, idx),
                 _nest(rvars, [n for _, n in desc.reduce_axes], BufferStore(out, desc.update, idx))]
        if desc.finish is not None:
            parts.append(BufferStore(out, desc.finish, idx))
        stmt = seq(*parts)
    return PrimFunc((*desc.inputs, out), _nest(idx, desc.extents, stmt), dict(attrs or {}))


__all__ = ["ComputeDesc", "Reduce", "ReduceAxis", "Tensor", "combine", "compute",
           "create_prim_func", "extract_compute", "max", "max_value", "mean", "min",
           "min_value", "placeholder", "prim_func_from_desc", "prod", "reduce", "reduce_axes",
           "reduce_axis", "sum", "with_finish"]
