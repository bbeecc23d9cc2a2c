"""Dtype and shape rules of the NN ops (conv, conv_transpose, max_pool, avg_pool, lrn) and
the window arithmetic they share with their references and templates.

Layout is NCHW: ``x[N, C, *spatial]`` with 1 to 3 spatial axes, weights ``[O, C/groups,
*K]`` (conv) or ``[C, O/groups, *K]`` (conv_transpose). Window attributes hold one entry
per spatial axis (``padding``: the begins of every axis, then the ends); an empty tuple
means the default (strides and dilations 1, paddings 0). Imports numpy and lower
``irkernel.ir`` modules only.

Output sizes: conv ``(S + pad_b + pad_e - dilation*(K-1) - 1) // stride + 1``; pooling the
same, rounded up with ``ceil_mode`` but without a window that would start in the end
padding (onnxruntime's rule); conv_transpose ``(S-1)*stride - pad_b - pad_e +
dilation*(K-1) + output_padding + 1``. A window larger than the padded input, or an
empty result, is a TypeInferenceError (onnxruntime computes odd sizes there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.ids import FLOAT_DTYPES
from irkernel.ir.ops.opdef import Shape, TensorType
from irkernel.ir.ops.type_rules import dtypes_in, fmt, same_dtype

MAX_SPATIAL = 3


@dataclass(frozen=True)
class Window:
    """The sliding window of one op on one input: per spatial axis, the input size, kernel
    size, stride, begin and end padding, dilation and the output size."""

    size: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pad_begin: tuple[int, ...]
    pad_end: tuple[int, ...]
    dilation: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.size)

    def taps(self, axis: int, o: int) -> list[int]:
        """Input positions (padding included: may be < 0 or >= size) of window ``o``."""
        start = o * self.strides[axis] - self.pad_begin[axis]
        return [start + k * self.dilation[axis] for k in range(self.kernel[axis])]


def _per_axis(attrs: Mapping[str, Any], name: str, r: int, default: int,
              times: int = 1) -> tuple[int, ...]:
    value = attrs[name]
    if value == ():
        return (default,) * (r * times)
    if len(value) != r * times:
        raise TypeInferenceError(f"{name} {fmt(value)} must hold {r * times} values "
                                 f"for {r} spatial axes")
    return tuple(value)


def spatial_rank(shape: Shape, what: str = "input") -> int:
    r = len(shape) - 2
    if not 1 <= r <= MAX_SPATIAL:
        raise TypeInferenceError(f"{what} {fmt(shape)} must be [N, C, *spatial] with 1 "
                                 f"to {MAX_SPATIAL} spatial axes")
    return r


def window_attrs(attrs: Mapping[str, Any], r: int
                 ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(strides, pad_begin, pad_end, dilation) with defaults filled and checked."""
    strides = _per_axis(attrs, "strides", r, 1)
    padding = _per_axis(attrs, "padding", r, 0, times=2)
    dilation = _per_axis(attrs, "dilation", r, 1) if "dilation" in attrs else (1,) * r
    if any(s < 1 for s in strides):
        raise TypeInferenceError(f"strides {fmt(strides)} must be >= 1")
    if any(d < 1 for d in dilation):
        raise TypeInferenceError(f"dilation {fmt(dilation)} must be >= 1")
    if any(p < 0 for p in padding):
        raise TypeInferenceError(f"padding {fmt(padding)} must be >= 0 "
                                 "(crop with strided_slice)")
    return strides, padding[:r], padding[r:], dilation


def sliding_window(size: Shape, kernel: Shape, attrs: Mapping[str, Any],
                   ceil_mode: bool = False) -> Window:
    """The window of conv (``ceil_mode`` False) and the pools over spatial ``size``."""
    r = len(size)
    strides, pb, pe, dil = window_attrs(attrs, r)
    if any(k < 1 for k in kernel):
        raise TypeInferenceError(f"kernel {fmt(kernel)} must be >= 1 on every axis")
    out = []
    for a in range(r):
        span = size[a] + pb[a] + pe[a]
        extent = dil[a] * (kernel[a] - 1) + 1
        if span < extent:
            raise TypeInferenceError(
                f"window of extent {extent} (kernel {kernel[a]}, dilation {dil[a]}) is "
                f"larger than spatial axis {a} of size {size[a]} with padding "
                f"{pb[a]} + {pe[a]}")
        n = (span - extent + (strides[a] - 1 if ceil_mode else 0)) // strides[a] + 1
        if ceil_mode and (n - 1) * strides[a] >= size[a] + pb[a]:
            n -= 1  # the last window would start in the end padding: dropped
        out.append(n)
    return Window(tuple(size), tuple(kernel), strides, pb, pe, dil, tuple(out))


