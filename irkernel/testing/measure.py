"""Measuring a graph as :class:`GraphSpec` describes it: ``graph_fractions``, ``operand_lists``.

Imports ``irkernel.ir.*`` only.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.operands import operand_csr
from irkernel.ir.validate import validate_function


def operand_lists(func: Function) -> tuple[np.ndarray, np.ndarray]:
    """CSR of every node's operands: ``(ptr int64[n+1], args int32[k])`` (read-only)."""
    validate_function(func, "operand_lists")  # the CSR kernel indexes with the operands
    csr = operand_csr(func)
    return csr.ptr, csr.ids


def graph_fractions(func: Function) -> dict[str, float]:
    """The spec's fractions as measured on ``func``.

    Returns ``const_fraction`` (CONST nodes / nodes) and, over op nodes (neither
    param nor const), ``dead_fraction`` (not reached from an output),
    ``const_subgraph_fraction`` (every operand constant-derived) and
    ``duplicate_fraction`` (same op, operands and attributes as an earlier
    node). Uses a Python loop over nodes for reachability: meant for tests on
    graphs up to ~1e5 nodes.
    """
    n = func.num_nodes
    kind = func.kind
    is_leaf = (kind == ops.OP_PARAM) | (kind == ops.OP_CONST)
    is_op = ~is_leaf
    ptr, args = operand_lists(func)
    ptr_l, args_l = ptr.tolist(), args.tolist()
    live = np.zeros(n, bool)
    live[func.outputs] = True
    live_l = live.tolist()
    for i in range(n - 1, -1, -1):
        if live_l[i]:
            for v in args_l[ptr_l[i]:ptr_l[i + 1]]:
                live_l[v] = True
    cderived = (kind == ops.OP_CONST).tolist()
    for i in range(n):
        if is_op[i]:
            vs = args_l[ptr_l[i]:ptr_l[i + 1]]
            cderived[i] = bool(vs) and all(cderived[v] for v in vs)
    keys: set[tuple[int, ...]] = set()
    dups = 0
    attr = func.attr_id.tolist()
    for i in np.nonzero(is_op)[0].tolist():
        key = (int(kind[i]), attr[i], *args_l[ptr_l[i]:ptr_l[i + 1]])
        if key in keys:
            dups += 1
        keys.add(key)
    m = max(int(is_op.sum()), 1)
    return {
        "const_fraction": float((kind == ops.OP_CONST).sum()) / max(n, 1),
        "dead_fraction": float((is_op & ~np.array(live_l)).sum()) / m,
        "const_subgraph_fraction": float((is_op & np.array(cderived)).sum()) / m,
        "duplicate_fraction": dups / m,
    }


__all__ = ["graph_fractions", "operand_lists"]
