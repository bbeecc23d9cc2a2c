"""``runtime.explain(mod)``: why FuseOps fused, or kept apart, every producer-consumer edge.

``explain`` lowers ``mod`` as ``runtime.build`` does, up to FuseOps (the passes
of the GraphLowering pipeline before it, under the current context), then runs
FuseOps' own sweep (``passes.fuse_ops.fusion_decisions``), which writes a
reason code beside each decision, so a reason can never disagree with what
FuseOps did. Here the codes get words, per edge of every graph function:

* fused: the group (its root node) and the pattern kinds of the pair;
* consumer / producer opaque, refined by what the node is: not a kernel call
  (param, const, call_func), an opaque op, a shape-generic kernel (tensors of at
  most ``runtime.generic_max_elements`` elements run on one kernel per op and
  are never fused), or a kernel over non-static buffers;
* several consumers, or the producer is a function output (its value must exist);
* a reduction/matmul takes only an elementwise/broadcast epilogue (an injective
  consumer is a layout change), two reductions/matmuls never share a group, an
  injective producer does not fuse into a matmul;
* the group would exceed FuseOps' ``max_group_size``.

The result is columns (one row per edge) with a text rendering; ``irkernel viz
--explain`` prints it, or draws it with the reasons as hover titles. Imports
irkernel and passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.distinct import sorted_distinct
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule
from passes import fuse_ops
from runtime.build import graph_pipeline

_PATTERN = ops.PATTERN_NAMES


@dataclass(frozen=True)
class FunctionExplanation:
    """The edges of one graph function after the passes before FuseOps, as columns:
    ``producer``, ``consumer`` (node ids), ``reason`` (``passes.fuse_ops`` codes),
    ``group`` (the consumer's group root when fused, else -1) and ``why`` (one text per
    edge); ``func`` is the function the ids refer to."""

    name: str
    func: Function
    producer: np.ndarray
    consumer: np.ndarray
    reason: np.ndarray
    group: np.ndarray
    why: list[str]

    @property
    def fused(self) -> np.ndarray:
        return self.reason == fuse_ops.FUSED


@dataclass(frozen=True)
class Explanation:
    """``runtime.explain``'s answer: the lowered module and one entry per graph function."""

    module: IRModule
    functions: dict[str, FunctionExplanation]

    def render(self) -> str:
        """One line per edge: ``@f %p (op) -> %c (op): reason``, then a count per reason."""
        lines = []
        for name, fe in self.functions.items():
            lines.append(f"@{name}: {len(fe.producer)} edges, {int(fe.fused.sum())} fused")
            ops_of = _op_names(fe.func, self.module)
            for p, c, why in zip(fe.producer.tolist(), fe.consumer.tolist(), fe.why,
                                 strict=True):
                lines.append(f"  %{p} ({ops_of[p]}) -> %{c} ({ops_of[c]}): {why}")
            codes, counts = np.unique(fe.reason, return_counts=True)
            lines.append("  " + ", ".join(f"{fuse_ops.REASON_NAMES[k]}: {n}" for k, n in
                                          zip(codes.tolist(), counts.tolist(), strict=True)))
        return "\n".join(lines) + "\n"


def _op_names(func: Function, mod: IRModule) -> list[str]:
    """Per node: the op name, a call_tir's by its callee's ``op_name`` (per record)."""
    by_kind = [ops.get_op(k).name for k in range(int(func.kind.max()) + 1)]
    names = [by_kind[k] for k in func.kind.tolist()]
    records = func.attr_table.records
    calls = np.nonzero(func.kind == ops.OP_CALL_TIR)[0]
    label = {}
    for aid in sorted_distinct(func.attr_id[calls]).tolist():
        callee = dict(records[aid]).get("callee")
        target = mod.functions.get(callee) if isinstance(callee, str) else None
        label[aid] = str(getattr(target, "attrs", {}).get("op_name", callee))
    for i, aid in zip(calls.tolist(), func.attr_id[calls].tolist(), strict=True):
        names[i] = label[aid]
    return names


def _opaque_detail(func: Function, mod: IRModule) -> list[str]:
    """Per node: why it is opaque to FuseOps (only read for nodes that are)."""
    by_kind = [ops.get_op(k).name for k in range(int(func.kind.max()) + 1)]
    out = [f"a {by_kind[k]} node, not a kernel call" for k in func.kind.tolist()]
    records = func.attr_table.records
    calls = np.nonzero(func.kind == ops.OP_CALL_TIR)[0]
    detail = {}
    for aid in sorted_distinct(func.attr_id[calls]).tolist():
        target = mod.functions.get(dict(records[aid]).get("callee"))
        attrs = getattr(target, "attrs", {})
        if "generic_name" in attrs:
            detail[aid] = ("a shape-generic kernel (tensors of at most "
                           "runtime.generic_max_elements elements are not fused)")
        elif attrs.get("op_pattern", ops.OPAQUE) == ops.OPAQUE:
            detail[aid] = f"an opaque op ({attrs.get('op_name', 'kernel')})"
        else:
            detail[aid] = "a kernel over non-static buffers"
    for i, aid in zip(calls.tolist(), func.attr_id[calls].tolist(), strict=True):
        out[i] = detail[aid]
    return out


