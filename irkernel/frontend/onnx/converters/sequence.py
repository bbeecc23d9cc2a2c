"""Sequence models: LSTM, unrolled over its static sequence length.

The input projection of every time step is one matmul (``X @ W^T + Wb + Rb``);
each step then adds ``H @ R^T``, slices the four gates (ONNX order i, o, f, c)
and updates the cell. The graph grows linearly with the sequence length,
which is static in the model (a loop construct is a later option). Supported:
forward, reverse and bidirectional, both layouts, peepholes, ``clip``, the
default activations and any of Sigmoid/Tanh/Relu/HardSigmoid; not supported:
``input_forget=1`` and per-batch ``sequence_lens`` shorter than the sequence.
Imports the converter machinery only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import Context, OnnxOpConverter, Value, register, same_dtype
from irkernel.frontend.onnx.converters.shape import strided_slice

Args = list["Value | None"]


def _activation(ctx: Context, name: str, x: Value, alpha: float | None,
                beta: float | None) -> Value:
    if name == "Sigmoid":
        return ctx.emit("sigmoid", x)
    if name == "Tanh":
        return ctx.emit("tanh", x)
    if name == "Relu":
        return ctx.emit("relu", x)
    if name == "HardSigmoid":
        a = ctx.scalar(0.2 if alpha is None else alpha, x)
        b = ctx.scalar(0.5 if beta is None else beta, x)
        y = ctx.emit("add", ctx.emit("multiply", x, a), b)
        return ctx.emit("minimum", ctx.emit("maximum", y, ctx.scalar(0, x)), ctx.scalar(1, x))
    raise ctx.error(f"LSTM activation {name!r} is not supported (Sigmoid, Tanh, Relu, "
                    "HardSigmoid)")


def _take_rows(ctx: Context, v: Value, axis: int, start: int, stop: int) -> Value:
    begin, end = [0] * v.rank, list(v.shape)
    begin[axis], end[axis] = start, stop
    return strided_slice(ctx, v, begin, end, [1] * v.rank)


@register("LSTM")
class LSTM(OnnxOpConverter):
    graph_ops = ("add", "concat", "matmul", "maximum", "minimum", "multiply", "permute_dims",
                 "relu", "reshape", "sigmoid", "strided_slice", "tanh")

    @classmethod
    def _impl_v7(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        args = list(args) + [None] * (8 - len(args))
        x, w, r, b, seq_lens, h0, c0, p = args[:8]
        assert x is not None and w is not None and r is not None
        same_dtype(ctx, [v for v in (x, w, r, b, h0, c0, p) if v is not None], "LSTM")
        if int(attrs.get("input_forget", 0)):
            raise ctx.error("input_forget=1 is not supported")
        layout = int(attrs.get("layout", 0))
        if layout:  # [batch, seq, in] -> [seq, batch, in]; states [batch, dir, h] -> [dir, ...]
            x = ctx.emit("permute_dims", x, axes=(1, 0, 2))
            h0, c0 = (None if v is None else ctx.emit("permute_dims", v, axes=(1, 0, 2))
                      for v in (h0, c0))
        seq, batch, _ = x.shape
        if seq_lens is not None:
            lens = ctx.const_value(seq_lens, "input 'sequence_lens'")
            if np.any(lens != seq):
                raise ctx.error(f"sequence_lens {lens.tolist()} shorter than the sequence "
                                f"({seq}) are not supported")
        direction = attrs.get("direction", "forward")
        n_dir = 2 if direction == "bidirectional" else 1
        hidden = int(attrs.get("hidden_size", r.shape[-1]))
        if w.shape[0] != n_dir or r.shape != (n_dir, 4 * hidden, hidden):
            raise ctx.error(f"W {list(w.shape)} / R {list(r.shape)} do not match direction "
                            f"{direction!r} and hidden_size {hidden}")
        acts = list(attrs.get("activations", ["Sigmoid", "Tanh", "Tanh"] * n_dir))
        alphas = list(attrs.get("activation_alpha", []))
        betas = list(attrs.get("activation_beta", []))
        clip = attrs.get("clip")
        ys, hs, cs = [], [], []
        for d in range(n_dir):
            reverse = direction == "reverse" or d == 1
            sel = slice(3 * d, 3 * d + 3)
            y, h, c = cls._direction(
                ctx, x, [_take_rows(ctx, v, 0, d, d + 1) if v is not None else None
                         for v in (w, r, b, h0, c0, p)],
                hidden, batch, reverse, acts[sel], (alphas + [None] * 6)[sel],
                (betas + [None] * 6)[sel], clip)
            ys.append(y)
            hs.append(h)
            cs.append(c)
        def cat(vs: list[Value], axis: int) -> Value:
            return vs[0] if len(vs) == 1 else ctx.emit("concat", *vs, axis=axis)
        y_all = cat(ys, 1)  # [seq, n_dir, batch, hidden]
        if layout:
            y_all = ctx.emit("permute_dims", y_all, axes=(2, 0, 1, 3))
            return [y_all, ctx.emit("permute_dims", cat(hs, 0), axes=(1, 0, 2)),
                    ctx.emit("permute_dims", cat(cs, 0), axes=(1, 0, 2))]
        return [y_all, cat(hs, 0), cat(cs, 0)]

    @classmethod
    def _direction(cls, ctx: Context, x: Value, params: list[Value | None], hidden: int,
                   batch: int, reverse: bool, acts: list[str], alphas: list[float | None],
                   betas: list[float | None], clip: float | None) -> tuple[Value, Value, Value]:
        w, r, b, h0, c0, p = params
        assert w is not None and r is not None
        seq, _, n_in = x.shape
        wt = ctx.emit("permute_dims", ctx.reshape(w, (4 * hidden, n_in)), axes=(1, 0))
        rt = ctx.emit("permute_dims", ctx.reshape(r, (4 * hidden, hidden)), axes=(1, 0))
        proj = ctx.emit("matmul", ctx.reshape(x, (seq * batch, n_in)), wt)
        if b is not None:
            b2 = ctx.reshape(b, (8 * hidden,))
            bias = ctx.emit("add", _take_rows(ctx, b2, 0, 0, 4 * hidden),
                            _take_rows(ctx, b2, 0, 4 * hidden, 8 * hidden))
            proj = ctx.emit("add", proj, bias)
        proj = ctx.reshape(proj, (seq, batch, 4 * hidden))
        zeros = ctx.const(np.zeros((batch, hidden), dtype=x.dtype_name))
        h = zeros if h0 is None else ctx.reshape(h0, (batch, hidden))
        c = zeros if c0 is None else ctx.reshape(c0, (batch, hidden))
        peep = [None, None, None] if p is None else [
            _take_rows(ctx, ctx.reshape(p, (3 * hidden,)), 0, k * hidden, (k + 1) * hidden)
            for k in range(3)]  # P holds i, o, f

        def act(k: int, v: Value) -> Value:
            return _activation(ctx, acts[k], v, alphas[k], betas[k])

        def clipped(v: Value) -> Value:
            if clip is None:
                return v
            lim = float(clip)
            return ctx.emit("minimum", ctx.emit("maximum", v, ctx.scalar(-lim, v)),
                            ctx.scalar(lim, v))

        outs: list[Value] = []
        steps = range(seq - 1, -1, -1) if reverse else range(seq)
        for t in steps:
            g = ctx.emit("add", ctx.reshape(_take_rows(ctx, proj, 0, t, t + 1),
                                            (batch, 4 * hidden)), ctx.emit("matmul", h, rt))
            gi, go, gf, gc = (_take_rows(ctx, g, 1, k * hidden, (k + 1) * hidden)
                              for k in range(4))
            if peep[0] is not None:
                gi = ctx.emit("add", gi, ctx.emit("multiply", peep[0], c))
                gf = ctx.emit("add", gf, ctx.emit("multiply", peep[2], c))
            i, f = act(0, clipped(gi)), act(0, clipped(gf))
            cand = act(1, clipped(gc))
            c = ctx.emit("add", ctx.emit("multiply", f, c), ctx.emit("multiply", i, cand))
            if peep[1] is not None:
                go = ctx.emit("add", go, ctx.emit("multiply", peep[1], c))
            o = act(0, clipped(go))
            h = ctx.emit("multiply", o, act(2, c))
            outs.append(ctx.reshape(h, (1, 1, batch, hidden)))
        if reverse:
            outs.reverse()
        y = outs[0] if len(outs) == 1 else ctx.emit("concat", *outs, axis=0)
        return y, ctx.reshape(h, (1, batch, hidden)), ctx.reshape(c, (1, batch, hidden))
