"""The int8 weights and scales behind a dequantized constant (QDQ models' weights).

The ONNX frontend evaluates ``DequantizeLinear`` of a constant weight at import, so a
QDQ model's conv or matmul sees only ``wf = float32(q * scale)``. onnxruntime's
quantizer makes int8 weights symmetric (zero point 0) with ``scale = max|w| / 127`` per
output channel (or per tensor), so ``q`` and ``scale`` are found again from ``wf``:
the candidates are ``max|wf| / 127`` per channel and per tensor, each a few ulps either
way (``max|wf|`` is itself ``float32(127 * scale)``, rounded), and a candidate counts
only when ``float32(rint(wf / s) * s)`` gives back every element of the channel
exactly, with ``|q| <= 127``. A weight that is not such a product is left alone.
Imports NumPy only.
"""

from __future__ import annotations

import numpy as np

#: Ulps tried either way of each candidate scale.
ULPS = 2


def _shifted(s: np.ndarray, steps: int) -> np.ndarray:
    out = s.copy()
    for _ in range(abs(steps)):
        out = np.nextafter(out, np.float32(np.inf if steps > 0 else -np.inf)).astype(np.float32)
    return out


def symmetric_int8(wf: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(q, scale)``: int64 ``q`` of ``wf``'s shape and float32 ``scale`` per index of
    ``axis`` with ``float32(q * scale) == wf`` exactly (module docstring), or None."""
    w = np.moveaxis(np.asarray(wf), axis, 0)
    if w.dtype != np.float32 or w.shape[0] == 0 or w.size == 0:
        return None
    flat = w.reshape(w.shape[0], -1)
    if not np.all(np.isfinite(flat)):
        return None
    amax = np.abs(flat).max(axis=1)
    per_channel = np.where(amax == 0, np.float32(1), amax / np.float32(127)).astype(np.float32)
    whole = np.full_like(per_channel, max(float(amax.max()), 1e-30) / 127, np.float32)
    found = np.zeros(len(flat), bool)
    q_best = np.zeros(flat.shape, np.float32)
    s_best = np.ones(len(flat), np.float32)
    for base in (per_channel, whole):
        for steps in sorted(range(-ULPS, ULPS + 1), key=abs):
            s = _shifted(base, steps)
            q = np.rint(flat / s[:, None])
            ok = (np.abs(q) <= 127).all(axis=1) & (q * s[:, None] == flat).all(axis=1)
            new = ok & ~found
            q_best[new], s_best[new] = q[new], s[new]
            found |= ok
    if not found.all():
        return None
    q_out = np.moveaxis(q_best.reshape(w.shape), 0, axis).astype(np.int64)
    return q_out, s_best


__all__ = ["ULPS", "symmetric_int8"]
