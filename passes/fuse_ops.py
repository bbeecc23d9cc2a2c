"""FuseOps: group call_tir nodes into ``Primitive`` graph functions (TVM's FuseOps).

Input: graph Functions after LegalizeOps (param / const / call_func / call_tir
nodes). Each call_tir node gets a fusion pattern from its callee PrimFunc's
``op_pattern`` attribute (TVM's OpPatternKind numbering, ``irkernel.ir.ops``);
every other node is OPAQUE. One forward Numba sweep (``fuse_groups_kernel``)
then decides, per consumer, which single-use producers join its group:

* a producer group without a REDUCE/OUT_EWISE_FUSABLE member fuses into an
  ELEMWISE/BROADCAST/INJECTIVE consumer, or into a REDUCE consumer (injective
  prologue of a reduction);
* a producer group *with* one (a "heavy" group: reduction or matmul) fuses into
  an ELEMWISE/BROADCAST consumer (epilogue), never into an injective or heavy one;
* a group holds at most one heavy member and at most ``max_group_size`` members
  (so the fused kernel stays small enough to compile quickly);
* function outputs are group roots (their value must exist); a multi-use node joins
  a consumer's group only when every one of its consumers is already in that group:
  a *diamond* whose paths re-join there (TVM's post-dominator rule). The sweep visits
  a node's single-use producers first, then its multi-use ones, checking each
  consumer's group root by its ``parent`` chain (at most a group long). This is what
  fuses SiLU, ``x * sigmoid(x)``, into the conv before it (efficientnet: a separate
  pass over 96 x 112 x 112 floats per block otherwise).

Every group is an in-tree of ``parent`` links whose root is its last node (diamond
edges are extra edges inside the group); the sweep records the links and one reverse
sweep resolves roots: no union-find, no recursion, no per-node Python.

Rewrite (vectorized over all groups at once, then per *group* Python for the
dedup key and per *distinct* group for the Function object): each group of two
or more members becomes a private graph Function with attr ``Primitive=True``
(params = the group's external inputs in order of first use; body = the
members; output = the root), and the root's row in the caller becomes a
``call_func`` to it while the other members are dropped through
``irkernel.ir.rebuild``. Structurally identical groups share one Primitive
function, so FuseTIR compiles each distinct kernel once.

Imports irkernel only (never runtime).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.distinct import sorted_distinct
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES, NONE
from irkernel.ir.jit import helper, kernel
from irkernel.ir.module import IRModule
from irkernel.ir.operands import operand_csr, operand_edges
from irkernel.ir.pools import ConstPool
from irkernel.ir.rebuild import rebuild
from irkernel.tir.buffer import Buffer
from irkernel.tir.expr import IntImm

#: Default cap on members per group: a fused kernel of 64 ops compiles in well under
#: a second; larger groups give little (the chain already makes one pass over memory).
MAX_GROUP_SIZE = 64
#: Longest generated function name before truncation (``fused_a_b_..._etc``).
MAX_NAME_LENGTH = 64

_ELEMWISE, _BROADCAST, _INJECTIVE = ops.ELEMWISE, ops.BROADCAST, ops.INJECTIVE
_REDUCE, _OUT_EWISE_FUSABLE, _OPAQUE = ops.REDUCE, ops.OUT_EWISE_FUSABLE, ops.OPAQUE


#: Why an operand edge (producer -> consumer) was or was not fused: one int8 per CSR
#: edge, written by ``fuse_groups_kernel`` beside each decision (so a reason can not
#: disagree with the decision it explains). ``runtime.explain`` words them.
(FUSED, CONSUMER_OPAQUE, PRODUCER_OPAQUE, SEVERAL_CONSUMERS, HEAVY_EPILOGUE_INJECTIVE,
 TWO_HEAVY, INTO_HEAVY, GROUP_SIZE, OTHER_GROUP) = range(9)
REASON_NAMES = ("fused", "consumer opaque", "producer opaque", "several consumers",
                "injective after reduction/matmul", "two reductions/matmuls",
                "into a reduction/matmul consumer", "group size", "in another group")


@helper
def _consumers_in_group(p, i, uses, cons_ptr, cons, parent):
    """Whether every consumer of ``p`` is ``i`` or already in ``i``'s group, and ``p`` is no
    output (its distinct consumers are all of its uses): then ``p`` is a diamond's source
    whose paths re-join at ``i`` (TVM's post-dominator rule), and may join the group."""
    distinct = 0
    last = -1
    for t in range(cons_ptr[p], cons_ptr[p + 1]):
        c = cons[t]
        if c == last:
            continue
        last = c
        distinct += 1
        r = c
        while parent[r] != r:  # the consumer's group root (chains are at most a group long)
            r = parent[r]
        if r != i:
            return False
    return distinct == uses[p]


@kernel
def fuse_groups_kernel(operand_ptr, operand, pattern, uses, max_size, reason):
    """Forward sweep choosing, per consumer, the single-use producer groups that join it.

    Arrays: operand_ptr int64[n+1] and operand int64[E] (CSR: node i reads
    operand[operand_ptr[i]:operand_ptr[i+1]]); pattern int8[n] (per node; OPAQUE =
    never fused); uses int32[n] (distinct consumers, outputs included). Written:
    reason int8[E], the rule that decided each edge (``FUSED`` ... ``OTHER_GROUP``).
    Returns (root int32[n], size int32[n]): the root (last node) of each node's
    group, and the member count of the group rooted at each root. Relies on
    topological order: a producer's group is final when its consumer is visited.
    """
    n = pattern.shape[0]
    # consumers of each node (CSR, in node order: a node reading p twice appears twice)
    cons_ptr = np.zeros(n + 1, np.int64)
    for t in range(operand.shape[0]):
        cons_ptr[operand[t] + 1] += 1
    for i in range(n):
        cons_ptr[i + 1] += cons_ptr[i]
    fill = cons_ptr[:-1].copy()
    cons = np.empty(operand.shape[0], np.int64)
    for i in range(n):
        for t in range(operand_ptr[i], operand_ptr[i + 1]):
            cons[fill[operand[t]]] = i
            fill[operand[t]] += 1
    parent = np.arange(n).astype(np.int32)
    size = np.ones(n, np.int32)
    heavy = np.zeros(n, np.bool_)
    for i in range(n):
        pc = pattern[i]
        if pc == _OPAQUE:
            for t in range(operand_ptr[i], operand_ptr[i + 1]):
                reason[t] = CONSUMER_OPAQUE
            continue
        heavy[i] = _REDUCE <= pc <= _OUT_EWISE_FUSABLE
        # Single-use producers first, so that a diamond's inner paths have joined before
        # its multi-use source is considered. A producer joins when it is fusable, is in
        # no group yet, has one consumer (which may read it twice: x * x) or only
        # consumers already in i's group (a diamond; never an output), the pattern kinds
        # allow it and the group stays within max_size; the first rule that fails is
        # the edge's reason.
        for single in (True, False):
            for t in range(operand_ptr[i], operand_ptr[i + 1]):
                p = operand[t]
                if (uses[p] == 1) != single:
                    continue  # decided in the other pass
                if pattern[p] == _OPAQUE:
                    reason[t] = PRODUCER_OPAQUE
                    continue
                if parent[p] == i:  # a second read of a producer already in i's group
                    reason[t] = FUSED
                    continue
                if parent[p] != p:
                    reason[t] = OTHER_GROUP
                    continue
                if not single and not _consumers_in_group(p, i, uses, cons_ptr, cons, parent):
                    reason[t] = SEVERAL_CONSUMERS
                    continue
                if heavy[p]:  # epilogue: elementwise/broadcast onto a reduction / matmul
                    ok = pc <= _BROADCAST and not heavy[i]
                    if not ok:
                        reason[t] = HEAVY_EPILOGUE_INJECTIVE if pc == _INJECTIVE else TWO_HEAVY
                else:  # injective producers fuse into injective consumers and reductions
                    ok = pc <= _INJECTIVE or pc == _REDUCE
                    if not ok:
                        reason[t] = INTO_HEAVY
                if ok and size[i] + size[p] > max_size:
                    ok = False
                    reason[t] = GROUP_SIZE
                if ok:
                    reason[t] = FUSED
                    parent[p] = i
                    size[i] += size[p]
                    heavy[i] = heavy[i] or heavy[p]
    root = np.empty(n, np.int32)
    for i in range(n - 1, -1, -1):
        p = parent[i]
        root[i] = i if p == i else root[p]
    return root, size


# ---------------------------------------------------------------------------
# per-node inputs of the sweep
# ---------------------------------------------------------------------------

def operands_and_uses(func: Function) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(operand_ptr int64[n+1], operand int64[E], uses int32[n]) of every node, read-only;
    ``uses`` counts distinct consumer nodes plus occurrences among the outputs, so a
    value read twice by one node (``x * x``) still fuses into it: FuseTIR binds such a
    value once with a ``Let`` instead of computing it twice."""
    n = func.num_nodes
    ptr, ids = operand_csr(func)
    operand = ids.astype(np.int64)
    consumer = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    distinct = sorted_distinct(consumer * max(n, 1) + operand) % max(n, 1)
    reads = np.concatenate([distinct, func.outputs.astype(np.int64)])
    uses = np.bincount(reads, minlength=n).astype(np.int32)
    return _frozen(ptr), _frozen(operand), _frozen(uses)


def _callee_info(func: Function, mod: IRModule) -> tuple[np.ndarray, list[str]]:
    """Per attribute record: the callee's pattern (OPAQUE unless a fusable PrimFunc) and
    its op name. Python over the attribute table (distinct records, not nodes)."""
    records = func.attr_table.records
    pattern = np.full(len(records), _OPAQUE, np.int8)
    names = [""] * len(records)
    is_call = func.kind == ops.OP_CALL_TIR
    by_callee: dict[str, tuple[int, str] | None] = {}  # records outnumber callees
    for aid in sorted_distinct(func.attr_id[is_call]).tolist():
        callee = dict(records[aid]).get("callee")
        if not isinstance(callee, str):
            continue
        if callee not in by_callee:
            by_callee[callee] = _callee_pattern(callee, mod.functions.get(callee))
        found = by_callee[callee]
        if found is not None:
            pattern[aid], names[aid] = found
    return pattern, names


def _callee_pattern(callee: str, target: Any) -> tuple[int, str] | None:
    """(fusion pattern, op name) of a call_tir callee; None when it is no PrimFunc."""
    if not getattr(type(target), "_irkernel_prim_func", False):
        return None
    value = target.attrs.get("op_pattern", _OPAQUE)
    if not isinstance(value, int) or value not in ops.PATTERN_NAMES:
        raise IRError(f"FuseOps: PrimFunc {callee!r}: op_pattern {value!r} is not one of "
                      f"{sorted(ops.PATTERN_NAMES)} (rule: op_pattern attribute)")
    # Only kernels of static-shaped buffers can be composed by FuseTIR.
    static = all(isinstance(p, Buffer) and not p.strides and all(
        isinstance(d, IntImm) for d in p.shape) for p in target.params)
    fusable = value if value != _OPAQUE and static else _OPAQUE
    return fusable, _sanitize(str(target.attrs.get("op_name", callee)))


def node_patterns(func: Function, mod: IRModule) -> tuple[np.ndarray, list[str]]:
    """int8[n] fusion pattern per node (gathered from the per-record lookup) and the
    per-record op names."""
    by_record, names = _callee_info(func, mod)
    pattern = np.where(func.kind == ops.OP_CALL_TIR, by_record[func.attr_id], _OPAQUE)
    return _frozen(pattern.astype(np.int8)), names


def fusion_groups(func: Function, mod: IRModule,
                  max_group_size: int = MAX_GROUP_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """(root int32[n], size int32[n]) of ``func``'s fusion groups (see the module notes)."""
    decisions = fusion_decisions(func, mod, max_group_size)
    return decisions.root, decisions.size


@dataclass(frozen=True)
class FusionDecisions:
    """FuseOps' decisions on one function, as columns: per node its ``pattern`` and
    group ``root`` (``size`` per root), per operand edge (CSR ``operand_ptr`` /
    ``operand``: consumer i reads operand[operand_ptr[i]:operand_ptr[i+1]]) the
    ``reason`` code (``FUSED`` or the rule that kept the two apart)."""

    pattern: np.ndarray
    operand_ptr: np.ndarray
    operand: np.ndarray
    root: np.ndarray
    size: np.ndarray
    reason: np.ndarray


def fusion_decisions(func: Function, mod: IRModule,
                     max_group_size: int = MAX_GROUP_SIZE) -> FusionDecisions:
    """The sweep FuseOps runs on ``func``, with the reason of every edge."""
    pattern, _ = node_patterns(func, mod)
    ptr, operand, uses = operands_and_uses(func)
    reason = np.zeros(len(operand), np.int8)
    root, size = fuse_groups_kernel(ptr, operand, pattern, uses, np.int32(max_group_size),
                                    reason)
    return FusionDecisions(pattern, ptr, operand, root, size, _frozen(reason))


# ---------------------------------------------------------------------------
# rewrite
# ---------------------------------------------------------------------------

def _sanitize(name: str) -> str:
    return re.sub(r"\W", "_", name) or "op"


def _group_name(op_names: list[str]) -> str:
    name = "fused_" + "_".join(op_names)
    if len(name) > MAX_NAME_LENGTH:
        name = name[:MAX_NAME_LENGTH - 4].rstrip("_") + "_etc"
    return name


class _Names:
    """Fresh function names in a module (``x``, ``x_1``, ``x_2``, ...)."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


@dataclass
class _Layout:
    """All groups of one function as flat arrays (built without per-node Python).

    Groups are numbered in root order. Per group g: ``roots[g]``, ``n_inputs[g]``
    external inputs (``input_node[input_start[g]:...]``, in first-use order),
    and its sub-function rows ``row_start[g]:row_start[g] + n_rows[g]`` (params,
    then members) in the columns ``kind``..``attr_id`` and the 2-d ``key`` (same
    rows, for hashing), with operand lists ``extra[edge_start[g]:...]``.
    """

    members: np.ndarray
    roots: np.ndarray
    n_inputs: np.ndarray
    input_start: np.ndarray
    input_node: np.ndarray
    row_start: np.ndarray
    n_rows: np.ndarray
    edge_start: np.ndarray
    n_edges: np.ndarray
    key: np.ndarray
    columns: dict[str, np.ndarray]
    extra: np.ndarray


def _layout(func: Function, root: np.ndarray, size: np.ndarray) -> _Layout | None:
    n = func.num_nodes
    in_group = size[root] >= 2
    if not np.any(in_group):
        return None
    # Members grouped by root, ascending node id inside a group (stable sort).
    members = np.nonzero(in_group)[0].astype(np.int64)
    members = members[np.argsort(root[members], kind="stable")]
    roots = sorted_distinct(root[members]).astype(np.int64)
    n_groups = len(roots)
    group_of = np.full(n, -1, np.int64)
    group_of[roots] = np.arange(n_groups)
    member_group = group_of[root[members]]
    group_size = size[roots].astype(np.int64)
    local = np.empty(n, np.int64)
    local[members] = np.arange(len(members)) - np.repeat(np.cumsum(group_size) - group_size,
                                                         group_size)
    # Operand edges of the members (member then operand order), internal or external.
    consumer, operand = operand_edges(func, members)
    edge_group = group_of[root[consumer]]
    internal = in_group[operand] & (root[operand] == root[consumer])
    ext = np.nonzero(~internal)[0]
    # External inputs: distinct (group, node) pairs in order of first use.
    uniq, first, inverse = np.unique(edge_group[ext] * n + operand[ext], return_index=True,
                                     return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int64)
    rank[order] = np.arange(len(uniq))
    input_node = operand[ext][first[order]]
    input_group = uniq[order] // n
    n_inputs = np.bincount(input_group, minlength=n_groups).astype(np.int64)
    input_start = np.cumsum(n_inputs) - n_inputs
    # Sub-function operand ids: params 0..k-1, members k + local index.
    sub_operand = np.empty(len(operand), np.int64)
    sub_operand[internal] = n_inputs[edge_group[internal]] + local[operand[internal]]
    sub_operand[ext] = rank[inverse] - input_start[edge_group[ext]]
    n_rows = n_inputs + group_size
    row_start = np.cumsum(n_rows) - n_rows
    key = np.zeros((int(n_rows.sum()), 6), np.int32)  # kind, a0, a1, dtype, shape_id, attr_id
    position = np.arange(len(input_node)) - input_start[input_group]
    prow = row_start[input_group] + position
    key[prow, 0], key[prow, 1], key[prow, 2] = ops.OP_PARAM, position, NONE
    key[prow, 3], key[prow, 4] = func.dtype[input_node], func.shape_id[input_node]
    n_edges = np.bincount(edge_group, minlength=n_groups).astype(np.int64)
    edge_start = np.cumsum(n_edges) - n_edges
    n_operands = np.bincount(_positions(members, consumer), minlength=len(members))
    mrow = row_start[member_group] + n_inputs[member_group] + local[members]
    key[mrow, 0] = ops.OP_CALL_TIR
    key[mrow, 1] = np.cumsum(n_operands) - n_operands - edge_start[member_group]
    key[mrow, 2] = n_operands
    key[mrow, 3], key[mrow, 4] = func.dtype[members], func.shape_id[members]
    key[mrow, 5] = func.attr_id[members]
    columns = {name: _frozen(key[:, c].astype(dtype)) for c, (name, dtype) in enumerate(
        (("kind", np.int16), ("a0", np.int32), ("a1", np.int32), ("dtype", np.int8),
         ("shape_id", np.int32), ("attr_id", np.int32)))}
    return _Layout(members, roots, n_inputs, input_start, input_node, row_start, n_rows,
                   edge_start, n_edges, key, columns, _frozen(sub_operand.astype(np.int32)))


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr)
    arr.setflags(write=False)
    return arr


_EMPTY_POOL = ConstPool.empty()


def _primitives(func: Function, lay: _Layout, op_names: list[str], names: _Names,
                made: dict[tuple[Any, ...], tuple[str, Function, tuple[Any, ...]]]
                ) -> list[tuple[tuple[str, Any], ...]]:
    """The call_func attribute record of each group; new Primitive functions go in ``made``
    (one per distinct group structure: per-group Python is a key lookup)."""
    tables = (id(func.shapes), id(func.attr_table))
    out = []
    cols, extra, key = lay.columns, lay.extra, lay.key
    for r0, nr, e0, ne, k, root in zip(lay.row_start.tolist(), lay.n_rows.tolist(),
                                       lay.edge_start.tolist(), lay.n_edges.tolist(),
                                       lay.n_inputs.tolist(), lay.roots.tolist(), strict=True):
        skey = (tables, key[r0:r0 + nr].tobytes(), extra[e0:e0 + ne].tobytes())
        entry = made.get(skey)
        if entry is None:
            member_aids = cols["attr_id"][r0 + k:r0 + nr].tolist()
            callee = names.fresh(_group_name([op_names[a] for a in member_aids]))
            sub = Function(**{c: v[r0:r0 + nr] for c, v in cols.items()},
                           extra=extra[e0:e0 + ne], params=_frozen(np.arange(k, dtype=np.int32)),
                           outputs=_frozen(np.array([nr - 1], np.int32)),
                           param_names=tuple(f"p{j}" for j in range(k)), shapes=func.shapes,
                           attr_table=func.attr_table, consts=_EMPTY_POOL,
                           attrs={"Primitive": True})
            # The record call_func's normalize_attrs would make (sorted keys), built directly.
            record = (("callee", callee), ("dtype", DTYPE_NAMES[int(func.dtype[root])]),
                      ("shape", func.shapes[int(func.shape_id[root])]))
            entry = made[skey] = (callee, sub, record)
        out.append(entry[2])
    return out


def _fuse_function(func: Function, fname: str, mod: IRModule, names: _Names,
                   made: dict[tuple[Any, ...], tuple[str, Function, tuple[Any, ...]]],
                   max_group_size: int) -> Function:
    """``func`` with each group of >= 2 members replaced by a call_func (new Primitive
    functions go into ``made``, keyed by their structure)."""
    pattern, op_names = node_patterns(func, mod)
    if not np.any(pattern != _OPAQUE):
        return func
    ptr, operand, uses = operands_and_uses(func)
    root, size = fuse_groups_kernel(ptr, operand, pattern, uses, np.int32(max_group_size),
                                    np.empty(len(operand), np.int8))
    lay = _layout(func, root, size)
    if lay is None:
        return func
    records = _primitives(func, lay, op_names, names, made)
    table, new_ids = func.attr_table.extended(records)
    # The caller: each root becomes call_func(inputs...); other members are dropped.
    kind, a0, a1, attr_id = (func.kind.copy(), func.a0.copy(), func.a1.copy(),
                             func.attr_id.copy())
    kind[lay.roots] = ops.OP_CALL_FUNC
    a0[lay.roots] = len(func.extra) + lay.input_start
    a1[lay.roots] = lay.n_inputs
    attr_id[lay.roots] = np.asarray(new_ids, np.int32)
    extra = np.concatenate([func.extra, lay.input_node.astype(np.int32)])
    keep = np.ones(func.num_nodes, np.bool_)
    keep[lay.members] = False
    keep[lay.roots] = True
    return rebuild(func, keep=keep, kind=kind, a0=a0, a1=a1, attr_id=attr_id, extra=extra,
                   attr_table=table, pass_name=f"FuseOps ({fname})")


def _positions(members: np.ndarray, consumer: np.ndarray) -> np.ndarray:
    """Index in ``members`` (group-sorted, not ascending) of each edge's consumer."""
    where = np.empty(int(members.max()) + 1 if len(members) else 0, np.int64)
    where[members] = np.arange(len(members))
    return where[consumer]


def _fuse_module(mod: IRModule, ctx: transform.PassContext, max_group_size: int) -> IRModule:
    names = _Names(set(mod.functions))
    made: dict[tuple[Any, ...], tuple[str, Function, tuple[Any, ...]]] = {}
    changed: dict[str, Any] = {}
    for fname, func in mod.functions.items():
        if (not isinstance(func, Function) or func.attrs.get("SkipOptimization", False)
                or func.attrs.get("Primitive", False)):
            continue
        out = _fuse_function(func, fname, mod, names, made, max_group_size)
        if out is not func:
            changed[fname] = out
            ctx.stat("nodes_fused", func.num_nodes - out.num_nodes)
    if not changed:
        return mod
    ctx.stat("primitive_functions", len(made))
    return mod.with_functions({**changed, **{name: sub for name, sub, _ in made.values()}})


def FuseOps(max_group_size: int = MAX_GROUP_SIZE) -> transform.ModulePass:
    """Group call_tir nodes into ``Primitive`` graph functions (opt level 1).

    Opt level 1 rather than TVM's 0: ``runtime.build(mod, opt_level=0)`` then
    gives one kernel per op (a debugging mode, like ``-O0``), while FuseTIR
    (level 0) still lowers any Primitive functions a user wrote.

    Parameters
    ----------
    max_group_size : int
        Most call_tir nodes in one group (default 64); at least 2.

    Returns
    -------
    ModulePass
        Skips functions with ``SkipOptimization`` (and existing Primitive
        functions). Requires nothing; run FuseTIR after it. Reports
        ``nodes_fused`` and ``primitive_functions``.

    Examples
    --------
    >>> mod = passes.FuseTIR()(passes.FuseOps()(passes.LegalizeOps()(mod)))  # doctest: +SKIP
    """
    if isinstance(max_group_size, bool) or not isinstance(max_group_size, int):
        raise TypeError(f"FuseOps: max_group_size must be an int, got {max_group_size!r}")
    if max_group_size < 2:
        raise ValueError(f"FuseOps: max_group_size must be at least 2, got {max_group_size}")

    def fuse_ops(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        return _fuse_module(mod, ctx, max_group_size)

    return transform.module_pass(fuse_ops, opt_level=1, name="FuseOps")


transform.register_pass("FuseOps", FuseOps)
