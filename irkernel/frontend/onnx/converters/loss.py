"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as compositions of graph ops.

Both are plain computations (no training state), used by exported evaluation graphs:
the loss of element ``(n, d...)`` is ``-input[n, target[n, d...], d...]``, times
``weight[target]`` when a weight is given, and 0 where the target is ``ignore_index``.
The pick along the class axis is one ``take`` from the input with the class axis moved
last and flattened (``row * C + target``). ``reduction`` ``none`` keeps the elements,
``sum`` adds them, ``mean`` divides the sum by the sum of the weights (1 per element not
ignored, as ``onnx.reference`` does). SoftmaxCrossEntropyLoss is the same on the
log-softmax over axis 1 (``nn.LogSoftmax``'s composition), whose value is its optional
second output.

Imports the converter machinery and ``nn`` only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import Context, OnnxOpConverter, Value, register
from irkernel.frontend.onnx.converters.nn import LogSoftmax

Args = list["Value | None"]


def nll_loss(ctx: Context, logp: Value, target: Value, weight: Value | None,
             attrs: dict[str, Any]) -> Value:
    """The negative log-likelihood loss of ``logp`` [N, C, d...] at ``target`` [N, d...]."""
    e = ctx.emit
    if logp.rank < 2 or target.shape != (logp.shape[0], *logp.shape[2:]):
        raise ctx.error(f"input {list(logp.shape)} must be [N, C, d...] and target "
                        f"{list(target.shape)} [N, d...]")
    reduction = str(attrs.get("reduction", "mean"))
    if reduction not in ("none", "sum", "mean"):
        raise ctx.error(f"reduction {reduction!r} is not none, sum or mean")
    classes = logp.shape[1]
    rows = int(np.prod(target.shape, dtype=np.int64))
    t = ctx.astype(target, "int64")
    ignore = attrs.get("ignore_index")
    keep = None
    if ignore is not None:
        keep = e("logical_not", e("equal", t, ctx.const(np.int64(ignore))))
        t = e("where", keep, t, ctx.const(np.int64(0)))
    moved = e("permute_dims", logp, axes=(0, *range(2, logp.rank), 1))
    flat = ctx.reshape(moved, (rows * classes,))
    at = e("add", ctx.const(np.arange(rows, dtype=np.int64) * classes), ctx.reshape(t, (rows,)))
    loss = ctx.reshape(e("negative", e("take", flat, at, axis=0)), target.shape)
    w = None if weight is None else e("take", ctx.astype(weight, logp.dtype_name), t, axis=0)
    if keep is not None:
        zero = ctx.scalar(0.0, logp)
        loss = e("where", keep, loss, zero)
        w = e("where", keep, ctx.scalar(1.0, logp) if w is None else w, zero)
    if w is not None:
        loss = e("multiply", loss, w)
    if reduction == "none":
        return loss
    axes = tuple(range(loss.rank))
    if reduction == "sum" or w is None:
        return e("sum" if reduction == "sum" else "mean", loss, axis=axes, keepdims=False)
    return e("divide", e("sum", loss, axis=axes, keepdims=False),
             e("sum", w, axis=axes, keepdims=False))


def _args(args: Args) -> tuple[Value, Value, Value | None]:
    x, target = args[0], args[1]
    assert x is not None and target is not None
    return x, target, args[2] if len(args) > 2 else None


@register("NegativeLogLikelihoodLoss")
class NegativeLogLikelihoodLoss(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "equal", "logical_not", "mean", "multiply",
                 "negative", "permute_dims", "reshape", "sum", "take", "where")

    @classmethod
    def _impl_v12(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        x, target, weight = _args(args)
        return nll_loss(ctx, x, target, weight, attrs)


@register("SoftmaxCrossEntropyLoss")
class SoftmaxCrossEntropyLoss(OnnxOpConverter):
    graph_ops = ("add", "astype", "divide", "equal", "exp", "log", "logical_not", "max", "mean",
                 "multiply", "negative", "permute_dims", "reshape", "subtract", "sum", "take",
                 "where")

    @classmethod
    def _impl_v12(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> list[Value]:
        x, target, weight = _args(args)
        if x.rank < 2:
            raise ctx.error(f"scores {list(x.shape)} must be [N, C, d...]")
        logp = LogSoftmax._compute(ctx, x, 1)
        return [nll_loss(ctx, logp, target, weight, attrs), logp]
