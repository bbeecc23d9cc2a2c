"""SimplifyArith: algebraic identities that hold exactly for the dtype.

Rules (``x`` any value, ``c0``/``c1`` constants whose every element is 0/1):

=====================  ==============================  =====================
pattern                becomes                         dtypes
=====================  ==============================  =====================
x + c0, c0 + x         x                               ints; floats only for
                                                       c0 = -0.0 (x + 0.0 maps
                                                       -0.0 to +0.0)
x - c0                 x                               ints; floats c0 = +0.0
x * c1, c1 * x         x                               all
x / c1                 x                               all
x * c0, c0 * x         c0                              ints (floats: NaN, inf)
x - x                  zeros                           ints (floats: NaN, inf)
negative(negative(x))  x                               all
astype(x, dtype(x))    x                               all
reshape(reshape(x))    reshape(x)                      all
reshape/broadcast_to   x                               same shape as x
permute_dims(...)      x / inner operand               identity permutation /
                                                       two that cancel
=====================  ==============================  =====================

Every rewrite keeps the node's dtype and shape: when the surviving value has a
smaller (broadcast) shape, the row becomes ``broadcast_to(value)`` instead of
a replacement. One forward sweep with canonical operands (a replaced node's
uses see its replacement), so chains such as ``((x * 1) * 1)`` collapse in one
run and a second run changes nothing. Rewritten rows stay in place (operands
earlier, topological order kept); ``rebuild`` applies the replacements.
"""

from __future__ import annotations

import numpy as np

from irkernel import transform
from irkernel.ir.function import Function
from irkernel.ir.ids import FLOAT32, FLOAT64, INT32, INT64, NUMPY_DTYPES
from irkernel.ir.jit import kernel
from irkernel.ir.ops import (
    OP_ADD,
    OP_ASTYPE,
    OP_BROADCAST_TO,
    OP_CONST,
    OP_DIVIDE,
    OP_MULTIPLY,
    OP_NEGATIVE,
    OP_PERMUTE_DIMS,
    OP_RESHAPE,
    OP_SUBTRACT,
)
from irkernel.ir.pools import ConstPool, ConstPoolBuilder, ShapeTable
from irkernel.ir.rebuild import rebuild

OTHER, ZERO, NEG_ZERO, ONE = 0, 1, 2, 3  # constant classes (ZERO is +0 for floats)
NO_PERM = -2  # attr is not a permute_dims attr; -1 = reverse (axes None)


@kernel
def _is_identity_perm_kernel(perm_ptr, perm, attr, rank):
    if perm_ptr[attr] == NO_PERM:
        return False
    if perm_ptr[attr] == -1:
        return rank <= 1
    for j in range(rank):
        if perm[perm_ptr[attr] + j] != j:
            return False
    return True


@kernel
def _perm_at_kernel(perm_ptr, perm, attr, rank, j):
    if perm_ptr[attr] == -1:
        return rank - 1 - j
    return perm[perm_ptr[attr] + j]


