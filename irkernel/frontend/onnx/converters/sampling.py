"""Sampling at computed positions: RoiAlign and GridSample, as one gather of graph ops.

Both read the input at positions computed from another tensor (the regions, the grid)
and blend a few taps per output element. Positions and weights are graph ops
(``floor``, ``where``, ``multiply``, ...), so run-time grids and regions work and
constant ones fold at import (``Context.emit``). The taps are then one ``take`` from the
input laid out as ``[positions, channels]``, weighted, and reduced over the taps
(:func:`_gather_taps`); per axis, taps and weights are stacked on a last axis and the
axes combined by broadcasting, so the graph has a fixed handful of ops.

- RoiAlign (opsets 10, 16): bilinear samples on a grid of ``sampling_ratio`` squared
  per output bin, averaged (``avg``) or maxed (``max``: the max over the samples of the
  max of the four weighted corners, as onnxruntime and ``onnx.reference`` do);
  ``coordinate_transformation_mode`` ``half_pixel`` (opset 16's default) or
  ``output_half_pixel``. ``sampling_ratio`` 0 (adaptive: ``ceil(region size / output
  size)`` samples, different per region) needs the regions as constants, which fix the
  sample counts at import.
- AffineGrid (opset 20): the sampling grid of affine maps ``theta`` (run time) over a
  constant ``size``: the output positions in normalized coordinates (a constant, as
  ``onnx.reference`` builds it) times ``theta``, one batched ``matmul``.
- GridSample (opsets 16, 20, 22): any number of spatial axes; ``linear``/``bilinear``,
  ``nearest`` (half to even) and ``cubic``/``bicubic`` (Keys, a = -0.75) with 2, 1 and 4
  taps per axis; ``padding_mode`` zeros, border and reflection; ``align_corners``. As in
  ``onnx.reference``, a coordinate outside the borders is first clamped (border) or
  reflected (reflection), then each tap is read with the padding rule.

Imports the converter machinery only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import Context, OnnxOpConverter, Value, register
from irkernel.ir import narrow

Args = list["Value | None"]
_FLOATS = ("float32", "float64", "float16", "bfloat16")


def _floats(ctx: Context, values: Any, like: Value) -> Value:
    """A constant array in ``like``'s float dtype."""
    return ctx.const(narrow.to_storage(np.asarray(values, np.float64), like.dtype),
                     code=like.dtype)


def _clamp(ctx: Context, v: Value, lo: float, hi: float) -> Value:
    return ctx.emit("minimum", ctx.emit("maximum", v, ctx.scalar(lo, v)), ctx.scalar(hi, v))


def _stack(ctx: Context, parts: list[Value]) -> Value:
    """Same-shaped values stacked on a new last axis."""
    parts = [ctx.reshape(p, p.shape + (1,)) for p in parts]
    return parts[0] if len(parts) == 1 else ctx.emit("concat", *parts, axis=parts[0].rank - 1)


def _gather_taps(ctx: Context, x: Value, index: Value, weight: Value, reduce: str) -> Value:
    """``reduce`` over the taps of ``x`` at ``index`` times ``weight``: ``x`` is [N, C,
    *spatial]; ``index`` (flat positions over N and the spatial axes, int64) and
    ``weight`` are [M, T]; the result is [M, C]."""
    c = x.shape[1]
    flat = ctx.emit("permute_dims", x, axes=(0, *range(2, x.rank), 1))
    flat = ctx.reshape(flat, (int(np.prod(flat.shape[:-1], dtype=np.int64)), c))
    taps = ctx.emit("take", flat, index, axis=0)  # [M, T, C]
    taps = ctx.emit("multiply", taps, ctx.reshape(weight, weight.shape + (1,)))
    return ctx.emit(reduce, taps, axis=1, keepdims=False)


