"""SplitConcat: a concat of many tensors becomes a tree of concats of at most ``max_operands``.

Why: a kernel's code grows with its operand count, and LLVM's loop passes grow
faster than linearly with the loops in one function (a concat of 1,000 parts
took seconds to optimize); a concat of 2,000 tensors of distinct lengths was
one kernel of 2,001 arguments. As a tree of fan-in ``max_operands`` (default
8) every concat kernel is small, small ones run on the shape-generic concat
kernel, and the large ones keep the fusable select form. The cost is one more
copy of the data per tree level (``ceil(log8(n))`` levels; 4 for 2,000 parts).

How: Python runs once per *large* concat (they are few) to plan its tree; the
new nodes go right before the concat they replace (their operands precede
that concat, so topological order holds), and every column is spliced and
renumbered with whole-array NumPy, as ``rebuild`` does for removals.
Run by ``runtime.build`` before LegalizeOps. Opt level 0 (it changes code
shape, not semantics: concat is associative).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import ENC_BINARY, ENC_UNARY
from irkernel.ir.module import IRModule

_MAX_OPERANDS = 8


def _plan(func: Function, node: int, fan_in: int, shapes: list[tuple[int, ...]]
          ) -> tuple[list[tuple[list[int], tuple[int, ...]]], list[int]]:
    """The new concat nodes of one large concat, in order, as (operand refs, shape), and
    the operand refs of the original node. A ref ``r >= 0`` is an existing node, ``r < 0``
    the new node ``-r - 1`` of this plan."""
    axis = ops.normalize_axes((int(func.node_attrs(node)["axis"]),),
                              len(shapes[0]))[0]
    refs = [int(v) for v in func.operands(node)]
    ref_shape = dict(zip(refs, shapes, strict=True))
    new: list[tuple[list[int], tuple[int, ...]]] = []
    while len(refs) > fan_in:
        level = []
        for start in range(0, len(refs), fan_in):
            group = refs[start:start + fan_in]
            if len(group) == 1:
                level.append(group[0])
                continue
            first = ref_shape[group[0]]
            shape = (*first[:axis], sum(ref_shape[r][axis] for r in group), *first[axis + 1:])
            new.append((group, shape))
            ref = -len(new)
            ref_shape[ref] = shape
            level.append(ref)
        refs = level
    return new, refs


def split_concats(func: Function, fan_in: int = _MAX_OPERANDS) -> tuple[Function, int]:
    """``func`` with every concat of more than ``fan_in`` operands split into a tree."""
    big = np.nonzero((func.kind == ops.OP_CONCAT) & (func.a1 > fan_in))[0]
    if not len(big):
        return func, 0
    plans = []
    for node in big.tolist():
        operand_shapes = [func.shapes[int(func.shape_id[v])] for v in func.operands(node)]
        plans.append(_plan(func, node, fan_in, operand_shapes))
    n_new = np.array([len(new) for new, _ in plans], np.int64)
    inserted_before = np.zeros(func.num_nodes, np.int64)
    inserted_before[big] = n_new
    old2new = (np.arange(func.num_nodes, dtype=np.int64) + np.cumsum(inserted_before))
    total = func.num_nodes + int(n_new.sum())
    # columns of the spliced function: old rows at old2new, new rows before each big concat
    kind = np.full(total, ops.OP_CONCAT, np.int16)
    a0 = np.empty(total, np.int32)
    a1 = np.empty(total, np.int32)
    dtype = np.empty(total, np.int8)
    shape_id = np.empty(total, np.int32)
    attr_id = np.empty(total, np.int32)
    for col, src in ((kind, func.kind), (a0, func.a0), (a1, func.a1), (dtype, func.dtype),
                     (shape_id, func.shape_id), (attr_id, func.attr_id)):
        col[old2new] = src
    # fixed-arity operands are node ids in a0/a1: renumbered (variadic a0 is an offset into
    # extra, whose old part keeps its positions; const/param a0 is a pool/param index)
    enc = ops.op_arrays().encoding[func.kind]
    unary = (enc == ENC_UNARY) | (enc == ENC_BINARY)
    binary = enc == ENC_BINARY
    a0[old2new[unary]] = old2new[func.a0[unary]]
    a1[old2new[binary]] = old2new[func.a1[binary]]
    shapes, new_shape_ids = func.shapes.extended(
        [shape for new, _ in plans for _, shape in new])
    extra_parts = [old2new[func.extra].astype(np.int32)]
    extra_len = len(func.extra)
    shape_iter = iter(new_shape_ids)
    for node, (new, top) in zip(big.tolist(), plans, strict=True):
        first_new = int(old2new[node]) - len(new)

        def resolve(refs: list[int], first: int = first_new) -> np.ndarray:
            return np.array([old2new[r] if r >= 0 else first + (-r - 1) for r in refs],
                            np.int32)

        for k, (refs, _) in enumerate(new):
            row = first_new + k
            a0[row], a1[row] = extra_len, len(refs)
            dtype[row], shape_id[row] = func.dtype[node], next(shape_iter)
            attr_id[row] = func.attr_id[node]
            extra_parts.append(resolve(refs))
            extra_len += len(refs)
        row = int(old2new[node])
        a0[row], a1[row] = extra_len, len(top)
        extra_parts.append(resolve(top))
        extra_len += len(top)
    out = replace(func, kind=kind, a0=a0, a1=a1, dtype=dtype, shape_id=shape_id,
                  attr_id=attr_id, extra=np.concatenate(extra_parts),
                  params=old2new[func.params].astype(np.int32),
                  outputs=old2new[func.outputs].astype(np.int32), shapes=shapes)
    return out, int(n_new.sum())


def SplitConcat(max_operands: int = _MAX_OPERANDS) -> transform.FunctionPass:
    """Split concats of more than ``max_operands`` tensors into a tree (opt level 0).

    Returns
    -------
    FunctionPass
        Reports ``concats_added``; returns its input when no concat is that large.
    """
    if not isinstance(max_operands, int) or isinstance(max_operands, bool) or max_operands < 2:
        raise ValueError(f"SplitConcat: max_operands must be an int >= 2, got {max_operands!r}")

    def split_concat(func: Function, mod: IRModule, ctx: transform.PassContext) -> Function:
        del mod
        out, added = split_concats(func, max_operands)
        if added:
            ctx.stat("concats_added", added)
        return out

    return transform.function_pass(split_concat, opt_level=0, name="SplitConcat")


transform.register_pass("SplitConcat", SplitConcat)

__all__ = ["SplitConcat", "split_concats"]