def transpose_window(size: Shape, kernel: Shape, attrs: Mapping[str, Any]) -> Window:
    """``out`` is the output size; the other fields describe the conv whose
    gradient it is (kernel, stride, dilation and padding of that conv)."""
    r = len(size)
    strides, pb, pe, dil = window_attrs(attrs, r)
    extra = _per_axis(attrs, "output_padding", r, 0)
    if any(p < 0 for p in extra):
        raise TypeInferenceError(f"output_padding {fmt(extra)} must be >= 0")
    if any(k < 1 for k in kernel):
        raise TypeInferenceError(f"kernel {fmt(kernel)} must be >= 1 on every axis")
    out = tuple((size[a] - 1) * strides[a] - pb[a] - pe[a] + dil[a] * (kernel[a] - 1)
                + extra[a] + 1 for a in range(r))
    if any(n < 1 for n in out):
        raise TypeInferenceError(f"output spatial size {fmt(out)} of input {fmt(size)} "
                                 f"is empty (padding {fmt(pb + pe)} too large)")
    return Window(tuple(size), tuple(kernel), strides, pb, pe, dil, out)


def _float_pair(types: Sequence[TensorType]) -> int:
    dtypes_in(FLOAT_DTYPES, types, "operand")
    return same_dtype(types)


def _groups(attrs: Mapping[str, Any], channels: int, outputs: int) -> int:
    g = attrs["groups"]
    if g < 1 or channels % g or outputs % g:
        raise TypeInferenceError(f"groups {g} must be >= 1 and divide the input "
                                 f"channels {channels} and the output channels {outputs}")
    return g


def conv_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt = _float_pair(types)
    (_, xs), (_, ws) = types
    r = spatial_rank(xs)
    if len(ws) != len(xs):
        raise TypeInferenceError(f"weight {fmt(ws)} must be [O, C/groups, *K] with "
                                 f"{r} kernel axes (input {fmt(xs)})")
    g = _groups(attrs, xs[1], ws[0])
    if ws[1] * g != xs[1]:
        raise TypeInferenceError(f"weight {fmt(ws)} has {ws[1]} input channels per "
                                 f"group; input {fmt(xs)} with groups {g} needs {xs[1] // g}")
    win = sliding_window(xs[2:], ws[2:], attrs)
    return dt, (xs[0], ws[0], *win.out)


def conv_transpose_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt = _float_pair(types)
    (_, xs), (_, ws) = types
    r = spatial_rank(xs)
    if len(ws) != len(xs) or ws[0] != xs[1]:
        raise TypeInferenceError(f"weight {fmt(ws)} must be [C, O/groups, *K] "
                                 f"with C = {xs[1]} and {r} kernel axes (input {fmt(xs)})")
    g = _groups(attrs, xs[1], ws[1] * attrs["groups"])
    win = transpose_window(xs[2:], ws[2:], attrs)
    return dt, (xs[0], ws[1] * g, *win.out)


def pool_window(shape: Shape, attrs: Mapping[str, Any]) -> Window:
    r = spatial_rank(shape)
    kernel = attrs["kernel"]
    if len(kernel) != r:
        raise TypeInferenceError(f"kernel {fmt(kernel)} must hold {r} values for input "
                                 f"{fmt(shape)}")
    return sliding_window(shape[2:], kernel, attrs, attrs["ceil_mode"])


def pool_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dtypes_in(FLOAT_DTYPES, types, "operand")
    dt, shape = types[0]
    return dt, shape[:2] + pool_window(shape, attrs).out


def lrn_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dtypes_in(FLOAT_DTYPES, types, "operand")
    dt, shape = types[0]
    if len(shape) < 2:
        raise TypeInferenceError(f"input {fmt(shape)} must be [N, C, ...]")
    if attrs["size"] < 1:
        raise TypeInferenceError(f"size {attrs['size']} must be >= 1")
    return dt, shape


def pool_divisors(win: Window, axis: int, count_include_pad: bool) -> list[int]:
    """avg_pool's divisor factor of each output position on ``axis`` (onnxruntime's rule):
    the taps inside the padded input ``[-pad_begin, size + pad_end)`` with
    ``count_include_pad``, else the taps inside the input. The divisor of an output
    element is the product over the axes; a window with no tap inside counts 1."""
    lo = -win.pad_begin[axis] if count_include_pad else 0
    hi = win.size[axis] + (win.pad_end[axis] if count_include_pad else 0)
    return [max(1, sum(lo <= t < hi for t in win.taps(axis, o))) for o in range(win.out[axis])]
