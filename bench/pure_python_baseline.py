"""Baseline for the graph-pass benchmarks: the same DCE and FoldConstant written the
way a plain Python compiler would, with one object per node.

It is kept honest rather than slow: ``__slots__`` nodes, a list-based graph,
iterative traversals, Python floats for scalar folding. Only the
transformation is timed; converting from/to irkernel Functions is not.
"""

from __future__ import annotations

import math
import operator

from irkernel import ops
from irkernel.graph import Function


class Node:
    __slots__ = ("op", "operands", "value")

    def __init__(self, op: str, operands: list[Node], value: float | None = None) -> None:
        self.op = op
        self.operands = operands
        self.value = value


def to_objects(func: Function) -> tuple[list[Node], list[Node]]:
    """One Node per graph node (scalar graphs: constants become Python floats)."""
    names = [op.name for op in ops.all_ops()]
    nodes: list[Node] = []
    kinds = func.kind.tolist()
    for i, k in enumerate(kinds):
        name = names[k]
        if name == "const":
            nodes.append(Node("const", [], float(func.const_value(i).reshape(()))))
        else:
            nodes.append(Node(name, [nodes[v] for v in func.operands(i)]))
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


_BINARY = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
           "maximum": max, "minimum": min}
_UNARY = {"negative": operator.neg, "exp": math.exp, "abs": abs, "sqrt": math.sqrt}


def fold(nodes: list[Node]) -> int:
    """Turn every node whose operands are constants into a constant, in place."""
    folded = 0
    for node in nodes:
        if node.op in _BINARY or node.op in _UNARY:
            args = node.operands
            if all(a.op == "const" for a in args):
                try:
                    fn = _BINARY.get(node.op) or _UNARY[node.op]
                    node.value = fn(*[a.value for a in args])
                except (ValueError, OverflowError):
                    continue
                node.op, node.operands = "const", []
                folded += 1
    return folded


def scalar_float_graph(n_nodes: int, seed: int = 0) -> Function:
    """A float64 scalar graph of the ops both implementations support."""
    from irkernel.testing import random_function

    return random_function(n_nodes, seed=seed, dtypes=("float64",), shapes="scalar",
                           ops=("add", "subtract", "multiply", "maximum", "minimum",
                                "negative", "abs"))