def explain_function(func: Function, name: str, mod: IRModule,
                     max_group_size: int = fuse_ops.MAX_GROUP_SIZE) -> FunctionExplanation:
    """The reason of every edge of ``func`` (a function of ``mod`` after LegalizeOps)."""
    d = fuse_ops.fusion_decisions(func, mod, max_group_size)
    consumer = np.repeat(np.arange(func.num_nodes), np.diff(d.operand_ptr))
    producer = d.operand
    reason = d.reason
    is_output = np.zeros(func.num_nodes, np.bool_)
    is_output[func.outputs] = True
    opaque = _opaque_detail(func, mod)
    kinds = [_PATTERN.get(int(k), str(k)) for k in range(max(_PATTERN) + 1)]
    why = []
    for p, c, r in zip(producer.tolist(), consumer.tolist(), reason.tolist(), strict=True):
        pk, ck = kinds[d.pattern[p]], kinds[d.pattern[c]]
        if r == fuse_ops.FUSED:
            why.append(f"fused into the group of %{int(d.root[c])} ({pk} -> {ck})")
        elif r == fuse_ops.CONSUMER_OPAQUE:
            why.append(f"the consumer is {opaque[c]}")
        elif r == fuse_ops.PRODUCER_OPAQUE:
            why.append(f"the producer is {opaque[p]}")
        elif r == fuse_ops.SEVERAL_CONSUMERS:
            why.append("the producer is a function output (its value must exist)"
                       if is_output[p] else "the producer has consumers outside this group")
        elif r == fuse_ops.HEAVY_EPILOGUE_INJECTIVE:
            why.append(f"a layout change ({ck}) after a reduction/matmul group: only "
                       "elementwise/broadcast epilogues fuse")
        elif r == fuse_ops.TWO_HEAVY:
            holder = (f"the consumer ({ck}) is one" if d.pattern[c] > ops.BROADCAST else
                      "the consumer's group already holds one")
            why.append(f"the producer's group holds a reduction/matmul and {holder}: "
                       "two never share a group")
        elif r == fuse_ops.INTO_HEAVY:
            why.append(f"a {pk} producer does not fuse into a {ck} consumer")
        elif r == fuse_ops.GROUP_SIZE:
            why.append(f"the group would exceed max_group_size={max_group_size}")
        else:
            why.append("the producer is in another group")
    # (the per-edge loop above is Python: explain is a debugging report, drawn or printed
    # per edge anyway, not a pass)
    group = np.where(reason == fuse_ops.FUSED, d.root[consumer], -1)
    return FunctionExplanation(name, func, producer.astype(np.int64), consumer, reason,
                               group, why)


def hover_titles(fe: FunctionExplanation) -> tuple[dict[int, str], dict[tuple[int, int], str]]:
    """(node titles, edge titles) for ``irkernel.viz.draw``: each node's group, each edge's
    reason."""
    edges = {(p, c): why for p, c, why in zip(fe.producer.tolist(), fe.consumer.tolist(),
                                              fe.why, strict=True)}
    fused = fe.group >= 0
    nodes = {p: f"fusion group of %{g}" for p, g in zip(fe.producer[fused].tolist(),
                                                        fe.group[fused].tolist(), strict=True)}
    nodes.update({g: f"fusion group of %{g} (its root)" for g in fe.group[fused].tolist()})
    return nodes, edges


def explain(mod: IRModule, *, max_group_size: int = fuse_ops.MAX_GROUP_SIZE) -> Explanation:
    """Why FuseOps fused or kept apart each producer-consumer edge of ``mod``'s graphs.

    ``mod`` is what ``runtime.build`` takes: it is lowered by the GraphLowering
    passes before FuseOps, under the current PassContext (as a build would be).
    Functions FuseOps skips (``SkipOptimization``, ``Primitive``) are left out.
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"explain: expected an IRModule, got {type(mod).__name__}")
    ctx = transform.PassContext.current()
    for p in graph_pipeline(ctx).passes:
        if p.info.name == "FuseOps":
            break
        if ctx.pass_enabled(p.info):  # the enabling rule a build's Sequential applies
            mod = p(mod)
    out = {}
    for name, func in mod.functions.items():
        if (isinstance(func, Function) and not func.attrs.get("SkipOptimization", False)
                and not func.attrs.get("Primitive", False)):
            out[name] = explain_function(func, name, mod, max_group_size)
    return Explanation(mod, out)


__all__ = ["Explanation", "FunctionExplanation", "explain", "explain_function", "hover_titles"]
