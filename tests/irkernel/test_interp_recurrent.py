"""ik.interpret of the recurrence ops ``lstm_recurrence`` and ``gru_recurrence`` against
hand-written Python: the ONNX LSTM and GRU equations, element by element with ``math``, in
float64 (the op's float64 result agrees to rounding).

Expected values are Python's own per-element code, never the op table's reference.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from interp_helpers import run

import irkernel as ik

COVERED = {"lstm_recurrence", "gru_recurrence"}

_ACT = {
    "sigmoid": lambda x, a, b: 1 / (1 + math.exp(-x)),
    "tanh": lambda x, a, b: math.tanh(x),
    "relu": lambda x, a, b: max(x, 0.0),
    "hard_sigmoid": lambda x, a, b: min(max(a * x + b, 0.0), 1.0),
    "elu": lambda x, a, b: x if x >= 0 else a * (math.exp(x) - 1),
    "softsign": lambda x, a, b: x / (1 + abs(x)),
}


def _acts(names: str, alphas: tuple, betas: tuple) -> list:
    defaults = {"hard_sigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}
    out = []
    for k, n in enumerate(names.split(",")):
        a, b = defaults.get(n, (0.0, 0.0))
        a, b = (alphas[k] if alphas else a), (betas[k] if betas else b)
        out.append(lambda x, n=n, a=a, b=b: _ACT[n](x, a, b))
    return out


def _clip(x: float, limit: float) -> float:
    return min(max(x, -limit), limit)


def _lstm_python(xp, rt, h0, c0, p, reverse=False, clip=math.inf, input_forget=False,
                 activations="sigmoid,tanh,tanh", alphas=(), betas=()):
    steps, batch, four_h = xp.shape
    hid = four_h // 4
    f, g, hact = _acts(activations, alphas, betas)
    out = np.zeros((steps + 1, batch, hid))
    for b in range(batch):
        h, c = list(h0[b]), list(c0[b])
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            gate = [xp[t, b, j] + sum(h[k] * rt[k, j] for k in range(hid))
                    for j in range(four_h)]
            for j in range(hid):
                i = f(_clip(gate[j] + p[0, j] * c[j], clip))
                fg = 1 - i if input_forget else f(_clip(gate[2 * hid + j] + p[2, j] * c[j], clip))
                c[j] = fg * c[j] + i * g(_clip(gate[3 * hid + j], clip))
                o = f(_clip(gate[hid + j] + p[1, j] * c[j], clip))
                out[t, b, j] = o * hact(c[j])
            h = list(out[t, b])
        out[steps, b] = c
    return out


def _gru_python(xp, rt, rbh, h0, reverse=False, clip=math.inf, linear_before_reset=False,
                activations="sigmoid,tanh", alphas=(), betas=()):
    steps, batch, three_h = xp.shape
    hid = three_h // 3
    f, g = _acts(activations, alphas, betas)
    out = np.zeros((steps, batch, hid))
    for b in range(batch):
        h = list(h0[b])
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            def rec(j, src):
                return sum(src[k] * rt[k, j] for k in range(hid))
            z = [f(_clip(xp[t, b, j] + rec(j, h), clip)) for j in range(hid)]
            r = [f(_clip(xp[t, b, hid + j] + rec(hid + j, h), clip)) for j in range(hid)]
            rh = [r[j] * h[j] for j in range(hid)]
            for j in range(hid):
                xh = xp[t, b, 2 * hid + j]
                if linear_before_reset:
                    cand = g(_clip(xh + r[j] * (rec(2 * hid + j, h) + rbh[j]), clip))
                else:
                    cand = g(_clip(xh + rec(2 * hid + j, rh) + rbh[j], clip))
                out[t, b, j] = (1 - z[j]) * cand + z[j] * h[j]
            h = list(out[t, b])
    return out


def _rand(*shape: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.7, shape)


@pytest.mark.parametrize(("steps", "batch", "hid", "attrs"), [
    (3, 2, 2, {}),
    (4, 1, 3, {"reverse": True, "clip": 0.4}),
    (2, 3, 2, {"input_forget": True, "activations": "hard_sigmoid,elu,softsign",
               "activation_alpha": (0.3, 0.5, 0.0)}),
])
def test_lstm_recurrence_against_python(steps, batch, hid, attrs):
    xp, rt = _rand(steps, batch, 4 * hid, seed=1), _rand(hid, 4 * hid, seed=2)
    h0, c0, p = _rand(batch, hid, seed=3), _rand(batch, hid, seed=4), _rand(3, hid, seed=5)
    out = run("lstm_recurrence", xp, rt, h0, c0, p, **attrs)
    renamed = {{"activation_alpha": "alphas", "activation_beta": "betas"}.get(k, k): v
               for k, v in attrs.items()}
    np.testing.assert_allclose(out, _lstm_python(xp, rt, h0, c0, p, **renamed), rtol=1e-12,
                               atol=1e-14)


@pytest.mark.parametrize("linear", [False, True])
@pytest.mark.parametrize(("steps", "batch", "hid", "attrs"), [
    (3, 2, 2, {}),
    (4, 1, 3, {"reverse": True, "clip": 0.3, "activations": "relu,softsign"}),
])
def test_gru_recurrence_against_python(steps, batch, hid, attrs, linear):
    xp, rt = _rand(steps, batch, 3 * hid, seed=6), _rand(hid, 3 * hid, seed=7)
    rbh, h0 = _rand(hid, seed=8), _rand(batch, hid, seed=9)
    out = run("gru_recurrence", xp, rt, rbh, h0, linear_before_reset=linear, **attrs)
    want = _gru_python(xp, rt, rbh, h0, linear_before_reset=linear, **attrs)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("op", "shapes", "attrs", "match"), [
    ("lstm_recurrence", [(2, 1, 8), (2, 8), (1, 2), (1, 2), (3, 2)],
     {"activations": "sigmoid,tanh"}, "must be 3 comma-separated names"),
    ("lstm_recurrence", [(2, 1, 8), (2, 8), (1, 2), (1, 2), (3, 2)],
     {"activations": "sigmoid,swish,tanh"}, "must be 3 comma-separated names"),
    ("lstm_recurrence", [(2, 1, 8), (2, 8), (1, 2), (1, 2), (3, 2)],
     {"activation_alpha": (1.0,)}, "activation_alpha holds 1 values"),
    ("lstm_recurrence", [(2, 1, 8), (2, 8), (1, 2), (1, 2), (3, 2)], {"clip": 0.0},
     "clip 0.0 must be positive"),
    ("lstm_recurrence", [(2, 1, 7), (2, 8), (1, 2), (1, 2), (3, 2)], {},
     r"xproj \(2, 1, 7\) must be \[steps >= 1, batch, 4 \* hidden\]"),
    ("lstm_recurrence", [(2, 1, 8), (8, 2), (1, 2), (1, 2), (3, 2)], {},
     r"rt is \(8, 2\), expected \(2, 8\)"),
    ("gru_recurrence", [(0, 1, 6), (2, 6), (2,), (1, 2)], {}, "steps >= 1"),
    ("gru_recurrence", [(2, 1, 6), (2, 6), (3,), (1, 2)], {}, r"rbh is \(3,\), expected \(2,\)"),
])
def test_bad_operands_and_attributes_name_the_fault(op, shapes, attrs, match):
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"p{k}", s, "float32") for k, s in enumerate(shapes)]
    with pytest.raises(ValueError, match=match):
        bb.call(op, *xs, **attrs)


def test_int_operands_are_rejected():
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"p{k}", s, "int32") for k, s in enumerate([(2, 1, 6), (2, 6), (2,), (1, 2)])]
    with pytest.raises(ValueError, match="dtype int32 not supported"):
        bb.call("gru_recurrence", *xs)