def _inputs(ctx: Context, args: Args, spatial: int | None) -> tuple[Value, Value]:
    x, other = args[0], args[1]
    assert x is not None and other is not None
    if x.dtype_name not in _FLOATS:
        raise ctx.error(f"X must be a float tensor, got {x.dtype_name}")
    if x.rank < 3 or (spatial is not None and x.rank != spatial + 2):
        raise ctx.error(f"X has shape {list(x.shape)}: it must be [N, C, spatial...]"
                        + (f" with {spatial} spatial axes" if spatial else ""))
    return x, ctx.astype(other, x.dtype_name)


# -- RoiAlign ---------------------------------------------------------------------------

def _roi_axis(ctx: Context, start: Value, size: Value, bins: int, offsets: np.ndarray,
              extent: int) -> tuple[Value, Value, Value, Value, Value]:
    """One axis of the samples ([R, bins, G]): low pixel, high pixel, their weights, and
    'outside the map'. ``offsets`` [R, 1, G]: each sample's place in its bin, in bins."""
    e = ctx.emit
    bin_size = e("divide", size, ctx.scalar(bins, size))
    place = e("add", _floats(ctx, np.arange(bins).reshape(1, bins, 1), size),
              _floats(ctx, offsets, size))
    pos = e("add", start, e("multiply", place, bin_size))
    outside = e("logical_or", e("less", pos, ctx.scalar(-1.0, pos)),
                e("greater", pos, ctx.scalar(extent, pos)))
    pos = e("maximum", pos, ctx.scalar(0.0, pos))
    low = e("floor", pos)
    last = ctx.scalar(extent - 1, pos)
    top = e("logical_not", e("less", low, last))
    low = e("where", top, last, low)
    high = e("where", top, last, e("add", low, ctx.scalar(1.0, pos)))
    frac = e("subtract", e("where", top, low, pos), low)
    return low, high, e("subtract", ctx.scalar(1.0, pos), frac), frac, outside


def _sample_counts(ctx: Context, rois: Value | None, ratio: int, scale: float, shift: float,
                   bins_h: int, bins_w: int) -> tuple[np.ndarray, np.ndarray]:
    """Samples per bin along y and x of each region: ``sampling_ratio``, or (0) the
    ceiling of the bin's size, from the constant regions in the reference's float64."""
    assert rois is not None
    if ratio:
        counts = np.full(rois.shape[0], ratio, np.int64)
        return counts, counts
    boxes = ctx.const_value(rois, "input 'rois' (sampling_ratio 0 sizes each region's "
                                  "sampling grid at import)")
    boxes = narrow.widen(boxes, rois.dtype).astype(np.float64) * scale - shift
    sizes = boxes[:, 2:] - boxes[:, :2]
    if shift == 0.0:  # output_half_pixel: malformed regions are 1x1
        sizes = np.maximum(sizes, 1.0)
    return (np.ceil(sizes[:, 1] / bins_h).astype(np.int64),
            np.ceil(sizes[:, 0] / bins_w).astype(np.int64))


def _slot_offsets(counts: np.ndarray, slots: int) -> np.ndarray:
    """[R, 1, slots]: each sample's place in its bin, in bins. A slot past its region's
    count repeats the last sample (harmless to max; avg gives it weight 0)."""
    slot = np.minimum(np.arange(slots)[None, :], np.maximum(counts - 1, 0)[:, None])
    return ((slot + 0.5) / np.maximum(counts, 1)[:, None]).reshape(len(counts), 1, slots)


def _slot_factor(grid_h: np.ndarray, grid_w: np.ndarray, g_h: int, g_w: int,
                 reduce: str) -> np.ndarray:
    """[R, 1, 1, g_h, g_w]: the weight of each sample slot: 1 / count on the region's own
    slots for avg; 1 everywhere for max (repeated slots do not change a max); 0 for a
    region without samples."""
    valid = (np.arange(g_h)[None, :, None] < grid_h[:, None, None]) & \
            (np.arange(g_w)[None, None, :] < grid_w[:, None, None])
    if reduce == "sum":
        factor = valid / np.maximum(grid_h * grid_w, 1)[:, None, None]
    else:
        factor = np.broadcast_to(((grid_h > 0) & (grid_w > 0))[:, None, None], valid.shape)
    return factor.reshape(len(grid_h), 1, 1, g_h, g_w)


