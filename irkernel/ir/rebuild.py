"""The one audited path for structural edits: keep mask + replacement map -> new Function.

Protocol (STYLE 9.3): a pass computes ``keep`` (bool[n]) and/or ``rep``
(int32[n], NONE = keep self, else a node id smaller than i whose value
replaces node i) and may rewrite rows, either in copied columns (e.g.
FoldConstant turns an ``add`` row into a CONST row) or, when few rows change,
as a sorted patch list (SimplifyArith). ``rebuild`` then, in one forward
sweep of ``rebuild_kernel``, applying the patches as it passes their rows,

1. resolves replacement chains (``rep[i] < i``, so the target's own
   replacement is final when i is visited: no cycles possible);
2. drops replaced nodes and nodes with ``keep[i] == False`` and numbers the
   survivors with a running count (``new_id``, the old-to-new map);
3. gathers every column of the survivors and remaps their operands and
   ``extra`` (operands precede their users, so their new ids are known);

and finally remaps ``outputs`` and ``params`` and freezes the arrays.

Large graphs (``jit.parallel_sweep``) are compacted by two parallel kernels
over fixed-size chunks instead: survivors counted per chunk, an exclusive
prefix sum over the chunks, then numbering, chain ends and the gather per
chunk. The output is the serial kernel's, bit for bit, at any thread count;
an input that breaks a rule goes to the serial kernel, which names the first
culprit exactly as before.

Params are never dropped or replaced (the signature is the caller's), and a
kept node may not read a dropped one: both are checked and reported as
IRError naming the pass's node. Passes must not hand-roll compaction.

Validity (``irkernel.ir.validate``): the input is validated (a set lookup for
anything built or rebuilt); rewritten columns or tables are checked as a
whole before the kernel indexes with them, patch rows one by one
(``checks.check_rows_kernel``). Compaction preserves every structural rule,
so the output is marked validated and the next pass pays nothing.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace
from typing import Any

import numba
import numpy as np

from irkernel.ir import ops
from irkernel.ir.checks import STRUCTURE_RULES, check_rows_kernel
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.ids import ENC_BINARY, ENC_PARAM, ENC_UNARY, ENC_VARIADIC, NONE
from irkernel.ir import jit
from irkernel.ir.jit import kernel, parallel_kernel
from irkernel.ir.validate import check_function, mark_validated, validate_function

REBUILD_OK, REBUILD_BAD_REP, REBUILD_DANGLING, REBUILD_PARAM = 0, 1, 2, 3


@kernel
def rebuild_kernel(kind, a0, a1, extra, dtype, shape_id, attr_id, keep, rep, has_keep, has_rep,
                   op_encoding,
                   p_row, p_kind, p_a0, p_a1, p_attr,
                   new_id, new_kind, new_a0, new_a1, new_dtype, new_shape, new_attr, new_extra):
    """Resolve ``rep``, apply row patches, drop nodes, remap operands and compact, in one sweep.

    Arrays: kind int16[n]; a0, a1, shape_id, attr_id int32[n]; dtype int8[n];
    extra int32[m]; keep bool[n]; rep int32[n] (NONE or < i), each read only when its
    flag has_keep / has_rep is set (else it may be a 1-element dummy); op_encoding
    int8[n_ops]; the patch list p_row int32[p] (strictly increasing row ids) with
    the rows' new p_kind int16[p] and p_a0, p_a1, p_attr int32[p] (all read-only).
    Written: new_id int32[n], the new id of the node
    whose value i has after replacement (-1 when that node is dropped), and the
    survivors' rows in new_kind, new_a0, new_a1, new_dtype, new_shape,
    new_attr (one row per survivor) and at the front of new_extra (length m). Returns
    (count, extra_count, status, bad_node); on a non-zero status ``bad_node``
    names the culprit and the outputs are incomplete.
    """
    # One forward sweep does chain resolution, numbering and the gather: rep[i] < i
    # makes new_id[rep[i]] final when i is visited, and operands precede their users.
    # Patches are sorted, so one cursor walks them alongside i.
    n = kind.shape[0]
    n_patch = p_row.shape[0]
    p = 0
    next_patch = p_row[0] if n_patch > 0 else n
    j = 0
    e = 0
    for i in range(n):
        r = rep[i] if has_rep else -1
        if i == next_patch:
            k = p_kind[p]
            x, y, at = p_a0[p], p_a1[p], p_attr[p]
            p += 1
            next_patch = p_row[p] if p < n_patch else n
        else:
            k = kind[i]
            x, y, at = a0[i], a1[i], attr_id[i]
        enc = op_encoding[k]
        if r != -1:
            if r < 0 or r >= i:
                return j, e, REBUILD_BAD_REP, i
            if enc == ENC_PARAM:
                return j, e, REBUILD_PARAM, i
            new_id[i] = new_id[r]
            continue
        if has_keep and not keep[i]:
            if enc == ENC_PARAM:
                return j, e, REBUILD_PARAM, i
            new_id[i] = -1
            continue
        new_id[i] = j
        new_kind[j] = k
        new_dtype[j] = dtype[i]
        new_shape[j] = shape_id[i]
        new_attr[j] = at
        if enc == ENC_VARIADIC:
            new_a0[j] = e
            new_a1[j] = y
            for t in range(x, x + y):
                v = new_id[extra[t]]
                if v < 0:
                    return j, e, REBUILD_DANGLING, i
                new_extra[e] = v
                e += 1
        else:
            if enc == ENC_UNARY or enc == ENC_BINARY:
                x = new_id[x]
                if x < 0:
                    return j, e, REBUILD_DANGLING, i
            if enc == ENC_BINARY:
                y = new_id[y]
                if y < 0:
                    return j, e, REBUILD_DANGLING, i
            new_a0[j] = x
            new_a1[j] = y
        j += 1
    return j, e, REBUILD_OK, -1


@kernel
def survivors_kernel(keep, rep, use_keep):
    """Rows that are neither replaced nor dropped (no bool[n] temporaries, unlike NumPy)."""
    count = 0
    for i in range(rep.shape[0]):
        count += rep[i] == -1 and (not use_keep or keep[i])
    return count


@parallel_kernel
def rebuild_count_kernel(kind, a0, a1, keep, rep, has_keep, has_rep, op_encoding, p_row,
                         p_kind, p_a1, chunk, counts, extra_counts):
    """Phase one of the parallel compaction: survivors and operand-list lengths per chunk.

    Arrays as in ``rebuild_kernel``; written: counts, extra_counts int64[c] (c chunks
    of ``chunk`` nodes). Returns the first node (any chunk) whose ``rep`` or param
    rule is broken, else -1: the caller then asks the serial kernel for the error.
    """
    n = kind.shape[0]
    n_chunks = counts.shape[0]
    n_patch = p_row.shape[0]
    first_bad = np.full(n_chunks, n, np.int64)
    for c in numba.prange(n_chunks):
        lo = c * chunk
        hi = min(n, lo + chunk)
        p = np.searchsorted(p_row, lo)
        count = 0
        extra_count = 0
        for i in range(lo, hi):
            k, y = kind[i], a1[i]
            if p < n_patch and p_row[p] == i:
                k, y = p_kind[p], p_a1[p]
                p += 1
            enc = op_encoding[k]
            r = rep[i] if has_rep else -1
            if r != -1 or (has_keep and not keep[i]):
                if (r != -1 and (r < 0 or r >= i)) or enc == ENC_PARAM:
                    first_bad[c] = i
                    break
                continue
            count += 1
            if enc == ENC_VARIADIC:
                extra_count += y
        counts[c] = count
        extra_counts[c] = extra_count
    bad = first_bad.min()
    return bad if bad < n else -1


@parallel_kernel
def rebuild_fill_kernel(kind, a0, a1, extra, dtype, shape_id, attr_id, keep, rep, has_keep,
                        has_rep, op_encoding, p_row, p_kind, p_a0, p_a1, p_attr, chunk,
                        row_start, extra_start,
                        new_id, new_kind, new_a0, new_a1, new_dtype, new_shape, new_attr,
                        new_extra):
    """Phases two to four of the parallel compaction, on inputs phase one found valid.

    row_start, extra_start int64[c]: where each chunk's rows and operand lists go (the
    exclusive prefix sums of phase one's counts). Writes what ``rebuild_kernel``
    writes, identically: (2) survivors numbered and dropped nodes -1 per chunk; (3)
    replaced nodes take the number of the end of their chain (``rep`` strictly
    decreases along it, so it ends; its end was numbered in (2)); (4) survivors'
    rows gathered with their operands remapped. Returns the first node reading a
    dropped node, else -1.
    """
    n = kind.shape[0]
    n_chunks = row_start.shape[0]
    for c in numba.prange(n_chunks):
        lo = c * chunk
        hi = min(n, lo + chunk)
        j = row_start[c]
        for i in range(lo, hi):
            if has_rep and rep[i] != -1:
                continue
            if has_keep and not keep[i]:
                new_id[i] = -1
            else:
                new_id[i] = j
                j += 1
    if has_rep:
        for c in numba.prange(n_chunks):
            lo = c * chunk
            hi = min(n, lo + chunk)
            for i in range(lo, hi):
                r = rep[i]
                if r != -1:
                    while rep[r] != -1:
                        r = rep[r]
                    new_id[i] = new_id[r]
    n_patch = p_row.shape[0]
    first_bad = np.full(n_chunks, n, np.int64)
    for c in numba.prange(n_chunks):
        lo = c * chunk
        hi = min(n, lo + chunk)
        p = np.searchsorted(p_row, lo)
        e = extra_start[c]
        for i in range(lo, hi):
            k, x, y, at = kind[i], a0[i], a1[i], attr_id[i]
            if p < n_patch and p_row[p] == i:
                k, x, y, at = p_kind[p], p_a0[p], p_a1[p], p_attr[p]
                p += 1
            if (has_rep and rep[i] != -1) or (has_keep and not keep[i]):
                continue
            row = new_id[i]
            new_kind[row] = k
            new_dtype[row] = dtype[i]
            new_shape[row] = shape_id[i]
            new_attr[row] = at
            enc = op_encoding[k]
            dangling = False
            if enc == ENC_VARIADIC:
                new_a0[row] = e
                new_a1[row] = y
                for t in range(x, x + y):
                    v = new_id[extra[t]]
                    dangling |= v < 0
                    new_extra[e] = v
                    e += 1
            else:
                if enc == ENC_UNARY or enc == ENC_BINARY:
                    x = new_id[x]
                    dangling |= x < 0
                if enc == ENC_BINARY:
                    y = new_id[y]
                    dangling |= y < 0
                new_a0[row] = x
                new_a1[row] = y
            if dangling:
                first_bad[c] = i
                break
    bad = first_bad.min()
    return bad if bad < n else -1


def _compact_in_parallel(cols: dict[str, np.ndarray], keep: np.ndarray, rep: np.ndarray,
                         has_keep: bool, has_rep: bool,
                         patch: tuple[np.ndarray, ...], chunk: int) -> tuple[Any, ...] | None:
    """(new_id, columns, extra count) by the parallel kernels, or None when the input
    breaks a rule (the serial kernel then names the first culprit)."""
    n = len(cols["kind"])
    p_row, p_kind, p_a0, p_a1, p_attr = patch
    encoding = ops.op_arrays().encoding
    n_chunks = -(-n // chunk)
    counts = np.empty(n_chunks, np.int64)
    extra_counts = np.empty(n_chunks, np.int64)
    if rebuild_count_kernel(cols["kind"], cols["a0"], cols["a1"], keep, rep, has_keep,
                            has_rep, encoding, p_row, p_kind, p_a1, chunk, counts,
                            extra_counts) >= 0:
        return None
    row_start = np.cumsum(counts) - counts
    extra_start = np.cumsum(extra_counts) - extra_counts
    count = int(counts.sum())
    new_id = np.empty(n, np.int32)
    bufs = (np.empty(count, np.int16), np.empty(count, np.int32), np.empty(count, np.int32),
            np.empty(count, np.int8), np.empty(count, np.int32), np.empty(count, np.int32),
            np.empty(len(cols["extra"]), np.int32))
    if rebuild_fill_kernel(cols["kind"], cols["a0"], cols["a1"], cols["extra"], cols["dtype"],
                           cols["shape_id"], cols["attr_id"], keep, rep, has_keep, has_rep,
                           encoding, p_row, p_kind, p_a0, p_a1, p_attr, chunk, row_start,
                           extra_start, new_id, *bufs) >= 0:
        return None
    return new_id, bufs, int(extra_counts.sum())


_COLUMNS = ("kind", "a0", "a1", "extra", "dtype", "shape_id", "attr_id")


def _compact_serially(cols: dict[str, np.ndarray], keep: np.ndarray, rep: np.ndarray,
                      has_keep: bool, has_rep: bool,
                      patch: tuple[np.ndarray, ...]) -> tuple[Any, ...]:
    """(new_id, columns, extra count, status, bad node) by the serial kernel."""
    n = len(cols["kind"])
    # The survivors (not replaced, kept): counted first so the columns are allocated at
    # their exact size (the kernel writes exactly this many rows).
    count = (int(survivors_kernel(keep, rep, has_keep)) if has_rep
             else int(np.count_nonzero(keep)) if has_keep else n)
    new_id = np.empty(n, np.int32)
    bufs = (np.empty(count, np.int16), np.empty(count, np.int32), np.empty(count, np.int32),
            np.empty(count, np.int8), np.empty(count, np.int32), np.empty(count, np.int32),
            np.empty(len(cols["extra"]), np.int32))
    n_rows, n_extra, status, bad = rebuild_kernel(
        cols["kind"], cols["a0"], cols["a1"], cols["extra"], cols["dtype"], cols["shape_id"],
        cols["attr_id"], keep, rep, has_keep, has_rep, ops.op_arrays().encoding,
        *patch, new_id, *bufs)
    assert status or n_rows == count
    return new_id, bufs, n_extra, status, bad


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


def _trimmed(buf: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` entries, frozen; copied when the buffer is over twice as long
    (so a Function that dropped most operand lists does not hold on to the input's)."""
    out = buf[:count] if 2 * count >= len(buf) else buf[:count].copy()
    return _frozen(out)