@kernel
def simplify_kernel(kind, a0, a1, dtype, shape_id, attr_id, shape_ndim, const_class, perm_ptr,
                    perm, broadcast_attr, zero_const, n_attrs, rep, p_row, p_kind, p_a0, p_a1,
                    p_attr):
    """One forward sweep applying the rules; returns (n_changed, n_rep, n_patch, n_new_attr,
    n_zeros).

    Arrays: kind int16[n]; a0, a1, shape_id, attr_id int32[n]; dtype int8[n];
    shape_ndim int32[s]; const_class int8[k] per pool entry; perm_ptr int32[t]
    (start of each permute attr's axes in ``perm``, -1 = reverse, NO_PERM);
    broadcast_attr int32[s]: attr id of broadcast_to to shape s;
    zero_const int32[s]: const id of int zeros of shape s for the node's dtype
    column ``2 * s + (dtype == INT64)`` (-1 = none). Written (the wrapper's
    buffers): rep int32[n] (all NONE on entry), and the rewritten rows as a patch
    list in increasing row order: p_row int32[n] with the rows' new p_kind int16[n],
    p_a0, p_a1, p_attr int32[n] (only the first n_patch entries are written, so
    the untouched tail of these buffers never costs a page fault). While sweeping,
    a patched row i holds ``rep[i] = -2 - (its patch index)`` so later rows read its
    new values; the wrapper resets those entries to NONE. The counts returned let
    the wrapper skip whole-array scans: rows replaced, rows patched, broadcast rows
    whose attr id is new (>= n_attrs, the input's attribute count), rows rewritten
    to zeros.
    """
    n = kind.shape[0]
    n_changed = 0
    n_rep = 0
    n_patch = 0
    n_new_attr = 0
    n_zeros = 0

    # Only canonical nodes (never replaced) are read through these; rep[v] <= -2 marks
    # a patched row.
    def canon(v):  # the value node v stands for: its replacement, else itself
        r = rep[v]
        return v if r < 0 else r

    def is_kind(v, want):  # does node v (patched or not) now have kind ``want``?
        # A patch turns a row into CONST only from SUBTRACT (x - x), otherwise into
        # BROADCAST_TO (never asked for) or RESHAPE from RESHAPE: so ``rep[v]``, a
        # cache miss when v is a replacement target, is read only when kind[v] says
        # the answer may be yes.
        k = kind[v]
        if k != want and not (want == OP_CONST and k == OP_SUBTRACT):
            return False
        if k == OP_CONST:  # constants are never patched
            return True
        r = rep[v]
        return (p_kind[-2 - r] if r <= -2 else k) == want

    def a0_of(v):
        if kind[v] == OP_CONST:  # never patched: skip the read of rep[v]
            return a0[v]
        r = rep[v]
        return p_a0[-2 - r] if r <= -2 else a0[v]

    def attr_of(v):
        r = rep[v]
        return p_attr[-2 - r] if r <= -2 else attr_id[v]

    for i in range(n):
        k = kind[i]
        if not (OP_ADD <= k <= OP_DIVIDE or k == OP_NEGATIVE or k == OP_ASTYPE
                or k == OP_RESHAPE or k == OP_BROADCAST_TO or k == OP_PERMUTE_DIMS):
            continue
        dt = dtype[i]
        is_int = dt == INT32 or dt == INT64
        is_float = dt == FLOAT32 or dt == FLOAT64
        x = canon(a0[i])
        y = canon(a1[i]) if k <= OP_DIVIDE else -1
        cx = const_class[a0_of(x)] if (x >= 0 and is_kind(x, OP_CONST)) else OTHER
        cy = const_class[a0_of(y)] if (y >= 0 and is_kind(y, OP_CONST)) else OTHER
        keep = -1  # the operand whose value the node equals
        zeros = False
        new_a0 = -1  # >= 0: reshape of reshape, the row now reads this node
        if k == OP_ADD:
            if (is_int and cy == ZERO) or (is_float and cy == NEG_ZERO):
                keep = x
            elif (is_int and cx == ZERO) or (is_float and cx == NEG_ZERO):
                keep = y
        elif k == OP_SUBTRACT:
            if cy == ZERO and (is_int or is_float):
                keep = x
            elif is_int and x == y:
                zeros = True
        elif k == OP_MULTIPLY:
            if cy == ONE:
                keep = x
            elif cx == ONE:
                keep = y
            elif is_int and cy == ZERO:
                keep = y
            elif is_int and cx == ZERO:
                keep = x
        elif k == OP_DIVIDE:
            if cy == ONE:
                keep = x
        elif k == OP_NEGATIVE:
            if is_kind(x, OP_NEGATIVE):
                keep = canon(a0_of(x))
        elif k == OP_ASTYPE:
            if dtype[x] == dt:
                keep = x
        elif k == OP_RESHAPE or k == OP_BROADCAST_TO:
            if shape_id[x] == shape_id[i]:
                keep = x
            elif k == OP_RESHAPE and is_kind(x, OP_RESHAPE):
                new_a0 = canon(a0_of(x))
                n_changed += 1
                if shape_id[new_a0] == shape_id[i]:
                    keep = new_a0
        elif k == OP_PERMUTE_DIMS:
            rank = shape_ndim[shape_id[i]]
            if _is_identity_perm_kernel(perm_ptr, perm, attr_id[i], rank):
                keep = x
            elif is_kind(x, OP_PERMUTE_DIMS) and perm_ptr[attr_of(x)] != NO_PERM:
                cancel = True
                for j in range(rank):
                    q = _perm_at_kernel(perm_ptr, perm, attr_id[i], rank, j)
                    if _perm_at_kernel(perm_ptr, perm, attr_of(x), rank, q) != j:
                        cancel = False
                        break
                if cancel:
                    keep = canon(a0_of(x))
        if zeros:
            cid = zero_const[2 * shape_id[i] + (1 if dt == INT64 else 0)]
            if cid >= 0:
                p_row[n_patch] = i
                p_kind[n_patch] = OP_CONST
                p_a0[n_patch] = cid
                p_a1[n_patch] = -1
                p_attr[n_patch] = 0
                rep[i] = -2 - n_patch
                n_patch += 1
                n_changed += 1
                n_zeros += 1
            continue
        if keep < 0:
            if new_a0 >= 0:  # reshape of reshape that still changes the shape
                p_row[n_patch] = i
                p_kind[n_patch] = k
                p_a0[n_patch] = new_a0
                p_a1[n_patch] = a1[i]
                p_attr[n_patch] = attr_id[i]
                rep[i] = -2 - n_patch
                n_patch += 1
            continue
        n_changed += 1
        if shape_id[keep] == shape_id[i]:
            rep[i] = keep
            n_rep += 1
        else:  # the identity would change the shape: broadcast the survivor instead
            p_row[n_patch] = i
            p_kind[n_patch] = OP_BROADCAST_TO
            p_a0[n_patch] = keep
            p_a1[n_patch] = -1
            p_attr[n_patch] = broadcast_attr[shape_id[i]]
            rep[i] = -2 - n_patch
            n_new_attr += p_attr[n_patch] >= n_attrs
            n_patch += 1
    return n_changed, n_rep, n_patch, n_new_attr, n_zeros


