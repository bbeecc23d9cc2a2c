"""ONNX Resize (opsets 10-19) and Upsample, lowered at import to ``take`` and weighted sums.

Resizing is separable: each resized axis is a 1-D interpolation whose source indices and
weights depend only on the output position along that axis, so the converter computes
them with NumPy at import (every ``coordinate_transformation_mode``, ``nearest_mode``,
linear and cubic with ``cubic_coeff_a``, ``exclude_outside``, ``antialias``,
``keep_aspect_ratio_policy``, ``axes``, scales or sizes), as onnx's reference does, and
emits per axis and per tap ``take(x, indices, axis) * weights``, summed. Nearest is one
``take`` per axis (exact, any dtype); ``tf_crop_and_resize`` positions outside the input
become ``extrapolation_value`` through a ``where``. Opset 10 Resize and Upsample are
``asymmetric`` with onnxruntime's nearest rounding (floor when enlarging, ceil when
shrinking). Scales, sizes and roi must be constants. Imports the converter machinery only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import (
    Context,
    OnnxOpConverter,
    Value,
    norm_axes,
    register,
)

Args = list["Value | None"]
_MODES = ("nearest", "linear", "cubic")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")


def _source(mode: str, y: np.ndarray, scale: float, n_in: int, n_out: int,
            roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray | None]:
    """Source coordinates of the output positions ``y`` and, for tf_crop_and_resize, which
    of them fall outside the input (onnx reference ``_compute_x_ori``)."""
    width = scale * n_in  # the real-valued output length
    if mode == "align_corners":
        return (np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale, None
    if mode == "pytorch_half_pixel":
        return (np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)
        return offset + (y + 0.5) / scale - 0.5, None
    start, end = roi  # tf_crop_and_resize
    if width == 1:
        x = np.full(n_out, (end - start) * (n_in - 1) / 2)
    else:
        x = y * (end - start) * (n_in - 1) / (width - 1)
    x = x + start * (n_in - 1)
    return x, (x < 0) | (x > n_in - 1)


def _coefficients(ratio: np.ndarray, scale: float, mode: str, nearest: str, a: float,
                  antialias: bool) -> np.ndarray:
    """Tap weights ``[n_out, taps]`` of each output position (onnx reference coefficients)."""
    r = ratio[:, None]
    if mode == "nearest":
        whole = ratio == np.round(ratio)
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
              "floor": np.zeros_like(whole), "ceil": np.ones_like(whole),
              "simple": np.full(whole.shape, scale < 1)}[nearest] | whole
        return np.stack([~up, up], axis=1).astype(np.float64)
    if not antialias:
        if mode == "linear":
            return np.concatenate([1 - r, r], axis=1)
        s = 1 - r
        return np.concatenate([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                               ((a + 2) * r - (a + 3)) * r * r + 1,
                               ((a + 2) * s - (a + 3)) * s * s + 1,
                               ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a],
                              axis=1)
    scale = min(scale, 1.0)
    support = 1 if mode == "linear" else 2
    start = int(math.floor(-support / scale) + 1)
    x = np.abs((np.arange(start, 2 - start)[None, :] - r) * scale)
    if mode == "linear":
        w = np.clip(1 - x, 0, 1)
    else:
        w = np.where(x <= 1, (a + 2) * x**3 - (a + 3) * x**2 + 1,
                     np.where(x < 2, a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a, 0.0))
    return w / w.sum(axis=1, keepdims=True)


def axis_taps(n_in: int, n_out: int, scale: float, opts: dict[str, Any],
              roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(indices ``[n_out, taps]`` clamped into the input, weights ``[n_out, taps]``,
    extrapolated positions or None) of one resized axis (onnx reference
    ``_interpolate_1d_along_axis``)."""
    y = np.arange(n_out, dtype=np.float64)
    x, outside = _source(opts["transform"], y, scale, n_in, n_out, roi)
    floor = np.floor(x)
    ratio = np.where(x == floor, 1.0, x - floor)  # an exact integer takes the left pixel
    w = _coefficients(ratio, scale, opts["mode"], opts["nearest"], opts["cubic_a"],
                      opts["antialias"])
    n = w.shape[1]
    pad = (n + 1) // 2
    padded = x + pad
    p = np.floor(padded).astype(np.int64)
    frac = padded - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if opts["exclude_outside"]:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(idx, 0, n_in - 1), w, outside


