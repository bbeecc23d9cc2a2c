"""PackConstantWeights: constant operands a kernel reads in its own order are packed once, here.

Why a pass of its own, after LegalizeOps: which operand a kernel would rather read packed,
and in what order, is the template's business (its register tile decides the order), and a
template sees only types, never values. So the template marks its PrimFunc ``packable``
(``passes/topi/packing.py``: packer name, operand index, key), and this pass, seeing the
graph, finds the calls whose operand at that index is a constant: per distinct (constant,
packer key) it calls the packer once (NumPy), adds the packed array as a new constant of
the function and points the call at it and at the packer's PrimFunc that reads it. The
old constant, once nothing reads it, goes with the next DeadCodeElimination. The packed
constants are ordinary constants, so a saved executable and the cache keep them: a build
packs each weight once, a load from the cache not at all. It runs before FuseOps, so an
epilogue (bias, GELU) fuses into the packed kernel's store as into the unpacked one's.

Used by the matmul's B (``passes/topi/matmul_packed.py``) and by 1x1 convs on small maps,
whose filters are packed by output-channel vectors (``passes/topi/conv_channels.py``);
other filter orders (channel-blocked, or Winograd's transformed ``U``) fit the same
protocol: a ``packable`` attribute on the conv's PrimFunc and a registered packer.

Scaling: NumPy over the ``call_tir`` rows; Python once per distinct callee and once per
weight packed, never per node. Imports irkernel and passes.topi only.
"""

from __future__ import annotations

import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.distinct import sorted_distinct
from irkernel.ir.function import Function
from irkernel.ir.ids import ENC_BINARY, ENC_UNARY
from irkernel.ir.module import IRModule
from irkernel.tir.function import Attrs, PrimFunc
from passes.topi import conv_channels as _conv_channels  # noqa: F401  (registers its packer)
from passes.topi import matmul_packed as _matmul_packed  # noqa: F401  (registers its packer)
from passes.topi.packing import PACKABLE, packer


def _packable_rows(func: Function, prims: dict[str, PrimFunc]
                   ) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """(call rows, their packable operand nodes, callee of each attr id) for the calls of a
    packable PrimFunc whose operand at the packed index is a constant."""
    calls = np.flatnonzero(func.kind == ops.OP_CALL_TIR)
    callee: dict[int, str] = {}
    slot_of: dict[int, int] = {}
    for aid in sorted_distinct(func.attr_id[calls]).tolist():  # one step per distinct record
        name = func.attr_table.as_dict(aid)["callee"]
        prim = prims.get(name)
        spec = prim.attrs.get(PACKABLE) if prim is not None else None
        if spec is not None:
            callee[aid], slot_of[aid] = name, int(spec[1])
    if not slot_of:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), callee
    slots = np.full(int(func.attr_id.max()) + 1, -1, np.int64)
    slots[list(slot_of)] = list(slot_of.values())
    calls = calls[slots[func.attr_id[calls]] >= 0]
    slot = slots[func.attr_id[calls]]
    calls, slot = calls[slot < func.a1[calls]], slot[slot < func.a1[calls]]
    operand = func.extra[func.a0[calls].astype(np.int64) + slot].astype(np.int64)
    const = func.kind[operand] == ops.OP_CONST
    return calls[const], operand[const], callee


