"""NumPy references of the NN ops: conv, conv_transpose, max_pool, avg_pool, lrn.

One Python step per kernel position (never per element): each step is a strided slice
of the padded input and a batched matmul over the channels of a group (conv,
conv_transpose) or an elementwise update (pools, lrn). Accumulation is in the input
dtype, kernel positions in row-major order, which is also the order of the TIR
templates' reduction loops: pools and lrn's sums are bit-identical to compiled code
(conv's channel sums go through BLAS, so they agree within rounding). Semantics are
stated in :mod:`irkernel.ir.ops.nn_rules` and ``docs/ops.md``. Imports numpy and lower
``irkernel.ir`` modules only.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.ir.ops.nn_rules import (
    Window,
    pool_divisors,
    pool_window,
    sliding_window,
    transpose_window,
)


def _padded(x: np.ndarray, win: Window, fill: float) -> np.ndarray:
    """``x`` padded with ``fill`` so that every tap of every window is inside."""
    pads = [(0, 0), (0, 0)]
    for a in range(win.rank):
        last = (win.out[a] - 1) * win.strides[a] + win.dilation[a] * (win.kernel[a] - 1)
        end = max(win.pad_end[a], last + 1 - win.pad_begin[a] - win.size[a])
        pads.append((win.pad_begin[a], end))
    return np.pad(x, pads, mode="constant", constant_values=fill)


def _taps(win: Window) -> list[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """Per kernel position (row-major): the position and the strided slices of the padded
    input that this tap of every window reads."""
    out = []
    for kpos in itertools.product(*(range(k) for k in win.kernel)):
        sl = tuple(slice(kpos[a] * win.dilation[a],
                         kpos[a] * win.dilation[a] + (win.out[a] - 1) * win.strides[a] + 1,
                         win.strides[a]) for a in range(win.rank))
        out.append((kpos, sl))
    return out


def conv_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    x, w = xs
    win = sliding_window(x.shape[2:], w.shape[2:], attrs)
    g = attrs["groups"]
    n, c = x.shape[:2]
    o = w.shape[0]
    cg, og = c // g, o // g
    xp = _padded(x, win, 0.0)
    xp = xp.reshape(n, g, cg, *xp.shape[2:])
    wg = w.reshape(g, og, cg, *w.shape[2:])
    m = n * int(np.prod(win.out, dtype=np.int64))
    acc = np.zeros((g, m, og), x.dtype)
    every = (slice(None),) * 3
    with np.errstate(all="ignore"):
        for kpos, sl in _taps(win):
            rows = np.moveaxis(xp[(*every, *sl)], 2, -1).swapaxes(0, 1)   # [g, n, *out, cg]
            acc += rows.reshape(g, m, cg) @ np.swapaxes(wg[(*every, *kpos)], 1, 2)
    return _groups_to_channels(acc.reshape(g, n, *win.out, og), n, o, win.out)


def _groups_to_channels(acc: np.ndarray, n: int, o: int, out: tuple[int, ...]) -> np.ndarray:
    """[g, n, *out, og] -> [n, g * og, *out]."""
    r = len(out)
    moved = np.transpose(acc, (1, 0, r + 2, *range(2, r + 2)))   # [n, g, og, *out]
    return np.ascontiguousarray(moved.reshape(n, o, *out))


def conv_transpose_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """Scatter form: input element ``i`` adds ``x[i] * w[k]`` at full-output position
    ``i * stride + k * dilation``; the full output (with ``output_padding`` zeros at the
    end) is cropped by the paddings."""
    x, w = xs
    win = transpose_window(x.shape[2:], w.shape[2:], attrs)
    g = attrs["groups"]
    n, c = x.shape[:2]
    cg, og = c // g, w.shape[1]
    r = win.rank
    full = tuple(win.out[a] + win.pad_begin[a] + win.pad_end[a] for a in range(r))
    acc = np.zeros((g, n, *full, og), x.dtype)
    xg = np.moveaxis(x.reshape(n, g, cg, *x.shape[2:]), 2, -1).swapaxes(0, 1)  # [g,n,*S,cg]
    wg = w.reshape(g, cg, og, *w.shape[2:])
    every = (slice(None),) * 3
    for kpos in itertools.product(*(range(k) for k in win.kernel)):
        sl = tuple(slice(kpos[a] * win.dilation[a],
                         kpos[a] * win.dilation[a] + (win.size[a] - 1) * win.strides[a] + 1,
                         win.strides[a]) for a in range(r))
        weight = wg[(*every, *kpos)][(slice(None), *([None] * r))]   # [g, 1, ..., cg, og]
        with np.errstate(all="ignore"):
            acc[(slice(None), slice(None), *sl)] += xg @ weight         # [g, n, *S, og]
    crop = tuple(slice(win.pad_begin[a], win.pad_begin[a] + win.out[a]) for a in range(r))
    return _groups_to_channels(acc[(slice(None), slice(None), *crop)], n, g * og, win.out)


def max_pool_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """NaN-propagating max over each window; padding (and the overhang of ceil_mode
    windows) is -inf, so it never wins; a window of padding only gives -inf."""
    (x,) = xs
    win = pool_window(x.shape, attrs)
    xp = _padded(x, win, -np.inf)
    acc = np.full(x.shape[:2] + win.out, -np.inf, x.dtype)
    for _, sl in _taps(win):
        v = xp[(slice(None), slice(None), *sl)]
        acc = np.where((v > acc) | np.isnan(v), v, acc)
    return acc


def avg_pool_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """Sum over each window (padding adds 0) divided by onnxruntime's divisor
    (``nn_rules.pool_divisors``)."""
    (x,) = xs
    win = pool_window(x.shape, attrs)
    xp = _padded(x, win, 0.0)
    acc = np.zeros(x.shape[:2] + win.out, x.dtype)
    with np.errstate(all="ignore"):
        for _, sl in _taps(win):
            acc = acc + xp[(slice(None), slice(None), *sl)]
    div = np.ones((), np.int64)
    for a in range(win.rank):
        div = np.multiply.outer(div, np.array(pool_divisors(win, a, attrs["count_include_pad"]),
                                              np.int64))
    with np.errstate(all="ignore"):
        return (acc / div.astype(x.dtype)).astype(x.dtype)


def lrn_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """ONNX LRN: ``x / (bias + alpha / size * square_sum) ** beta`` with the square sum over
    channels ``[c - floor((size-1)/2), c + ceil((size-1)/2)]`` (clipped to the tensor)."""
    (x,) = xs
    size = attrs["size"]
    lo = (size - 1) // 2
    dt = x.dtype.type
    c = x.shape[1]
    with np.errstate(all="ignore"):
        sq = x * x
    acc = np.zeros_like(x)
    for k in range(size):  # channel offset k - lo, in the template's order
        shift = k - lo
        # stops clamped at 0: a window wider than the channels gives an empty slice, not
        # one counted from the end
        src = slice(max(0, shift), max(0, min(c, c + shift)))
        dst = slice(max(0, -shift), max(0, min(c, c - shift)))
        with np.errstate(all="ignore"):
            acc[:, dst] = acc[:, dst] + sq[:, src]
    with np.errstate(all="ignore"):
        scale = dt(attrs["bias"]) + dt(attrs["alpha"]) / dt(size) * acc
        return (x / np.power(scale, dt(attrs["beta"]))).astype(x.dtype)
