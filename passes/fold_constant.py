"""FoldConstant: evaluate every pure node whose operands are all constants.

Design. One resumable forward sweep (``fold_sweep_kernel``) carries each
node's value when it is known: one-element values as (float64, int64) pairs
evaluated by ``irkernel.ir.ops.scalar`` (the very code the interpreter uses for
the transcendental ops, so results are bit-identical to ``ik.interpret``);
float32 stays float32. A node whose operands are known but which involves a
larger tensor stops the sweep; Python evaluates it once with the op table's
NumPy reference (the interpreter's own code) and the sweep resumes. Results
larger than ``FoldConstant.max_elements`` are not materialized (TVM's guard
against folding ``ones(shape)`` into huge constants). Folded rows are
rewritten in place into CONST rows (operands stay earlier, so topological
order holds); the operands they no longer need are left for
DeadCodeElimination. New scalar constants are interned by an open-addressing
kernel against the existing pool (equal bytes share one pool entry).

On large graphs (``jit.parallel_sweep``) the sweep runs on every chunk of
nodes at once (``fold_chunks_kernel``); a node whose operands another chunk
has not decided yet is deferred and decided afterwards by one serial scan in
node order (``fold_deferred_kernel``), with the same rules: the values are the
serial sweep's, bit for bit.

Alternatives considered: level-synchronous NumPy evaluation (one Python step
per dependency level: a 1e6-long constant chain costs 1e6 steps) and
compiling ops as TVM does (seconds per op).
"""

from __future__ import annotations

import numba
import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import (
    BFLOAT16,
    ENC_BINARY,
    ENC_CONST,
    ENC_PARAM,
    ENC_VARIADIC,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    NONE,
    NUMPY_DTYPES,
)
from irkernel.ir import jit
from irkernel.ir.jit import inline, kernel, parallel_kernel
from irkernel.ir.ops import (
    OP_BROADCAST_TO,
    OP_CALL_FUNC,
    OP_CALL_TIR,
    OP_CONCAT,
    OP_MATMUL,
    OP_MAX,
    OP_MEAN,
    OP_MULTIPLY,
    OP_PERMUTE_DIMS,
    OP_RESHAPE,
    OP_SUM,
)
from irkernel.ir.ops.scalar import scalar_eval_kernel
from irkernel.ir.interp import evaluate_op
from irkernel.ir.pools import ConstPool, ConstPoolBuilder, scalar_bits, scalar_from_bits
from irkernel.ir.rebuild import rebuild
from irkernel.ir.verify import check_node_type

UNKNOWN, SCALAR, TENSOR, DEFERRED = 0, 1, 2, 3
SWEEP_DONE, SWEEP_NEEDS_PYTHON = 0, 1
NODE_FOLDED, NODE_SKIPPED, NODE_NEEDS_PYTHON = 0, 1, 2


@inline
def is_foldable_op(k, op_pure):
    """Pure and not a call (calls are not folded)."""
    return op_pure[k] and k != OP_CALL_FUNC and k != OP_CALL_TIR


@inline
def operands_known(i, lo, kind, a0, a1, extra, op_encoding, op_pure, state):
    """(all operands known, all one-element, some operand deferred) for node ``i``.

    An operand before ``lo`` (another thread's chunk) is read only when it is a
    constant (set before the chunks start); else its fate is decided by its op
    alone: params, impure ops and calls are never known, anything else is DEFERRED.
    """
    enc = op_encoding[kind[i]]
    if enc == ENC_VARIADIC:
        first, count = a0[i], a1[i]
    else:
        first, count = 0, 2 if enc == ENC_BINARY else 1
    all_scalar = True
    deferred = False
    for j in range(count):
        v = extra[first + j] if enc == ENC_VARIADIC else (a0[i] if j == 0 else a1[i])
        if v >= lo:  # the common case (the serial sweep: lo = 0): no load of kind[v]
            s = state[v]
        else:
            kv = kind[v]
            if op_encoding[kv] == ENC_CONST:
                s = state[v]
            elif op_encoding[kv] == ENC_PARAM or not is_foldable_op(kv, op_pure):
                return False, False, False
            else:
                s = DEFERRED
        if s == UNKNOWN:
            return False, False, False
        if s == DEFERRED:
            deferred = True
        elif s == TENSOR:
            all_scalar = False
    return not deferred, all_scalar, deferred


