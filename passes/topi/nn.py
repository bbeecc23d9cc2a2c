"""TIR templates of the NN ops: conv, conv_transpose, max_pool, avg_pool, lrn.

Every template is a canonical te reduction (``irkernel.tir.te``): a nest over the output
axes around ``out = init``, a nest over the reduction axes (channels of a group, then the
kernel positions, row-major) and, for avg_pool and lrn, a finishing store. FuseOps
therefore treats them like matmul (``out_ewise_fusable``: an elementwise epilogue such as
a bias add and a relu moves into the same nest). FuseTIR could also inline an injective
producer (a pad) into their loads, but FuseOps, following TVM's rules, does not group one
with an ``out_ewise_fusable`` op. They are the correct, fusable baselines; convs and
conv_transposes above a few thousand multiply-adds (any groups, 1-3 spatial axes, float32
or float64) and float32 max pools use the schedules of ``passes/topi/conv.py``,
``conv_transpose.py`` and ``pool.py`` instead, chosen here per signature (the canonical convs ran 15-80x
slower than onnxruntime).

Padding is a select: a tap outside the input reads a clamped (in-bounds) index and is
replaced by 0 (conv, avg_pool) or -inf (max_pool: padding never wins); conditions and
clamps are left out on axes where every tap is provably inside. conv_transpose gathers:
output ``y`` receives ``x[q] * w[k]`` where ``y + pad_begin - k * dilation = q * stride``
with ``0 <= q < size``. avg_pool divides by onnxruntime's divisor, computed from the
output index (``nn_rules.pool_divisors`` is the same count in Python).
Imports ``irkernel.ir``, ``irkernel.tir`` and the scheduled templates of ``passes.topi``
(``conv``, ``conv_stem``, ``conv_transpose``, ``pool``, ``winograd``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.ops.nn_rules import (
    Window,
    pool_divisors,
    pool_window,
    sliding_window,
    transpose_window,
)
from irkernel.ir.ops.opdef import OUT_EWISE_FUSABLE, TensorType
from irkernel.tir import dtype as dt
from irkernel.tir import te
from irkernel.tir.construct import call, cast, const, eq, select
from irkernel.tir.expr import FloorDiv, FloorMod, IntImm, Max, Min, PrimExpr
from irkernel.tir.function import PrimFunc
from passes.topi.conv import (
    conv_ok,
    depthwise_ok,
    gemv_ok,
    scheduled_conv,
    scheduled_depthwise2d,
    scheduled_gemv,
)
from passes.topi.conv_channels import packable_if_worth
from passes.topi.conv_stem import scheduled_stem, stem_ok
from passes.topi.conv_transpose import conv_transpose_ok, scheduled_conv_transpose
from passes.topi.pool import avg_pool_rows, max_pool_rows, pool_ok
from passes.topi.winograd import scheduled_winograd, winograd_ok, winograd_worth


def _idx(v: int) -> PrimExpr:
    return IntImm(v, dt.INDEX)


def _inputs(types: Sequence[TensorType]) -> list[te.Tensor]:
    return [te.placeholder(s, DTYPE_NAMES[c], f"x{k}") for k, (c, s) in enumerate(types)]


def _finish(name: str, inputs: Sequence[te.Tensor], out: te.Tensor) -> PrimFunc:
    return te.create_prim_func(inputs, out, {"op_name": name, "op_pattern": OUT_EWISE_FUSABLE})


def _affine(o: PrimExpr, stride: int, k: PrimExpr, dilation: int, offset: int) -> PrimExpr:
    """``o * stride + k * dilation + offset`` without the no-op terms."""
    e = o * _idx(stride) if stride != 1 else o
    e = e + (k * _idx(dilation) if dilation != 1 else k)
    return e + _idx(offset) if offset else e


def _all(conds: list[PrimExpr]) -> PrimExpr | None:
    out = None
    for c in conds:
        out = c if out is None else out & c
    return out


def _window_taps(win: Window, outs: Sequence[PrimExpr], ks: Sequence[PrimExpr]
                 ) -> tuple[list[PrimExpr], PrimExpr | None]:
    """The input index of each spatial axis (clamped where a tap can fall outside) and the
    condition that the tap is inside (None when it always is)."""
    index, conds = [], []
    for a in range(win.rank):
        e = _affine(outs[a], win.strides[a], ks[a], win.dilation[a], -win.pad_begin[a])
        first = -win.pad_begin[a]
        last = ((win.out[a] - 1) * win.strides[a] + win.dilation[a] * (win.kernel[a] - 1)
                - win.pad_begin[a])
        if first < 0:
            conds.append(e >= _idx(0))
            e = Max(e, _idx(0))
        if last > win.size[a] - 1:
            conds.append(e < _idx(win.size[a]))
            e = Min(e, _idx(win.size[a] - 1))
        index.append(e)
    return index, _all(conds)


# ---------------------------------------------------------------------------
# conv, conv_transpose
# ---------------------------------------------------------------------------


def implicit_gemm_args(types: Sequence[TensorType], attrs: Mapping[str, Any],
                       result: TensorType) -> tuple[Any, ...] | None:
    """The arguments of ``scheduled_conv`` for a conv that runs as the implicit GEMM
    (``runtime.tune`` times its tiles), or None when another schedule takes it."""
    (cx, sx), (_, sw) = types
    win = sliding_window(sx[2:], sw[2:], attrs)
    g, dtype = attrs["groups"], DTYPE_NAMES[cx]
    if gemv_ok(sx, sw, g, dtype, win.out, win.strides, win.pad_begin, win.pad_end) \
            or depthwise_ok(sx, sw, g, dtype) or not conv_ok(sx, sw, g, dtype) \
            or winograd_args(types, attrs) is not None or stem_args(types, attrs) is not None:
        return None
    return (sx, sw, g, win.strides, win.pad_begin, win.pad_end, win.dilation, win.out, dtype)


def winograd_args(types: Sequence[TensorType], attrs: Mapping[str, Any]
                  ) -> tuple[Any, ...] | None:
    """The arguments of ``scheduled_winograd`` for a stride-1 3x3 conv that the cost rule
    and the config ``topi.winograd`` give to Winograd F(2x2,3x3), else None."""
    (cx, sx), (_, sw) = types
    win = sliding_window(sx[2:], sw[2:], attrs)
    if not winograd_ok(sx, sw, attrs["groups"], DTYPE_NAMES[cx], win.strides, win.dilation,
                       (*win.pad_begin, *win.pad_end)) or not winograd_worth(sx, sw, win.out):
        return None
    return (sx, sw, win.pad_begin, win.out)


def stem_args(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The arguments of ``scheduled_stem`` for a conv over an image of a few channels
    (``conv_stem.stem_ok``), else None."""
    (cx, sx), (_, sw) = types
    win = sliding_window(sx[2:], sw[2:], attrs)
    dtype = DTYPE_NAMES[cx]
    if not conv_ok(sx, sw, attrs["groups"], dtype) \
            or not stem_ok(sx, sw, attrs["groups"], dtype, win.out):
        return None
    return (sx, sw, win.strides, win.pad_begin, win.pad_end, win.dilation, win.out, dtype)


