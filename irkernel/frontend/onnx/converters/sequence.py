"""Recurrent layers: ONNX LSTM and GRU, one recurrence op per direction.

Each direction is two steps. The input projection of every time step does not depend on
the state, so it is one matmul over all steps (``X [T*B, I] @ W^T + biases -> [T, B, G*H]``);
the time loop is one graph op, ``lstm_recurrence`` or ``gru_recurrence``
(:mod:`irkernel.ir.ops.recurrent`), which compiles to one kernel. Unrolled into graph ops
instead, an exported 12-step LSTM ran ~450 kernel launches per call. The recurrent
weights go in as ``R^T`` (a transpose of a constant, folded at import), so the kernel's
inner loop reads them at unit stride.

Supported: forward, reverse and bidirectional, both layouts, initial states, peepholes,
``clip``, ``input_forget``, GRU's ``linear_before_reset``, and every activation of the
ONNX spec (Sigmoid, Tanh, Relu, HardSigmoid, LeakyRelu, Affine, ThresholdedRelu,
ScaledTanh, Elu, Softsign, Softplus) with ``activation_alpha``/``activation_beta``
consumed in order by the activations that take them, as onnxruntime does. Not
supported: per-batch ``sequence_lens`` shorter than the sequence. Imports the converter machinery and the op table's activation names only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import Context, OnnxOpConverter, Value, register, same_dtype
from irkernel.frontend.onnx.converters.shape import strided_slice
from irkernel.ir.ops.recurrent import ACTIVATIONS

Args = list["Value | None"]

#: ONNX activation names (lower case, as onnxruntime compares them) -> the ops' names.
_ONNX_ACTIVATIONS = {name.replace("_", ""): name for name in ACTIVATIONS}
#: Which activations consume an alpha and a beta from the attribute lists.
_TAKES = {"affine": (True, True), "leaky_relu": (True, False),
          "thresholded_relu": (True, False), "scaled_tanh": (True, True),
          "hard_sigmoid": (True, True), "elu": (True, False)}


def _activation_attrs(ctx: Context, attrs: dict[str, Any], op_type: str, n_dir: int,
                      defaults: list[str]) -> list[dict[str, Any]]:
    """The recurrence op's activation attributes of each direction."""
    given = attrs.get("activations")
    names = list(given) if given else defaults * n_dir
    if len(names) != len(defaults) * n_dir:
        raise ctx.error(f"{op_type} activations {names} must hold {len(defaults)} names per "
                        f"direction ({n_dir})")
    alphas = list(attrs.get("activation_alpha", []))
    betas = list(attrs.get("activation_beta", []))
    slots = []
    for name in names:
        op_name = _ONNX_ACTIVATIONS.get(str(name).lower())
        if op_name is None:
            raise ctx.error(f"{op_type} activation {name!r} is not supported (ONNX's RNN "
                            f"activations: {', '.join(sorted(_ONNX_ACTIVATIONS))})")
        alpha, beta = ACTIVATIONS[op_name]
        takes_alpha, takes_beta = _TAKES.get(op_name, (False, False))
        if takes_alpha and alphas:
            alpha = alphas.pop(0)
        if takes_beta and betas:
            beta = betas.pop(0)
        slots.append((op_name, float(alpha), float(beta)))
    per = len(defaults)
    return [{"activations": ",".join(s[0] for s in slots[d * per:(d + 1) * per]),
             "activation_alpha": tuple(s[1] for s in slots[d * per:(d + 1) * per]),
             "activation_beta": tuple(s[2] for s in slots[d * per:(d + 1) * per])}
            for d in range(n_dir)]


def _take_rows(ctx: Context, v: Value, axis: int, start: int, stop: int) -> Value:
    begin, end = [0] * v.rank, list(v.shape)
    begin[axis], end[axis] = start, stop
    return strided_slice(ctx, v, begin, end, [1] * v.rank)


def _direction_rows(ctx: Context, v: Value | None, d: int, shape: tuple[int, ...]
                    ) -> Value | None:
    """Direction ``d`` of a per-direction input, reshaped to ``shape`` (None stays None)."""
    return None if v is None else ctx.reshape(_take_rows(ctx, v, 0, d, d + 1), shape)