@inline
def fold_known_node(i, all_scalar, kind, a0, a1, extra, dtype, shape_id, shape_size,
                    op_encoding, max_elements, state, fval, ival):
    """Fold node ``i`` whose operands are all known: NODE_FOLDED, NODE_SKIPPED (too
    large) or NODE_NEEDS_PYTHON (tensors, or a rule the scalar evaluator lacks)."""
    k = kind[i]
    enc = op_encoding[k]
    size = shape_size[shape_id[i]]
    if size > max_elements:
        return NODE_SKIPPED
    if not all_scalar or size != 1:
        return NODE_NEEDS_PYTHON
    first = a0[i]
    x = a0[i] if enc != ENC_VARIADIC else extra[first]
    if (k == OP_SUM or k == OP_MAX or k == OP_MEAN or k == OP_RESHAPE
            or k == OP_PERMUTE_DIMS or k == OP_BROADCAST_TO or k == OP_CONCAT):
        # one element in, one element out: the value passes through unchanged,
        # except that NumPy's float sum/mean add it to +0.0 (-0.0 becomes +0.0)
        state[i] = SCALAR
        ival[i] = ival[x]
        if (k == OP_SUM or k == OP_MEAN) and (dtype[i] == FLOAT32 or dtype[i] == FLOAT64
                                              or dtype[i] == FLOAT16 or dtype[i] == BFLOAT16):
            fval[i] = fval[x] + 0.0
        return NODE_FOLDED
    if enc == ENC_VARIADIC:  # where(cond, x, y)
        y, z = extra[first + 1], extra[first + 2]
    elif enc == ENC_BINARY:
        y, z = a1[i], a1[i]
    else:
        y, z = x, x
    odt = dtype[x] if enc != ENC_VARIADIC else dtype[y]
    op = OP_MULTIPLY if k == OP_MATMUL else k  # a one-element matmul is one product
    f, iv, ok = scalar_eval_kernel(op, dtype[i], odt, fval[x], ival[x], fval[y], ival[y],
                                   fval[z], ival[z])
    if not ok:
        return NODE_NEEDS_PYTHON
    state[i] = SCALAR
    if dtype[i] == FLOAT32 or dtype[i] == FLOAT64:
        # NumPy's matmul accumulates the one product onto +0.0 (-0.0 becomes +0.0)
        fval[i] = f + 0.0 if k == OP_MATMUL else f
    else:
        ival[i] = iv
    return NODE_FOLDED


@inline
def set_const_state(i, a0, shape_size, const_shape_id, const_ival, state, ival):
    c = a0[i]
    if shape_size[const_shape_id[c]] == 1:
        state[i] = SCALAR
        ival[i] = const_ival[c]  # the raw bits, whatever the dtype
    else:
        state[i] = TENSOR


