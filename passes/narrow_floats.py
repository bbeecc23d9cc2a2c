"""float16/bfloat16 ops become float32 ops between casts: LegalizeOps' first step.

The narrow-float rule (``irkernel.ir.narrow``): an op on float16/bfloat16 values
computes in float32 and rounds its result once. :func:`widen_narrow_floats`
writes that rule into the graph, so that no template ever computes in a narrow
dtype: every op node (``astype`` and the leaves aside) that reads or makes a
narrow float now reads ``astype(x, float32)`` of each narrow operand, computes
in float32, and its narrow result is ``astype(.., float16)`` of the float32 one.
FuseOps then fuses the casts into their neighbours, so the kernels load and
store the narrow dtype and compute in float32 registers, with the interpreter's
bits (a narrow value read by several ops is widened once, right after it).

Layout (one whole-array pass, no Python per node): node ``v`` becomes up to three
rows, in order: ``v`` itself (its result dtype float32 when it was narrow), the
rounding ``astype`` of its result, and the widening ``astype`` that its wrapped
consumers read. Alternatives considered: casts inside each template (the
templates that accumulate into their output buffer would round at every step)
and a narrow variant of every template (one per op and dtype).
Imports ``irkernel.ir`` only.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import (
    DTYPE_NAMES,
    ENC_BINARY,
    ENC_VARIADIC,
    FLOAT32,
    NARROW_FLOAT_DTYPES,
    NONE,
)
from irkernel.ir.operands import operand_csr
from irkernel.ir.pools import AttrTable

_LEAVES = (ops.OP_PARAM, ops.OP_CONST, ops.OP_CALL_FUNC, ops.OP_CALL_TIR, ops.OP_ASTYPE)


def widen_narrow_floats(func: Function) -> Function:
    """``func`` with its float16/bfloat16 ops computing in float32 (see the module);
    ``func`` itself when it has none."""
    code_is_narrow = np.zeros(len(DTYPE_NAMES), bool)
    code_is_narrow[list(NARROW_FLOAT_DTYPES)] = True
    narrow = code_is_narrow[func.dtype]
    if not narrow.any():
        return func
    n = func.num_nodes
    csr = operand_csr(func)
    counts = np.diff(csr.ptr)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    operand_narrow = narrow[csr.ids]
    is_op = ~np.isin(func.kind, np.array(_LEAVES, np.int16))
    reads_narrow = np.zeros(n, bool)
    reads_narrow[owner[operand_narrow]] = True
    wrapped = is_op & (narrow | reads_narrow)
    if not wrapped.any():
        return func
    rounds = wrapped & narrow  # its result is rounded by a new astype row
    widened = np.zeros(n, bool)  # a wrapped op reads it: a widening astype row follows
    widened[csr.ids[operand_narrow & wrapped[owner]]] = True
    rows = 1 + rounds.astype(np.int64) + widened
    base = np.zeros(n + 1, np.int64)
    np.cumsum(rows, out=base[1:])
    at = base[:-1]
    value_id = at + rounds  # what outputs and the other consumers read
    wide_id = value_id + widened  # what wrapped consumers read of a narrow operand
    mapped = np.where(wrapped[owner] & operand_narrow, wide_id[csr.ids],
                      value_id[csr.ids]).astype(np.int32)

    m = int(base[-1])
    kind = np.full(m, ops.OP_ASTYPE, np.int16)
    a0 = np.empty(m, np.int32)
    a1 = np.full(m, NONE, np.int32)
    dtype = np.empty(m, np.int8)
    shape_id = np.empty(m, np.int32)
    attr_id = np.empty(m, np.int32)
    kind[at] = func.kind
    dtype[at] = np.where(rounds, FLOAT32, func.dtype)
    shape_id[at] = func.shape_id
    attr_id[at] = func.attr_id
    enc = ops.op_arrays().encoding[func.kind]
    fixed = (enc != ENC_VARIADIC) & (counts > 0)
    a0[at] = func.a0  # params and consts keep their position / const id
    a1[at] = func.a1
    a0[at[fixed]] = mapped[csr.ptr[:-1][fixed]]
    binary = enc == ENC_BINARY
    a1[at[binary]] = mapped[csr.ptr[:-1][binary] + 1]
    variadic = enc == ENC_VARIADIC
    extra = mapped[variadic[owner]]  # the variadic rows' lists, back to back, in node order
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(np.where(variadic, counts, 0), out=starts[1:])
    a0[at[variadic]] = starts[:-1][variadic]

    f32_attr, attr_by_code, attr_table = _astype_attrs(func)
    r = np.flatnonzero(rounds)  # rounding rows: astype(the float32 result, the narrow dtype)
    a0[at[r] + 1] = at[r]
    dtype[at[r] + 1] = func.dtype[r]
    shape_id[at[r] + 1] = func.shape_id[r]
    attr_id[at[r] + 1] = attr_by_code[func.dtype[r]]
    w = np.flatnonzero(widened)  # widening rows: astype(the narrow value, float32)
    a0[wide_id[w]] = value_id[w]
    dtype[wide_id[w]] = FLOAT32
    shape_id[wide_id[w]] = func.shape_id[w]
    attr_id[wide_id[w]] = f32_attr
    return Function(kind=kind, a0=a0, a1=a1, dtype=dtype, shape_id=shape_id, attr_id=attr_id,
                    extra=extra, params=value_id[func.params].astype(np.int32),
                    outputs=value_id[func.outputs].astype(np.int32),
                    param_names=func.param_names, shapes=func.shapes, attr_table=attr_table,
                    consts=func.consts, attrs=func.attrs)


def _astype_attrs(func: Function) -> tuple[int, np.ndarray, AttrTable]:
    """(attr id of astype to float32, attr id of astype to each dtype code, the table)."""
    astype = ops.get_op(ops.OP_ASTYPE)
    records = [astype.normalize_attrs({"dtype": name}) for name in DTYPE_NAMES]
    table, ids = func.attr_table.extended(records)
    by_code = np.asarray(ids, np.int32)
    return int(by_code[FLOAT32]), by_code, table


__all__ = ["widen_narrow_floats"]