@dataclass
class _Direction:
    """One direction's operands and attributes for its recurrence op: the projection
    ``[T*B, G*H]`` (no bias yet), ``R^T``, its rows of B, initial states and the
    converter's extra inputs (LSTM's P)."""

    index: int
    proj: Value
    rt: Value
    bias: Value | None
    states: list[Value]
    extra: Args
    op_attrs: dict[str, Any]
    seq: int
    batch: int
    hidden: int


class _Recurrent(OnnxOpConverter):
    """What LSTM and GRU share: checks, layout, directions, projection, outputs."""

    op_type = ""
    gates = 0
    default_activations: list[str] = []

    @classmethod
    def _run(cls, ctx: Context, args: Args, attrs: dict[str, Any], n_states: int
             ) -> list[Value]:
        x, w, r, b, seq_lens = args[:5]
        states, extra = args[5:5 + n_states], args[5 + n_states:]
        assert x is not None and w is not None and r is not None
        present = [v for v in (x, w, r, b, *states, *extra) if v is not None]
        same_dtype(ctx, present, cls.op_type)
        layout = int(attrs.get("layout", 0))
        if layout:  # [batch, seq, in] -> [seq, batch, in]; states [batch, dir, h] -> [dir, ...]
            x = ctx.emit("permute_dims", x, axes=(1, 0, 2))
            states = [None if v is None else ctx.emit("permute_dims", v, axes=(1, 0, 2))
                      for v in states]
        seq, batch, n_in = x.shape
        if seq_lens is not None:
            lens = ctx.const_value(seq_lens, "input 'sequence_lens'")
            if np.any(lens != seq):
                raise ctx.error(f"sequence_lens {lens.tolist()} shorter than the sequence "
                                f"({seq}) are not supported")
        direction = attrs.get("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.error(f"{cls.op_type} direction {direction!r} is not one of forward, "
                            "reverse, bidirectional")
        n_dir = 2 if direction == "bidirectional" else 1
        hidden = int(attrs.get("hidden_size", r.shape[-1]))
        g = cls.gates * hidden
        if w.shape != (n_dir, g, n_in) or r.shape != (n_dir, g, hidden):
            raise ctx.error(f"W {list(w.shape)} / R {list(r.shape)} do not match direction "
                            f"{direction!r}, hidden_size {hidden} and input size {n_in}")
        clip = attrs.get("clip")
        common = {"clip": float("inf") if clip is None else float(clip)}
        acts = _activation_attrs(ctx, attrs, cls.op_type, n_dir, cls.default_activations)
        x2 = ctx.reshape(x, (seq * batch, n_in))
        outs: list[list[Value]] = []
        for d in range(n_dir):
            wd = _direction_rows(ctx, w, d, (g, n_in))
            rd = _direction_rows(ctx, r, d, (g, hidden))
            assert wd is not None and rd is not None
            proj = ctx.emit("matmul", x2, ctx.emit("permute_dims", wd, axes=(1, 0)))
            rt = ctx.emit("permute_dims", rd, axes=(1, 0))
            bd = _direction_rows(ctx, b, d, (2 * g,))
            st = [_direction_rows(ctx, v, d, (batch, hidden)) for v in states]
            zeros = ctx.const(np.zeros((batch, hidden), dtype=x.dtype_name))
            st = [zeros if v is None else v for v in st]
            reverse = direction == "reverse" or d == 1
            op_attrs = {**common, **acts[d], "reverse": reverse}
            outs.append(cls._direction(ctx, attrs, _Direction(d, proj, rt, bd, st, extra,
                                                              op_attrs, seq, batch, hidden)))

        def cat(k: int, axis: int) -> Value:
            vs = [o[k] for o in outs]
            return vs[0] if len(vs) == 1 else ctx.emit("concat", *vs, axis=axis)
        results = [cat(0, 1)] + [cat(k, 0) for k in range(1, len(outs[0]))]
        if layout:  # Y [seq, dir, batch, h] -> [batch, seq, dir, h]; states -> [batch, dir, h]
            results = [ctx.emit("permute_dims", results[0], axes=(2, 0, 1, 3))] + [
                ctx.emit("permute_dims", v, axes=(1, 0, 2)) for v in results[1:]]
        return results

    @classmethod
    def _direction(cls, ctx: Context, attrs: dict[str, Any], dn: _Direction) -> list[Value]:
        """Y ``[T, 1, B, H]`` and the final states ``[1, B, H]`` of one direction."""
        raise NotImplementedError


