"""IntegerKernels: matmuls and convs of 8-bit integers held in floats become int32 kernels.

The ONNX frontend imports MatMulInteger, QLinearMatMul, QGemm, ConvInteger and
QLinearConv (``irkernel/frontend/onnx/converters/qlinear.py``) as an exact float matmul
or conv of integers: ``matmul(astype(x) - zx, C)`` (``conv`` likewise) with ``x``
uint8 or int8, ``zx`` a constant and ``C`` the constant weights minus their zero
points, followed by the requantization (scale, round half to even, zero point,
saturate) or ``astype(int32)``. This pass finds that shape (one Numba sweep; Python
once per match) and replaces the matmul by a ``call_tir`` to ``passes.topi.int_matmul``
(a 2-D conv with one group: ``passes.topi.int_conv``): the bytes of ``x`` times int8
weights packed here, at build time, in int32 accumulators (VNNI ``vpdpbusd`` where the
CPU has it), converted to the op's float dtype in the kernel's store.
The requantization ops stay graph ops; FuseOps folds them into that store (the
kernel is ``OUT_EWISE_FUSABLE``), so they run on the accumulators in registers.

**Bit-exact by construction.** A match is taken only when the float matmul it replaces
is exact: ``C`` and ``zx`` are integers, each column of ``C`` spans at most 256 values
(so it is int8 after a shift; for a conv, every weight fits int8), and
``max |x - zx| * max_j sum_k |C[k, j]|`` (per output channel for a conv) is below
2**31 and below the float's exact-integer limit (2**24 for float32, 2**53 for
float64; the frontend picks float64 past 2**24). Then every partial sum, in float or
int32 and in any order, is the same integer, and the output bits equal the
interpreter's and onnxruntime's.

**QDQ ops** (config ``IntegerKernels.qdq``, default on): a DequantizeLinear's
``multiply(astype(x) - zx, x_scale)`` feeding the op with a folded float weight. Its
int8 weights and per-channel scales are recovered exactly (``passes/qdq_weights.py``;
else the op stays float), the op's row becomes the call and a new ``multiply`` after it
scales the int32 sum by ``x_scale * w_scale``: onnxruntime's integer rounding rather
than the ONNX text's float one (docs/onnx.md: the decision to make it the default).

The weight and the activation chain (``multiply``, ``subtract``, ``astype``) are
dropped when the op was their only reader. Runs in ``GraphLowering`` before
``LegalizeOps``, at opt level 2; the lanes of the packing come from the PassContext's
``target`` (``topi.vector_bits``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import (
    DTYPE_NAMES,
    ENC_BINARY,
    ENC_UNARY,
    FLOAT32,
    FLOAT64,
    INT8,
    NONE,
    UINT8,
    dtype_code,
)
from irkernel.ir.jit import kernel
from irkernel.ir.module import IRModule
from irkernel.ir.operands import use_counts
from irkernel.ir.rebuild import rebuild
from irkernel.tir.function import PrimFunc
from passes.qdq_weights import symmetric_int8
from passes.topi.int_conv import int_conv2d, pack_conv_weights
from passes.topi.int_matmul import column_offsets, dot_lanes, int_matmul, pack_weights
from passes.topi.vector import current_target

#: Exact-integer limits of the float dtypes, and int32's.
_EXACT = {FLOAT32: 2**24, FLOAT64: 2**53}
_INT32_LIMIT = 2**31


@kernel
def match_kernel(kind, a0, a1, dtype, op_matmul, op_conv, op_astype, op_subtract,
                 op_multiply, op_const, matches):
    """Rows ``(matmul or conv, x, astype, subtract or -1, zero point const or -1, weight,
    multiply or -1, scale const or -1)`` of every candidate (module docstring; the
    multiply by a scale is a DequantizeLinear's); returns their count. Values and shapes
    are checked by the caller, once per match."""
    found = 0
    for i in range(kind.shape[0]):
        if not (kind[i] == op_matmul or kind[i] == op_conv) or \
                not (dtype[i] == FLOAT32 or dtype[i] == FLOAT64):
            continue
        a, w = a0[i], a1[i]
        if kind[w] != op_const:
            continue
        mul, scale = -1, -1
        if kind[a] == op_multiply and kind[a1[a]] == op_const:
            mul, scale = a, a1[a]
            a = a0[a]
        sub, zp = -1, -1
        if kind[a] == op_subtract and kind[a1[a]] == op_const:
            sub, zp = a, a1[a]
            a = a0[a]
        if kind[a] != op_astype or dtype[a] != dtype[i]:
            continue
        x = a0[a]
        if not (dtype[x] == UINT8 or dtype[x] == INT8):
            continue
        row = matches[found]
        row[0], row[1], row[2], row[3] = i, x, a, sub
        row[4], row[5], row[6], row[7] = zp, w, mul, scale
        found += 1
    return found


class _Rewrite:
    """One accepted match: its new constants and kernel; a QDQ match also has the scale
    that a new node after the call multiplies its integers by."""

    def __init__(self, row: int, x: int, consts: list[np.ndarray], prim: PrimFunc,
                 odt: str, out_shape: tuple[int, ...], scale: np.ndarray | None = None,
                 ) -> None:
        self.row, self.x, self.consts, self.prim = row, x, consts, prim
        self.odt, self.out_shape, self.scale = odt, out_shape, scale


def _integer(value: np.ndarray) -> np.ndarray | None:
    """``value`` as int64 when every element is an integer, else None."""
    if not np.all(np.isfinite(value)) or not np.array_equal(value, np.round(value)):
        return None
    return value.astype(np.int64)


def _zero_point(func: Function, zp: int) -> int | None:
    """The integer activation zero point of const node ``zp`` (-1: none), or None."""
    if zp < 0:
        return 0
    z = _integer(np.asarray(func.consts.value(int(func.a0[zp]), func.shapes), np.float64))
    return None if z is None or z.size != 1 else int(z.reshape(-1)[0])


def _exact(x_dtype: str, zx: int, column_sums: np.ndarray, limit: int) -> bool:
    """Whether every partial sum is an integer of magnitude below ``limit``
    (``column_sums``: ``sum |C|`` per output column or channel)."""
    lo, hi = (0, 255) if x_dtype == "uint8" else (-128, 127)
    return max(abs(hi - zx), abs(lo - zx)) * int(column_sums.max(initial=0)) < limit


def _accept(func: Function, match: list[int], lanes: int, target: Any, op_conv: int,
            qdq: bool) -> _Rewrite | None:
    """The rewrite of one candidate, or None when it is not exact (module docstring)."""
    row, x, _, _, zp, w, mul, x_scale = match
    zx = _zero_point(func, zp)
    wf = func.consts.value(int(func.a0[w]), func.shapes)
    scale = None
    if mul < 0:
        weights = _integer(np.asarray(wf, np.float64))
    else:  # a DequantizeLinear's activations: only with the config, and the weights'
        weights, scale = _qdq_weights(func, row, wf, x_scale, op_conv) \
            if qdq else (None, None)
    if zx is None or weights is None:
        return None
    x_dtype = DTYPE_NAMES[int(func.dtype[x])]
    zu = zx + (128 if x_dtype == "int8" else 0)  # int8 x is read as uint8 x + 128
    odt = DTYPE_NAMES[int(func.dtype[row])]
    out_shape = func.shapes[int(func.shape_id[row])]
    if 0 in out_shape or 0 in weights.shape or 0 in func.shapes[int(func.shape_id[x])]:
        return None  # nothing to compute
    # the float op is exact below its dtype's limit; a QDQ op is rounded anyway (the
    # int32 sum then converts once), so only int32 bounds it
    limit = _INT32_LIMIT if mul >= 0 else min(_INT32_LIMIT, _EXACT[int(func.dtype[row])])
    if int(func.kind[row]) == op_conv:
        prim, consts = _conv(func, row, x, x_dtype, zx, zu, weights, odt, lanes, target,
                             limit)
    else:
        prim, consts = _matmul(func, row, x, x_dtype, zx, zu, weights, odt, lanes, target,
                               limit)
    if prim is None:
        return None
    name = prim.attrs["schedule"]
    prim = prim.with_attr("op_name", name).with_attr("op_pattern", ops.OUT_EWISE_FUSABLE)
    return _Rewrite(row, x, consts, prim, odt, out_shape, scale)


def _qdq_weights(func: Function, row: int, wf: np.ndarray, x_scale: int, op_conv: int,
                 ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(int8 weights, the op's float32 output scale ``x_scale * w_scale`` shaped for its
    result) of a QDQ op's dequantized weight ``wf``, or (None, None)."""
    sx = np.asarray(func.consts.value(int(func.a0[x_scale]), func.shapes))
    conv = int(func.kind[row]) == op_conv
    if sx.size != 1 or sx.dtype != np.float32 or wf.ndim != (4 if conv else 2):
        return None, None
    found = symmetric_int8(wf, 0 if conv else 1)
    if found is None:
        return None, None
    q, sw = found
    scale = (sx.reshape(()) * sw).astype(np.float32)
    return q, scale.reshape(-1, 1, 1) if conv else scale


def _matmul(func, row, x, x_dtype, zx, zu, c, odt, lanes, target, limit):
    """(PrimFunc, constants) of an exact matmul, or (None, [])."""
    a_shape = func.shapes[int(func.shape_id[x])]
    if len(a_shape) < 2 or c.ndim != 2 or c.shape[1] < 2:
        return None, []
    offsets = column_offsets(c)
    if offsets is None or not _exact(x_dtype, zx, np.abs(c).sum(axis=0), limit):
        return None, []
    # wrapping int32 arithmetic is exact mod 2**32, and the true result is below 2**31
    consts = [pack_weights(c, offsets, lanes), _wrap32(-zu * c.sum(axis=0))]
    with_rowsum = bool(offsets.any())
    if with_rowsum:
        consts.append(_wrap32(offsets))
    return int_matmul(a_shape, x_dtype, c.shape[1], odt, lanes, with_rowsum, target), consts


def _conv(func, row, x, x_dtype, zx, zu, w, odt, lanes, target, limit):
    """(PrimFunc, constants) of an exact 2-D conv with one group, or (None, [])."""
    attrs = dict(func.attr_table[int(func.attr_id[row])])
    x_shape = func.shapes[int(func.shape_id[x])]
    if len(x_shape) != 4 or w.ndim != 4 or int(attrs["groups"]) != 1 or w.shape[0] < 2 \
            or w.min(initial=0) < -128 or w.max(initial=0) > 127 or not 0 <= zu <= 255:
        return None, []
    flat = w.reshape(w.shape[0], -1)
    if not _exact(x_dtype, zx, np.abs(flat).sum(axis=1), limit):
        return None, []
    consts = [pack_conv_weights(w, lanes), _wrap32(-zu * flat.sum(axis=1))]
    prim = int_conv2d(x_shape, x_dtype, w.shape, func.shapes[int(func.shape_id[row])],
                      tuple(attrs["strides"]), tuple(attrs["padding"]),
                      tuple(attrs["dilation"]), zu, odt, lanes, target)
    return prim, consts


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((v + 2**31) % 2**32 - 2**31).astype(np.int32)


def rewrite_function(func: Function, taken: set[str], added: dict[str, PrimFunc],
                     qdq: bool = False) -> tuple[Function, int]:
    """``func`` with every exact 8-bit matmul and conv calling an integer kernel (new PrimFuncs
    go to ``added``, named apart from ``taken``; ``qdq``: QDQ ops too, as the config
    ``IntegerKernels.qdq``); (new function or ``func``, count)."""
    op_matmul, op_conv = ops.get_op("matmul").opcode, ops.get_op("conv").opcode
    n_ops = int(np.count_nonzero((func.kind == op_matmul) | (func.kind == op_conv)))
    if not n_ops:
        return func, 0
    matches = np.empty((n_ops, 8), np.int32)
    found = match_kernel(func.kind, func.a0, func.a1, func.dtype, op_matmul, op_conv,
                         ops.get_op("astype").opcode, ops.get_op("subtract").opcode,
                         ops.get_op("multiply").opcode, ops.OP_CONST, matches)
    if not found:
        return func, 0
    target = current_target()
    lanes = dot_lanes(target)
    rewrites = [r for r in (_accept(func, m, lanes, target, op_conv, qdq)
                            for m in matches[:found].tolist()) if r is not None]
    if not rewrites:
        return func, 0
    by_digest: dict[bytes, str] = {}
    names = []
    for r in rewrites:
        digest = r.prim.structural_digest()
        name = by_digest.get(digest)
        if name is None:
            base = f"{r.prim.attrs['schedule']}_{'x'.join(map(str, r.out_shape))}"
            name, k = base, 0
            while name in taken:
                k += 1
                name = f"{base}_{k}"
            taken.add(name)
            by_digest[digest] = name
            added[name] = r.prim
        names.append(name)
    dropped = _unread(func, matches[:found], {r.row for r in rewrites})
    out, new_id = _apply(func, rewrites, names)
    keep = np.ones(out.num_nodes, bool)
    keep[new_id[dropped]] = False
    return rebuild(out, keep=keep, pass_name="IntegerKernels"), len(rewrites)


def _unread(func: Function, matches: np.ndarray, rewritten: set[int]) -> np.ndarray:
    """The weights and activation chains (multiply, subtract, astype) that only the
    ``rewritten`` ops read (old node ids)."""
    uses = use_counts(func)
    dropped = []
    for m in matches.tolist():
        if m[0] not in rewritten:
            continue
        uses[func.a0[m[0]]] -= 1
        uses[m[5]] -= 1
        for node in (m[5], m[6], m[3], m[2]):  # readers first
            if node >= 0 and uses[node] == 0:
                dropped.append(node)
                for o in func.operands(node):
                    uses[o] -= 1
    return np.asarray(dropped, np.int64)


def _apply(func: Function, rewrites: list[_Rewrite], names: list[str],
           ) -> tuple[Function, np.ndarray]:
    """The op rows as call_tir rows reading their new constants, which are prepended; a
    QDQ op's users read a new ``multiply`` of the call by its scale, inserted after it.
    Every node id moves up by the constants and the multiplies before it; returns the
    function and the new id of each old node."""
    calls = [v for r in rewrites for v in r.consts]
    scaled = sorted((r for r in rewrites if r.scale is not None), key=lambda r: r.row)
    values = calls + [r.scale for r in scaled]
    count, n = len(values), func.num_nodes
    shapes, shape_ids = func.shapes.extended([v.shape for v in values])
    consts, const_ids = func.consts.with_tensors(values, shape_ids)
    call = ops.get_op(ops.OP_CALL_TIR)
    attr_table, attr_ids = func.attr_table.extended(
        call.normalize_attrs({"callee": name, "dtype": r.odt, "shape": r.out_shape})
        for r, name in zip(rewrites, names, strict=True))
    after = np.array(sorted(r.row for r in scaled), np.int64)  # rows that get a multiply
    new_id = np.arange(n, dtype=np.int64) + count + np.searchsorted(after, np.arange(n))
    ref = new_id.copy()  # what a reader of each old node reads now
    ref[after] += 1
    enc = ops.op_arrays().encoding[func.kind]
    a0 = np.where((enc == ENC_UNARY) | (enc == ENC_BINARY), ref[func.a0], func.a0)
    a1 = np.where(enc == ENC_BINARY, ref[func.a1], func.a1)
    kind, attr_id = func.kind.copy(), func.attr_id.copy()
    lists: list[int] = []
    first = 0
    for r, attr in zip(rewrites, attr_ids, strict=True):
        operands = [int(ref[r.x]), *range(first, first + len(r.consts))]
        first += len(r.consts)
        kind[r.row], attr_id[r.row] = ops.OP_CALL_TIR, attr
        a0[r.row], a1[r.row] = len(func.extra) + len(lists), len(operands)
        lists.extend(operands)
    total = n + count + len(after)
    out = {name: np.zeros(total, dt) for name, dt in (
        ("kind", np.int16), ("a0", np.int32), ("a1", np.int32), ("dtype", np.int8),
        ("shape_id", np.int32), ("attr_id", np.int32))}
    out["kind"][:count] = ops.OP_CONST
    out["a0"][:count] = const_ids
    out["a1"][:count] = NONE
    out["dtype"][:count] = [dtype_code(v.dtype) for v in values]
    out["shape_id"][:count] = shape_ids
    for name, col in (("kind", kind), ("a0", a0), ("a1", a1), ("dtype", func.dtype),
                      ("shape_id", func.shape_id), ("attr_id", attr_id)):
        out[name][new_id] = col
    rows = new_id[after] + 1  # the multiplies: the call times its scale constant
    out["kind"][rows] = ops.get_op("multiply").opcode
    out["a0"][rows] = new_id[after]
    out["a1"][rows] = len(calls) + np.arange(len(after))
    out["dtype"][rows] = func.dtype[after]
    out["shape_id"][rows] = func.shape_id[after]
    old_extra = ref[func.extra] if len(func.extra) else func.extra.astype(np.int64)
    return Function(
        **out, extra=np.concatenate([old_extra, np.asarray(lists, np.int64)]).astype(np.int32),
        params=ref[func.params].astype(np.int32), outputs=ref[func.outputs].astype(np.int32),
        param_names=func.param_names, shapes=shapes, attr_table=attr_table, consts=consts,
        attrs=func.attrs), new_id


QDQ_KEY = "IntegerKernels.qdq"
transform.register_pass_config(
    QDQ_KEY, bool, True,
    description="IntegerKernels also takes QDQ convs and matmuls (onnxruntime's integer "
                "rounding instead of the ONNX text's float one; False: the float path)")


def IntegerKernels() -> transform.ModulePass:
    """Exact 8-bit matmuls and convs (module docstring) call integer kernels (opt level 2).

    Returns
    -------
    ModulePass
        Reports the statistic ``rewritten``.
    """

    def integer_kernels(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        taken = set(mod.functions)
        added: dict[str, PrimFunc] = {}
        functions = dict(mod.functions)
        total = 0
        qdq = bool(ctx.get_config(QDQ_KEY))
        for name, f in mod.functions.items():
            if isinstance(f, Function):
                out, n = rewrite_function(f, taken, added, qdq)
                if n:
                    functions[name] = out
                    total += n
        if not total:
            return mod
        ctx.stat("rewritten", total)
        functions.update(added)
        return mod.with_functions(functions)

    return transform.module_pass(integer_kernels, opt_level=2, name="IntegerKernels")


transform.register_pass("IntegerKernels", IntegerKernels)

__all__ = ["QDQ_KEY", "IntegerKernels", "match_kernel", "rewrite_function"]