def _resize_axis(ctx: Context, x: Value, axis: int, n_out: int, scale: float,
                 opts: dict[str, Any], roi: tuple[float, float]) -> Value:
    idx, w, outside = axis_taps(x.shape[axis], n_out, scale, opts, roi)
    after = (1,) * (x.rank - axis - 1)
    if opts["mode"] == "nearest":  # one-hot weights: one take
        picked = idx[np.arange(n_out), np.argmax(w, axis=1)]
        out = ctx.emit("take", x, ctx.const(picked), axis=axis)
    else:
        out = None
        for j in range(w.shape[1]):
            if not w[:, j].any():
                continue
            tap = ctx.emit("take", x, ctx.const(idx[:, j]), axis=axis)
            weight = ctx.const(w[:, j].reshape((n_out, *after)).astype(x.dtype_name))
            term = ctx.emit("multiply", tap, weight)
            out = term if out is None else ctx.emit("add", out, term)
        assert out is not None
    if outside is not None and outside.any():
        mask = ctx.const(outside.reshape((n_out, *after)))
        out = ctx.emit("where", mask, ctx.scalar(opts["extrapolation"], x), out)
    return out


def _floats(ctx: Context, v: Value | None, what: str) -> np.ndarray | None:
    if v is None:
        return None
    arr = np.asarray(ctx.const_value(v, what), np.float64).ravel()
    return arr if arr.size else None


def resize(ctx: Context, x: Value, opts: dict[str, Any], roi_in: Value | None,
           scales_in: Value | None, sizes_in: Value | None) -> Value:
    """The shared lowering of Resize (every opset) and Upsample."""
    if opts["mode"] not in _MODES:
        raise ctx.error(f"mode {opts['mode']!r} is not one of {', '.join(_MODES)}")
    if opts["transform"] not in _TRANSFORMS or opts["nearest"] not in _NEAREST:
        raise ctx.error(f"coordinate_transformation_mode {opts['transform']!r} / nearest_mode "
                        f"{opts['nearest']!r} is not supported")
    if opts["mode"] != "nearest" and x.dtype_name not in ("float32", "float64"):
        raise ctx.error(f"{opts['mode']} resize of {x.dtype_name} data is not supported "
                        "(float32/float64; nearest takes any dtype)")
    rank = x.rank
    axes = list(range(rank)) if opts["axes"] is None else list(
        norm_axes(ctx, opts["axes"], rank, "axes"))
    scales, sizes = _floats(ctx, scales_in, "input 'scales'"), _floats(ctx, sizes_in,
                                                                       "input 'sizes'")
    roi = _floats(ctx, roi_in, "input 'roi'")
    full_roi = [0.0] * rank + [1.0] * rank
    if roi is not None and opts["transform"] == "tf_crop_and_resize":
        if roi.size != 2 * len(axes):
            raise ctx.error(f"roi has {roi.size} values, expected {2 * len(axes)}")
        for k, a in enumerate(axes):
            full_roi[a], full_roi[rank + a] = roi[k], roi[len(axes) + k]
    if (scales is None) == (sizes is None):
        raise ctx.error("exactly one of 'scales' and 'sizes' must be given")
    if scales is not None:
        if scales.size != len(axes) or (scales <= 0).any():
            raise ctx.error(f"scales {scales.tolist()} must be {len(axes)} positive numbers")
        scale = dict(zip(axes, scales.tolist(), strict=True))
        out = {a: int(scale[a] * x.shape[a]) for a in axes}
    else:
        assert sizes is not None
        if sizes.size != len(axes) or (sizes < 0).any():
            raise ctx.error(f"sizes {sizes.tolist()} must be {len(axes)} sizes >= 0")
        out = {a: int(s) for a, s in zip(axes, sizes.tolist(), strict=True)}
        if any(x.shape[a] == 0 for a in axes):
            raise ctx.error(f"cannot resize the empty input {list(x.shape)}")
        scale = {a: out[a] / x.shape[a] for a in axes}
        policy = opts["policy"]
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                raise ctx.error(f"keep_aspect_ratio_policy {policy!r} is not supported")
            pick = min if policy == "not_larger" else max
            s = pick(scale.values())
            scale = dict.fromkeys(axes, s)
            out = {a: int(s * x.shape[a] + 0.5) for a in axes}
    for a in axes:
        roi_a = (full_roi[a], full_roi[rank + a])
        if math.isclose(scale[a], 1.0) and out[a] == x.shape[a] and roi_a == (0.0, 1.0):
            continue  # the identity along this axis
        if x.shape[a] == 0:
            raise ctx.error(f"cannot resize the empty axis {a} of {list(x.shape)}")
        x = _resize_axis(ctx, x, a, out[a], scale[a], opts, roi_a)
    return x


