"""Type rules and NumPy references of the recurrence ops ``lstm_recurrence`` and
``gru_recurrence``: the time loop of one direction of an ONNX LSTM or GRU.

Why ops of their own: unrolled into graph ops, every step of a sequence was a matmul, four
slices and a handful of elementwise kernels (an exported 12-step LSTM ran ~450 kernel
launches per call). As one op, the whole loop is one kernel (``passes/topi/recurrent.py``).
The input projection of every step does not depend on the state, so it stays outside, as
one matmul over all steps; the op receives its result.

``lstm_recurrence(xproj[T, B, 4H], rt[H, 4H], h0[B, H], c0[B, H], p[3, H]) -> [T + 1, B, H]``:
``xproj`` holds ``X W^T + Wb + Rb`` (gates in ONNX order i, o, f, c), ``rt`` is ``R^T``
(so a step's ``h @ rt`` reads rows of ``rt`` at unit stride), ``p`` the peepholes i, o, f
(zeros for none). Rows ``0 .. T-1`` of the result are ``Y`` in time order (also when
``reverse``, which runs the steps from ``T - 1`` down to 0), row ``T`` the final cell
state; the final hidden state is row ``T - 1`` (``0`` when reversed). One result, because
graph ops have one.

``gru_recurrence(xproj[T, B, 3H], rt[H, 3H], rbh[H], h0[B, H]) -> [T, B, H]`` (``Y``):
``xproj`` holds ``X W^T + Wb`` plus ``Rb`` of the gates z and r (ONNX order z, r, h);
``rbh`` is ``Rb`` of the h gate, added inside the reset product when
``linear_before_reset`` and outside it otherwise, as ONNX defines.

Attributes: ``activations``, comma-separated names of ``ACTIVATIONS`` (f, g, h for LSTM;
f, g for GRU); ``activation_alpha``/``activation_beta``, empty for the defaults or one
value per activation (read by ``hard_sigmoid``, ``leaky_relu``, ``affine``, ...);
``clip`` (inf: none) bounds every gate input before its activation; ``input_forget``
(LSTM) sets the forget gate to ``1 - i``. Arithmetic is in the operands' dtype, sigmoid
and tanh through the compiled scalar code as the ``sigmoid``/``tanh`` ops, so the
unrolled and the fused forms agree. Imports numpy and lower ``irkernel.ir`` modules only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.ids import FLOAT_DTYPES
from irkernel.ir.ops.opcodes import OP_SIGMOID, OP_TANH
from irkernel.ir.ops.opdef import Shape, TensorType
from irkernel.ir.ops.references import float_math, nan_max, nan_min
from irkernel.ir.ops.type_rules import dtypes_in, fmt, same_dtype

#: Activation names and their default (alpha, beta), as ONNX's RNN activations.
ACTIVATIONS: dict[str, tuple[float, float]] = {
    "sigmoid": (0.0, 0.0), "tanh": (0.0, 0.0), "relu": (0.0, 0.0),
    "hard_sigmoid": (0.2, 0.5), "leaky_relu": (0.01, 0.0), "affine": (1.0, 0.0),
    "thresholded_relu": (1.0, 0.0), "scaled_tanh": (1.0, 1.0), "elu": (1.0, 0.0),
    "softsign": (0.0, 0.0), "softplus": (0.0, 0.0),
}
#: Gates per cell and activations per op.
GATES = {"lstm_recurrence": 4, "gru_recurrence": 3}
N_ACTIVATIONS = {"lstm_recurrence": 3, "gru_recurrence": 2}


def activation_list(attrs: Mapping[str, Any],
                    op: str) -> list[tuple[str, float, float]]:
    """``(name, alpha, beta)`` per activation slot; TypeInferenceError on a bad attribute."""
    names = [n.strip() for n in str(attrs["activations"]).split(",")]
    want = N_ACTIVATIONS[op]
    if len(names) != want or any(n not in ACTIVATIONS for n in names):
        raise TypeInferenceError(
            f"activations {attrs['activations']!r} must be {want} comma-separated names "
            f"of {', '.join(ACTIVATIONS)}")
    params = []
    for key, pos in (("activation_alpha", 0), ("activation_beta", 1)):
        given = attrs[key]
        if given and len(given) != want:
            raise TypeInferenceError(f"{key} holds {len(given)} values; give none or "
                                     f"one per activation ({want})")
        params.append([float(given[k]) if given else ACTIVATIONS[n][pos]
                       for k, n in enumerate(names)])
    return list(zip(names, params[0], params[1], strict=True))


def _check_common(op: str, types: Sequence[TensorType], attrs: Mapping[str, Any]) -> tuple[
        int, int, int, int]:
    dtypes_in(FLOAT_DTYPES, types, "operand")
    dt = same_dtype(types)
    activation_list(attrs, op)
    clip = float(attrs["clip"])
    if not clip > 0:
        raise TypeInferenceError(f"clip {clip} must be positive (inf: no clipping)")
    xs = types[0][1]
    gates = GATES[op]
    if len(xs) != 3 or xs[0] < 1 or xs[2] % gates or xs[2] == 0:
        raise TypeInferenceError(f"xproj {fmt(xs)} must be [steps >= 1, batch, "
                                 f"{gates} * hidden]")
    steps, batch, hidden = xs[0], xs[1], xs[2] // gates
    return dt, steps, batch, hidden


def _expect(what: str, got: Shape, want: Shape) -> None:
    if tuple(got) != want:
        raise TypeInferenceError(f"{what} is {fmt(got)}, expected {fmt(want)}")


def lstm_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt, steps, batch, hidden = _check_common("lstm_recurrence", types, attrs)
    for (name, want), (_, got) in zip((("rt", (hidden, 4 * hidden)), ("h0", (batch, hidden)),
                                       ("c0", (batch, hidden)), ("p", (3, hidden))),
                                      types[1:], strict=True):
        _expect(name, got, want)
    return dt, (steps + 1, batch, hidden)


def gru_rule(types: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    dt, steps, batch, hidden = _check_common("gru_recurrence", types, attrs)
    for (name, want), (_, got) in zip((("rt", (hidden, 3 * hidden)), ("rbh", (hidden,)),
                                       ("h0", (batch, hidden))), types[1:], strict=True):
        _expect(name, got, want)
    return dt, (steps, batch, hidden)


_SIGMOID, _TANH = float_math(OP_SIGMOID), float_math(OP_TANH)


def apply_activation(name: str, alpha: float, beta: float, x: np.ndarray) -> np.ndarray:
    """One RNN activation of ``x`` in its dtype (ONNX's definitions)."""
    t = x.dtype.type
    a, b, zero, one = t(alpha), t(beta), t(0), t(1)
    if name == "sigmoid":
        return _SIGMOID([x], {})
    if name == "tanh":
        return _TANH([x], {})
    if name == "relu":
        return nan_max(x, np.zeros((), x.dtype))
    if name == "hard_sigmoid":
        return nan_min(nan_max(a * x + b, np.asarray(zero)), np.asarray(one))
    if name == "leaky_relu":
        return np.where(x >= zero, x, a * x)
    if name == "affine":
        return a * x + b
    if name == "thresholded_relu":
        return np.where(x > a, x, zero)
    if name == "scaled_tanh":
        return a * _TANH([b * x], {})
    if name == "elu":
        return np.where(x >= zero, x, a * (np.exp(x) - one))
    if name == "softsign":
        return x / (one + np.abs(x))
    return np.log(one + np.exp(x))  # softplus


def _gate_functions(attrs: Mapping[str, Any], op: str) -> tuple[
        list[Callable[[np.ndarray], np.ndarray]], Callable[[np.ndarray], np.ndarray]]:
    acts = [lambda x, spec=spec: apply_activation(*spec, x) for spec in activation_list(
        attrs, op)]
    clip = float(attrs["clip"])
    if math.isinf(clip):
        return acts, lambda x: x

    def clipped(x: np.ndarray) -> np.ndarray:
        lim = x.dtype.type(clip)
        return nan_min(nan_max(x, np.asarray(-lim)), np.asarray(lim))
    return acts, clipped


def _steps(n: int, reverse: bool) -> range:
    return range(n - 1, -1, -1) if reverse else range(n)


def lstm_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _lstm(xs, attrs)


def gru_ref(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _gru(xs, attrs)


def _lstm(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    xproj, rt, h, c, p = xs
    steps, batch, four_h = xproj.shape
    hidden = four_h // 4
    (f, g, act_h), clip = _gate_functions(attrs, "lstm_recurrence")
    out = np.empty((steps + 1, batch, hidden), xproj.dtype)
    one = xproj.dtype.type(1)
    for t in _steps(steps, attrs["reverse"]):
        gates = xproj[t] + h @ rt
        gi, go, gf, gc = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
        i = f(clip(gi + p[0] * c))
        forget = one - i if attrs["input_forget"] else f(clip(gf + p[2] * c))
        c = forget * c + i * g(clip(gc))
        o = f(clip(go + p[1] * c))
        h = o * act_h(c)
        out[t] = h
    out[steps] = c
    return out


def _gru(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    xproj, rt, rbh, h = xs
    steps, batch, three_h = xproj.shape
    hidden = three_h // 3
    (f, g), clip = _gate_functions(attrs, "gru_recurrence")
    out = np.empty((steps, batch, hidden), xproj.dtype)
    one = xproj.dtype.type(1)
    rt_zr, rt_h = rt[:, :2 * hidden], rt[:, 2 * hidden:]
    for t in _steps(steps, attrs["reverse"]):
        zr = xproj[t, :, :2 * hidden] + h @ rt_zr
        z = f(clip(zr[:, :hidden]))
        r = f(clip(zr[:, hidden:]))
        xh = xproj[t, :, 2 * hidden:]
        if attrs["linear_before_reset"]:
            cand = g(clip(xh + r * (h @ rt_h + rbh)))
        else:
            cand = g(clip(xh + (r * h) @ rt_h + rbh))
        h = (one - z) * cand + z * h
        out[t] = h
    return out


__all__ = ["ACTIVATIONS", "GATES", "N_ACTIVATIONS", "activation_list", "apply_activation",
           "gru_ref", "gru_rule", "lstm_ref", "lstm_rule"]