def _last_step(ctx: Context, seq_out: Value, steps: int, reverse: bool) -> Value:
    """``Y_h``: the row of the last step run (``0`` when reversed), as ``[1, B, H]``."""
    row = 0 if reverse else steps - 1
    return _take_rows(ctx, seq_out, 0, row, row + 1)


@register("LSTM")
class LSTM(_Recurrent):
    graph_ops = ("add", "concat", "lstm_recurrence", "matmul", "permute_dims",
                 "reshape", "strided_slice")
    op_type, gates = "LSTM", 4
    default_activations = ["Sigmoid", "Tanh", "Tanh"]

    @classmethod
    def _impl_v7(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        return cls._run(ctx, list(args) + [None] * (8 - len(args)), attrs, 2)

    @classmethod
    def _direction(cls, ctx: Context, attrs: dict[str, Any], dn: _Direction) -> list[Value]:
        seq, batch, hidden, proj, b = dn.seq, dn.batch, dn.hidden, dn.proj, dn.bias
        g = 4 * hidden
        if b is not None:
            proj = ctx.emit("add", proj, ctx.emit("add", _take_rows(ctx, b, 0, 0, g),
                                                  _take_rows(ctx, b, 0, g, 2 * g)))
        (p,) = dn.extra
        peep = (ctx.const(np.zeros((3, hidden), dtype=proj.dtype_name)) if p is None
                else _direction_rows(ctx, p, dn.index, (3, hidden)))
        assert peep is not None
        out = ctx.emit("lstm_recurrence", ctx.reshape(proj, (seq, batch, g)), dn.rt,
                       *dn.states, peep, input_forget=bool(int(attrs.get("input_forget", 0))),
                       **dn.op_attrs)
        y = ctx.reshape(_take_rows(ctx, out, 0, 0, seq), (seq, 1, batch, hidden))
        return [y, _last_step(ctx, out, seq, dn.op_attrs["reverse"]),
                _take_rows(ctx, out, 0, seq, seq + 1)]


@register("GRU")
class GRU(_Recurrent):
    graph_ops = ("add", "concat", "gru_recurrence", "matmul", "permute_dims",
                 "reshape", "strided_slice")
    op_type, gates = "GRU", 3
    default_activations = ["Sigmoid", "Tanh"]

    @classmethod
    def _impl_v7(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        return cls._run(ctx, list(args) + [None] * (6 - len(args)), attrs, 1)

    @classmethod
    def _direction(cls, ctx: Context, attrs: dict[str, Any], dn: _Direction) -> list[Value]:
        seq, batch, hidden, proj, b = dn.seq, dn.batch, dn.hidden, dn.proj, dn.bias
        g = 3 * hidden
        if b is None:
            rbh = ctx.const(np.zeros(hidden, dtype=proj.dtype_name))
        else:  # Wb of every gate and Rb of z and r add to the projection; Rbh goes in apart
            zeros = ctx.const(np.zeros(hidden, dtype=proj.dtype_name))
            rb_zr = ctx.emit("concat", _take_rows(ctx, b, 0, g, g + 2 * hidden), zeros, axis=0)
            proj = ctx.emit("add", proj, ctx.emit("add", _take_rows(ctx, b, 0, 0, g), rb_zr))
            rbh = _take_rows(ctx, b, 0, g + 2 * hidden, 2 * g)
        out = ctx.emit("gru_recurrence", ctx.reshape(proj, (seq, batch, g)), dn.rt, rbh,
                       *dn.states,
                       linear_before_reset=bool(int(attrs.get("linear_before_reset", 0))),
                       **dn.op_attrs)
        return [ctx.reshape(out, (seq, 1, batch, hidden)),
                _last_step(ctx, out, seq, dn.op_attrs["reverse"])]