def _str(attrs: dict[str, Any], name: str, default: str) -> str:
    value = attrs.get(name, default)
    return value.decode() if isinstance(value, bytes) else str(value)


def _legacy_opts(attrs: dict[str, Any]) -> dict[str, Any]:
    """Opset 10 Resize and Upsample: asymmetric, onnxruntime's nearest rounding."""
    return {"mode": _str(attrs, "mode", "nearest"), "transform": "asymmetric",
            "nearest": "simple", "cubic_a": -0.75, "exclude_outside": False,
            "extrapolation": 0.0, "antialias": False, "axes": None, "policy": "stretch"}


def _legacy(ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
    """Resize-10 and Upsample-9: (X, scales)."""
    x = args[0]
    assert x is not None
    return resize(ctx, x, _legacy_opts(attrs), None, args[1], None)


_GRAPH_OPS = ("add", "multiply", "take", "where")


@register("Resize")
class Resize(OnnxOpConverter):
    graph_ops = _GRAPH_OPS

    _impl_v10 = classmethod(lambda cls, ctx, args, attrs: _legacy(ctx, args, attrs))

    @classmethod
    def _impl_v11(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        opts = {"mode": _str(attrs, "mode", "nearest"),
                "transform": _str(attrs, "coordinate_transformation_mode", "half_pixel"),
                "nearest": _str(attrs, "nearest_mode", "round_prefer_floor"),
                "cubic_a": float(attrs.get("cubic_coeff_a", -0.75)),
                "exclude_outside": bool(attrs.get("exclude_outside", 0)),
                "extrapolation": float(attrs.get("extrapolation_value", 0.0)),
                "antialias": bool(attrs.get("antialias", 0)),
                "axes": attrs.get("axes"),
                "policy": _str(attrs, "keep_aspect_ratio_policy", "stretch")}
        if opts["antialias"] and opts["mode"] == "nearest":
            raise ctx.error("antialias applies to linear and cubic modes only")
        sizes = args[3] if len(args) > 3 else None
        return resize(ctx, x, opts, args[1], args[2] if len(args) > 2 else None, sizes)


@register("Upsample")
class Upsample(OnnxOpConverter):
    graph_ops = _GRAPH_OPS

    @classmethod
    def _impl_v7(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x = args[0]
        assert x is not None
        scales = attrs.get("scales")
        if scales is None:
            raise ctx.error("Upsample-7 needs the 'scales' attribute")
        return resize(ctx, x, _legacy_opts(attrs), None,
                      ctx.const(np.asarray(scales, np.float32)), None)

    _impl_v9 = classmethod(lambda cls, ctx, args, attrs: _legacy(ctx, args, attrs))


__all__ = ["Resize", "Upsample", "axis_taps", "resize"]