@kernel
def fold_sweep_kernel(kind, a0, a1, extra, dtype, shape_id, shape_size, op_encoding, op_pure, const_dtype, const_shape_id, const_fval, const_ival, max_elements,
                      state, fval, ival, start, folded, n_folded):
    """Propagate constant values forward from ``start``; stops where Python must evaluate.

    Arrays: kind int16[n]; a0, a1, shape_id int32[n]; dtype int8[n]; extra int32[m];
    shape_size int64[s]; op_encoding int8[n_ops]; op_pure bool[n_ops];
    const_* [k] (pool columns; fval/ival are the two views of sval).
    Scratch written: state int8[n] (UNKNOWN/SCALAR/TENSOR) and the value of
    SCALAR nodes in fval float64[n] / ival int64[n], two views of one buffer
    (like the pool's sval: float64 bits for float dtypes, the int64 value
    else). Appended: the ids of the nodes folded, in order, to folded int32[n]
    from position n_folded. Returns (node, status, n_folded); on
    SWEEP_NEEDS_PYTHON the caller evaluates ``node``, appends it and resumes.
    """
    n = kind.shape[0]
    for i in range(start, n):
        k = kind[i]
        enc = op_encoding[k]
        if enc == ENC_PARAM:
            continue
        if enc == ENC_CONST:
            set_const_state(i, a0, shape_size, const_shape_id, const_ival, state, ival)
            continue
        if not is_foldable_op(k, op_pure):
            continue
        # operands_known(i, 0, ...) written out: inlined, its tuple return and early exits
        # made this sweep 1.8x slower (FoldConstant at 4e5 nodes: 23 ms against 13 ms), and
        # the serial sweep has no DEFERRED operands to look for
        if enc == ENC_VARIADIC:
            first, count = a0[i], a1[i]
        else:
            first, count = 0, 2 if enc == ENC_BINARY else 1
        known = True
        all_scalar = True
        for j in range(count):
            v = extra[first + j] if enc == ENC_VARIADIC else (a0[i] if j == 0 else a1[i])
            s = state[v]
            if s == UNKNOWN:
                known = False
                break
            if s == TENSOR:
                all_scalar = False
        if not known:
            continue
        status = fold_known_node(i, all_scalar, kind, a0, a1, extra, dtype, shape_id,
                                 shape_size, op_encoding, max_elements, state, fval, ival)
        if status == NODE_NEEDS_PYTHON:
            return i, SWEEP_NEEDS_PYTHON, n_folded
        if status == NODE_FOLDED:
            folded[n_folded] = i
            n_folded += 1
    return n, SWEEP_DONE, n_folded


