"""DOT pictures of graph Functions, written straight from the columns.

One DOT node per IR node, labelled with its id, op, type and (short)
attributes; one edge per operand read, operand to user. Small constants (at
most ``fold_consts`` elements) are not drawn: their value is printed in each
user's label instead (``args: %4, 0.5``). Parameters are ellipses, outputs have
a double border. A ``call_tir`` node is named by its PrimFunc's ``op_name`` and
filled with the colour of its fusion pattern (TVM's OpPatternKind); after
FuseOps, each ``call_func`` to a ``Primitive`` function is drawn as a cluster
holding that function's nodes (its parameters become edges from the call's
operands), filled with the colour of the group's pattern (the largest of its
members', as TVM ranks them).

Size: a picture of more than ``max_nodes`` DOT nodes takes graphviz minutes
and shows nothing, so a larger graph is drawn with its fusion groups collapsed
into one node each when that fits, and otherwise summarized: a note with the
op histogram, the first nodes and the output cone (the nodes within the
largest depth from the outputs that fits), operands outside both counted in
their user's label. Python runs per *drawn* node here (bounded by
``max_nodes``); the histogram, depths and hashes over the whole graph are
NumPy and Numba sweeps. Imports ``irkernel.ir`` and ``irkernel.text`` only.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.jit import kernel
from irkernel.ir.module import IRModule
from irkernel.ir.operands import operand_at, operand_count, operand_csr, use_counts
from irkernel.text.printer import format_type, format_values
from irkernel.viz.hashes import node_hashes

#: Fill colours of the fusion patterns (TVM's OpPatternKind).
PATTERN_COLORS = {ops.ELEMWISE: "#c8e6c9", ops.BROADCAST: "#bbdefb", ops.INJECTIVE: "#fff9c4",
                  ops.REDUCE: "#ffe0b2", ops.OUT_EWISE_FUSABLE: "#f8bbd0",
                  ops.OPAQUE: "#e0e0e0"}
NODE_FILL, PARAM_FILL, CONST_FILL = "#ffffff", "#e3f2fd", "#eeeeee"
HIGHLIGHT_FILL, HIGHLIGHT_PEN = "#ffab91", "#d84315"
DEFAULT_MAX_NODES = 2000
_ATTR_CHARS = 48  # attribute text longer than this is cut in labels


@dataclass(frozen=True)
class Drawing:
    """A DOT picture and what it shows.

    ``mode`` is ``"full"`` (every node, fusion groups as clusters), ``"collapsed"``
    (fusion groups as one node each) or ``"summary"`` (above ``max_nodes``).
    """

    dot: str
    function: str
    num_nodes: int  # nodes of the drawn function (callees not counted)
    drawn: int  # DOT nodes written
    mode: str
    highlighted: int  # nodes drawn as changed


@kernel
def depth_from_outputs_kernel(kind, a0, a1, extra, op_encoding, outputs):
    """Fewest operand steps from each node to an output (-1: reaches no output).

    Arrays: kind int16[n]; a0, a1 int32[n]; extra int32[m]; op_encoding int8[n_ops];
    outputs int32[r]. One reverse sweep (operands precede their users).
    """
    n = kind.shape[0]
    depth = np.full(n, -1, np.int64)
    for j in range(outputs.shape[0]):
        depth[outputs[j]] = 0
    for i in range(n - 1, -1, -1):
        d = depth[i]
        if d < 0:
            continue
        enc = op_encoding[kind[i]]
        for j in range(operand_count(enc, a1[i])):
            v = operand_at(enc, a0[i], a1[i], extra, j)
            if depth[v] < 0 or depth[v] > d + 1:
                depth[v] = d + 1
    return depth


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def pick_function(func_or_mod: Function | IRModule,
                  function: str | None) -> tuple[str, Function, IRModule | None]:
    """(name, Function, module or None) of what to draw; ValueError/TypeError naming it."""
    if isinstance(func_or_mod, Function):
        if function is not None:
            raise ValueError("function= names a function of a module; a Function was given")
        return str(func_or_mod.attrs.get("global_symbol", "main")), func_or_mod, None
    if not isinstance(func_or_mod, IRModule):
        raise TypeError(f"viz: expected a Function or an IRModule, got "
                        f"{type(func_or_mod).__name__}")
    graphs = [k for k, v in func_or_mod.functions.items() if isinstance(v, Function)]
    if function is None:
        tops = [k for k in graphs if not func_or_mod[k].attrs.get("Primitive")]
        if not graphs:
            raise ValueError("viz: the module has no graph function to draw")
        function = "main" if "main" in graphs else (tops or graphs)[0]
    if function not in func_or_mod:
        raise ValueError(f"viz: no function {function!r} in the module (graph functions: "
                         f"{', '.join(graphs) or 'none'})")
    value = func_or_mod[function]
    if not isinstance(value, Function):
        raise ValueError(f"viz: {function!r} is a {type(value).__name__}, not a graph "
                         f"function (graph functions: {', '.join(graphs) or 'none'})")
    return function, value, func_or_mod


class _Picture:
    """The DOT lines of one picture, written function by function."""

    def __init__(self, mod: IRModule | None, fold_consts: int, baseline: Collection[int] | None,
                 highlight: Collection[int],
                 node_titles: Mapping[int, str] | None = None,
                 edge_titles: Mapping[tuple[int, int], str] | None = None) -> None:
        self.mod = mod
        # hover texts (graphviz tooltips: SVG titles) of the top function's nodes and
        # (producer, consumer) edges, e.g. runtime.explain's fusion reasons
        self.node_titles = node_titles or {}
        self.edge_titles = edge_titles or {}
        self.fold_consts = fold_consts
        self.baseline = baseline  # hashes of the other version: nodes not in it changed
        self.highlight = set(highlight)  # node ids of the top function
        self.lines: list[str] = []
        # edges go after every node and outside the clusters: an edge written inside a
        # cluster would pull its other end (a parameter, a producer) into it
        self.edges: list[str] = []
        self.drawn = 0
        self.highlighted = 0

    # -- what things are -----------------------------------------------------------
    def callee(self, func: Function, attr_id: int) -> tuple[str, Any]:
        name = str(dict(func.attr_table[attr_id]).get("callee", "?"))
        return name, (self.mod.functions.get(name) if self.mod is not None else None)

    def pattern(self, func: Function, i: int) -> int:
        """Fusion pattern of node ``i``: its PrimFunc's for call_tir, the group's for a call of
        a Primitive function, else OPAQUE."""
        kind = int(func.kind[i])
        if kind not in (ops.OP_CALL_TIR, ops.OP_CALL_FUNC):
            return ops.OPAQUE
        _, target = self.callee(func, int(func.attr_id[i]))
        if kind == ops.OP_CALL_TIR:
            value = getattr(target, "attrs", {}).get("op_pattern", ops.OPAQUE)
            return int(value) if value in PATTERN_COLORS else ops.OPAQUE
        if isinstance(target, Function) and target.attrs.get("Primitive"):
            inner = [self.pattern(target, j) for j in
                     np.flatnonzero(target.kind == ops.OP_CALL_TIR).tolist()]
            inner = [p for p in inner if p != ops.OPAQUE]
            return max(inner) if inner else ops.OPAQUE
        return ops.OPAQUE

    def expandable(self, func: Function, i: int) -> Function | None:
        if int(func.kind[i]) != ops.OP_CALL_FUNC:
            return None
        _, target = self.callee(func, int(func.attr_id[i]))
        return target if isinstance(target, Function) and target.attrs.get("Primitive") else None

    def const_text(self, func: Function, i: int) -> str:
        """A constant's value as the text format spells it (a flat list unless a scalar)."""
        value = func.const_value(i)
        texts = format_values(value.ravel(), int(func.dtype[i]))
        return texts[0] if value.ndim == 0 else "[" + ", ".join(texts) + "]"

    # -- labels --------------------------------------------------------------------
    def label(self, func: Function, i: int, args: list[str], hidden: int) -> str:
        kind = int(func.kind[i])
        opdef = ops.get_op(kind)
        record = dict(func.attr_table[int(func.attr_id[i])])
        head = f"%{i} {opdef.name}"
        if kind == ops.OP_PARAM:
            head = f"%{i} param {func.param_names[int(func.a0[i])]}"
        elif kind == ops.OP_CALL_TIR:
            name, target = self.callee(func, int(func.attr_id[i]))
            head = f"%{i} {getattr(target, 'attrs', {}).get('op_name', name)} (tir)"
        elif kind == ops.OP_CALL_FUNC:
            head = f"%{i} call @{record.get('callee', '?')}"
        lines = [head, format_type(int(func.dtype[i]), func.shapes[int(func.shape_id[i])])]
        if kind == ops.OP_CONST:
            value = func.const_value(i)
            if value.size <= self.fold_consts:
                lines.append(self.const_text(func, i))
        shown = {k: v for k, v in record.items() if k not in ("callee", "dtype", "shape")
                 or kind not in (ops.OP_CALL_TIR, ops.OP_CALL_FUNC)}
        if shown:
            text = ", ".join(f"{k}={_attr_text(v)}" for k, v in shown.items())
            lines.append(text if len(text) <= _ATTR_CHARS else text[:_ATTR_CHARS - 3] + "...")
        if any(not a.startswith("%") for a in args):
            lines.append("args: " + ", ".join(args))
        if hidden:
            lines.append(f"(+{hidden} operand{'s' * (hidden != 1)} not drawn)")
        return "\n".join(lines)

    def node(self, dot_id: str, func: Function, i: int, args: list[str], hidden: int,
             changed: bool, is_output: bool, indent: str) -> None:
        kind = int(func.kind[i])
        shape = "ellipse" if kind == ops.OP_PARAM else "box"
        fill = {ops.OP_PARAM: PARAM_FILL, ops.OP_CONST: CONST_FILL}.get(kind, NODE_FILL)
        pattern = self.pattern(func, i)
        in_cluster = indent != "  "  # members of a fusion group: the cluster has the colour
        if kind in (ops.OP_CALL_TIR, ops.OP_CALL_FUNC) and pattern != ops.OPAQUE \
                and not in_cluster:
            fill = PATTERN_COLORS[pattern]
        style = [f"label={_quote(self.label(func, i, args, hidden))}", f"shape={shape}",
                 f'fillcolor="{fill}"']
        if changed:
            style += [f'fillcolor="{HIGHLIGHT_FILL}"', f'color="{HIGHLIGHT_PEN}"', "penwidth=2"]
            self.highlighted += 1
        if is_output:
            style.append("peripheries=2")
        if not in_cluster and i in self.node_titles:
            style.append(f"tooltip={_quote(self.node_titles[i])}")
        self.lines.append(f"{indent}{dot_id} [{', '.join(style)}];")
        self.drawn += 1

    def edge_style(self, producer: int, consumer: int, top: bool) -> str:
        title = self.edge_titles.get((producer, consumer)) if top else None
        return "" if title is None else f" [tooltip={_quote(title)}]"

    # -- functions -----------------------------------------------------------------
    def folded(self, func: Function) -> np.ndarray:
        """bool[n]: the constants printed in their users' labels (small, used, not outputs)."""
        small = func.shapes.size[func.shape_id] <= self.fold_consts
        out = (func.kind == ops.OP_CONST) & small & (use_counts(func) > 0)
        out[func.outputs] = False
        return out

    def function(self, func: Function, prefix: str, nodes: np.ndarray | None,
                 inputs: list[str] | None, hashes: np.ndarray, expand: bool, top: bool,
                 indent: str = "  ") -> dict[int, str]:
        """Write the nodes of ``func`` (all, or the sorted ids ``nodes``) and their edges.

        ``inputs`` are the references of a called function's arguments (its parameters
        are not drawn). Returns the reference of each node an operand may name: a DOT
        id (starting with 'n') or '=' and a folded constant's text. Python runs per
        drawn node and operand only.
        """
        folded = self.folded(func)
        drawn = ~folded
        if inputs is not None:
            drawn &= func.kind != ops.OP_PARAM
        if nodes is not None:
            drawn &= np.isin(np.arange(func.num_nodes), nodes)
        is_output = set(func.outputs.tolist())
        csr = operand_csr(func)
        refs: dict[int, str] = {}
        if inputs is not None:
            refs.update(zip(func.params.tolist(), inputs, strict=True))
        for i in np.flatnonzero(drawn).tolist():
            args, hidden = [], 0
            operands = csr.of(i).tolist()
            for v in operands:
                if v not in refs and folded[v]:
                    refs[v] = "=" + self.const_text(func, v)
                ref = refs.get(v)
                if ref is None:
                    hidden += 1
                else:
                    args.append(f"%{v}" if ref.startswith("n") else ref[1:])
            callee = self.expandable(func, i) if expand else None
            if callee is not None:
                out = self.cluster(func, i, callee, [refs.get(v) for v in operands], hashes,
                                   indent, i in is_output)
                if out is not None:
                    refs[i] = out
                continue
            changed = (self.baseline is not None and int(hashes[i]) not in self.baseline) or \
                (top and i in self.highlight)
            refs[i] = f"{prefix}{i}"
            self.node(refs[i], func, i, args, hidden, changed, i in is_output and top, indent)
            self.edges.extend(f"  {refs[v]} -> {refs[i]}{self.edge_style(v, i, top)};"
                              for v in operands if refs.get(v, "=").startswith("n"))
        return refs

    def cluster(self, func: Function, i: int, callee: Function, inputs: list[str | None],
                hashes: np.ndarray, indent: str, is_output: bool) -> str | None:
        """A call of a Primitive function as a cluster of its nodes; the reference of the
        callee's output (what the call's users read)."""
        name, _ = self.callee(func, int(func.attr_id[i]))
        pattern = self.pattern(func, i)
        csr = operand_csr(func)
        arg_hashes = hashes[csr.of(i)]
        inner_hashes = node_hashes(callee, arg_hashes)
        self.lines.append(f"{indent}subgraph cluster_{i} {{")
        label = _quote(f"%{i} {name} ({ops.PATTERN_NAMES[pattern]})")
        self.lines.append(f'{indent}  label={label}; style="filled,rounded"; '
                          f'fillcolor="{PATTERN_COLORS[pattern]}";')
        missing = [k for k, ref in enumerate(inputs) if ref is None]
        for k in missing:  # an argument not drawn (summary): a stand-in
            inputs[k] = f"n{i}_arg{k}"
            self.lines.append(f'{indent}  n{i}_arg{k} [label="%{int(csr.of(i)[k])}", '
                              'shape=plaintext];')
        refs = self.function(callee, f"n{i}_", None, [str(r) for r in inputs], inner_hashes,
                             expand=False, top=False, indent=indent + "  ")
        self.lines.append(f"{indent}}}")
        out = refs.get(int(callee.outputs[0]))
        if is_output and out is not None and out.startswith("n"):
            self.lines.append(f"{indent}{out} [peripheries=2];")
        return out


