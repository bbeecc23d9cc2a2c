"""Which small elementwise ops stay specialized so they fuse into a scheduled producer.

Why: LegalizeOps sends ops whose tensors all fit ``runtime.generic_max_elements`` to
shape-generic kernels (one compile per op and dtypes), and FuseOps does not fuse those.
A conv on a small map (RegNet's 2x2 and 4x4 stages, a squeeze-excite block's 1x1 convs)
is itself specialized, by its work, while its bias add and relu are small: they ran as
two more launches each instead of folding into the conv's store (RegNet-X at 64x64: 145
generic launches beside 74 kernels). So an elementwise or broadcast op that the size rule
would make generic stays specialized when an operand comes from a specialized op that
fuses its consumers (``OUT_EWISE_FUSABLE``: conv, matmul, pools), directly or through
such ops. The chain is followed ``MAX_CHAIN`` ops deep (bias, activation, residual add,
activation), a few whole-array NumPy steps. Imports irkernel only.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.operands import operand_csr

#: Elementwise ops followed after a specialized producer.
MAX_CHAIN = 6


def specialized_epilogues(func: Function, rows: np.ndarray, generic: np.ndarray) -> np.ndarray:
    """bool per row of ``rows`` (op nodes of ``func``; ``generic``: whether the size rule
    gives each a shape-generic kernel): rows to specialize after all, as above."""
    pattern = ops.op_arrays().pattern[func.kind[rows]]
    marked = np.zeros(len(func.kind), bool)
    marked[rows[(pattern == ops.OUT_EWISE_FUSABLE) & ~generic]] = True
    # kernels placed before LegalizeOps take epilogues too (IntegerKernels's int32 matmul)
    marked[func.kind == ops.OP_CALL_TIR] = True
    if not marked.any():
        return np.zeros(len(rows), bool)
    csr = operand_csr(func)
    candidates = np.flatnonzero(generic & (pattern <= ops.BROADCAST))
    nodes = rows[candidates]
    counts = csr.ptr[nodes + 1] - csr.ptr[nodes]
    owner = np.repeat(np.arange(len(nodes)), counts)
    operand_ids = csr.ids[np.repeat(csr.ptr[nodes], counts)
                          + np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts,
                                                                     counts)]
    chosen = np.zeros(len(rows), bool)
    for _ in range(MAX_CHAIN):  # one whole-array step per link of the chain
        reached = np.bincount(owner, weights=marked[operand_ids], minlength=len(nodes)) > 0
        new = reached & ~marked[nodes]
        if not new.any():
            break
        marked[nodes[new]] = True
        chosen[candidates[new]] = True
    return chosen


__all__ = ["MAX_CHAIN", "specialized_epilogues"]