def pack_function(func: Function, prims: dict[str, PrimFunc], taken: set[str],
                  added: dict[str, PrimFunc]) -> tuple[Function, int]:
    """``func`` with its packable calls reading packed constants; (function, weights
    packed). New PrimFuncs go to ``added`` (names not in ``taken``, which grows)."""
    rows, operand, callee = _packable_rows(func, prims)
    if not len(rows):
        return func, 0
    aids = func.attr_id[rows].astype(np.int64)
    pairs, first, inverse = np.unique(np.stack([operand, aids], 1), axis=0,
                                      return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    values, new_records = [], {}
    for node, aid in pairs.tolist():  # one step per weight packed
        spec = prims[callee[aid]].attrs[PACKABLE]
        values.append(packer(spec[0]).pack(
            func.consts.value(int(func.a0[node]), func.shapes), tuple(spec[2:])))
        if aid not in new_records:
            new_records[aid] = _variant_record(func, aid, prims[callee[aid]], taken, added)
    shapes, shape_ids = func.shapes.extended([v.shape for v in values])
    consts, const_ids = func.consts.with_tensors(values, shape_ids)
    attr_table, new_ids = func.attr_table.extended(list(new_records.values()))
    record_of = dict(zip(new_records, new_ids, strict=True))
    shift = len(values)
    enc = ops.op_arrays().encoding[func.kind]
    a0, a1 = func.a0.astype(np.int64), func.a1.astype(np.int64)
    a0[(enc == ENC_UNARY) | (enc == ENC_BINARY)] += shift
    a1[enc == ENC_BINARY] += shift
    extra = func.extra.astype(np.int64) + shift
    slots = np.array([int(prims[callee[int(aid)]].attrs[PACKABLE][1]) for aid in aids[first]])
    extra[func.a0[rows].astype(np.int64) + slots[inverse]] = inverse  # new nodes 0..shift-1
    attr_id = func.attr_id.copy()
    attr_id[rows] = np.array([record_of[int(a)] for a in pairs[:, 1]], np.int32)[inverse]
    out = Function(
        kind=np.concatenate([np.full(shift, ops.OP_CONST, np.int16), func.kind]),
        a0=np.concatenate([const_ids, a0]).astype(np.int32),
        a1=np.concatenate([np.full(shift, -1, np.int64), a1]).astype(np.int32),
        dtype=np.concatenate([func.dtype[operand[first]], func.dtype]),
        shape_id=np.concatenate([np.asarray(shape_ids, np.int32), func.shape_id]),
        attr_id=np.concatenate([np.zeros(shift, np.int32), attr_id]),
        extra=extra.astype(np.int32), params=func.params + shift,
        outputs=func.outputs + shift, param_names=func.param_names, shapes=shapes,
        attr_table=attr_table, consts=consts, attrs=func.attrs)
    return out, shift


def _variant_record(func: Function, aid: int, prim: PrimFunc, taken: set[str],
                    added: dict[str, PrimFunc]) -> tuple:
    """The call record of the packed form of ``prim`` (added under a fresh name once)."""
    record = func.attr_table.as_dict(aid)
    spec = prim.attrs[PACKABLE]
    variant = packer(spec[0]).variant(tuple(spec[2:]))
    attrs = {**{k: v for k, v in prim.attrs.items() if k != PACKABLE}, **variant.attrs}
    variant = variant.replace(attrs=Attrs(attrs))
    name = next((n for n, p in added.items() if p == variant), None)
    if name is None:
        base, k = f"{record['callee']}_packed", 0
        name = base
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        added[name] = variant
    return ops.get_op(ops.OP_CALL_TIR).normalize_attrs({**record, "callee": name})


def pack_module(mod: IRModule, ctx: transform.PassContext | None = None) -> IRModule:
    prims = {n: f for n, f in mod.functions.items() if isinstance(f, PrimFunc)}
    if not any(PACKABLE in p.attrs for p in prims.values()):
        return mod
    taken, added = set(mod.functions), {}
    changed, total = {}, 0
    for fname, func in mod.functions.items():
        if isinstance(func, Function):
            out, n = pack_function(func, prims, taken, added)
            if n:
                changed[fname], total = out, total + n
    if not changed:
        return mod
    if ctx is not None:
        ctx.stat("weights_packed", total)
    return IRModule({**mod.functions, **changed, **added}, mod.attrs)


def PackConstantWeights() -> transform.ModulePass:
    """Pack the constant operands of ``packable`` kernels at build time (opt 0: the packed
    and unpacked kernels compute the same values; reports ``weights_packed``)."""
    def pack_constant_weights(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        return pack_module(mod, ctx)
    return transform.module_pass(pack_constant_weights, opt_level=0,
                                 name="PackConstantWeights")


transform.register_pass("PackConstantWeights", PackConstantWeights)

__all__ = ["PackConstantWeights", "pack_function", "pack_module"]
