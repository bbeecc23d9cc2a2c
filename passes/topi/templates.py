"""TIR templates of the built-in graph ops (the ``legalize`` hook of each OpDef).

A template maps ``(operand types, attrs, result type)`` to a private
``tir.PrimFunc`` in canonical compute form (``irkernel.tir.te``) with
parameters ``x0, x1, ..., out`` (static shapes, destination passing) and the
attrs ``op_pattern`` and ``op_name``. Importing this module installs them with
:func:`irkernel.ir.ops.set_legalize`; a user-registered op brings its own through
``OpDef(legalize=...)``.

Semantics follow the op table's references exactly where they are exact:
binary ops broadcast as NumPy (a size-1 axis reads index 0, missing leading
axes are dropped); ``maximum``/``minimum``/``relu`` are written as selects
that reproduce ``ops.references.nan_max``/``nan_min`` bit for bit (NaN from the first
operand wins, ``x if x > y else y`` fixes the signed-zero result; LLVM's
``maximum`` would pick +0.0); int ``divide`` is TIR floor division (x // 0 is
0, INT_MIN // -1 wraps, as NumPy); ``astype`` is TIR ``Cast`` (float -> int
saturates, NaN -> 0: LLVM's ``fptosi.sat``, like ``ops.astype_reference``);
``less``/``greater`` on bools compare them as int32. ``concat`` selects
between clamped loads so no operand is ever read out of bounds.

Where the results are only close: exp/log/tanh/sigmoid/power/erf/trig are TIR math
calls (LLVM intrinsics; libm on scalars, a vector math library on vectors;
NumPy in ``tir.interpret``), while the reference uses Numba's libm calls, so
they agree to a few ulps. Float ``sum``/``mean``/``matmul`` accumulate
sequentially (or in the tiled matmul's order) where NumPy sums pairwise or
uses BLAS: equal within float tolerance, exact for ints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from irkernel.ir import ops
from irkernel.ir.ids import DTYPE_NAMES, FLOAT_DTYPES
from irkernel.ir.ops import (
    BROADCAST,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OUT_EWISE_FUSABLE,
    REDUCE,
    TensorType,
    normalize_axes,
    permutation,
)
from irkernel.tir import te
from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.construct import call, cast, const, eq, ne, select, truncmod
from irkernel.tir.expr import FloorDiv, FloorMod, IntImm, Max, Min, Not, PrimExpr, Var
from irkernel.tir.function import Attrs, PrimFunc
from irkernel.target import CPUTarget
from irkernel.tir.stmt import BufferStore, For, Stmt, seq
from passes.topi import movement, nn, recurrent, selection
from passes.topi.movement import nan_max, nan_min
from passes.topi.transpose import blocked_ok, blocked_transpose
from passes.topi.tuned import TileTable, tuned_tiles
from passes.topi.vector import current_target
from passes.topi.winograd import winograd_enabled

Shape = tuple[int, ...]
Template = Callable[[Sequence[TensorType], Mapping[str, Any], TensorType], PrimFunc]


def _idx(v: int) -> PrimExpr:
    return IntImm(v, "int64")


def broadcast_index(in_shape: Shape, out_index: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
    """Index of an operand of ``in_shape`` broadcast to an output indexed by ``out_index``."""
    lead = len(out_index) - len(in_shape)
    return tuple(_idx(0) if d == 1 else out_index[lead + a] for a, d in enumerate(in_shape))


def _inputs(types: Sequence[TensorType]) -> list[te.Tensor]:
    return [te.placeholder(s, DTYPE_NAMES[c], f"x{k}") for k, (c, s) in enumerate(types)]


def _finish(name: str, pattern: int, inputs: Sequence[te.Tensor], out: te.Tensor) -> PrimFunc:
    return te.create_prim_func(inputs, out, {"op_name": name, "op_pattern": pattern})


# ---------------------------------------------------------------------------
# elementwise and broadcasting ops
# ---------------------------------------------------------------------------


def _is_float(x: PrimExpr) -> bool:
    return x.dtype in ("float32", "float64")


def _as_int(x: PrimExpr) -> PrimExpr:
    return cast("int32", x) if x.dtype == "bool" else x


_BINARY: dict[str, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    "add": lambda x, y: x + y,
    "subtract": lambda x, y: x - y,
    "multiply": lambda x, y: x * y,
    "divide": lambda x, y: x / y if _is_float(x) else FloorDiv(x, y),
    "maximum": nan_max,
    "minimum": nan_min,
    "power": lambda x, y: call("pow", x, y),
    "equal": eq,
    "less": lambda x, y: _as_int(x) < _as_int(y),
    "greater": lambda x, y: _as_int(x) > _as_int(y),
    "logical_and": lambda x, y: x & y,
    "logical_or": lambda x, y: x | y,
    "logical_xor": ne,
    # np.mod: TIR floor remainder (codegen follows NumPy's npy_divmod for floats; ints % 0 = 0)
    "floor_mod": FloorMod,
    # C fmod: frem for floats, truncated remainder for ints (x % 0 == 0, INT_MIN % -1 == 0)
    "fmod": lambda x, y: call("fmod", x, y) if _is_float(x) else truncmod(x, y),
}


def _sigmoid(x: PrimExpr) -> PrimExpr:
    one = const(1, x.dtype)
    return one / (one + call("exp", -x))


def _relu(x: PrimExpr) -> PrimExpr:
    return nan_max(x, const(0, x.dtype))


_UNARY: dict[str, Callable[[PrimExpr], PrimExpr]] = {
    "negative": lambda x: -x,
    "exp": lambda x: call("exp", x),
    "log": lambda x: call("log", x),
    "sqrt": lambda x: call("sqrt", x),
    "tanh": lambda x: call("tanh", x),
    "sigmoid": _sigmoid,
    "relu": _relu,
    "abs": lambda x: call("fabs", x) if _is_float(x) else call("abs", x),
    "erf": lambda x: call("erf", x),
    "floor": lambda x: call("floor", x),
    "ceil": lambda x: call("ceil", x),
    "round": lambda x: call("round", x),  # llvm.roundeven: half to even, as np.round
    "logical_not": Not,
    # sin/cos: LLVM intrinsics; tan ... atanh: libm calls (irkernel.tir.expr.LIBM_TRIG)
    **{name: (lambda n: lambda x: call(n, x))(name) for name in ops.TRIG_OPS},
}


def _elementwise(name: str, fn: Callable[..., PrimExpr], pattern: int) -> Template:
    def template(types: Sequence[TensorType], attrs: Mapping[str, Any],
                 result: TensorType) -> PrimFunc:
        xs = _inputs(types)
        out = te.compute(result[1], lambda *i: fn(*(x[broadcast_index(x.shape, i)]
                                                    for x in xs)), "out")
        return _finish(name, pattern, xs, out)
    return template


def _astype(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    (x,) = _inputs(types)
    target = DTYPE_NAMES[result[0]]
    out = te.compute(result[1], lambda *i: cast(target, x[i]), "out")
    return _finish("astype", ELEMWISE, [x], out)


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------


def _reduction(name: str) -> Template:
    def template(types: Sequence[TensorType], attrs: Mapping[str, Any],
                 result: TensorType) -> PrimFunc:
        (x,) = _inputs(types)
        axes = normalize_axes(attrs["axis"], x.ndim)
        keep = attrs["keepdims"]
        if not axes:  # nothing to reduce: sum/max/mean of one element each is the element
            out = te.compute(result[1], lambda *i: x[i], "out")
            return _finish(name, REDUCE, [x], out)
        rk = te.reduce_axes([x.shape[a] for a in axes])

        def fcompute(*i: PrimExpr) -> te.Reduce:
            index: list[PrimExpr] = []
            kept = iter(a for k, a in enumerate(i) if not keep or k not in axes)
            red = iter(rk)
            for a in range(x.ndim):
                index.append(next(red).var if a in axes else next(kept))
            return getattr(te, name)(x[tuple(index)], rk)

        return _finish(name, REDUCE, [x], te.compute(result[1], fcompute, "out"))
    return template


def _arg_reduction(name: str) -> Template:
    """argmax/argmin: a te.reduce over the axis whose accumulator is the best index so far;
    each step compares the element at ``k`` with the one at the stored index."""
    is_max = name == "argmax"

    def template(types: Sequence[TensorType], attrs: Mapping[str, Any],
                 result: TensorType) -> PrimFunc:
        (x,) = _inputs(types)
        (axis,) = normalize_axes((attrs["axis"],), x.ndim)
        keep, last = attrs["keepdims"], attrs["select_last_index"]
        (rk,) = te.reduce_axes([x.shape[axis]])

        def fcompute(*i: PrimExpr) -> te.Reduce:
            outer = [v for a, v in enumerate(i) if not (keep and a == axis)]

            def at(k: PrimExpr) -> PrimExpr:
                return x[(*outer[:axis], k, *outer[axis:])]

            def update(acc: PrimExpr) -> PrimExpr:
                v, best = at(rk.var), at(acc)
                if last:  # ties (and NaNs) move the index on: the last one wins
                    wins = (v >= best) if is_max else (v <= best)
                else:
                    wins = (v > best) if is_max else (v < best)
                if _is_float(v):  # NaN is the max (argmax) / min (argmin), as in NumPy
                    v_nan, best_nan = ne(v, v), ne(best, best)
                    wins = (v_nan | (~best_nan & wins)) if last else (
                        (v_nan & ~best_nan) | wins)
                return select(wins, rk.var, acc)

            return te.reduce(update, const(0, "int64"), rk)

        return _finish(name, REDUCE, [x], te.compute(result[1], fcompute, "out"))
    return template


# ---------------------------------------------------------------------------
# layout ops
# ---------------------------------------------------------------------------


def _strides(shape: Shape) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _reshape(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    (x,) = _inputs(types)
    new = result[1]

    def fcompute(*i: PrimExpr) -> PrimExpr:
        if x.shape == new:
            return x[i]
        flat: PrimExpr = _idx(0)
        for v, s, d in zip(i, _strides(new), new, strict=True):
            if d != 1:
                flat = flat + v * s if s != 1 else flat + v
        index = []
        for a, (s, d) in enumerate(zip(_strides(x.shape), x.shape, strict=True)):
            if d == 1:
                index.append(_idx(0))
                continue
            q = FloorDiv(flat, _idx(s)) if s != 1 else flat
            index.append(q if a == 0 else FloorMod(q, _idx(d)))
        return x[tuple(index)]

    return _finish("reshape", INJECTIVE, [x], te.compute(new, fcompute, "out"))


def _permute(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    (x,) = _inputs(types)
    perm = permutation(attrs["axes"], x.ndim)
    in_shape = tuple(types[0][1])
    if blocked_ok(in_shape, tuple(perm)):
        return blocked_transpose(in_shape, tuple(perm), DTYPE_NAMES[types[0][0]])
    inverse = [perm.index(a) for a in range(x.ndim)]
    out = te.compute(result[1], lambda *i: x[tuple(i[inverse[a]] for a in range(x.ndim))], "out")
    return _finish("permute_dims", INJECTIVE, [x], out)


def _broadcast_to(types: Sequence[TensorType], attrs: Mapping[str, Any],
                  result: TensorType) -> PrimFunc:
    (x,) = _inputs(types)
    out = te.compute(result[1], lambda *i: x[broadcast_index(x.shape, i)], "out")
    return _finish("broadcast_to", BROADCAST, [x], out)


#: A concat of more than one non-empty part is a sequence of copy loops, one per part. The
#: select form (``out[i] = select(i < n0, x0[i], select(..., x1[i - n0], ...))``) is
#: canonical, so FuseOps fused the parts' producers into it; but a select evaluates both
#: sides, so each output element then computed *every* part's producer, and a concat of
#: concats (a SplitConcat tree) multiplied that per level: a chain of 2,000 steps ran
#: 1.6 s instead of milliseconds. Copy loops are opaque: the producers stay kernels of
#: their own, and each element is computed once and copied once per level.
CONCAT_SELECT_PARTS = 1
#: Copy loops of more parts than this take the minimal LLVM tier (code grows with the
#: parts, and O3 on thousands of loops costs seconds; runtime/target.py says why).
CONCAT_MINIMAL_TIER_PARTS = 64


def _concat_loops(types: Sequence[TensorType], axis: int, result: TensorType) -> PrimFunc:
    """``out[..., offset_k + i, ...] = x_k[..., i, ...]``, one loop nest per non-empty part."""
    dtype = DTYPE_NAMES[result[0]]
    xs = [Buffer(f"x{k}", shape, DTYPE_NAMES[code]) for k, (code, shape) in enumerate(types)]
    out = Buffer("out", result[1], dtype)
    nests: list[Stmt] = []
    offset = 0
    for k, x in enumerate(xs):
        shape = types[k][1]
        if shape[axis] and all(shape):
            index = [Var(f"i{d}", dt.INDEX) for d in range(len(shape))]
            at = list(index)
            if offset:
                at[axis] = index[axis] + _idx(offset)
            body: Stmt = BufferStore(out, BufferLoad(x, tuple(index)), tuple(at))
            for v, n in zip(reversed(index), reversed(shape), strict=True):
                body = For(v, _idx(0), _idx(n), "serial", body)
            nests.append(body)
        offset += shape[axis]
    attrs: dict[str, Any] = {"op_name": "concat", "op_pattern": OPAQUE}
    if len(nests) > CONCAT_MINIMAL_TIER_PARTS:
        attrs["llvm_tier"] = "minimal"
    return PrimFunc((*xs, out), seq(*nests), Attrs(attrs))


def _concat(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    (axis,) = normalize_axes((attrs["axis"],), len(result[1]))
    if sum(1 for _, shape in types if shape[axis]) > CONCAT_SELECT_PARTS:
        return _concat_loops(types, axis, result)
    xs = _inputs(types)
    parts, offset = [], 0
    for x in xs:
        if x.shape[axis]:
            parts.append((x, offset))
        offset += x.shape[axis]

    def fcompute(*i: PrimExpr) -> PrimExpr:
        def load(x: te.Tensor, start: int) -> PrimExpr:
            at = i[axis] - start if start else i[axis]
            n = x.shape[axis]
            if start:  # clamp: selects evaluate both sides, so every load stays in bounds
                at = Max(at, _idx(0))
            if start + n < result[1][axis]:
                at = Min(at, _idx(n - 1))
            return x[(*i[:axis], at, *i[axis + 1:])]

        def pick(lo: int, hi: int) -> PrimExpr:  # a balanced select tree: depth log2(n)
            if hi - lo == 1:
                return load(*parts[lo])
            mid = (lo + hi) // 2
            return select(i[axis] < parts[mid][1], pick(lo, mid), pick(mid, hi))

        return pick(0, len(parts))

    if not parts:  # every operand is empty along the axis: so is the result
        out = te.compute(result[1], lambda *i: const(0, DTYPE_NAMES[result[0]]), "out")
    else:
        out = te.compute(result[1], fcompute, "out")
    return _finish("concat", INJECTIVE, xs, out)


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------


def _matmul(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    (ca, sa), (_cb, sb) = types
    if len(sa) >= 2 and len(sb) >= 2 and ca in FLOAT_DTYPES:
        from passes.topi.matmul import scheduled_batch_matmul, scheduled_matmul

        fast = scheduled_matmul(sa[0], sb[1], sa[1], DTYPE_NAMES[ca]) \
            if len(sa) == 2 and len(sb) == 2 else \
            scheduled_batch_matmul(tuple(sa), tuple(sb), DTYPE_NAMES[ca])
        if fast is not None:
            return fast.with_attr("op_name", "matmul").with_attr(
                "op_pattern", OUT_EWISE_FUSABLE)
    a, b = _inputs(types)
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    a_batch = () if a_vec else sa[:-2]
    b_batch = () if b_vec else sb[:-2]
    n_batch = max(len(a_batch), len(b_batch))
    (rk,) = te.reduce_axes([sa[-1]])
    k = rk.var

    def fcompute(*i: PrimExpr) -> te.Reduce:
        batch, rest = i[:n_batch], list(i[n_batch:])
        row = None if a_vec else rest.pop(0)
        col = None if b_vec else rest.pop(0)
        ia = (*broadcast_index(a_batch, batch), *(() if a_vec else (row,)), k)
        ib = (*broadcast_index(b_batch, batch), k, *(() if b_vec else (col,)))
        return te.sum(a[ia] * b[ib], rk)

    return _finish("matmul", OUT_EWISE_FUSABLE, [a, b], te.compute(result[1], fcompute, "out"))


# ---------------------------------------------------------------------------
# installation
# ---------------------------------------------------------------------------


def _where(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    return _elementwise("where", select, BROADCAST)(types, attrs, result)


TEMPLATES: dict[str, Template] = {
    **{name: _elementwise(name, fn, BROADCAST) for name, fn in _BINARY.items()},
    **{name: _elementwise(name, fn, ELEMWISE) for name, fn in _UNARY.items()},
    "where": _where,
    "astype": _astype,
    "sum": _reduction("sum"),
    "max": _reduction("max"),
    "mean": _reduction("mean"),
    "min": _reduction("min"),
    "prod": _reduction("prod"),
    "argmax": _arg_reduction("argmax"),
    "argmin": _arg_reduction("argmin"),
    **movement.TEMPLATES,
    **nn.TEMPLATES,
    **selection.TEMPLATES,
    **recurrent.TEMPLATES,
    "reshape": _reshape,
    "permute_dims": _permute,
    "broadcast_to": _broadcast_to,
    "concat": _concat,
    "matmul": _matmul,
}


def legalize_op(opcode: int, record: tuple[tuple[str, Any], ...],
                types: tuple[TensorType, ...], result: TensorType) -> PrimFunc:
    """The op's PrimFunc for one signature (memoized per template: PrimFuncs are immutable).

    Raises ValueError naming the op when it has no template.
    """
    op = ops.get_op(opcode)
    if op.legalize is None:
        raise ValueError(f"op {op.name!r} has no TIR template (OpDef.legalize is None)")
    return _legalize_cached(op.legalize, op.name, record, types, result, current_target(),
                            tuned_tiles(), winograd_enabled())


@lru_cache(maxsize=4096)
def _legalize_cached(template: Template, name: str, record: tuple[tuple[str, Any], ...],
                     types: tuple[TensorType, ...], result: TensorType,
                     target: CPUTarget, tuned: TileTable, winograd: bool) -> PrimFunc:
    # ``target``, ``tuned`` and ``winograd`` are only part of the key: the templates read
    # their tiles from them, and ``nn.conv`` its choice of Winograd (``topi.winograd``)
    func = template(list(types), dict(record), result)
    if not isinstance(func, PrimFunc):
        raise TypeError(f"op {name!r}: legalize returned {type(func).__name__}, "
                        "expected a tir.PrimFunc")
    return func


def install() -> None:
    """Set the legalize hook of every built-in op that has a template (idempotent)."""
    for name, template in TEMPLATES.items():
        if ops.get_op(name).legalize is not template:
            ops.set_legalize(name, template)


install()

__all__ = ["TEMPLATES", "broadcast_index", "install", "legalize_op", "nan_max", "nan_min"]
