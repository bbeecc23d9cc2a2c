"""FoldBatchNorm: an inference BatchNormalization after a conv goes into the conv's weights.

The ONNX frontend emits BatchNormalization as ``add(multiply(x, s), t)`` with ``s``
and ``t`` per-channel constants (``irkernel/frontend/onnx/converters/nn.py``; the
statistics fold at import). When ``x`` is a conv (optionally followed by its bias add,
``add(conv, b)``) whose weights are a constant, the pair folds away:

    conv(x, W) * s + t            ->  conv(x, W * s) + t
    (conv(x, W) + b) * s + t      ->  conv(x, W * s) + (b * s + t)

with ``s`` taken per output channel (axis 1 of the conv's result). The FuseOps epilogue
would run the multiply and add in the conv's store anyway; folding saves their loads and
flops per output element, and leaves the plain ``conv + bias`` shape that every other
model has. Rounding changes (``W * s`` is rounded once, before the sum), as in every
inference framework's BN folding; the pass is opt level 2, beside FoldConstant.

One Numba sweep over the node columns finds the matches (the multiply, the conv, the
optional bias add and the weight each used once, the constants per-channel); Python then
runs once per match (NumPy on that conv's weights: new pool entries, the user's constant
arrays are never written) and ``rebuild`` applies the row patches: the weight's const row
points at the scaled copy, a bias const row at ``b * s + t``, and the multiply (and, with
a bias, the final add) are replaced by the value before them.
"""

from __future__ import annotations

import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import FLOAT32, FLOAT64
from irkernel.ir.jit import kernel
from irkernel.ir.operands import use_counts
from irkernel.ir.ops import OP_ADD, OP_CONST, OP_MULTIPLY
from irkernel.ir.pools import ConstPoolBuilder
from irkernel.ir.rebuild import rebuild


@kernel
def match_kernel(kind, a0, a1, dtype, uses, op_conv, matches):
    """Rows ``(final add, multiply, bias add or -1, conv, weight, s, t, b or -1)`` of
    every foldable pattern (see the module docstring), written to ``matches``; returns
    their count. Shape checks are left to the caller (once per match)."""
    n = kind.shape[0]
    found = 0
    for i in range(n):
        if kind[i] != OP_ADD or not (dtype[i] == FLOAT32 or dtype[i] == FLOAT64):
            continue
        m, t = a0[i], a1[i]
        if kind[m] != OP_MULTIPLY:
            m, t = a1[i], a0[i]
        if kind[m] != OP_MULTIPLY or kind[t] != OP_CONST or uses[m] != 1:
            continue
        c, s = a0[m], a1[m]
        if kind[s] != OP_CONST:
            c, s = a1[m], a0[m]
        if kind[s] != OP_CONST or uses[c] != 1:
            continue
        bias_add, b = -1, -1
        v = c
        if kind[c] == OP_ADD:
            v, b = a0[c], a1[c]
            if kind[b] != OP_CONST:
                v, b = a1[c], a0[c]
            if kind[b] != OP_CONST or uses[b] != 1 or uses[v] != 1:
                continue
            bias_add = c
        if kind[v] != op_conv:
            continue
        w = a1[v]
        if kind[w] != OP_CONST or uses[w] != 1:
            continue
        matches[found, 0] = i
        matches[found, 1] = m
        matches[found, 2] = bias_add
        matches[found, 3] = v
        matches[found, 4] = w
        matches[found, 5] = s
        matches[found, 6] = t
        matches[found, 7] = b
        found += 1
    return found


def _per_channel(value: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """``value`` as a ``[channels]`` vector when it broadcasts against a rank-``rank``
    result as one value per channel (axis 1), else None."""
    shape = (1,) * (rank - value.ndim) + value.shape
    if len(shape) != rank or any(d != 1 for a, d in enumerate(shape) if a != 1):
        return None
    if shape[1] not in (1, channels):
        return None
    return np.broadcast_to(value.reshape(-1), (channels,)) if value.size == 1 else \
        value.reshape(channels)


def fold_function(func: Function) -> tuple[Function, int]:
    """Fold every matching BatchNormalization; returns (new function or ``func``, count)."""
    op_conv = ops.get_op("conv").opcode
    if not np.any(func.kind == op_conv):
        return func, 0
    uses = use_counts(func).astype(np.int32)
    matches = np.empty((int(np.count_nonzero(func.kind == op_conv)), 8), np.int32)
    found = match_kernel(func.kind, func.a0, func.a1, func.dtype, uses, op_conv, matches)
    if not found:
        return func, 0
    shapes, pool = func.shapes, func.consts
    builder = ConstPoolBuilder(pool, shapes)
    rep = np.full(func.num_nodes, -1, np.int32)
    patches: dict[int, int] = {}  # const row -> new pool id
    folded = 0
    for final, mul, bias_add, conv, w, s, t, b in matches[:found].tolist():
        rank = len(shapes[int(func.shape_id[conv])])
        weights = pool.value(int(func.a0[w]), shapes)
        channels = weights.shape[0]
        scale = _per_channel(pool.value(int(func.a0[s]), shapes), channels, rank)
        shift = _per_channel(pool.value(int(func.a0[t]), shapes), channels, rank)
        if scale is None or shift is None or weights.dtype != scale.dtype:
            continue
        if bias_add >= 0:
            bias_value = pool.value(int(func.a0[b]), shapes)
            bias = _per_channel(bias_value, channels, rank)
            if bias is None or bias_value.size != channels:
                continue
            new_bias = (bias * scale + shift).astype(bias_value.dtype).reshape(bias_value.shape)
            patches[b] = builder.add(new_bias, int(func.shape_id[b]))
            rep[final] = bias_add  # (conv + b') replaces ((conv + b) * s + t)
        scaled = weights * scale.reshape((channels,) + (1,) * (weights.ndim - 1))
        patches[w] = builder.add(scaled.astype(weights.dtype), int(func.shape_id[w]))
        rep[mul] = bias_add if bias_add >= 0 else conv  # the multiply is gone
        folded += 1
    if not folded:
        return func, 0
    rows = np.array(sorted(patches), np.int32)
    patch = (rows, np.full(len(rows), OP_CONST, np.int16),
             np.array([patches[r] for r in rows.tolist()], np.int32),
             np.full(len(rows), -1, np.int32), np.zeros(len(rows), np.int32))
    return rebuild(func, rep=rep, patch=patch, consts=builder.freeze(),
                   pass_name="FoldBatchNorm"), folded


def FoldBatchNorm() -> transform.FunctionPass:
    """Fold per-channel scale-and-shift after a constant-weight conv into it (opt level 2).

    Returns
    -------
    FunctionPass
        Reports the statistic ``folded``; the bypassed multiply/add rows are left for
        DeadCodeElimination.
    """

    def fold(func: Function, mod: object, ctx: transform.PassContext) -> Function:
        out, n = fold_function(func)
        if n:
            ctx.stat("folded", n)
        return out

    return transform.function_pass(fold, opt_level=2, name="FoldBatchNorm")


transform.register_pass("FoldBatchNorm", FoldBatchNorm)

__all__ = ["FoldBatchNorm", "fold_function"]