def _checked_patch(patch: tuple[np.ndarray, ...] | None, n: int,
                   pass_name: str) -> tuple[np.ndarray, ...]:
    """The patch arrays, validated (the kernel trusts their order and dtypes)."""
    if patch is None:
        return tuple(_frozen(np.empty(0, d))
                     for d in (np.int32, np.int16, np.int32, np.int32, np.int32))
    dtypes = (np.int32, np.int16, np.int32, np.int32, np.int32)
    if (not isinstance(patch, tuple) or len(patch) != 5
            or not all(isinstance(a, np.ndarray) and a.dtype == d and a.ndim == 1
                       for a, d in zip(patch, dtypes, strict=True))
            or len({len(a) for a in patch}) != 1):
        raise TypeError(f"{pass_name}: patch must be (row int32[p], kind int16[p], a0, a1, "
                        f"attr_id int32[p])")
    rows = patch[0]
    if len(rows) and (rows[0] < 0 or rows[-1] >= n or np.any(rows[1:] <= rows[:-1])):
        raise IRError(f"{pass_name}: patch rows must be strictly increasing node ids "
                      f"in [0, {n}) (rule: rebuild protocol)")
    return tuple(_frozen(np.ascontiguousarray(a).view()) for a in patch)


def _check_patch_rows(func: Function, patch: tuple[np.ndarray, ...], pass_name: str) -> None:
    """The rewritten rows obey the structural rules (``irkernel.ir.checks.check_node``)
    and neither are nor become params, so the output stays valid without a sweep."""
    rows, kind, a0, a1, attr_id = patch
    params = (func.kind[rows] == ops.OP_PARAM) | (kind == ops.OP_PARAM)
    if np.any(params):
        raise IRError(f"{pass_name}: patch of node {int(rows[np.argmax(params)])}: a param "
                      "row may not be rewritten, nor a row made a param (rule: rebuild protocol)")
    table = ops.op_arrays()
    bad, rule, detail = check_rows_kernel(
        rows, kind, a0, a1, attr_id, func.dtype, func.shape_id, func.extra, table.encoding,
        table.arity, func.num_nodes, len(func.consts), len(func.params), len(func.shapes),
        len(func.attr_table))
    if bad >= 0:
        raise IRError(f"{pass_name}: patch of node {int(rows[bad])}: "
                      f"{STRUCTURE_RULES[rule]} ({int(detail)}) (rule: rebuild protocol)")


