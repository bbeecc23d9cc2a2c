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

The weight, the ``astype`` and the ``subtract`` are dropped when the op was their
only reader. Runs in ``GraphLowering`` before ``LegalizeOps``, at opt level 2; the
lanes of the packing come from the PassContext's ``target`` (``topi.vector_bits``).
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
from passes.topi.int_conv import int_conv2d, pack_conv_weights
from passes.topi.int_matmul import column_offsets, dot_lanes, int_matmul, pack_weights
from passes.topi.vector import current_target

#: Exact-integer limits of the float dtypes, and int32's.
_EXACT = {FLOAT32: 2**24, FLOAT64: 2**53}
_INT32_LIMIT = 2**31


@kernel
def match_kernel(kind, a0, a1, dtype, op_matmul, op_conv, op_astype, op_subtract, op_const,
                 matches):
    """Rows ``(matmul or conv, x, astype, subtract or -1, zero point const or -1, weight)``
    of every candidate (module docstring); returns their count. Values and shapes are
    checked by the caller, once per match."""
    found = 0
    for i in range(kind.shape[0]):
        if not (kind[i] == op_matmul or kind[i] == op_conv) or \
                not (dtype[i] == FLOAT32 or dtype[i] == FLOAT64):
            continue
        a, w = a0[i], a1[i]
        if kind[w] != op_const:
            continue
        sub, zp = -1, -1
        if kind[a] == op_subtract and kind[a1[a]] == op_const:
            sub, zp = a, a1[a]
            a = a0[a]
        if kind[a] != op_astype or dtype[a] != dtype[i]:
            continue
        x = a0[a]
        if not (dtype[x] == UINT8 or dtype[x] == INT8):
            continue
        matches[found, 0] = i
        matches[found, 1] = x
        matches[found, 2] = a
        matches[found, 3] = sub
        matches[found, 4] = zp
        matches[found, 5] = w
        found += 1
    return found


class _Rewrite:
    """One accepted match: its new constants and kernel."""

    def __init__(self, row: int, x: int, consts: list[np.ndarray], prim: PrimFunc,
                 odt: str, out_shape: tuple[int, ...]) -> None:
        self.row, self.x, self.consts, self.prim = row, x, consts, prim
        self.odt, self.out_shape = odt, out_shape


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


def _exact(func: Function, row: int, x_dtype: str, zx: int, column_sums: np.ndarray) -> bool:
    """Whether every partial sum is an integer the op's float dtype and int32 both hold
    (``column_sums``: ``sum |C|`` per output column or channel)."""
    lo, hi = (0, 255) if x_dtype == "uint8" else (-128, 127)
    bound = max(abs(hi - zx), abs(lo - zx)) * int(column_sums.max(initial=0))
    return bound < min(_INT32_LIMIT, _EXACT[int(func.dtype[row])])


def _accept(func: Function, match: list[int], lanes: int, target: Any,
            op_conv: int) -> _Rewrite | None:
    """The rewrite of one candidate, or None when it is not exact (module docstring)."""
    row, x, _, _, zp, w = match
    zx = _zero_point(func, zp)
    weights = _integer(np.asarray(func.consts.value(int(func.a0[w]), func.shapes),
                                  np.float64))
    if zx is None or weights is None:
        return None
    x_dtype = DTYPE_NAMES[int(func.dtype[x])]
    zu = zx + (128 if x_dtype == "int8" else 0)  # int8 x is read as uint8 x + 128
    odt = DTYPE_NAMES[int(func.dtype[row])]
    out_shape = func.shapes[int(func.shape_id[row])]
    if int(func.kind[row]) == op_conv:
        prim, consts = _conv(func, row, x, x_dtype, zx, zu, weights, odt, lanes, target)
    else:
        prim, consts = _matmul(func, row, x, x_dtype, zx, zu, weights, odt, lanes, target)
    if prim is None:
        return None
    name = prim.attrs["schedule"]
    prim = prim.with_attr("op_name", name).with_attr("op_pattern", ops.OUT_EWISE_FUSABLE)
    return _Rewrite(row, x, consts, prim, odt, out_shape)


def _matmul(func, row, x, x_dtype, zx, zu, c, odt, lanes, target):
    """(PrimFunc, constants) of an exact matmul, or (None, [])."""
    a_shape = func.shapes[int(func.shape_id[x])]
    if len(a_shape) < 2 or c.ndim != 2 or c.shape[1] < 2:
        return None, []
    offsets = column_offsets(c)
    if offsets is None or not _exact(func, row, x_dtype, zx, np.abs(c).sum(axis=0)):
        return None, []
    # wrapping int32 arithmetic is exact mod 2**32, and the true result is below 2**31
    consts = [pack_weights(c, offsets, lanes), _wrap32(-zu * c.sum(axis=0))]
    with_rowsum = bool(offsets.any())
    if with_rowsum:
        consts.append(_wrap32(offsets))
    return int_matmul(a_shape, x_dtype, c.shape[1], odt, lanes, with_rowsum, target), consts