@kernel
def _int_sub_shapes_kernel(kind, dtype, shape_id, n_shapes):
    """uint8[2 * n_shapes]: 1 at ``2 * shape + (dtype == INT64)`` for every integer
    subtract (the (dtype, shape) pairs that may need a zeros constant for x - x),
    found without full-size boolean temporaries."""
    seen = np.zeros(2 * n_shapes, np.uint8)
    for i in range(kind.shape[0]):
        if kind[i] == OP_SUBTRACT:
            dt = dtype[i]
            if dt == INT32 or dt == INT64:
                seen[2 * shape_id[i] + (1 if dt == INT64 else 0)] = 1
    return seen


def _const_classes(pool: ConstPool, shapes: ShapeTable) -> np.ndarray:
    """Class of every pool entry; scalars vectorized, tensors one check per entry."""
    k = len(pool)
    classes = np.zeros(k, np.int8)
    if not k:
        return classes
    is_scalar = shapes.size[pool.shape_id] == 1
    is_float = (pool.dtype == FLOAT32) | (pool.dtype == FLOAT64)
    is_int = (pool.dtype == INT32) | (pool.dtype == INT64)
    f, i = pool.sval_f, pool.sval_i
    classes[is_scalar & is_float & (i == 0)] = ZERO  # +0.0 has all-zero bits
    classes[is_scalar & is_float & (f == 0.0) & (i != 0)] = NEG_ZERO
    classes[is_scalar & is_float & (f == 1.0)] = ONE
    classes[is_scalar & is_int & (i == 0)] = ZERO
    classes[is_scalar & is_int & (i == 1)] = ONE
    for c in np.nonzero(~is_scalar & (is_float | is_int))[0].tolist():
        v = pool.value(c, shapes)
        if v.size and np.all(v == 1):
            classes[c] = ONE
        elif v.size and np.all(v == 0):
            neg = np.signbit(v) if v.dtype.kind == "f" else np.zeros(v.shape, bool)
            classes[c] = NEG_ZERO if np.all(neg) else (ZERO if not np.any(neg) else OTHER)
    return classes