def rebuild(func: Function, *, keep: np.ndarray | None = None, rep: np.ndarray | None = None,
            patch: tuple[np.ndarray, ...] | None = None, pass_name: str = "rebuild",
            **changes: Any) -> Function:
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
    patch : (row int32[p], kind int16[p], a0, a1, attr_id int32[p]), optional
        Rewritten rows as a list (rows strictly increasing): row ``row[t]`` gets
        the given kind, operands and attribute id, applied before dropping. For
        passes that rewrite few rows: no full copies of four columns.
    pass_name : str
        Named in errors.
    **changes
        Replacement columns or tables (``kind``, ``a0``, ``a1``, ``dtype``,
        ``shape_id``, ``attr_id``, ``extra``, ``consts``, ``shapes``,
        ``attr_table``) applied before dropping, for rewritten rows. Column
        arrays are taken over: they are frozen (made read-only) here, and
        become the new Function's columns when nothing is dropped, without a
        copy; the caller must not write to them afterwards.

    Returns
    -------
    Function
        ``func`` itself when nothing changes.

    Notes
    -----
    The output columns are allocated here with NumPy rather than inside the
    kernel: NumPy asks for transparent huge pages on large buffers and Numba's
    allocator does not, and on a 1e7-node graph the first-touch page faults of
    4 KiB pages cost more than the sweep itself. For the same reason a missing
    ``keep`` or ``rep`` is not materialized as a full-size default array.
    """
    n = func.num_nodes
    validate_function(func, pass_name)  # the input (usually a set lookup)
    for name in _COLUMNS:
        arr = changes.get(name)
        if isinstance(arr, np.ndarray):
            _frozen(arr)  # one specialization of the kernel: columns are always read-only
    patch = _checked_patch(patch, n, pass_name)
    p_row, p_kind, p_a0, p_a1, p_attr = patch
    if keep is None and rep is None and not changes and not len(p_row):
        return func
    if changes:
        # Rewritten columns or tables: the kernel below indexes with them, so they are
        # checked first (one sweep), as the Function they describe.
        func = dc_replace(func, **changes)
        check_function(func, f"{pass_name} (rewritten columns)")
        mark_validated(func)
        changes = {}
    if len(p_row):
        _check_patch_rows(func, patch, pass_name)
    if keep is None and rep is None:  # rewritten rows only: no compaction needed
        if not len(p_row):
            return func
        for name, values in (("kind", p_kind), ("a0", p_a0), ("a1", p_a1),
                             ("attr_id", p_attr)):
            col = np.array(getattr(func, name))
            col[p_row] = values
            changes[name] = _frozen(col)
        return mark_validated(dc_replace(func, **changes))
    cols = {name: getattr(func, name) for name in _COLUMNS}
    has_keep, has_rep = keep is not None, rep is not None
    keep = np.ones(1, np.bool_) if keep is None else keep
    rep = np.full(1, NONE, np.int32) if rep is None else rep
    if (not isinstance(keep, np.ndarray) or not isinstance(rep, np.ndarray)
            or keep.dtype != np.bool_ or rep.dtype != np.int32
            or (has_keep and keep.shape != (n,)) or (has_rep and rep.shape != (n,))):
        raise TypeError(f"{pass_name}: keep must be bool[{n}] and rep int32[{n}]")
    keep = _frozen(np.ascontiguousarray(keep).view())
    rep = _frozen(np.ascontiguousarray(rep).view())
    with jit.parallel_sweep(n) as chunk:
        done = (_compact_in_parallel(cols, keep, rep, has_keep, has_rep, patch, chunk)
                if chunk else None)
    if done is not None:
        new_id, bufs, n_extra = done
        status, bad = REBUILD_OK, -1
    else:  # small graphs, and any input the parallel kernels found to break a rule
        new_id, bufs, n_extra, status, bad = _compact_serially(cols, keep, rep, has_keep,
                                                               has_rep, patch)
    outputs = new_id[func.outputs]
    if status == REBUILD_OK and np.any(outputs < 0):
        status, bad = REBUILD_DANGLING, int(func.outputs[np.argmax(outputs < 0)])
    if status:
        what = {REBUILD_BAD_REP: "replacement does not point to an earlier node",
                REBUILD_DANGLING: "reads a node that was removed",
                REBUILD_PARAM: "is a param, which may not be removed or replaced"}[status]
        raise IRError(f"{pass_name}: node {bad}: {what} (rule: rebuild protocol)")
    kind, a0, a1, dtype, shape_id, attr_id = (_frozen(b) for b in bufs[:6])
    extra = _trimmed(bufs[6], n_extra)
    # Compaction keeps every rule of a valid input (ids shrink monotonically, so operands
    # stay earlier), and the patch rows were checked: the output needs no sweep.
    return mark_validated(dc_replace(
        func, kind=kind, a0=a0, a1=a1, dtype=dtype, shape_id=shape_id, attr_id=attr_id,
        extra=extra, outputs=_frozen(outputs), params=_frozen(new_id[func.params])))
