"""IntegerMatmul: a matmul of 8-bit integers held in floats becomes an int32 kernel.

The ONNX frontend imports MatMulInteger, QLinearMatMul and QGemm
(``irkernel/frontend/onnx/converters/qlinear.py``) as an exact float matmul of
integers: ``matmul(astype(x) - zx, C)`` with ``x`` uint8 or int8, ``zx`` a constant
and ``C`` the constant weights minus their zero points, followed by the
requantization (scale, round half to even, zero point, saturate) or ``astype(int32)``.
This pass finds that shape (one Numba sweep; Python once per match) and replaces the
matmul by a ``call_tir`` to ``passes.topi.int_matmul``: the bytes of ``x`` times
int8 weights packed here, at build time, in int32 accumulators (VNNI ``vpdpbusd``
where the CPU has it), converted to the matmul's float dtype in the kernel's store.
The requantization ops stay graph ops; FuseOps folds them into that store (the
kernel is ``OUT_EWISE_FUSABLE``), so they run on the accumulators in registers.

**Bit-exact by construction.** A match is taken only when the float matmul it replaces
is exact: ``C`` and ``zx`` are integers, each column of ``C`` spans at most 256 values
(so it is int8 after a shift), and ``max |x - zx| * max_j sum_k |C[k, j]|`` is below
2**31 and below the float's exact-integer limit (2**24 for float32, 2**53 for
float64; the frontend picks float64 past 2**24). Then every partial sum, in float or
int32 and in any order, is the same integer, and the output bits equal the
interpreter's and onnxruntime's.

The weight, the ``astype`` and the ``subtract`` are dropped when the matmul was their
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
from passes.topi.int_matmul import column_offsets, dot_lanes, int_matmul, pack_weights
from passes.topi.vector import current_target

#: Exact-integer limits of the float dtypes, and int32's.
_EXACT = {FLOAT32: 2**24, FLOAT64: 2**53}
_INT32_LIMIT = 2**31


@kernel
def match_kernel(kind, a0, a1, dtype, op_matmul, op_astype, op_subtract, op_const,
                 matches):
    """Rows ``(matmul, x, astype, subtract or -1, zero point const or -1, weight const)``
    of every candidate (module docstring); returns their count. Values and shapes are
    checked by the caller, once per match."""
    found = 0
    for i in range(kind.shape[0]):
        if kind[i] != op_matmul or not (dtype[i] == FLOAT32 or dtype[i] == FLOAT64):
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


def _accept(func: Function, match: list[int], lanes: int, target: Any) -> _Rewrite | None:
    """The rewrite of one candidate, or None when it is not exact (module docstring)."""
    row, x, _, sub, zp, w = match
    shapes, pool = func.shapes, func.consts
    a_shape = shapes[int(func.shape_id[x])]
    c_float = pool.value(int(func.a0[w]), shapes)
    if len(a_shape) < 2 or c_float.ndim != 2 or c_float.shape[1] < 2:
        return None
    c = _integer(np.asarray(c_float, np.float64))
    zx = 0
    if zp >= 0:
        z = _integer(np.asarray(pool.value(int(func.a0[zp]), shapes), np.float64))
        if z is None or z.size != 1:
            return None
        zx = int(z.reshape(-1)[0])
    offsets = None if c is None else column_offsets(c)
    if offsets is None:
        return None
    a_dtype = DTYPE_NAMES[int(func.dtype[x])]
    lo, hi = (0, 255) if a_dtype == "uint8" else (-128, 127)
    bound = max(abs(hi - zx), abs(lo - zx)) * int(np.abs(c).sum(axis=0).max(initial=0))
    code = int(func.dtype[row])
    if bound >= min(_INT32_LIMIT, _EXACT[code]):
        return None
    zu = zx + (128 if a_dtype == "int8" else 0)  # int8 x is read as uint8 x + 128
    n = c.shape[1]
    # wrapping int32 arithmetic is exact mod 2**32, and the true result is below 2**31
    corr = (-zu * c.sum(axis=0)).astype(np.int64)
    consts = [pack_weights(c, offsets, lanes), _wrap32(corr)]
    with_rowsum = bool(offsets.any())
    if with_rowsum:
        consts.append(_wrap32(offsets))
    odt = DTYPE_NAMES[code]
    prim = int_matmul(a_shape, a_dtype, n, odt, lanes, with_rowsum, target)
    prim = prim.with_attr("op_name", "int_matmul").with_attr("op_pattern",
                                                             ops.OUT_EWISE_FUSABLE)
    return _Rewrite(row, x, consts, prim, odt, (*a_shape[:-1], n))


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((v + 2**31) % 2**32 - 2**31).astype(np.int32)


def rewrite_function(func: Function, taken: set[str], added: dict[str, PrimFunc],
                     ) -> tuple[Function, int]:
    """``func`` with every exact 8-bit matmul calling an integer kernel (new PrimFuncs
    go to ``added``, named apart from ``taken``); (new function or ``func``, count)."""
    op_matmul = ops.get_op("matmul").opcode
    n_mm = int(np.count_nonzero(func.kind == op_matmul))
    if not n_mm:
        return func, 0
    matches = np.empty((n_mm, 6), np.int32)
    found = match_kernel(func.kind, func.a0, func.a1, func.dtype, op_matmul,
                         ops.get_op("astype").opcode, ops.get_op("subtract").opcode,
                         ops.OP_CONST, matches)
    if not found:
        return func, 0
    target = current_target()
    lanes = dot_lanes(target)
    rewrites = [r for r in (_accept(func, m, lanes, target)
                            for m in matches[:found].tolist()) if r is not None]
    if not rewrites:
        return func, 0
    by_digest: dict[bytes, str] = {}
    names = []
    for r in rewrites:
        digest = r.prim.structural_digest()
        name = by_digest.get(digest)
        if name is None:
            base = f"int_matmul_{'x'.join(map(str, r.out_shape))}"
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
    return rebuild(out, keep=keep, pass_name="IntegerMatmul"), len(rewrites)


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


def IntegerMatmul() -> transform.ModulePass:
    """Exact 8-bit matmuls (module docstring) call integer kernels (opt level 2).

    Returns
    -------
    ModulePass
        Reports the statistic ``rewritten``.
    """

    def integer_matmul(mod: IRModule, ctx: transform.PassContext) -> IRModule:
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

    return transform.module_pass(integer_matmul, opt_level=2, name="IntegerMatmul")


transform.register_pass("IntegerMatmul", IntegerMatmul)

__all__ = ["IntegerMatmul", "match_kernel", "rewrite_function"]