def conv(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    x, w = _inputs(types)
    win = sliding_window(x.shape[2:], w.shape[2:], attrs)
    g = attrs["groups"]
    (cx, sx), (_, sw) = types
    dtype = DTYPE_NAMES[cx]
    fast = None
    gemm = implicit_gemm_args(types, attrs, result)
    wino = winograd_args(types, attrs)
    stem = stem_args(types, attrs)
    if wino is not None:
        fast = scheduled_winograd(*wino)
    elif stem is not None:
        fast = scheduled_stem(*stem)
    elif gemm is not None:
        fast = packable_if_worth(scheduled_conv(*gemm), *gemm)
    elif gemv_ok(sx, sw, g, dtype, win.out, win.strides, win.pad_begin, win.pad_end):
        fast = scheduled_gemv(sx, sw, g, win.strides, win.pad_begin, win.dilation, win.out)
    elif depthwise_ok(sx, sw, g, dtype):
        fast = scheduled_depthwise2d(sx, sw, win.strides, win.pad_begin, win.pad_end,
                                     win.dilation, win.out, dtype)
    if fast is not None:
        return fast.with_attr("op_name", "conv").with_attr("op_pattern", OUT_EWISE_FUSABLE)
    cg, og = x.shape[1] // g, w.shape[0] // g
    axes = te.reduce_axes([cg, *win.kernel])
    rc, rk = axes[0].var, [a.var for a in axes[1:]]

    def fcompute(n: PrimExpr, o: PrimExpr, *sp: PrimExpr) -> te.Reduce:
        c = rc if g == 1 else FloorDiv(o, _idx(og)) * _idx(cg) + rc
        index, inside = _window_taps(win, sp, rk)
        v = x[(n, c, *index)]
        if inside is not None:
            v = select(inside, v, const(0, x.dtype))
        return te.sum(v * w[(o, rc, *rk)], axes)

    return _finish("conv", [x, w], te.compute(result[1], fcompute, "out"))


def conv_transpose(types: Sequence[TensorType], attrs: Mapping[str, Any],
                   result: TensorType) -> PrimFunc:
    x, w = _inputs(types)
    win = transpose_window(x.shape[2:], w.shape[2:], attrs)
    g = attrs["groups"]
    (cx, sx), (_, sw) = types
    if conv_transpose_ok(sx, sw, DTYPE_NAMES[cx]):
        fast = scheduled_conv_transpose(sx, sw, g, win.strides, win.pad_begin, win.dilation,
                                        win.out, DTYPE_NAMES[cx])
        return fast.with_attr("op_name", "conv_transpose").with_attr("op_pattern",
                                                                     OUT_EWISE_FUSABLE)
    cg, og = x.shape[1] // g, w.shape[1]
    axes = te.reduce_axes([cg, *win.kernel])
    rc, rk = axes[0].var, [a.var for a in axes[1:]]

    def fcompute(n: PrimExpr, o: PrimExpr, *sp: PrimExpr) -> te.Reduce:
        c = rc if g == 1 else FloorDiv(o, _idx(og)) * _idx(cg) + rc
        index, conds = [], []
        for a in range(win.rank):
            # the tap's position in the full (uncropped) output: y + pad_begin - k * dilation
            t = _affine(sp[a], 1, rk[a], -win.dilation[a], win.pad_begin[a])
            s = win.strides[a]
            q = FloorDiv(t, _idx(s)) if s != 1 else t
            if s != 1:
                conds.append(eq(FloorMod(t, _idx(s)), _idx(0)))
            conds += [t >= _idx(0), q < _idx(win.size[a])]
            index.append(Min(Max(q, _idx(0)), _idx(win.size[a] - 1)))
        oo = o if g == 1 else FloorMod(o, _idx(og))
        # the product under the select: a tap outside the input contributes 0, even when
        # its weight is NaN or inf (0 * nan is nan), as in the reference and onnxruntime
        v = select(_all(conds), x[(n, c, *index)] * w[(c, oo, *rk)], const(0, x.dtype))
        return te.sum(v, axes)

    return _finish("conv_transpose", [x, w], te.compute(result[1], fcompute, "out"))


# ---------------------------------------------------------------------------
# pooling, lrn
# ---------------------------------------------------------------------------


def max_pool(types: Sequence[TensorType], attrs: Mapping[str, Any],
             result: TensorType) -> PrimFunc:
    (x,) = _inputs(types)
    win = pool_window(x.shape, attrs)
    (cx, sx), = types
    if pool_ok(sx, win.kernel, win.strides, win.pad_begin, win.dilation, win.out,
               DTYPE_NAMES[cx]):
        fast = max_pool_rows(sx, win.kernel, win.strides, win.pad_begin, win.dilation,
                             win.out)
        return fast.with_attr("op_name", "max_pool").with_attr("op_pattern",
                                                               OUT_EWISE_FUSABLE)
    axes = te.reduce_axes(win.kernel)

    def fcompute(n: PrimExpr, c: PrimExpr, *sp: PrimExpr) -> te.Reduce:
        index, inside = _window_taps(win, sp, [a.var for a in axes])
        v = x[(n, c, *index)]
        if inside is not None:
            v = select(inside, v, te.min_value(x.dtype))
        return te.max(v, axes)

    return _finish("max_pool", [x], te.compute(result[1], fcompute, "out"))


def _divisor(win: Window, a: int, o: PrimExpr, count_include_pad: bool) -> PrimExpr:
    """The divisor factor of axis ``a`` at output index ``o`` (``pool_divisors`` as TIR):
    a constant when it is the same everywhere, else a count of the taps in range."""
    counts = pool_divisors(win, a, count_include_pad)
    if len(set(counts)) == 1:
        return _idx(counts[0])
    lo = -win.pad_begin[a] if count_include_pad else 0
    hi = win.size[a] + (win.pad_end[a] if count_include_pad else 0)
    d, k = win.dilation[a], win.kernel[a]
    base = _affine(o, win.strides[a], _idx(0), 1, -win.pad_begin[a])
    # taps base + j*d for j in [0, k): the first j with base + j*d >= lo, the last < hi
    first = Max(FloorDiv(_idx(lo + d - 1) - base, _idx(d)), _idx(0))
    last = Min(FloorDiv(_idx(hi - 1) - base, _idx(d)), _idx(k - 1))
    return Max(last - first + _idx(1), _idx(1))


def avg_pool(types: Sequence[TensorType], attrs: Mapping[str, Any],
             result: TensorType) -> PrimFunc:
    (x,) = _inputs(types)
    win = pool_window(x.shape, attrs)
    cip = attrs["count_include_pad"]
    (cx, sx), = types
    if pool_ok(sx, win.kernel, win.strides, win.pad_begin, win.dilation, win.out,
               DTYPE_NAMES[cx]):
        divisors = tuple(tuple(pool_divisors(win, a, cip)) for a in range(2))
        bounds = ((-win.pad_begin[0], win.size[0] + win.pad_end[0], -win.pad_begin[1],
                   win.size[1] + win.pad_end[1]) if cip else (0, win.size[0], 0, win.size[1]))
        fast = avg_pool_rows(sx, win.kernel, win.strides, win.pad_begin, win.dilation, win.out,
                             divisors, bounds)
        return fast.with_attr("op_name", "avg_pool").with_attr("op_pattern",
                                                               OUT_EWISE_FUSABLE)
    axes = te.reduce_axes(win.kernel)

    def fcompute(n: PrimExpr, c: PrimExpr, *sp: PrimExpr) -> te.Reduce:
        index, inside = _window_taps(win, sp, [a.var for a in axes])
        v = x[(n, c, *index)]
        if inside is not None:
            v = select(inside, v, const(0, x.dtype))
        div: PrimExpr = _idx(1)
        for a in range(win.rank):
            factor = _divisor(win, a, sp[a], cip)
            div = factor if a == 0 else div * factor
        return te.with_finish(te.sum(v, axes), lambda acc: acc / cast(x.dtype, div))

    return _finish("avg_pool", [x], te.compute(result[1], fcompute, "out"))


def lrn(types: Sequence[TensorType], attrs: Mapping[str, Any], result: TensorType) -> PrimFunc:
    (x,) = _inputs(types)
    size = attrs["size"]
    lo, channels = (size - 1) // 2, x.shape[1]
    (rk,) = te.reduce_axes([size])
    dtype = x.dtype

    def fcompute(n: PrimExpr, c: PrimExpr, *rest: PrimExpr) -> te.Reduce:
        src = c + rk.var - _idx(lo) if lo else c + rk.var
        v = x[(n, Min(Max(src, _idx(0)), _idx(channels - 1)), *rest)]
        sq = select((src >= _idx(0)) & (src < _idx(channels)), v * v, const(0, dtype))
        scale_of = const(attrs["alpha"], dtype) / const(size, dtype)

        def finish(acc: PrimExpr) -> PrimExpr:
            scale = const(attrs["bias"], dtype) + scale_of * acc
            return x[(n, c, *rest)] / call("pow", scale, const(attrs["beta"], dtype))

        return te.with_finish(te.sum(sq, rk), finish)

    return _finish("lrn", [x], te.compute(result[1], fcompute, "out"))


TEMPLATES = {"conv": conv, "conv_transpose": conv_transpose, "max_pool": max_pool,
             "avg_pool": avg_pool, "lrn": lrn}

__all__ = ["TEMPLATES", "avg_pool", "conv", "conv_transpose", "implicit_gemm_args", "lrn", "max_pool",
           "stem_args", "winograd_args"]