@parallel_kernel
def fold_chunks_kernel(kind, a0, a1, extra, dtype, shape_id, shape_size, op_encoding, op_pure,
                       const_shape_id, const_ival, max_elements, chunk, state, fval, ival):
    """``fold_sweep_kernel`` per chunk of nodes, all chunks at once.

    Constants' states are set first (they depend on nothing). A node that reads a
    non-constant of an earlier chunk, or that needs Python, is marked DEFERRED
    (and so are the nodes reading it): ``fold_deferred_kernel`` decides them
    afterwards in node order, when everything before them is final. Every other
    node is decided here by the serial sweep's own rules on final operands, so
    the values are the serial sweep's.
    """
    n = kind.shape[0]
    n_chunks = -(-n // chunk)
    for c in numba.prange(n_chunks):
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            if op_encoding[kind[i]] == ENC_CONST:
                set_const_state(i, a0, shape_size, const_shape_id, const_ival, state, ival)
    for c in numba.prange(n_chunks):
        lo = c * chunk
        for i in range(lo, min(n, lo + chunk)):
            k = kind[i]
            enc = op_encoding[k]
            if enc == ENC_PARAM or enc == ENC_CONST or not is_foldable_op(k, op_pure):
                continue
            known, all_scalar, deferred = operands_known(i, lo, kind, a0, a1, extra,
                                                         op_encoding, op_pure, state)
            if deferred:
                state[i] = DEFERRED
            elif known and fold_known_node(
                    i, all_scalar, kind, a0, a1, extra, dtype, shape_id, shape_size,
                    op_encoding, max_elements, state, fval, ival) == NODE_NEEDS_PYTHON:
                state[i] = DEFERRED


@kernel
def fold_deferred_kernel(kind, a0, a1, extra, dtype, shape_id, shape_size, op_encoding,
                         op_pure, max_elements, state, fval, ival, start):
    """Decide the DEFERRED nodes from ``start`` on, in node order (serial).

    Returns the next node Python must evaluate, or n when all are decided; the
    caller evaluates it and resumes after it.
    """
    n = kind.shape[0]
    for i in range(start, n):
        if state[i] != DEFERRED:
            continue
        state[i] = UNKNOWN
        known, all_scalar, _ = operands_known(i, 0, kind, a0, a1, extra, op_encoding, op_pure,
                                              state)
        if known and fold_known_node(
                i, all_scalar, kind, a0, a1, extra, dtype, shape_id, shape_size, op_encoding,
                max_elements, state, fval, ival) == NODE_NEEDS_PYTHON:
            return i
    return n


@kernel
def folded_nodes_kernel(kind, op_encoding, state):
    """int32 ids of the nodes folded (known values that are not constants), in order."""
    n = kind.shape[0]
    count = 0
    for i in range(n):
        count += state[i] != UNKNOWN and op_encoding[kind[i]] != ENC_CONST
    out = np.empty(count, np.int32)
    count = 0
    for i in range(n):
        if state[i] != UNKNOWN and op_encoding[kind[i]] != ENC_CONST:
            out[count] = i
            count += 1
    return out


@kernel
def intern_scalars_kernel(pool_dtype, pool_shape_id, pool_sval, pool_is_scalar, node_dtype,
                          node_shape_id, node_bits, slots):
    """Const ids for new one-element values, reusing equal pool entries.

    Arrays: pool_* [k] (pool_is_scalar bool marks one-element entries);
    node_* [m] the values to intern (bits: float64 bits for floats, int64 else);
    slots int64[cap] scratch, all -1 (cap a power of two >= 2 (k + m) + 2).
    Returns (const_id int32[m], new_index int32[m'] into node_*: the entries appended,
    in order, at ids k, k+1, ...).
    """
    k = pool_dtype.shape[0]
    m = node_dtype.shape[0]
    cap = slots.shape[0]  # >= 0: pool id; < -1: -(2 + node index)
    mask = cap - 1
    const_id = np.empty(m, np.int32)
    new_index = np.empty(m, np.int32)
    n_new = 0
    for t in range(k + m):
        if t < k:
            if not pool_is_scalar[t]:
                continue
            d, s, b = pool_dtype[t], pool_shape_id[t], pool_sval[t]
        else:
            d, s, b = node_dtype[t - k], node_shape_id[t - k], node_bits[t - k]
        h = (np.uint64(b) * np.uint64(0x9E3779B97F4A7C15)) ^ (np.uint64(d) << np.uint64(40)) \
            ^ np.uint64(s)
        slot = np.int64((h ^ (h >> np.uint64(29))) & np.uint64(mask))
        found = -1
        while slots[slot] != -1:
            e = slots[slot]
            if e >= 0:
                ed, es, eb = pool_dtype[e], pool_shape_id[e], pool_sval[e]
                cid = e
            else:
                j = -(e + 2)
                ed, es, eb = node_dtype[j], node_shape_id[j], node_bits[j]
                cid = const_id[j]
            if ed == d and es == s and eb == b:
                found = cid
                break
            slot = (slot + 1) & mask
        if t < k:
            if found == -1:
                slots[slot] = t
            continue
        if found == -1:
            found = k + n_new
            new_index[n_new] = t - k
            n_new += 1
            slots[slot] = -(2 + (t - k))
        const_id[t - k] = found
    return const_id, new_index[:n_new]


def _operand_value(func: Function, v: int, state: np.ndarray, fval: np.ndarray,
                   ival: np.ndarray, tensors: dict[int, np.ndarray]) -> np.ndarray:
    shape = func.shapes[int(func.shape_id[v])]
    if state[v] == SCALAR:
        return scalar_from_bits(ival[v: v + 1], int(func.dtype[v])).reshape(shape)
    if int(func.kind[v]) == ops.OP_CONST:
        return func.consts.value(int(func.a0[v]), func.shapes)
    return tensors[v]


def _evaluate_in_python(func: Function, i: int, state: np.ndarray, fval: np.ndarray,
                        ival: np.ndarray, tensors: dict[int, np.ndarray]) -> None:
    """Fold one node with the NumPy reference (tensor operands or results).

    The reference trusts the node's attributes and types, which the cheap validation
    at the pass entry does not check: the node's type rule is checked first.
    """
    check_node_type(func, i, str(func.attrs.get("global_symbol", "main")), "FoldConstant")
    opdef = ops.get_op(int(func.kind[i]))
    operands = func.operands(i)
    args = [_operand_value(func, v, state, fval, ival, tensors) for v in operands]
    assert opdef.reference is not None
    code = int(func.dtype[i])
    out = evaluate_op(opdef, args, [int(func.dtype[v]) for v in operands], func.node_attrs(i),
                      code).astype(NUMPY_DTYPES[code], copy=False)
    if out.size == 1:
        state[i] = SCALAR
        ival[i] = scalar_bits(out, code)
    else:
        state[i] = TENSOR
        tensors[i] = np.ascontiguousarray(out)


def _fold_serially(func: Function, max_elements: int, state: np.ndarray, fval: np.ndarray,
                   ival: np.ndarray, tensors: dict[int, np.ndarray]) -> tuple[np.ndarray, int]:
    """(folded ids buffer, count) by the one serial sweep."""
    table = ops.op_arrays()
    pool = func.consts
    # Only the first n_folded entries are written, so an untouched tail costs no memory.
    folded = np.empty(func.num_nodes, np.int32)
    i = n_folded = 0
    while True:
        i, status, n_folded = fold_sweep_kernel(
            func.kind, func.a0, func.a1, func.extra, func.dtype, func.shape_id, func.shapes.size,
            table.encoding, table.pure, pool.dtype, pool.shape_id, pool.sval_f,
            pool.sval_i, max_elements, state, fval, ival, i, folded, n_folded)
        if status == SWEEP_DONE:
            return folded, n_folded
        _evaluate_in_python(func, i, state, fval, ival, tensors)
        folded[n_folded] = i
        n_folded += 1
        i += 1


def fold_function(func: Function, max_elements: int) -> tuple[Function, int]:
    """Fold ``func``; returns (new function or ``func`` itself, number of nodes folded)."""
    n = func.num_nodes
    table = ops.op_arrays()
    state = np.zeros(n, np.int8)
    ival = np.zeros(n, np.int64)  # the values of one-element nodes, as the pool's sval
    fval = ival.view(np.float64)
    tensors: dict[int, np.ndarray] = {}
    pool = func.consts
    with jit.parallel_sweep(n) as chunk:
        if chunk:
            fold_chunks_kernel(func.kind, func.a0, func.a1, func.extra, func.dtype,
                               func.shape_id, func.shapes.size, table.encoding, table.pure,
                               pool.shape_id, pool.sval_i, max_elements, chunk, state, fval,
                               ival)
    if chunk:
        i = 0
        while True:
            i = fold_deferred_kernel(func.kind, func.a0, func.a1, func.extra, func.dtype,
                                     func.shape_id, func.shapes.size, table.encoding,
                                     table.pure, max_elements, state, fval, ival, i)
            if i == n:
                break
            _evaluate_in_python(func, i, state, fval, ival, tensors)
            i += 1
        folded = folded_nodes_kernel(func.kind, table.encoding, state)
        n_folded = len(folded)
    else:
        folded, n_folded = _fold_serially(func, max_elements, state, fval, ival, tensors)
    if not n_folded:
        return func, 0
    folded_ids = folded[:n_folded]
    scalar_ids = folded_ids[state[folded_ids] == SCALAR] if tensors else folded_ids
    return (_rewrite(func, folded_ids, scalar_ids, ival[scalar_ids], state, tensors),
            n_folded)


def _rewrite(func: Function, folded_ids: np.ndarray, scalar_ids: np.ndarray, bits: np.ndarray,
             state: np.ndarray, tensors: dict[int, np.ndarray]) -> Function:
    """Turn folded rows into CONST rows pointing at (interned) pool entries."""
    pool = func.consts
    tensor_ids = folded_ids[state[folded_ids] == TENSOR] if tensors else folded_ids[:0]
    node_dtype = func.dtype[scalar_ids]
    pool_is_scalar = func.shapes.size[pool.shape_id] == 1
    cap = 1
    while cap < 2 * (len(pool) + len(scalar_ids)) + 2:
        cap *= 2
    const_id, new_index = intern_scalars_kernel(
        pool.dtype, pool.shape_id, pool.sval, pool_is_scalar, node_dtype,
        func.shape_id[scalar_ids], bits, np.full(cap, -1, np.int64))
    m = len(new_index)
    new_pool = ConstPool(
        np.concatenate([pool.dtype, node_dtype[new_index]]),
        np.concatenate([pool.shape_id, func.shape_id[scalar_ids][new_index]]),
        np.concatenate([pool.sval, bits[new_index]]),
        np.concatenate([pool.offset, np.full(m, pool.offset[-1], np.int64)]),
        pool.data, pool.external) if m else pool
    a0 = func.a0.copy()
    a0[scalar_ids] = const_id
    if len(tensor_ids):  # rare: one pool entry per distinct folded tensor
        builder = ConstPoolBuilder(new_pool, func.shapes)
        for v in tensor_ids.tolist():
            a0[v] = builder.add(tensors[v], int(func.shape_id[v]), int(func.dtype[v]))
        new_pool = builder.freeze()
    kind = func.kind.copy()
    kind[folded_ids] = ops.OP_CONST
    a1 = func.a1.copy()
    a1[folded_ids] = NONE
    attr_id = func.attr_id.copy()
    attr_id[folded_ids] = 0
    return rebuild(func, kind=kind, a0=a0, a1=a1, attr_id=attr_id, consts=new_pool,
                   pass_name="FoldConstant")



# ---------------------------------------------------------------------------
# pass wrapper
# ---------------------------------------------------------------------------

MAX_ELEMENTS_KEY = "FoldConstant.max_elements"
transform.register_pass_config(
    MAX_ELEMENTS_KEY, int, 1 << 16,
    description="largest folded tensor (elements) FoldConstant materializes",
    check=lambda v: None if v >= 1 else "must be >= 1")


def FoldConstant(max_elements: int | None = None) -> transform.FunctionPass:
    """Fold every pure node whose operands are all constants (opt level 0).

    Parameters
    ----------
    max_elements : int, optional
        Results with more elements are left unfolded; default: the config
        ``FoldConstant.max_elements`` of the current PassContext (1 << 16).

    Returns
    -------
    FunctionPass
        Requires nothing; leaves folded operands for DeadCodeElimination.
        Reports the statistic ``nodes_folded``.

    Examples
    --------
    >>> mod = passes.FoldConstant()(mod)            # doctest: +SKIP
    """
    if max_elements is not None and (not isinstance(max_elements, int)
                                     or isinstance(max_elements, bool) or max_elements < 1):
        raise ValueError(f"FoldConstant: max_elements must be an int >= 1, got {max_elements!r}")

    def fold_constant(func: Function, mod: object, ctx: transform.PassContext) -> Function:
        limit = ctx.get_config(MAX_ELEMENTS_KEY) if max_elements is None else max_elements
        out, n_folded = fold_function(func, limit)
        if n_folded:
            ctx.stat("nodes_folded", n_folded)
        return out

    return transform.function_pass(fold_constant, opt_level=0, name="FoldConstant")


transform.register_pass("FoldConstant", FoldConstant)