def _conv(func, row, x, x_dtype, zx, zu, w, odt, lanes, target):
    """(PrimFunc, constants) of an exact 2-D conv with one group, or (None, [])."""
    attrs = dict(func.attr_table[int(func.attr_id[row])])
    x_shape = func.shapes[int(func.shape_id[x])]
    if len(x_shape) != 4 or w.ndim != 4 or int(attrs["groups"]) != 1 or w.shape[0] < 2 \
            or w.min(initial=0) < -128 or w.max(initial=0) > 127 or not 0 <= zu <= 255:
        return None, []
    flat = w.reshape(w.shape[0], -1)
    if not _exact(func, row, x_dtype, zx, np.abs(flat).sum(axis=1)):
        return None, []
    consts = [pack_conv_weights(w, lanes), _wrap32(-zu * flat.sum(axis=1))]
    prim = int_conv2d(x_shape, x_dtype, w.shape, func.shapes[int(func.shape_id[row])],
                      tuple(attrs["strides"]), tuple(attrs["padding"]),
                      tuple(attrs["dilation"]), zu, odt, lanes, target)
    return prim, consts


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((v + 2**31) % 2**32 - 2**31).astype(np.int32)


def rewrite_function(func: Function, taken: set[str], added: dict[str, PrimFunc],
                     ) -> tuple[Function, int]:
    """``func`` with every exact 8-bit matmul and conv calling an integer kernel (new PrimFuncs
    go to ``added``, named apart from ``taken``); (new function or ``func``, count)."""
    op_matmul, op_conv = ops.get_op("matmul").opcode, ops.get_op("conv").opcode
    n_ops = int(np.count_nonzero((func.kind == op_matmul) | (func.kind == op_conv)))
    if not n_ops:
        return func, 0
    matches = np.empty((n_ops, 6), np.int32)
    found = match_kernel(func.kind, func.a0, func.a1, func.dtype, op_matmul, op_conv,
                         ops.get_op("astype").opcode, ops.get_op("subtract").opcode,
                         ops.OP_CONST, matches)
    if not found:
        return func, 0
    target = current_target()
    lanes = dot_lanes(target)
    rewrites = [r for r in (_accept(func, m, lanes, target, op_conv)
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
    out = _apply(func, rewrites, names)
    uses = use_counts(out)
    keep = np.ones(out.num_nodes, bool)
    shift = out.num_nodes - func.num_nodes
    for m in matches[:found].tolist():  # readers first: a weight, subtract, then astype
        for node in (m[5], m[3], m[2]):
            if node >= 0 and uses[node + shift] == 0:
                keep[node + shift] = False
                for o in out.operands(node + shift):
                    uses[o] -= 1
    return rebuild(out, keep=keep, pass_name="IntegerKernels"), len(rewrites)


def _apply(func: Function, rewrites: list[_Rewrite], names: list[str]) -> Function:
    """The matmul rows as call_tir rows reading their new constants, which are prepended
    (every node id moves up by their count)."""
    values = [v for r in rewrites for v in r.consts]
    count = len(values)
    shapes, shape_ids = func.shapes.extended([v.shape for v in values])
    consts, const_ids = func.consts.with_tensors(values, shape_ids)
    call = ops.get_op(ops.OP_CALL_TIR)
    attr_table, attr_ids = func.attr_table.extended(
        call.normalize_attrs({"callee": name, "dtype": r.odt, "shape": r.out_shape})
        for r, name in zip(rewrites, names, strict=True))
    enc = ops.op_arrays().encoding[func.kind]
    a0 = np.where((enc == ENC_UNARY) | (enc == ENC_BINARY), func.a0 + count, func.a0)
    a1 = np.where(enc == ENC_BINARY, func.a1 + count, func.a1)
    kind, attr_id = func.kind.copy(), func.attr_id.copy()
    lists: list[int] = []
    first = 0
    for r, attr in zip(rewrites, attr_ids, strict=True):
        operands = [r.x + count, *range(first, first + len(r.consts))]
        first += len(r.consts)
        kind[r.row], attr_id[r.row] = ops.OP_CALL_TIR, attr
        a0[r.row], a1[r.row] = len(func.extra) + len(lists), len(operands)
        lists.extend(operands)
    return Function(
        kind=np.concatenate([np.full(count, ops.OP_CONST, np.int16), kind]),
        a0=np.concatenate([const_ids, a0]).astype(np.int32),
        a1=np.concatenate([np.full(count, NONE, np.int32), a1]).astype(np.int32),
        dtype=np.concatenate([np.array([dtype_code(v.dtype) for v in values], np.int8),
                              func.dtype]),
        shape_id=np.concatenate([np.asarray(shape_ids, np.int32), func.shape_id]),
        attr_id=np.concatenate([np.zeros(count, np.int32), attr_id]),
        extra=np.concatenate([func.extra + count, np.asarray(lists, np.int32)]).astype(np.int32),
        params=func.params + count, outputs=func.outputs + count,
        param_names=func.param_names, shapes=shapes, attr_table=attr_table, consts=consts,
        attrs=func.attrs)


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
        for name, f in mod.functions.items():
            if isinstance(f, Function):
                out, n = rewrite_function(f, taken, added)
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

__all__ = ["IntegerKernels", "match_kernel", "rewrite_function"]
