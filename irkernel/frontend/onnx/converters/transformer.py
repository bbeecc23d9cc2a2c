"""The opset-23 transformer ops: Attention, RMSNormalization and RotaryEmbedding.

Each is composed at import from existing graph ops (``matmul``, the softmax of
``nn.Softmax``, ``add``, ``multiply``, ``where``, ...), so FuseOps and the kernels see
ordinary graph ops and no new op is needed. The semantics follow
``onnx.reference`` (``op_attention.py``, ``op_rms_normalization.py``,
``op_rotary_embedding.py``), which the tests compare against:

- Attention (opsets 23-25): 3-D inputs are split into heads (``q_num_heads``,
  ``kv_num_heads``), 4-D ones are used as they are. Q and K are each scaled by
  ``sqrt(scale)`` (the reference's order, in Q's dtype). Grouped-query attention does
  not repeat K and V: Q's ``r = q_heads / kv_heads`` heads of one group are folded into
  its rows, so one batched ``matmul`` per group reads the shared K. The additive bias is
  the sum of the mask (a bool mask as 0 / -inf; a mask shorter than the keys padded with
  -inf) and one 0 / -inf term for ``is_causal``, the sliding windows and
  ``nonpad_kv_seqlen``, all bottom-right aligned at offset ``past length`` (or
  ``nonpad_kv_seqlen - q_len`` per batch). A query row the bias masks entirely gets
  zero probabilities (the reference's guard), decided on the bias, which folds to a
  constant when the masks are constants. ``softcap``, ``softmax_precision`` and the four
  ``qk_matmul_output_mode`` values are supported; ``past_key``/``past_value`` give the
  ``present`` outputs (a ``concat`` along the sequence).
- RMSNormalization: ``x / sqrt(mean(x * x) + epsilon) * scale`` over ``axis`` and
  after, in float32 for narrow floats (``stash_type`` 1, the only one the reference has).
- RotaryEmbedding: 3-D (``num_heads``) or 4-D inputs, halves or ``interleaved`` pairs,
  partial rotation (``rotary_embedding_dim``), caches read at ``position_ids`` by a
  ``take``. It works in the input's own layout (no transposes).

Imports the converter machinery and ``nn`` (softmax) only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import (
    Context,
    OnnxOpConverter,
    Value,
    norm_axis,
    register,
)
from irkernel.frontend.onnx.converters.nn import Softmax
from irkernel.frontend.onnx.converters.shape import ONNX_TO_NUMPY

Args = list["Value | None"]
_NARROW = ("float16", "bfloat16")


def _arg(args: Args, k: int) -> Value | None:
    return args[k] if len(args) > k else None


def _split_heads(ctx: Context, x: Value, heads: Any, what: str) -> Value:
    """[B, S, H * D] -> [B, H, S, D]."""
    if heads is None:
        raise ctx.error(f"{what} is 3-D ({list(x.shape)}): q_num_heads and kv_num_heads "
                        "are required")
    b, s, hidden = x.shape
    heads = int(heads)
    if heads <= 0 or hidden % heads:
        raise ctx.error(f"{what}'s hidden size {hidden} is not a multiple of {heads} heads")
    x = ctx.reshape(x, (b, s, heads, hidden // heads))
    return ctx.emit("permute_dims", x, axes=(0, 2, 1, 3))


def _mask_bias(ctx: Context, mask: Value, q: Value, skv: int) -> Value:
    """attn_mask as an additive bias of Q's dtype; a mask shorter than the keys is padded
    with 'masked' (the reference pads with False or -inf)."""
    is_bool = mask.dtype_name == "bool"
    if mask.rank == 0:
        raise ctx.error("attn_mask must have at least one dimension")
    short = skv - mask.shape[-1]
    if short < 0:
        raise ctx.error(f"attn_mask's last dimension {mask.shape[-1]} exceeds the "
                        f"{skv} keys")
    if short:
        fill = np.bool_(False) if is_bool else -np.inf
        pad = ctx.scalar(fill, mask)
        pad = ctx.emit("broadcast_to", pad, shape=mask.shape[:-1] + (short,))
        mask = ctx.emit("concat", mask, pad, axis=mask.rank - 1)
    if is_bool:
        return ctx.emit("where", mask, ctx.scalar(0, q), ctx.scalar(-np.inf, q))
    return ctx.astype(mask, q.dtype_name)


def _structural_bias(ctx: Context, q: Value, sq: int, skv: int, past: int,
                     nonpad: Value | None, causal: bool, left: int, right: int
                     ) -> Value | None:
    """The 0 / -inf bias of ``is_causal``, the windows and ``nonpad_kv_seqlen``.

    Query ``i`` sits at absolute position ``i + offset`` (offset: the past length, or
    ``nonpad_kv_seqlen[b] - sq`` per batch); key ``j`` is masked when ``j - i`` is past
    the causal frontier or outside the windows, or when ``j >= nonpad_kv_seqlen[b]``.
    All-constant pieces fold at import (``Context.emit``)."""
    if not (causal or left >= 0 or right >= 0 or nonpad is not None):
        return None
    d = ctx.const(np.arange(skv, dtype=np.int64)[None, :] - np.arange(sq, dtype=np.int64)[:, None])
    if nonpad is not None:
        if nonpad.rank != 1:
            raise ctx.error(f"nonpad_kv_seqlen must be 1-D, got {list(nonpad.shape)}")
        count = ctx.reshape(ctx.astype(nonpad, "int64"), (nonpad.shape[0], 1, 1, 1))
        offset = ctx.emit("subtract", count, ctx.const(np.int64(sq)))
    else:
        offset = ctx.const(np.int64(past))
    masked: list[Value] = []
    if causal:
        masked.append(ctx.emit("greater", d, offset))
    if left >= 0:  # i + offset - j > left
        masked.append(ctx.emit("less", d, ctx.emit("subtract", offset,
                                                   ctx.const(np.int64(left)))))
    if right >= 0:  # j - i - offset > right
        masked.append(ctx.emit("greater", d, ctx.emit("add", offset,
                                                      ctx.const(np.int64(right)))))
    if nonpad is not None:
        j = ctx.const(np.arange(skv, dtype=np.int64))
        masked.append(ctx.emit("logical_not", ctx.emit("less", j, count)))
    out = masked[0]
    for m in masked[1:]:
        out = ctx.emit("logical_or", out, m)
    return ctx.emit("where", out, ctx.scalar(-np.inf, q), ctx.scalar(0, q))


def _attention_inputs(ctx: Context, args: Args, attrs: dict[str, Any]
                      ) -> tuple[Value, Value, Value]:
    """Q, K and V checked, 3-D ones split into heads: [B, H, S, D] each."""
    q, k, v = args[0], args[1], args[2]
    assert q is not None and k is not None and v is not None
    if q.dtype_name not in ("float32", "float64", *_NARROW):
        raise ctx.error(f"Attention needs float inputs, got {q.dtype_name}")
    if not q.rank == k.rank == v.rank or q.rank not in (3, 4):
        raise ctx.error(f"Q, K and V must all be 3-D or all 4-D, got {list(q.shape)}, "
                        f"{list(k.shape)} and {list(v.shape)}")
    past_k, past_v, nonpad = (_arg(args, i) for i in (4, 5, 6))
    if (past_k is None) != (past_v is None):
        raise ctx.error("past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    if q.rank == 3:
        q = _split_heads(ctx, q, attrs.get("q_num_heads"), "Q")
        k = _split_heads(ctx, k, attrs.get("kv_num_heads"), "K")
        v = _split_heads(ctx, v, attrs.get("kv_num_heads"), "V")
    return q, k, v


def _cache(ctx: Context, k: Value, v: Value, past_k: Value | None, past_v: Value | None
           ) -> tuple[Value, Value, int]:
    """present_key, present_value (the past, then the new keys, unscaled) and the past
    length."""
    if past_k is None or past_v is None:
        return k, v, 0
    if past_k.rank != 4 or past_v.rank != 4:
        raise ctx.error(f"past_key {list(past_k.shape)} and past_value "
                        f"{list(past_v.shape)} must be 4-D")
    return (ctx.emit("concat", past_k, k, axis=2), ctx.emit("concat", past_v, v, axis=2),
            past_k.shape[2])


def _probabilities(ctx: Context, scores: Value, bias: Value | None,
                   attrs: dict[str, Any]) -> Value:
    """Softmax over the keys (in ``softmax_precision`` when given); a row the bias masks
    entirely attends nothing: zeros (the reference's guard, decided on the bias)."""
    precision = attrs.get("softmax_precision")
    if precision is not None:
        name = ONNX_TO_NUMPY.get(int(precision))
        if name not in ("float32", "float64", *_NARROW):
            raise ctx.error(f"softmax_precision {precision} is not a float type")
        scores = ctx.astype(scores, name)
    probs = Softmax._compute(ctx, scores, scores.rank - 1)
    if bias is None:
        return probs
    dead = ctx.emit("equal", ctx.emit("max", bias, axis=-1, keepdims=True),
                    ctx.scalar(-np.inf, bias))
    if dead.is_const and not dead.const.any():
        return probs
    return ctx.emit("where", dead, ctx.scalar(0, probs), probs)


def _group(ctx: Context, x: Value, kv_heads: int) -> Value:
    """[B, Hq, S, N] -> [B, Hkv, (Hq / Hkv) * S, N]: a group's query heads as rows (head
    ``h`` reads kv head ``h // r``, as the reference's ``np.repeat`` does)."""
    b, hq, s, n = x.shape
    return ctx.reshape(x, (b, kv_heads, (hq // kv_heads) * s, n))


@register("Attention")
class Attention(OnnxOpConverter):
    graph_ops = ("add", "astype", "broadcast_to", "concat", "divide", "equal", "exp",
                 "greater", "less", "logical_not", "logical_or", "matmul", "max",
                 "multiply", "permute_dims", "reshape", "subtract", "sum", "tanh", "where")

    @classmethod
    def _impl_v23(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        q, k, v = _attention_inputs(ctx, args, attrs)
        mask, past_k, past_v, nonpad = (_arg(args, i) for i in (3, 4, 5, 6))
        batch, hq, sq, head = q.shape
        k_present, v_present, past = _cache(ctx, k, v, past_k, past_v)
        scale = attrs.get("scale")
        scale = 1.0 / np.sqrt(head) if scale is None else float(scale)
        root = ctx.scalar(np.sqrt(scale), q)  # Q and K each scaled by sqrt(scale)
        q = ctx.emit("multiply", q, root)
        hkv, skv = k_present.shape[1], k_present.shape[2]
        if hkv <= 0 or hq % hkv or v_present.shape[1] != hkv:
            raise ctx.error(f"{hq} query heads cannot share {hkv} key / "
                            f"{v_present.shape[1]} value heads")
        kt = ctx.emit("permute_dims", ctx.emit("multiply", k_present, root), axes=(0, 1, 3, 2))
        scores = ctx.reshape(ctx.emit("matmul", _group(ctx, q, hkv), kt), (batch, hq, sq, skv))
        qk = {0: scores}
        softcap = float(attrs.get("softcap", 0.0))
        if softcap > 0:
            cap = ctx.scalar(softcap, q)
            scores = ctx.emit("multiply", ctx.emit("tanh", ctx.emit("divide", scores, cap)), cap)
        qk[1] = scores
        bias = cls._bias(ctx, q, mask, sq, skv, past, nonpad, attrs)
        if bias is not None:
            scores = ctx.emit("add", scores, bias)
        qk[2] = scores
        probs = ctx.astype(_probabilities(ctx, scores, bias, attrs), q.dtype_name)
        qk[3] = probs
        y = ctx.emit("matmul", _group(ctx, probs, hkv), v_present)
        y = ctx.reshape(y, (batch, hq, sq, v_present.shape[3]))
        if args[0] is not None and args[0].rank == 3:
            y = ctx.emit("permute_dims", y, axes=(0, 2, 1, 3))
            y = ctx.reshape(y, (batch, sq, hq * v_present.shape[3]))
        mode = int(attrs.get("qk_matmul_output_mode", 0))
        if mode not in qk:
            raise ctx.error(f"qk_matmul_output_mode {mode} is not one of 0, 1, 2, 3")
        return [y, k_present, v_present, ctx.astype(qk[mode], q.dtype_name)]

    @classmethod
    def _bias(cls, ctx: Context, q: Value, mask: Value | None, sq: int, skv: int, past: int,
              nonpad: Value | None, attrs: dict[str, Any]) -> Value | None:
        terms = [] if mask is None else [_mask_bias(ctx, mask, q, skv)]
        structural = _structural_bias(
            ctx, q, sq, skv, past, nonpad, bool(int(attrs.get("is_causal", 0))),
            int(attrs.get("left_window_size", -1)), int(attrs.get("right_window_size", -1)))
        if structural is not None:
            terms.append(structural)
        if not terms:
            return None
        return terms[0] if len(terms) == 1 else ctx.emit("add", terms[0], terms[1])


@register("RMSNormalization")
class RMSNormalization(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "mean", "multiply", "sqrt")

    @classmethod
    def _impl_v23(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, scale = args[0], args[1]
        assert x is not None and scale is not None
        if int(attrs.get("stash_type", 1)) != 1:
            raise ctx.error("stash_type other than 1 (float32) is not supported")
        axis = norm_axis(ctx, int(attrs.get("axis", -1)), x.rank)
        wide = ctx.astype(x, "float32") if x.dtype_name in _NARROW else x
        ms = ctx.emit("mean", ctx.emit("multiply", wide, wide),
                      axis=tuple(range(axis, x.rank)), keepdims=True)
        eps = ctx.scalar(float(attrs.get("epsilon", 1e-5)), wide)
        inv = ctx.emit("divide", ctx.scalar(1, wide),
                       ctx.emit("sqrt", ctx.emit("add", ms, eps)))
        y = ctx.astype(ctx.emit("multiply", wide, inv), x.dtype_name)
        return ctx.emit("multiply", y, ctx.astype(scale, x.dtype_name))


@register("RotaryEmbedding")
class RotaryEmbedding(OnnxOpConverter):
    graph_ops = ("add", "concat", "multiply", "reshape", "strided_slice", "subtract", "take")

    @classmethod
    def _impl_v23(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, cos, sin = args[0], args[1], args[2]
        assert x is not None and cos is not None and sin is not None
        positions = _arg(args, 3)
        shape = x.shape
        if x.rank == 3:  # [B, S, H * D] -> [B, S, H, D]; the caches broadcast over H
            heads = int(attrs.get("num_heads", 0))
            if heads <= 0 or shape[2] % heads:
                raise ctx.error(f"a 3-D input {list(shape)} needs num_heads dividing "
                                f"{shape[2]}, got {heads}")
            x = ctx.reshape(x, (shape[0], shape[1], heads, shape[2] // heads))
            head_axis = 2
        elif x.rank == 4:  # [B, H, S, D]; the caches broadcast over H
            head_axis = 1
        else:
            raise ctx.error(f"input must be 3-D or 4-D, got {list(shape)}")
        head = x.shape[3]
        rot = int(attrs.get("rotary_embedding_dim", 0)) or head
        if rot > head or rot % 2:
            raise ctx.error(f"rotary_embedding_dim {rot} must be even and at most the "
                            f"head size {head}")
        half = rot // 2
        if positions is not None:
            cos = ctx.emit("take", cos, ctx.astype(positions, "int64"), axis=0)
            sin = ctx.emit("take", sin, ctx.astype(positions, "int64"), axis=0)
        for cache, what in ((cos, "cos_cache"), (sin, "sin_cache")):
            if cache.rank != 3 or cache.shape[-1] != half:
                raise ctx.error(f"{what} has shape {list(cache.shape)}: it must be "
                                f"[batch, sequence, {half}] (after position_ids)")
        b, s = cos.shape[0], cos.shape[1]
        where = (b, 1, s, half) if head_axis == 1 else (b, s, 1, half)
        cos, sin = ctx.reshape(cos, where), ctx.reshape(sin, where)
        lead = [0, 0, 0]
        ends = list(x.shape[:3])
        ones = [1, 1, 1]

        def part(begin: int, end: int, step: int) -> Value:
            return ctx.emit("strided_slice", x, begin=lead + [begin], end=ends + [end],
                            strides=ones + [step])

        interleaved = bool(int(attrs.get("interleaved", 0)))
        x1, x2 = (part(0, rot, 2), part(1, rot, 2)) if interleaved else \
            (part(0, half, 1), part(half, rot, 1))
        real = ctx.emit("subtract", ctx.emit("multiply", cos, x1), ctx.emit("multiply", sin, x2))
        imag = ctx.emit("add", ctx.emit("multiply", sin, x1), ctx.emit("multiply", cos, x2))
        if interleaved:  # pairs (real, imag) back in place
            pair = x.shape[:3] + (half, 1)
            rotated = ctx.emit("concat", ctx.reshape(real, pair), ctx.reshape(imag, pair), axis=4)
            rotated = ctx.reshape(rotated, x.shape[:3] + (rot,))
            pieces = [rotated]
        else:
            pieces = [real, imag]
        if rot < head:
            pieces.append(part(rot, head, 1))
        y = ctx.emit("concat", *pieces, axis=3)
        return ctx.reshape(y, shape)