def _attr_text(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _drawn_count(picture: _Picture, func: Function) -> tuple[int, int]:
    """(DOT nodes with fusion groups expanded, with them collapsed), folded constants not
    counted."""
    collapsed = int(func.num_nodes - np.count_nonzero(picture.folded(func)))
    expanded = collapsed
    for i in np.flatnonzero(func.kind == ops.OP_CALL_FUNC).tolist():
        callee = picture.expandable(func, i)
        if callee is not None:
            expanded += callee.num_nodes - len(callee.params) - 1
    return expanded, collapsed


def _summary_nodes(func: Function, budget: int) -> tuple[np.ndarray, int, int]:
    """The first nodes and the output cone, at most ``budget`` together: (sorted ids,
    how many first nodes, the cone's depth)."""
    n = func.num_nodes
    head = np.arange(min(n, max(budget // 2, 1)), dtype=np.int64)
    depth = depth_from_outputs_kernel(func.kind, func.a0, func.a1, func.extra,
                                      ops.op_arrays().encoding, func.outputs)
    reached = depth >= 0
    counts = np.cumsum(np.bincount(depth[reached & (np.arange(n) >= len(head))]))
    room = max(budget - len(head), len(func.outputs))
    cone_depth = int(np.searchsorted(counts, room, side="right")) - 1
    cone = np.flatnonzero(reached & (depth <= max(cone_depth, 0)))
    return np.union1d(head, cone), len(head), max(cone_depth, 0)


def _histogram(func: Function, top: int = 12) -> list[str]:
    counts = np.bincount(func.kind.astype(np.int64), minlength=ops.num_ops())
    order = np.argsort(-counts, kind="stable")
    lines = [f"{ops.get_op(int(k)).name}: {int(counts[k]):,}" for k in order[:top] if counts[k]]
    rest = int(counts[order[top:]].sum())
    if rest:
        lines.append(f"other ops: {rest:,}")
    return lines


def draw(func_or_mod: Function | IRModule, function: str | None = None, *,
         max_nodes: int = DEFAULT_MAX_NODES, fold_consts: int = 4,
         highlight: Collection[int] = (), baseline: Collection[int] | None = None,
         title: str | None = None, node_titles: Mapping[int, str] | None = None,
         edge_titles: Mapping[tuple[int, int], str] | None = None) -> Drawing:
    """The DOT picture of one graph function (see :func:`to_dot`), with what it shows.

    ``baseline``: structural hashes (:func:`irkernel.viz.hashes.node_hashes`) of
    another version; nodes whose hash is not among them are highlighted.
    ``node_titles`` (node id -> text) and ``edge_titles`` ((producer, consumer) ->
    text) are hover texts (graphviz tooltips, titles in SVG and HTML), e.g. the
    fusion reasons of ``runtime.explain``.
    """
    if not isinstance(max_nodes, int) or isinstance(max_nodes, bool) or max_nodes < 1:
        raise ValueError(f"max_nodes must be a positive int, got {max_nodes!r}")
    if not isinstance(fold_consts, int) or isinstance(fold_consts, bool) or fold_consts < 0:
        raise ValueError(f"fold_consts must be a non-negative int, got {fold_consts!r}")
    name, func, mod = pick_function(func_or_mod, function)
    bad = [h for h in highlight if not (isinstance(h, (int, np.integer))
                                        and 0 <= h < func.num_nodes)]
    if bad:
        raise ValueError(f"highlight: {bad[:3]} are not node ids of {name!r} "
                         f"(0..{func.num_nodes - 1})")
    picture = _Picture(mod, fold_consts, baseline, [int(h) for h in highlight], node_titles,
                       edge_titles)
    expanded, collapsed = _drawn_count(picture, func)
    mode = "full" if expanded <= max_nodes else "collapsed" if collapsed <= max_nodes \
        else "summary"
    heading = title or f"@{name}"
    hashes = node_hashes(func) if baseline is not None or mode == "full" else \
        np.zeros(func.num_nodes, np.uint64)
    nodes = None
    if mode == "summary":
        nodes, n_head, cone_depth = _summary_nodes(func, max_nodes)
        note = [f"@{name}: {func.num_nodes:,} nodes (more than {max_nodes:,}: a summary)",
                f"drawn: the first {n_head:,} nodes and the output cone (depth <= "
                f"{cone_depth})", "op histogram:", *_histogram(func)]
        left = "".join(_quote(line)[1:-1] + "\\l" for line in note)  # left-justified lines
        picture.lines.append(f'  summary [shape=note, fillcolor="#fffde7", label="{left}"];')
        heading += " (summary)"
    picture.function(func, "n", nodes, None, hashes, expand=mode == "full", top=True)
    header = [f"digraph {_quote(name)} {{",
              f"  graph [label={_quote(heading)}, labelloc=t, fontname=Helvetica, "
              "rankdir=TB];",
              '  node [fontname=Helvetica, fontsize=10, style="filled,rounded"];',
              "  edge [arrowsize=0.6];"]
    dot = "\n".join([*header, *picture.lines, *picture.edges, "}", ""])
    return Drawing(dot, name, func.num_nodes, picture.drawn, mode, picture.highlighted)


def to_dot(func_or_mod: Function | IRModule, function: str | None = None, *,
           max_nodes: int = DEFAULT_MAX_NODES, fold_consts: int = 4,
           highlight: Collection[int] = ()) -> str:
    """The graphviz DOT text of a graph function.

    Parameters
    ----------
    func_or_mod : Function or IRModule
        What to draw. In a module, calls of ``Primitive`` functions (FuseOps'
        groups) are drawn as clusters and ``call_tir`` nodes are named and
        coloured from their PrimFuncs.
    function : str, optional
        The function of the module to draw (default ``main``, else the first
        graph function that is not ``Primitive``).
    max_nodes : int
        Above this many DOT nodes, fusion groups are collapsed, and if that is
        still too many, the picture is a summary (op histogram, first nodes,
        output cone).
    fold_consts : int
        Constants of at most this many elements are printed in their users'
        labels instead of drawn.
    highlight : collection of int
        Node ids of the function to draw as changed.

    Returns
    -------
    str
        DOT text (``dot -Tsvg`` renders it; see :func:`irkernel.viz.render`).

    Raises
    ------
    ValueError, TypeError
        An unknown function name, a PrimFunc, a bad option (naming it).
    """
    return draw(func_or_mod, function, max_nodes=max_nodes, fold_consts=fold_consts,
                highlight=highlight).dot


def hash_set(func_or_mod: Function | IRModule, function: str | None = None) -> set[int]:
    """Structural hashes of every node of a function and of the members of the fusion
    groups it calls (what ``draw(..., baseline=...)`` compares against)."""
    _, func, mod = pick_function(func_or_mod, function)
    hashes = node_hashes(func)
    out = set(hashes.tolist())
    if mod is None:
        return out
    picture = _Picture(mod, 0, None, ())
    csr = operand_csr(func)
    for i in np.flatnonzero(func.kind == ops.OP_CALL_FUNC).tolist():
        callee = picture.expandable(func, i)
        if callee is not None:
            out.update(node_hashes(callee, hashes[csr.of(i)]).tolist())
    return out


__all__ = ["DEFAULT_MAX_NODES", "Drawing", "draw", "hash_set", "pick_function", "to_dot"]
