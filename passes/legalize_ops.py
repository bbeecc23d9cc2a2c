"""LegalizeOps: every graph op node becomes a ``call_tir`` to a PrimFunc made by its template.

How it scales (no Python per node): per graph Function, one NumPy pass builds
a signature row per op node (opcode, attr_id, result dtype/shape_id, operand
count, operand dtypes and shape_ids); ``np.unique`` groups equal rows; Python
runs once per *distinct* signature (look up the op's ``legalize`` template,
memoized with its structural digest) and the kind, operand
and attribute columns are then rewritten with vectorized scatter: unary and
binary operands are appended to ``extra`` (call_tir is variadic), variadic
ops keep their operand lists in place.

PrimFuncs are shared: within the module by structural digest (equal
templates from different functions, and PrimFuncs already in the module, are
reused), named ``<op>_<dtype>_<dims>`` (``add_float32_4x4``; ``_1``, ``_2``
on collisions), private (no ``global_symbol``).

Decision on ``SkipOptimization``: functions carrying it are legalized too.
Legalization is not an optimization but the step that makes a graph
executable (TVM's LegalizeOps runs regardless); skipping it would leave a
module that cannot be built. The attribute is kept on the function so later
optimizations (fusion) still honour it.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

import passes.topi.templates as op_templates
from passes.topi import generic
from passes import legalize_bulk
from passes.narrow_floats import widen_narrow_floats
from passes.small_epilogues import specialized_epilogues
from passes.topi.matmul import scheduled_transposed_matmul
from passes.topi.tuned import TileTable, tuned_tiles
from passes.topi.vector import current_target
from passes.topi.winograd import winograd_enabled
from passes.transposed_operands import (
    materialize_constant_permutes,
    materialize_constant_widenings,
    swapped_sources,
)
from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES, ENC_BINARY, ENC_VARIADIC, FLOAT32, FLOAT64, INT64
from irkernel.ir.module import IRModule
from irkernel.ir.operands import operand_csr
from irkernel.ir.rebuild import rebuild
from irkernel.target import CPUTarget
from irkernel.ir.verify import check_node_type, is_verified
from irkernel.tir.function import PrimFunc

_LEAVES = (ops.OP_PARAM, ops.OP_CONST, ops.OP_CALL_FUNC, ops.OP_CALL_TIR)


def _variadic_groups(func: Function, rows: np.ndarray) -> np.ndarray:
    """int64[len(rows)]: equal ids for variadic rows with equal operand type lists.

    Rows are bucketed by operand count (Python once per distinct count), so the
    memory is the total operand count, never rows x the longest list.
    """
    counts = func.a1[rows].astype(np.int64)
    group = np.empty(len(rows), np.int64)
    offset = 0
    for c in np.unique(counts).tolist():
        sel = np.nonzero(counts == c)[0]
        if c == 0:
            group[sel] = offset
            offset += 1
            continue
        ids = func.extra[func.a0[rows[sel]].astype(np.int64)[:, None] + np.arange(c)]
        first, inverse = _group_rows(np.concatenate([func.dtype[ids], func.shape_id[ids]],
                                                    axis=1).astype(np.int64))
        group[sel] = offset + inverse
        offset += len(first)
    return group


def _signatures(func: Function, rows: np.ndarray, enc: np.ndarray) -> np.ndarray:
    """int64[r, 9]: opcode, attr_id, dtype, shape_id, then the operand types of unary and
    binary rows (dtype, shape_id; -1 when absent) and the operand-list group of variadic
    rows (-1 otherwise). Equal rows legalize to the same PrimFunc."""
    r = len(rows)
    sig = np.full((r, 9), -1, np.int64)
    sig[:, 0] = func.kind[rows]
    sig[:, 1] = func.attr_id[rows]
    sig[:, 2] = func.dtype[rows]
    sig[:, 3] = func.shape_id[rows]
    fixed = enc != ENC_VARIADIC
    x = func.a0[rows[fixed]]
    sig[fixed, 4] = func.dtype[x]
    sig[fixed, 5] = func.shape_id[x]
    binary = np.nonzero(enc == ENC_BINARY)[0]
    y = func.a1[rows[binary]]
    sig[binary, 6] = func.dtype[y]
    sig[binary, 7] = func.shape_id[y]
    var = np.nonzero(~fixed)[0]
    if len(var):
        sig[var, 8] = _variadic_groups(func, rows[var])
    return sig


def _template(opcode: int, record: tuple[tuple[str, Any], ...], types: tuple[Any, ...],
              result: Any) -> tuple[PrimFunc, bytes]:
    """The template's PrimFunc and its structural digest, computed once per signature."""
    return _digested(ops.get_op(opcode).legalize, opcode, record, types, result,
                     current_target(), tuned_tiles(), winograd_enabled())