def _perm_table(func: Function) -> tuple[np.ndarray, np.ndarray]:
    """Per attribute set: where its permute axes start in a flat array (see kernel)."""
    ptr = np.full(len(func.attr_table), NO_PERM, np.int32)
    flat: list[int] = []
    for aid, record in enumerate(func.attr_table.records):  # one per distinct attr set
        attrs = dict(record)
        if set(attrs) != {"axes"}:
            continue
        axes = attrs["axes"]
        if axes is None:
            ptr[aid] = -1
        else:
            rank = len(axes)
            ptr[aid] = len(flat)
            flat.extend(a % rank for a in axes)
    return ptr, np.array(flat, np.int32)


def simplify_function(func: Function, max_elements: int = 1 << 16) -> tuple[Function, int]:
    """Apply the rules; returns (new function or ``func`` itself, rewrites applied)."""
    shapes = func.shapes
    attr_table, broadcast_ids = func.attr_table.extended(
        (("shape", s),) for s in shapes.shapes)
    perm_ptr, perm = _perm_table(func)
    perm_ptr = np.concatenate([perm_ptr, np.full(len(attr_table) - len(perm_ptr), NO_PERM,
                                                 np.int32)])
    zero_const = np.full(2 * len(shapes), -1, np.int32)
    pool_builder = None
    pool = func.consts
    pairs = np.nonzero(_int_sub_shapes_kernel(func.kind, func.dtype, func.shape_id,
                                              len(shapes)))[0]
    for code in pairs.tolist():  # zeros for x - x, one entry per distinct (dtype, shape)
        sid, is64 = divmod(code, 2)
        dt = INT64 if is64 else INT32
        if shapes.size[sid] == 1:  # an interned scalar zero already in the pool is reused
            # without building a pool (a builder re-indexes the whole pool: ~10 ms at 1e7)
            found = np.flatnonzero((pool.dtype == dt) & (pool.shape_id == sid)
                                   & (pool.sval == 0))
            if len(found):
                zero_const[code] = found[0]  # the lowest id, as the builder's index keeps
                continue
        if shapes.size[sid] <= max_elements:
            if pool_builder is None:
                pool_builder = ConstPoolBuilder(func.consts, shapes)
            zero_const[code] = pool_builder.add(np.zeros(shapes[sid], NUMPY_DTYPES[dt]), sid)
    if pool_builder is not None:
        pool = pool_builder.freeze()
    # NOTE: the n-sized buffers come from NumPy (transparent huge pages), not from inside
    # the kernel: with Numba's 4 KiB pages their first touch dominated a 1e7-node sweep.
    # The patch buffers are n long (the worst case) but only their used head is touched.
    n = func.num_nodes
    rep = np.full(n, -1, np.int32)
    patch = (np.empty(n, np.int32), np.empty(n, np.int16), np.empty(n, np.int32),
             np.empty(n, np.int32), np.empty(n, np.int32))
    n_changed, n_rep, n_patch, n_new_attr, n_zeros = simplify_kernel(
        func.kind, func.a0, func.a1, func.dtype, func.shape_id, func.attr_id, shapes.ndim,
        _const_classes(pool, shapes), perm_ptr, perm, np.array(broadcast_ids, np.int32), zero_const,
        len(func.attr_table), rep, *patch)
    if n_changed == 0:
        return func, 0
    patch = tuple(buf[:n_patch].copy() for buf in patch)  # release the n-long buffers
    rep[patch[0]] = -1  # the kernel's in-sweep patch marks back to NONE
    changes: dict[str, object] = {}
    if n_new_attr:
        changes["attr_table"] = attr_table
    if pool is not func.consts and n_zeros:
        changes["consts"] = pool
    return rebuild(func, rep=rep if n_rep else None, patch=patch if n_patch else None,
                   pass_name="SimplifyArith", **changes), int(n_changed)



def SimplifyArith() -> transform.FunctionPass:
    """Apply the exact algebraic identities of the module docstring (opt level 1).

    Returns
    -------
    FunctionPass
        Reports the statistic ``rewrites``; leaves dead operands for
        DeadCodeElimination.
    """

    def simplify(func: Function, mod: object, ctx: transform.PassContext) -> Function:
        limit = ctx.get_config("FoldConstant.max_elements")
        out, n_rewrites = simplify_function(func, limit)
        if n_rewrites:
            ctx.stat("rewrites", n_rewrites)
        return out

    return transform.function_pass(simplify, opt_level=1, name="SimplifyArith")


transform.register_pass("SimplifyArith", SimplifyArith)
