"""Baseline for the graph-pass benchmarks: the same DCE and FoldConstant written the
way a plain Python compiler would, with one object per node.

What it is (the decision, recorded in bench/README.md): a straightforward
object-per-node implementation, neither sabotaged nor hyper-optimized. Each
node is an object with an op name, a list of operand nodes and an attribute
dict (``__slots__``, as a careful programmer would write). DCE marks live
nodes from the outputs with an explicit stack (no recursion) and keeps live
nodes and params in order. Fold is interpreter-style: it evaluates an op
whose operands are all constants with the NumPy ufunc of that op on NumPy
scalars of the node's dtype, because that is what being bit-identical to
``ik.interpret`` demands (dtype rules, and NaN semantics: Python's ``max``
and ``min`` are not ``np.maximum``/``np.minimum`` when a NaN is involved,
which the previous Python-float version of this baseline got wrong). Only
the transformation is timed; converting from/to irkernel Functions is not.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel import ops
from irkernel.ir.function import Function


class Node:
    __slots__ = ("attrs", "op", "operands", "value")

    def __init__(self, op: str, operands: list[Node], attrs: dict[str, Any] | None = None,
                 value: np.generic | None = None) -> None:
        self.op = op
        self.operands = operands
        self.attrs = attrs if attrs is not None else {}
        self.value = value


def to_objects(func: Function) -> tuple[list[Node], list[Node]]:
    """One Node per graph node; constants hold a NumPy scalar of their dtype."""
    names = [op.name for op in ops.all_ops()]
    nodes: list[Node] = []
    kinds = func.kind.tolist()
    for i, k in enumerate(kinds):
        name = names[k]
        if name == "const":
            nodes.append(Node("const", [], value=func.const_value(i).reshape(())[()]))
        else:
            nodes.append(Node(name, [nodes[v] for v in func.operands(i)], func.node_attrs(i)))
    return nodes, [nodes[int(o)] for o in func.outputs]


def dce(nodes: list[Node], outputs: list[Node]) -> list[Node]:
    """Mark live from the outputs with an explicit stack, keep live nodes in order."""
    live: set[int] = set()
    stack = list(outputs)
    while stack:
        node = stack.pop()
        if id(node) in live:
            continue
        live.add(id(node))
        stack.extend(node.operands)
    return [n for n in nodes if id(n) in live or n.op == "param"]


# The ops of ``scalar_float_graph``, evaluated as ``ik.interpret`` does (NumPy ufuncs).
_UFUNCS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
           "maximum": np.maximum, "minimum": np.minimum, "negative": np.negative,
           "abs": np.abs}


def fold(nodes: list[Node]) -> int:
    """Turn every node whose operands are constants into a constant, in place."""
    folded = 0
    for node in nodes:
        fn = _UFUNCS.get(node.op)
        if fn is None:
            continue
        args = node.operands
        if all(a.op == "const" for a in args):
            node.value = fn(*[a.value for a in args])
            node.op, node.operands, node.attrs = "const", [], {}
            folded += 1
    return folded


def scalar_float_graph(n_nodes: int, seed: int = 0) -> Function:
    """A float64 scalar graph of the ops both implementations support."""
    from irkernel.testing import random_function

    return random_function(n_nodes, seed=seed, dtypes=("float64",), shapes="scalar",
                           ops=tuple(_UFUNCS))