@lru_cache(maxsize=8192)
def _digested(hook: Any, opcode: int, record: tuple[tuple[str, Any], ...],
              types: tuple[Any, ...], result: Any, target: CPUTarget,
              tuned: TileTable, winograd: bool) -> tuple[PrimFunc, bytes]:
    # ``hook``, ``target``, ``tuned`` and ``winograd`` are only part of the key: installing
    # another template, tiling for another CPU or with measured tiles (templates read their
    # tiles from them), or switching Winograd convs (``topi.winograd``) misses the cache
    prim = op_templates.legalize_op(opcode, record, types, result)
    return prim, prim.structural_digest()


def _group_rows(sig: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct row, group of every row), like ``np.unique(axis=0)``.

    Rows become one int64 mixed-radix key (re-densified through ``np.unique``
    before it could overflow), so the sort is a plain int64 sort: 10-20x faster
    than ``np.unique(axis=0)``, which sorts byte strings.
    """
    key = np.zeros(len(sig), np.int64)
    span = 1
    for c in range(sig.shape[1]):
        col = sig[:, c]
        lo = int(col.min())
        radix = int(col.max()) - lo + 1
        if radix == 1:
            continue
        if span * radix >= 2**62:
            _, key = np.unique(key, return_inverse=True)
            key = key.reshape(-1).astype(np.int64)
            span = int(key.max()) + 1
        key = key * radix + (col - lo)
        span *= radix
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def _name(op: str, code: int, shape: tuple[int, ...]) -> str:
    dims = "x".join(map(str, shape)) if shape else "scalar"
    return f"{op}_{DTYPE_NAMES[code]}_{dims}"


class _Namer:
    """Module-wide PrimFunc sharing by structural digest (generic kernels: by their name,
    which identifies their op and dtypes), and unique names."""

    def __init__(self, mod: IRModule) -> None:
        self.taken = set(mod.functions)
        self.by_digest: dict[bytes, str] = {}
        for name, f in mod.functions.items():
            if isinstance(f, PrimFunc):
                generic_name = f.attrs.get("generic_name")
                key = (str(generic_name).encode() if generic_name is not None
                       else f.structural_digest())
                self.by_digest.setdefault(key, name)
        self.added: dict[str, PrimFunc] = {}

    def intern(self, prim: PrimFunc, digest: bytes, base: str) -> str:
        name = self.by_digest.get(digest)
        if name is not None:
            return name
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        self.by_digest[digest] = name
        self.added[name] = prim
        return name


def _generic_ok(op_name: str, types: tuple[Any, ...], result: Any, limit: int) -> bool:
    """Whether a signature runs on a shape-generic kernel: every tensor small enough, or a
    concat of any size (a concat is opaque copy loops either way, and a strided copy with
    runtime extents runs as fast as one with constant ones: no kernel per shape)."""
    if not limit:
        return False
    if op_name == "matmul":  # by work: M * N * K multiply-adds, not the tensors' sizes
        return math.prod(result[1]) * (types[0][1][-1] if types[0][1] else 1) <= limit
    return op_name == "concat" or all(math.prod(shape) <= limit
                                      for _, shape in (*types, result))


@lru_cache(maxsize=1024)
def _transposed(types: tuple[Any, ...], swapped: tuple[bool, bool], target: CPUTarget
                ) -> tuple[PrimFunc, bytes] | None:
    """The scheduled matmul reading its swapped operands' sources (``types``: the matmul's
    operand types, as the graph has them), with its digest; None when not scheduled."""
    (code, sa), (_, sb) = types
    src = [tuple(s[:-2]) + (s[-1], s[-2]) if swap else tuple(s)
           for (_, s), swap in zip(types, swapped, strict=True)]
    prim = scheduled_transposed_matmul(src[0], src[1], DTYPE_NAMES[code], *swapped) \
        if code in (FLOAT32, FLOAT64) and len(sa) >= 2 and len(sb) >= 2 else None
    if prim is None:
        return None
    prim = prim.with_attr("op_name", "matmul").with_attr("op_pattern", ops.OUT_EWISE_FUSABLE)
    return prim, prim.structural_digest()


#: Most distinct signatures of one function that LegalizeOps specializes when it may use
#: shape-generic kernels (``generic_max_elements`` > 0): past it, the elementwise,
#: broadcast, injective and reduction signatures covering the fewest elements take the
#: generic kernels whatever their size. A generated graph with a new shape per lane
#: (50,000 distinct shapes at 1e6 nodes) otherwise compiled a kernel per shape, about
#: 28 ms each; a conv or matmul is never demoted, nor an epilogue fused into one, nor an
#: op of more than ``MAX_DEMOTED_ELEMENTS`` elements (there fusion pays: a DenseNet at
#: 224x224 has 264 specialized signatures, its large maps keep theirs).
MAX_SPECIALIZED_SIGNATURES = 256
MAX_DEMOTED_ELEMENTS = 1 << 16
_ANY_SIZE = 1 << 62


def _over_budget(func: Function, reps: np.ndarray, counts: np.ndarray,
                 generic: np.ndarray) -> np.ndarray:
    """bool per signature group (``reps``: a node of each, ``counts``: its rows): the
    groups moved to generic kernels to keep ``MAX_SPECIALIZED_SIGNATURES``."""
    demoted = np.zeros(len(reps), bool)
    excess = int(np.count_nonzero(~generic)) - MAX_SPECIALIZED_SIGNATURES
    if excess <= 0:
        return demoted
    pattern = ops.op_arrays().pattern[func.kind[reps]]
    size = func.shapes.size[func.shape_id[reps]].astype(np.int64)
    candidates = np.flatnonzero(~generic & (pattern <= ops.REDUCE)
                                & (size <= MAX_DEMOTED_ELEMENTS))
    weight = size * counts
    order = candidates[np.argsort(weight[candidates], kind="stable")]
    demoted[order[:excess]] = True
    return demoted


def _node_types(func: Function, node: int) -> tuple[ops.OpDef, tuple[Any, ...], Any]:
    """(op, operand types, result type) of ``node``; a type is ``(dtype code, shape)``."""
    shapes = func.shapes
    types = tuple((int(func.dtype[o]), shapes[int(func.shape_id[o])])
                  for o in func.operands(node))
    return (ops.get_op(int(func.kind[node])), types,
            (int(func.dtype[node]), shapes[int(func.shape_id[node])]))


def _lower_signature(func: Function, fname: str, node: int, namer: _Namer, limit: int,
                     metas: dict[bytes, int], meta_arrays: list[np.ndarray],
                     swapped: tuple[bool, bool] = (False, False)) -> tuple[Any, int, bool]:
    """The call_tir attribute record of one signature (its representative ``node``), the
    index of its meta constant (-1 for a specialized kernel), and whether the call reads
    the sources of its ``swapped`` operands (a matmul through a transpose)."""
    op, types, result = _node_types(func, node)
    opcode, code = op.opcode, result[0]
    record = func.attr_table[int(func.attr_id[node])]
    meta_index = -1
    try:
        # node attribute records are stored normalized (defaults filled) by the builder
        generic_ok = _generic_ok(op.name, types, result, limit)
        call = generic.generic_call(op.name, dict(record), types, result) \
            if generic_ok else None
        folded = _transposed(types, swapped, current_target()) \
            if any(swapped) and not generic_ok else None
        if folded is not None:
            prim, digest = folded
            name = namer.intern(prim, digest, _name(op.name, code, result[1]))
        elif call is not None:
            # a generic kernel's name identifies it (op and dtypes): no digest of its tree
            prim, digest = call.prim, call.name.encode()
            key = call.meta.tobytes()
            meta_index = metas.get(key, -1)
            if meta_index < 0:
                meta_index = metas[key] = len(meta_arrays)
                meta_arrays.append(call.meta)
            name = namer.intern(prim, digest, call.name)
        else:
            prim, digest = _template(opcode, record, types, result)
            name = namer.intern(prim, digest, _name(op.name, code, result[1]))
    except (ValueError, TypeError, TypeInferenceError) as exc:
        raise type(exc)(f"LegalizeOps: {fname}: node {node} ({op.name}): {exc}") from None
    return _call_record(name, code, result[1]), meta_index, folded is not None


@lru_cache(maxsize=65536)
def _call_record(callee: str, code: int, shape: tuple[int, ...]) -> tuple[tuple[str, Any], ...]:
    return ops.get_op(ops.OP_CALL_TIR).normalize_attrs(
        {"callee": callee, "dtype": DTYPE_NAMES[code], "shape": shape})


def _lower_groups(func: Function, fname: str, namer: _Namer, rows: np.ndarray,
                  first: np.ndarray, group_sigs: np.ndarray, swapped: np.ndarray,
                  limits: np.ndarray, metas: dict[bytes, int], meta_arrays: list[np.ndarray]
                  ) -> tuple[list[Any], list[int], list[bool]]:
    """Per signature group: its call record, meta index and whether it reads transposes.

    One Python step per distinct signature, except flat elementwise groups on generic
    kernels, which take one step per kernel key (``legalize_bulk``)."""
    n_groups = len(first)
    records: list[Any] = [None] * n_groups
    group_meta = [-1] * n_groups
    group_folded = [False] * n_groups
    verified = is_verified(func)
    reps = rows[first]
    bulk = np.flatnonzero(legalize_bulk.flat_map_groups(func, reps, limits))
    key_first, key_of = _group_rows(legalize_bulk.kernel_keys(group_sigs[bulk])) \
        if len(bulk) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    step = np.ones(n_groups, bool)
    step[bulk] = False
    step[bulk[key_first]] = True  # each kernel key's lead takes the per-signature path

    def lower(g: int) -> None:
        node = int(reps[g])
        # the templates trust attributes and types: check the signature's rule once,
        # unless the whole function is known to verify
        if not verified:
            check_node_type(func, node, fname, "LegalizeOps")
        records[g], group_meta[g], group_folded[g] = _lower_signature(
            func, fname, node, namer, int(limits[g]), metas, meta_arrays,
            (bool(swapped[first[g], 0]), bool(swapped[first[g], 1])))

    for g in np.flatnonzero(step).tolist():
        lower(g)
    if not len(bulk):
        return records, group_meta, group_folded
    shapes = func.shapes
    sizes = shapes.size[func.shape_id[reps[bulk]]].tolist()
    operands = 1 + (ops.op_arrays().encoding[func.kind[reps[bulk]]] == ENC_BINARY)
    lead_ok = []
    for k, b in enumerate(bulk[key_first].tolist()):
        meta = meta_arrays[group_meta[b]] if group_meta[b] >= 0 else None
        j = int(key_first[k])
        lead_ok.append(legalize_bulk.lead_agrees(records[b], meta, int(operands[j]), sizes[j],
                                                 shapes[int(func.shape_id[reps[b]])]))
    leads = bulk[key_first][key_of].tolist()
    for j, (g, lead) in enumerate(zip(bulk.tolist(), leads, strict=True)):
        if g == lead:
            continue
        if not lead_ok[int(key_of[j])]:
            lower(g)
            continue
        records[g] = legalize_bulk.with_shape(records[lead], shapes[int(func.shape_id[reps[g]])])
        meta = legalize_bulk.flat_meta(int(operands[j]), sizes[j])
        index = metas.get(meta.tobytes(), -1)
        if index < 0:
            index = metas[meta.tobytes()] = len(meta_arrays)
            meta_arrays.append(meta)
        group_meta[g] = index
    return records, group_meta, group_folded


def legalize_function(func: Function, fname: str, namer: _Namer,
                      generic_max_elements: int = 0) -> tuple[Function, int]:
    """``func`` with every op node rewritten to call_tir; (new function, nodes legalized).

    Signatures whose tensors all have at most ``generic_max_elements`` elements
    call a shape-generic kernel (``passes.topi.generic``) with one more operand,
    an ``int64`` meta constant; those constants (one per distinct meta) are
    prepended to the function, so every node id moves up by their count.
    """
    func = widen_narrow_floats(func)  # float16/bfloat16 ops compute in float32 between casts
    func = materialize_constant_permutes(func)  # no transpose of a weight on every call
    func = materialize_constant_widenings(func)  # nor a widening of a float16 weight
    is_op = ~np.isin(func.kind, np.array(_LEAVES, np.int16))
    rows = np.nonzero(is_op)[0]
    if not len(rows):
        return func, 0
    enc = ops.op_arrays().encoding[func.kind[rows]]
    sources = swapped_sources(func, rows)
    swapped = (sources >= 0).astype(np.int64)
    signatures = _signatures(func, rows, enc)
    if swapped.any():  # reading through a transpose is part of the signature
        signatures = np.concatenate([signatures, swapped], axis=1)
    first, inverse = _group_rows(signatures)
    mode = np.zeros(len(first), np.int64)  # per group: 0 size rule, 1 specialize, 2 generic
    if generic_max_elements:
        reps = rows[first]
        flat = legalize_bulk.flat_map_groups(func, reps, np.full(len(first), _ANY_SIZE))
        group_generic = flat & (func.shapes.size[func.shape_id[reps]] <= generic_max_elements)
        others = np.flatnonzero(~flat)
        group_generic[others] = [  # one step per signature that is not a flat map
            _generic_ok(op.name, types, result, generic_max_elements)
            for op, types, result in map(lambda n: _node_types(func, n),
                                         reps[others].tolist())]
        demoted = _over_budget(func, rows[first], np.bincount(inverse), group_generic)
        generic_rows = (group_generic | demoted)[inverse]
        row_mode = np.where(specialized_epilogues(func, rows, generic_rows), 1,
                            np.where(demoted[inverse], 2, 0))
        if row_mode.any():  # the choice is part of the signature
            signatures = np.concatenate([signatures, row_mode[:, None]], axis=1)
            first, inverse = _group_rows(signatures)
            mode = row_mode[first]
    limits = np.array([generic_max_elements, 0, _ANY_SIZE], np.int64)[mode]
    metas: dict[bytes, int] = {}
    meta_arrays: list[np.ndarray] = []
    records, group_meta, group_folded = _lower_groups(
        func, fname, namer, rows, first, signatures[first], swapped, limits, metas, meta_arrays)
    attr_table, new_ids = func.attr_table.extended(records)
    n_meta = len(meta_arrays)
    shift = np.int32(n_meta)
    # every legalized row gets a fresh operand list in extra: its operands, then its meta
    csr = operand_csr(func)
    row_meta = np.asarray(group_meta, np.int64)[inverse]
    n_operands = (csr.ptr[rows + 1] - csr.ptr[rows]).astype(np.int64)
    counts = n_operands + (row_meta >= 0)
    starts = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    lists = np.empty(int(starts[-1]), np.int32)
    row_of = np.repeat(np.arange(len(rows)), counts)
    within = np.arange(len(lists), dtype=np.int64) - starts[row_of]
    is_operand = within < n_operands[row_of]
    lists[is_operand] = csr.ids[csr.ptr[rows[row_of[is_operand]]] + within[is_operand]] + shift
    folded_rows = np.nonzero(np.asarray(group_folded, bool)[inverse])[0]
    transposes = np.full((len(folded_rows), 2), -1, np.int64)
    for slot in (0, 1):  # folded matmuls read their transposes' sources
        hit = np.nonzero(sources[folded_rows, slot] >= 0)[0]
        row = folded_rows[hit]
        transposes[hit, slot] = lists[starts[row] + slot]
        lists[starts[row] + slot] = sources[row, slot] + shift
    lists[~is_operand] = row_meta[row_of[~is_operand]]  # meta nodes are 0..n_meta-1
    old_extra = func.extra + shift if n_meta else func.extra
    extra = np.concatenate([old_extra, lists]).astype(np.int32)
    kind = func.kind.copy()
    kind[rows] = ops.OP_CALL_TIR
    attr_id = func.attr_id.copy()
    attr_id[rows] = np.asarray(new_ids, np.int32)[inverse]
    a0 = func.a0.copy()
    a1 = func.a1.copy()
    a0[rows] = (len(func.extra) + starts[:-1]).astype(np.int32)
    a1[rows] = counts.astype(np.int32)
    if not n_meta:
        out = rebuild(func, kind=kind, a0=a0, a1=a1, attr_id=attr_id, extra=extra,
                      attr_table=attr_table, pass_name="LegalizeOps")
        return _drop_unused_transposes(out, transposes.reshape(-1)), len(rows)
    shapes, shape_ids = func.shapes.extended([(len(m),) for m in meta_arrays])
    consts, const_ids = func.consts.with_tensors(meta_arrays, shape_ids)
    out = Function(
        kind=np.concatenate([np.full(n_meta, ops.OP_CONST, np.int16), kind]),
        a0=np.concatenate([const_ids, a0]), a1=np.concatenate([np.full(n_meta, -1, np.int32), a1]),
        dtype=np.concatenate([np.full(n_meta, INT64, np.int8), func.dtype]),
        shape_id=np.concatenate([np.asarray(shape_ids, np.int32), func.shape_id]),
        attr_id=np.concatenate([np.zeros(n_meta, np.int32), attr_id]),
        extra=extra, params=func.params + shift, outputs=func.outputs + shift,
        param_names=func.param_names, shapes=shapes, attr_table=attr_table, consts=consts,
        attrs=func.attrs)
    return _drop_unused_transposes(out, transposes.reshape(-1)), len(rows)


def _drop_unused_transposes(func: Function, transposes: np.ndarray) -> Function:
    """``func`` without the ``transposes`` (node ids; -1 entries ignored) that nothing reads
    any more: their matmuls read the transposed nodes instead. A transpose still read
    elsewhere, or returned, stays. Its PrimFunc stays until DeadCodeElimination."""
    transposes = transposes[transposes >= 0]
    if not len(transposes):
        return func
    used = np.zeros(func.num_nodes, bool)
    used[operand_csr(func).ids] = True
    used[func.outputs] = True
    drop = np.zeros(func.num_nodes, bool)
    drop[transposes] = True
    drop &= ~used
    if not drop.any():
        return func
    return rebuild(func, keep=~drop, pass_name="LegalizeOps")


def legalize_module(mod: IRModule, ctx: transform.PassContext | None = None,
                    generic_max_elements: int = 0) -> IRModule:
    namer = _Namer(mod)
    changed: dict[str, Any] = {}
    total = 0
    limit = generic_max_elements
    for fname, func in mod.functions.items():
        if isinstance(func, Function):
            out, n = legalize_function(func, fname, namer, limit)
            if out is not func:
                changed[fname] = out
                total += n
    if not changed:
        return mod
    if ctx is not None:
        ctx.stat("nodes_legalized", total)
        ctx.stat("prim_funcs_added", len(namer.added))
    return IRModule({**mod.functions, **changed, **namer.added}, mod.attrs)


def LegalizeOps(generic_max_elements: int = 0) -> transform.ModulePass:
    """Rewrite graph ops to ``call_tir`` of template PrimFuncs added to the module (opt 0).

    Parameters
    ----------
    generic_max_elements : int
        Signatures whose tensors all have at most this many elements call a
        shape-generic kernel (``passes.topi.generic``: one kernel per op and
        dtypes, any shape, with an ``int64`` meta operand; never fused). 0, the
        default, gives every signature its specialized template, as TVM does;
        ``runtime.build`` sets it (config ``runtime.generic_max_elements``).

    Returns
    -------
    ModulePass
        Leaves params, consts, call_func and call_tir nodes alone; reports
        ``nodes_legalized`` and ``prim_funcs_added``. Runs on functions with
        ``SkipOptimization`` too (see the module docstring).
    """
    if not isinstance(generic_max_elements, int) or isinstance(generic_max_elements, bool) \
            or generic_max_elements < 0:
        raise ValueError(f"LegalizeOps: generic_max_elements must be an int >= 0, got "
                         f"{generic_max_elements!r}")

    def legalize_ops(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        return legalize_module(mod, ctx, generic_max_elements)

    return transform.module_pass(legalize_ops, opt_level=0, name="LegalizeOps")


transform.register_pass("LegalizeOps", LegalizeOps)

__all__ = ["LegalizeOps", "legalize_function", "legalize_module"]
