"""The reducer's edits of one graph Function: whole-array rewrites, never per-node Python.

Every edit takes a Function and an int array of node ids (a chunk chosen by the
reducer's ddmin) and returns a smaller or simpler Function, or None when the
edit does not apply to any of the nodes. Each one rewrites columns and hands
them to ``irkernel.ir.rebuild.rebuild`` (the one audited compaction path),
then :func:`prune` drops what the outputs no longer read, parameters
included. The results are well-formed (rebuild's structural rules); their
types are checked by the caller with ``verify``, since an edit such as
:func:`shrink_dim` may break a type rule, and such a candidate is simply not
interesting.

The edits (docs/debugging.md):

* :func:`cut` keeps the nodes below ``k``; the values they hand on become the outputs;
* :func:`keep_outputs` keeps a subset of the outputs;
* :func:`to_params` turns nodes into new parameters of their type;
* :func:`to_consts` turns nodes (or constants) into constants of their type, all
  zeros or all ones;
* :func:`bypass` replaces a node by its ``slot``-th operand when the types match;
* :func:`shrink_dim` replaces a dimension by a smaller one in every shape.

Imports ``irkernel.ir`` only.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import NONE, NUMPY_DTYPES
from irkernel.ir.jit import kernel
from irkernel.ir.operands import operand_csr
from irkernel.ir.pools import ConstPoolBuilder, ShapeTable
from irkernel.ir.rebuild import rebuild
from irkernel.ir.validate import check_function

_PASS = "reduce"


@kernel
def live_kernel(ptr, ids, outputs, n):
    """bool[n]: the nodes the outputs read, directly or not (one reverse sweep).
    Arrays: ptr int64[n+1], ids int32[E] (the operand CSR), outputs int32[k]."""
    live = np.zeros(n, np.bool_)
    for o in outputs:
        live[o] = True
    for i in range(n - 1, -1, -1):
        if live[i]:
            for t in range(ptr[i], ptr[i + 1]):
                live[ids[t]] = True
    return live


def live_nodes(func: Function) -> np.ndarray:
    """bool[n]: the cone of the outputs."""
    ptr, ids = operand_csr(func)
    return live_kernel(ptr, ids, func.outputs, func.num_nodes)


def _param_columns(func: Function, kind: np.ndarray, a0: np.ndarray,
                   keep: np.ndarray | None) -> dict[str, object]:
    """``params``, ``param_names`` and positions for rows whose kind is PARAM and kept:
    old parameters keep their names, new ones are named after their old node id."""
    is_param = kind == ops.OP_PARAM
    if keep is not None:
        is_param &= keep
    rows = np.nonzero(is_param)[0].astype(np.int32)
    old = dict(zip(func.params.tolist(), func.param_names, strict=True))
    taken = set(func.param_names)
    names = []
    for r in rows.tolist():  # one step per parameter, not per node
        name = old.get(r) if func.kind[r] == ops.OP_PARAM else None
        if name is None:
            name, k = f"r{r}", 0
            while name in taken:
                k += 1
                name = f"r{r}_{k}"
            taken.add(name)
        names.append(name)
    a0[rows] = np.arange(len(rows), dtype=np.int32)
    return {"params": rows, "param_names": tuple(names)}


def prune(func: Function) -> Function:
    """``func`` without the nodes its outputs do not read, unused parameters included."""
    live = live_nodes(func)
    if live.all():
        return func
    dead_params = func.params[~live[func.params]]
    if not len(dead_params):
        return rebuild(func, keep=live, pass_name=_PASS)
    # rebuild never drops a parameter (the signature is the caller's): the reducer
    # changes the signature, so dead parameter rows become (dropped) constant rows first.
    pool, consts = func.consts, {}
    if not len(pool):
        builder = ConstPoolBuilder(pool, func.shapes)
        builder.add_scalars(np.zeros(1), int(func.dtype[dead_params[0]]))
        pool = consts["consts"] = builder.freeze()
    kind, a0 = func.kind.copy(), func.a0.copy()
    kind[dead_params], a0[dead_params] = ops.OP_CONST, 0
    cols = _param_columns(func, kind, a0, live)
    return rebuild(func, keep=live, kind=kind, a0=a0, pass_name=_PASS, **consts, **cols)


def keep_outputs(func: Function, outputs: np.ndarray) -> Function | None:
    """``func`` returning ``outputs`` (node ids), pruned."""
    if not len(outputs):
        return None
    return prune(replace(func, outputs=np.asarray(outputs, np.int32)))


def cut(func: Function, k: int) -> Function | None:
    """The nodes below ``k``, returning every value they hand on to the nodes from ``k``
    on or to the outputs (in node order). The difference a miscompile makes below ``k``
    reaches the old outputs through these values, so a bisection over ``k`` finds
    where it starts in about log2(n) calls."""
    n = func.num_nodes
    if not 0 < k < n:
        return None
    ptr, ids = operand_csr(func)
    read_later = np.zeros(n, np.bool_)
    read_later[ids[ptr[k]:]] = True
    read_later[func.outputs] = True
    frontier = np.nonzero(read_later[:k])[0]
    frontier = frontier[func.kind[frontier] != ops.OP_PARAM]
    if not len(frontier):
        return None
    # The params from k on are unused: they go as prune drops dead parameters.
    return prune(replace(func, outputs=frontier.astype(np.int32)))


def _rewritable(func: Function, nodes: np.ndarray) -> np.ndarray:
    nodes = np.asarray(nodes, np.int64)
    return nodes[func.kind[nodes] != ops.OP_PARAM]


def to_params(func: Function, nodes: np.ndarray) -> Function | None:
    """Each of ``nodes`` (not a parameter) becomes a new parameter of its type."""
    nodes = _rewritable(func, nodes)
    if not len(nodes):
        return None
    kind, a0, a1, attr_id = func.kind.copy(), func.a0.copy(), func.a1.copy(), func.attr_id.copy()
    kind[nodes], a1[nodes], attr_id[nodes] = ops.OP_PARAM, NONE, 0
    cols = _param_columns(func, kind, a0, None)
    return prune(rebuild(func, kind=kind, a0=a0, a1=a1, attr_id=attr_id, pass_name=_PASS,
                         **cols))


def to_consts(func: Function, nodes: np.ndarray, fill: int) -> Function | None:
    """Each of ``nodes`` becomes a constant of its type filled with ``fill`` (0 or 1);
    constants that already hold that value are left alone."""
    nodes = _rewritable(func, nodes)
    if not len(nodes):
        return None
    builder = ConstPoolBuilder(func.consts, func.shapes)
    types = np.unique(np.stack([func.dtype[nodes].astype(np.int64),
                                func.shape_id[nodes].astype(np.int64)]), axis=1)
    const_of = {}
    for code, sid in types.T.tolist():  # per distinct type, not per node
        value = np.full(func.shapes[sid], fill, NUMPY_DTYPES[code])
        const_of[(code, sid)] = builder.add(value, sid)
    cid = np.array([const_of[(d, s)] for d, s in zip(func.dtype[nodes].tolist(),
                                                     func.shape_id[nodes].tolist())], np.int32)
    same = (func.kind[nodes] == ops.OP_CONST) & (func.a0[nodes] == cid)
    if same.all():
        return None
    kind, a0, a1, attr_id = func.kind.copy(), func.a0.copy(), func.a1.copy(), func.attr_id.copy()
    kind[nodes], a0[nodes], a1[nodes], attr_id[nodes] = ops.OP_CONST, cid, NONE, 0
    return prune(rebuild(func, kind=kind, a0=a0, a1=a1, attr_id=attr_id,
                         consts=builder.freeze(), pass_name=_PASS))


def bypass(func: Function, nodes: np.ndarray, slot: int) -> Function | None:
    """Each of ``nodes`` whose ``slot``-th operand has its type is replaced by that
    operand (a unary or elementwise op bypassed)."""
    nodes = np.asarray(nodes, np.int64)
    ptr, ids = operand_csr(func)
    nodes = nodes[ptr[nodes + 1] - ptr[nodes] > slot]
    operand = ids[ptr[nodes] + slot].astype(np.int64)
    same = ((func.dtype[operand] == func.dtype[nodes])
            & (func.shape_id[operand] == func.shape_id[nodes]))
    nodes, operand = nodes[same], operand[same]
    if not len(nodes):
        return None
    rep = np.full(func.num_nodes, NONE, np.int32)
    rep[nodes] = operand
    return prune(rebuild(func, rep=rep, pass_name=_PASS))


def shrink_dim(func: Function, old: int, new: int) -> Function | None:
    """Every dimension ``old`` of every shape becomes ``new`` (< old); constants whose
    shape changes keep a prefix of their values (``np.resize``). Attributes are not
    touched, so an op whose attributes name the old size no longer type-checks, and
    the caller's ``verify`` rejects the candidate."""
    shapes = [tuple(new if d == old else d for d in s) for s in func.shapes.shapes]
    if shapes == list(func.shapes.shapes):
        return None
    # Two shapes may become one (4 -> 1 makes (4,) equal to (1,)): ids are re-interned.
    index: dict[tuple[int, ...], int] = {}
    sid_map = np.array([index.setdefault(s, len(index)) for s in shapes], np.int32)
    table = ShapeTable(list(index))
    pool = func.consts
    builder = ConstPoolBuilder()
    new_id = np.zeros(max(len(pool), 1), np.int32)
    for cid in range(len(pool)):  # per constant (a pool is small next to the graph)
        sid = int(pool.shape_id[cid])
        value = np.resize(pool.value(cid, func.shapes), shapes[sid])
        new_id[cid] = builder.add(value, int(sid_map[sid]))
    is_const = func.kind == ops.OP_CONST
    a0 = func.a0.copy()
    a0[is_const] = new_id[func.a0[is_const]]
    out = replace(func, shapes=table, consts=builder.freeze(), a0=a0.astype(np.int32),
                  shape_id=sid_map[func.shape_id])
    check_function(out, _PASS)
    return out


__all__ = ["bypass", "cut", "keep_outputs", "live_nodes", "prune", "shrink_dim", "to_consts",
           "to_params"]
