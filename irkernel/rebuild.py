"""The one audited path for structural edits: keep mask + replacement map -> new Function.

Protocol (STYLE 9.3): a pass computes ``keep`` (bool[n]) and/or ``rep``
(int32[n], NONE = keep self, else a node id smaller than i whose value
replaces node i) and may rewrite rows in copied columns (e.g. FoldConstant
turns an ``add`` row into a CONST row). ``rebuild`` then

1. resolves replacement chains in one forward sweep (``rep[i] < i``, so the
   target's own replacement is final when i is visited: no cycles possible);
2. drops replaced nodes and nodes with ``keep[i] == False`` and numbers the
   survivors with a prefix sum (``old2new``);
3. gathers every column, remaps operands, ``extra`` and ``outputs``, compacts
   ``extra``;
4. freezes the arrays.

Params are never dropped or replaced (the signature is the caller's), and a
kept node may not read a dropped one: both are checked and reported as
IRError naming the pass's node. Passes must not hand-roll compaction.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace
from typing import Any

import numpy as np

from . import ops
from ._jit import kernel
from .errors import IRError
from .graph import Function
from .ids import ENC_BINARY, ENC_PARAM, ENC_UNARY, ENC_VARIADIC, NONE

REBUILD_OK, REBUILD_BAD_REP, REBUILD_DANGLING, REBUILD_PARAM = 0, 1, 2, 3


@kernel
def rebuild_kernel(kind, a0, a1, extra, dtype, shape_id, attr_id, outputs, keep, rep,
                   op_encoding):
    """Resolve ``rep``, drop nodes, remap operands and compact every column.

    Arrays: kind int16[n]; a0, a1, shape_id, attr_id int32[n]; dtype int8[n];
    extra int32[m]; outputs int32[r]; keep bool[n]; rep int32[n] (NONE or < i);
    op_encoding int8[n_ops]. Returns the new (kind, a0, a1, dtype, shape_id,
    attr_id, extra, outputs, new_id) and (status, bad_node); on a non-zero
    status the arrays are empty and ``bad_node`` names the culprit.
    """
    n = kind.shape[0]
    # new_id[i]: the new id of the node whose value i has after replacement
    # (-1 when that node is dropped); one array does both chain resolution and
    # renumbering because rep[i] < i makes new_id[rep[i]] final when i is visited.
    new_id = np.full(n, -1, np.int32)
    alive = np.empty(n, np.bool_)
    count = 0
    m_new = 0
    for i in range(n):
        r = rep[i]
        enc = op_encoding[kind[i]]
        if r != -1:
            if r < 0 or r >= i:
                return _empty_result(n), REBUILD_BAD_REP, i
            if enc == ENC_PARAM:
                return _empty_result(n), REBUILD_PARAM, i
            new_id[i] = new_id[r]
            alive[i] = False
        else:
            alive[i] = keep[i]
            if not keep[i] and enc == ENC_PARAM:
                return _empty_result(n), REBUILD_PARAM, i
            if alive[i]:
                new_id[i] = count
                count += 1
                if enc == ENC_VARIADIC:
                    m_new += a1[i]
    new_kind = np.empty(count, np.int16)
    new_a0 = np.empty(count, np.int32)
    new_a1 = np.empty(count, np.int32)
    new_dtype = np.empty(count, np.int8)
    new_shape = np.empty(count, np.int32)
    new_attr = np.empty(count, np.int32)
    new_extra = np.empty(m_new, np.int32)
    e = 0
    for i in range(n):
        if not alive[i]:
            continue
        j = new_id[i]
        k = kind[i]
        enc = op_encoding[k]
        new_kind[j] = k
        new_dtype[j] = dtype[i]
        new_shape[j] = shape_id[i]
        new_attr[j] = attr_id[i]
        x, y = a0[i], a1[i]
        if enc == ENC_VARIADIC:
            new_a0[j] = e
            new_a1[j] = y
            for t in range(x, x + y):
                v = new_id[extra[t]]
                if v < 0:
                    return _empty_result(n), REBUILD_DANGLING, i
                new_extra[e] = v
                e += 1
            continue
        if enc == ENC_UNARY or enc == ENC_BINARY:
            x = new_id[x]
            if x < 0:
                return _empty_result(n), REBUILD_DANGLING, i
        if enc == ENC_BINARY:
            y = new_id[y]
            if y < 0:
                return _empty_result(n), REBUILD_DANGLING, i
        new_a0[j] = x
        new_a1[j] = y
    new_outputs = np.empty(outputs.shape[0], np.int32)
    for t in range(outputs.shape[0]):
        v = new_id[outputs[t]]
        if v < 0:
            return _empty_result(n), REBUILD_DANGLING, outputs[t]
        new_outputs[t] = v
    return (new_kind, new_a0, new_a1, new_dtype, new_shape, new_attr, new_extra, new_outputs,
            new_id), REBUILD_OK, -1


@kernel
def _empty_result_kernel(n):
    """Placeholder arrays returned with an error status (keeps one return type)."""
    z16 = np.empty(0, np.int16)
    z32 = np.empty(0, np.int32)
    z8 = np.empty(0, np.int8)
    return (z16, z32, z32, z8, z32, z32, z32, z32, np.full(n, -1, np.int32))


_empty_result = _empty_result_kernel


def rebuild(func: Function, *, keep: np.ndarray | None = None, rep: np.ndarray | None = None,
            pass_name: str = "rebuild", **changes: Any) -> Function:
    """A new Function with nodes dropped/replaced and columns compacted.

    Parameters
    ----------
    func : Function
        The input; never modified.
    keep : bool[n], optional
        False drops the node (nothing kept may read it). Default: keep all.
    rep : int32[n], optional
        NONE keeps the node; ``rep[i] = j < i`` redirects every use of i to j
        and drops i. Default: no replacement.
    pass_name : str
        Named in errors.
    **changes
        Replacement columns or tables (``kind``, ``a0``, ``a1``, ``dtype``,
        ``shape_id``, ``attr_id``, ``extra``, ``consts``, ``shapes``,
        ``attr_table``) applied before dropping, for rewritten rows.

    Returns
    -------
    Function
        ``func`` itself when nothing changes.
    """
    n = func.num_nodes
    if keep is None and rep is None and not changes:
        return func
    if keep is None and rep is None:  # rewritten rows only: no compaction needed
        return dc_replace(func, **changes)
    cols = {name: changes.pop(name, getattr(func, name))
            for name in ("kind", "a0", "a1", "extra", "dtype", "shape_id", "attr_id")}
    if keep is None:
        keep = np.ones(n, np.bool_)
    if rep is None:
        rep = np.full(n, NONE, np.int32)
    if keep.dtype != np.bool_ or rep.dtype != np.int32 or len(keep) != n or len(rep) != n:
        raise TypeError(f"{pass_name}: keep must be bool[{n}] and rep int32[{n}]")
    arrays, status, bad = rebuild_kernel(
        cols["kind"], cols["a0"], cols["a1"], cols["extra"], cols["dtype"], cols["shape_id"],
        cols["attr_id"], func.outputs, keep, rep, ops.op_arrays().encoding)
    if status:
        what = {REBUILD_BAD_REP: "replacement does not point to an earlier node",
                REBUILD_DANGLING: "reads a node that was removed",
                REBUILD_PARAM: "is a param, which may not be removed or replaced"}[status]
        raise IRError(f"{pass_name}: node {bad}: {what} (rule: rebuild protocol)")
    kind, a0, a1, dtype, shape_id, attr_id, extra, outputs, new_id = arrays
    params = new_id[func.params]
    for arr in (kind, a0, a1, dtype, shape_id, attr_id, extra, outputs, params):
        arr.setflags(write=False)
    return dc_replace(func, kind=kind, a0=a0, a1=a1, dtype=dtype, shape_id=shape_id,
                      attr_id=attr_id, extra=extra, outputs=outputs, params=params, **changes)