@register("RoiAlign")
class RoiAlign(OnnxOpConverter):
    graph_ops = ("add", "astype", "concat", "divide", "floor", "greater", "less",
                 "logical_not", "logical_or", "max", "maximum", "multiply", "permute_dims",
                 "reshape", "strided_slice", "subtract", "sum", "take", "where")

    @classmethod
    def _impl_v10(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        return cls._convert(ctx, args, attrs, half_pixel=False)

    @classmethod
    def _impl_v16(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        mode = attrs.get("coordinate_transformation_mode", "half_pixel")
        if mode not in ("half_pixel", "output_half_pixel"):
            raise ctx.error(f"coordinate_transformation_mode {mode!r} is not half_pixel or "
                            "output_half_pixel")
        return cls._convert(ctx, args, attrs, half_pixel=mode == "half_pixel")

    @classmethod
    def _convert(cls, ctx: Context, args: Args, attrs: dict[str, Any],
                 half_pixel: bool) -> Value:
        x, rois = _inputs(ctx, args, 2)
        batch = args[2]
        assert batch is not None
        n_roi = rois.shape[0] if rois.rank == 2 else -1
        if rois.rank != 2 or rois.shape[1] != 4 or batch.shape != (n_roi,):
            raise ctx.error(f"rois {list(rois.shape)} must be [R, 4] and batch_indices "
                            f"{list(batch.shape)} [R]")
        reduce = {"avg": "sum", "max": "max"}.get(str(attrs.get("mode", "avg")).lower())
        if reduce is None:
            raise ctx.error(f"mode {attrs.get('mode')!r} is not avg or max")
        bins_h, bins_w = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
        ratio, scale = int(attrs.get("sampling_ratio", 0)), float(attrs.get("spatial_scale", 1.0))
        if bins_h <= 0 or bins_w <= 0 or ratio < 0:
            raise ctx.error(f"output {bins_h}x{bins_w} and sampling_ratio {ratio} must be "
                            "positive (sampling_ratio 0: adaptive)")
        e = ctx.emit
        height, width = x.shape[2], x.shape[3]
        shift = 0.5 if half_pixel else 0.0

        def corner(k: int) -> Value:  # column k of the regions, scaled: [R, 1, 1]
            col = e("strided_slice", rois, begin=[0, k], end=[n_roi, k + 1], strides=[1, 1])
            col = e("multiply", ctx.reshape(col, (n_roi, 1, 1)), ctx.scalar(scale, x))
            return e("subtract", col, ctx.scalar(shift, x))

        x0, y0, x1, y1 = (corner(k) for k in range(4))
        size_w, size_h = e("subtract", x1, x0), e("subtract", y1, y0)
        if not half_pixel:  # malformed regions are 1x1
            size_w = e("maximum", size_w, ctx.scalar(1.0, x))
            size_h = e("maximum", size_h, ctx.scalar(1.0, x))
        grid_h, grid_w = _sample_counts(ctx, args[1], ratio, scale, shift, bins_h, bins_w)
        g_h, g_w = max(int(grid_h.max(initial=0)), 1), max(int(grid_w.max(initial=0)), 1)
        ctx.const_shape((n_roi, bins_h, bins_w, g_h, g_w, 4), "RoiAlign's sample table")
        y_lo, y_hi, y_wl, y_wh, y_out = _roi_axis(ctx, y0, size_h, bins_h,
                                                  _slot_offsets(grid_h, g_h), height)
        x_lo, x_hi, x_wl, x_wh, x_out = _roi_axis(ctx, x0, size_w, bins_w,
                                                  _slot_offsets(grid_w, g_w), width)
        as_y = (n_roi, bins_h, 1, g_h, 1)
        as_x = (n_roi, 1, bins_w, 1, g_w)
        y_lo, y_hi, y_wl, y_wh, y_out = (ctx.reshape(v, as_y) for v in
                                         (y_lo, y_hi, y_wl, y_wh, y_out))
        x_lo, x_hi, x_wl, x_wh, x_out = (ctx.reshape(v, as_x) for v in
                                         (x_lo, x_hi, x_wl, x_wh, x_out))
        factor = _floats(ctx, _slot_factor(grid_h, grid_w, g_h, g_w, reduce), x)
        inside = e("where", e("logical_or", y_out, x_out), ctx.scalar(0.0, x), factor)
        weights = [e("multiply", e("multiply", wy, wx), inside)
                   for wy, wx in ((y_wl, x_wl), (y_wl, x_wh), (y_wh, x_wl), (y_wh, x_wh))]
        base = ctx.reshape(e("multiply", ctx.astype(batch, "int64"),
                             ctx.const(np.int64(height * width))), (n_roi, 1, 1, 1, 1))
        rows = [e("multiply", ctx.astype(v, "int64"), ctx.const(np.int64(width)))
                for v in (y_lo, y_hi)]
        cols = [ctx.astype(v, "int64") for v in (x_lo, x_hi)]
        index = [e("add", base, e("add", rows[i], cols[j])) for i in (0, 1) for j in (0, 1)]
        taps = n_roi * bins_h * bins_w
        index = ctx.reshape(_stack(ctx, index), (taps, g_h * g_w * 4))
        weight = ctx.reshape(_stack(ctx, weights), (taps, g_h * g_w * 4))
        y = _gather_taps(ctx, x, index, weight, reduce)
        y = ctx.reshape(y, (n_roi, bins_h, bins_w, x.shape[1]))
        return e("permute_dims", y, axes=(0, 3, 1, 2))


# -- GridSample -------------------------------------------------------------------------

_KEYS_A = -0.75


def _keys(ctx: Context, t: Value) -> list[Value]:
    """Keys' cubic weights of the taps at -1, 0, 1, 2 for a fraction ``t`` in [0, 1)
    (the reference's formulas, a = -0.75)."""
    e, a = ctx.emit, _KEYS_A

    def s(v: float) -> Value:
        return ctx.scalar(v, t)

    def far(u: Value) -> Value:  # ((a u - 5a) u + 8a) u - 4a
        inner = e("add", e("multiply", e("subtract", e("multiply", u, s(a)), s(5 * a)), u),
                  s(8 * a))
        return e("subtract", e("multiply", inner, u), s(4 * a))

    def near(u: Value) -> Value:  # ((a + 2) u - (a + 3)) u u + 1
        inner = e("subtract", e("multiply", u, s(a + 2)), s(a + 3))
        return e("add", e("multiply", e("multiply", inner, u), u), s(1.0))

    one_minus = e("subtract", s(1.0), t)
    return [far(e("add", t, s(1.0))), near(t), near(one_minus),
            far(e("subtract", s(2.0), t))]


def _reflect(ctx: Context, v: Value, lo: float, hi: float) -> Value:
    """``v`` reflected at ``lo`` and ``hi`` until inside (the reference's _gs_reflect)."""
    e = ctx.emit
    span = hi - lo
    if span <= 0:
        return e("broadcast_to", ctx.scalar(lo, v), shape=v.shape)
    below = e("less", v, ctx.scalar(lo, v))
    above = e("greater", v, ctx.scalar(hi, v))
    dx = e("where", below, e("subtract", ctx.scalar(lo, v), v),
           e("subtract", v, ctx.scalar(hi, v)))
    turns = e("floor", e("divide", dx, ctx.scalar(span, v)))
    rest = e("subtract", dx, e("multiply", turns, ctx.scalar(span, v)))
    even = e("equal", e("floor_mod", turns, ctx.scalar(2.0, v)), ctx.scalar(0.0, v))
    from_lo = e("add", ctx.scalar(lo, v), rest)
    from_hi = e("subtract", ctx.scalar(hi, v), rest)
    return e("where", below, e("where", even, from_lo, from_hi),
             e("where", above, e("where", even, from_hi, from_lo), v))


def _axis_taps(ctx: Context, coord: Value, extent: int, mode: str, padding: str,
               align: bool) -> tuple[Value, Value]:
    """Pixel indices (int64) and weights of one spatial axis's taps, stacked last."""
    e = ctx.emit
    lo, hi = (0.0, extent - 1.0) if align else (-0.5, extent - 0.5)
    if mode == "nearest":
        coord = e("round", coord)
    outside = e("logical_or", e("less", coord, ctx.scalar(lo, coord)),
                e("greater", coord, ctx.scalar(hi, coord)))
    if padding == "border":
        coord = e("where", outside, _clamp(ctx, coord, 0.0, extent - 1.0), coord)
    elif padding == "reflection":
        coord = _reflect(ctx, coord, lo, hi)
    base = e("floor", coord)
    t = e("subtract", coord, base)
    if mode == "nearest":
        offsets, weights = [0], [e("broadcast_to", ctx.scalar(1.0, t), shape=t.shape)]
    elif mode == "linear":
        offsets, weights = [0, 1], [e("subtract", ctx.scalar(1.0, t), t), t]
    else:
        offsets, weights = [-1, 0, 1, 2], _keys(ctx, t)
    indices = []
    for k, off in enumerate(offsets):
        pos = e("add", base, ctx.scalar(float(off), base)) if off else base
        if padding == "zeros":
            inside = e("logical_not", e("logical_or", e("less", pos, ctx.scalar(0.0, pos)),
                                        e("greater", pos, ctx.scalar(extent - 1.0, pos))))
            weights[k] = e("where", inside, weights[k], ctx.scalar(0.0, t))
        elif padding == "reflection":
            pos = e("floor", _reflect(ctx, pos, lo, hi))
        indices.append(ctx.astype(_clamp(ctx, pos, 0.0, extent - 1.0), "int64"))
    return _stack(ctx, indices), _stack(ctx, weights)


@register("GridSample")
class GridSample(OnnxOpConverter):
    graph_ops = ("add", "astype", "broadcast_to", "concat", "divide", "equal", "floor",
                 "floor_mod", "greater",
                 "less", "logical_not", "logical_or", "maximum", "minimum", "multiply",
                 "permute_dims", "reshape", "round", "strided_slice", "subtract", "sum", "take",
                 "where")
    _MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic",
              "nearest": "nearest"}

    @classmethod
    def _impl_v16(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        return cls._convert(ctx, args, attrs, "bilinear")

    @classmethod
    def _impl_v20(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        return cls._convert(ctx, args, attrs, "linear")

    @classmethod
    def _convert(cls, ctx: Context, args: Args, attrs: dict[str, Any], default: str) -> Value:
        x, grid = _inputs(ctx, args, None)
        mode = cls._MODES.get(str(attrs.get("mode", default)))
        padding = str(attrs.get("padding_mode", "zeros"))
        if mode is None or padding not in ("zeros", "border", "reflection"):
            raise ctx.error(f"mode {attrs.get('mode')!r} / padding_mode {padding!r} is not "
                            "supported (linear, nearest, cubic; zeros, border, reflection)")
        align = bool(int(attrs.get("align_corners", 0)))
        spatial = x.shape[2:]
        dims = len(spatial)
        n = x.shape[0]
        if grid.rank != dims + 2 or grid.shape[0] != n or grid.shape[-1] != dims:
            raise ctx.error(f"grid {list(grid.shape)} must be [N, *output, {dims}] for X "
                            f"{list(x.shape)}")
        out = grid.shape[1:-1]
        e = ctx.emit
        index: Value | None = None
        weight: Value | None = None
        stride = 1
        for axis in reversed(range(dims)):  # grid[..., 0] is the last spatial axis
            k = dims - 1 - axis
            g = e("strided_slice", grid, begin=[0] * (grid.rank - 1) + [k],
                  end=list(grid.shape[:-1]) + [k + 1], strides=[1] * grid.rank)
            g = ctx.reshape(g, (n, *out))
            extent = spatial[axis]
            one = ctx.scalar(1.0, g)
            if align:  # (g + 1) / 2 * (extent - 1)
                coord = e("multiply", e("add", g, one), ctx.scalar((extent - 1) / 2.0, g))
            else:  # ((g + 1) * extent - 1) / 2
                coord = e("divide", e("subtract", e("multiply", e("add", g, one),
                                                    ctx.scalar(extent, g)), one),
                          ctx.scalar(2.0, g))
            idx, w = _axis_taps(ctx, coord, extent, mode, padding, align)
            taps = idx.shape[-1]
            place = (n, *out) + (1,) * axis + (taps,) + (1,) * (dims - 1 - axis)
            idx = ctx.reshape(e("multiply", idx, ctx.const(np.int64(stride))), place)
            w = ctx.reshape(w, place)
            index = idx if index is None else e("add", index, idx)
            weight = w if weight is None else e("multiply", weight, w)
            stride *= extent
        assert index is not None and weight is not None
        batch = ctx.const((np.arange(n, dtype=np.int64) * stride).reshape(
            (n,) + (1,) * (index.rank - 1)))
        index = e("add", index, batch)
        rows = int(np.prod((n, *out), dtype=np.int64))
        taps = int(np.prod(index.shape[len(out) + 1:], dtype=np.int64))
        index = ctx.reshape(index, (rows, taps))
        weight = ctx.reshape(weight, (rows, taps))
        y = ctx.reshape(_gather_taps(ctx, x, index, weight, "sum"), (n, *out, x.shape[1]))
        return e("permute_dims", y, axes=(0, len(out) + 1, *range(1, len(out) + 1)))


@register("AffineGrid")
class AffineGrid(OnnxOpConverter):
    graph_ops = ("matmul", "permute_dims", "reshape")

    @classmethod
    def _impl_v20(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        theta = args[0]
        assert theta is not None
        size = [int(v) for v in np.asarray(ctx.const_value(
            args[1] if len(args) > 1 else None, "input 'size'")).ravel()]
        spatial = size[2:]
        dims = len(spatial)
        if theta.dtype_name not in _FLOATS or dims not in (2, 3) or \
                theta.shape != (size[0], dims, dims + 1):
            raise ctx.error(f"theta {theta.dtype_name}{list(theta.shape)} must be float "
                            f"[N, {dims}, {dims + 1}] for size {size} (2 or 3 spatial axes)")
        align = bool(int(attrs.get("align_corners", 0)))
        ctx.const_shape((int(np.prod(spatial)), dims + 1), "the grid")
        axes = []
        for extent in spatial:
            i = np.arange(extent, dtype=np.float64)
            axes.append(-1.0 + i * (2.0 / (extent - 1)) if align and extent > 1 else
                        np.full(extent, -1.0) if align else -1.0 + (2.0 * i + 1.0) / extent)
        mesh = np.meshgrid(*axes, indexing="ij")
        # last axis (x, y[, z], 1): the grid's first coordinate is the last spatial axis
        base = np.stack([*(m.ravel() for m in reversed(mesh)), np.ones(mesh[0].size)], axis=1)
        grid = ctx.emit("matmul", _floats(ctx, base, theta),
                        ctx.emit("permute_dims", theta, axes=(0, 2, 1)))
        return ctx.reshape(grid, (size[0], *spatial, dims))
