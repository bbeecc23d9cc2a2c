"""Transposes feeding a matmul: found as columns, so LegalizeOps can read through them.

Exporters write ``x @ w.T`` and attention's ``q @ k.T`` as a ``permute_dims`` that swaps
the last two axes, then a ``matmul``. Lowered as written, the transpose is a kernel of
its own (a pass over B that writes a copy) and the matmul then packs the copy: two
passes where one would do. LegalizeOps asks two things of this module:

* :func:`swapped_sources`: for each matmul row, the node each operand transposes (the
  input of a ``permute_dims`` that swaps exactly the last two axes), or -1. When the
  scheduled template takes the form (``passes.topi.matmul.scheduled_transposed_matmul``),
  the call reads that node directly and the transpose, unused, is dropped;
* :func:`materialize_constant_permutes`: a ``permute_dims`` of a constant becomes a
  constant (its value transposed at build time), at any size (and likewise
  :func:`materialize_constant_widenings` for a float16/bfloat16 weight's widening). FoldConstant stops at
  ``FoldConstant.max_elements`` (a guard against folds that *grow* a constant, such as
  ``broadcast_to``); a permutation never grows it, and a weight stored ``(out, in)``
  (ONNX ``Gemm`` with ``transB``) is otherwise transposed again on every call.

Python runs once per distinct attribute record, never per node. Imports irkernel only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from irkernel.ir import narrow, ops
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES, FLOAT32, NARROW_FLOAT_DTYPES
from irkernel.ir.rebuild import rebuild


def _swaps_last_two(axes: object, rank: int) -> bool:
    """Whether ``permute_dims`` axes (None: reversed) swap the last two of ``rank`` axes
    and keep every other in place."""
    if rank < 2:
        return False
    full = tuple(range(rank - 1, -1, -1)) if axes is None else \
        tuple(int(a) % rank for a in axes)  # type: ignore[union-attr]
    return full == (*range(rank - 2), rank - 1, rank - 2)


def swapped_sources(func: Function, rows: np.ndarray) -> np.ndarray:
    """int64[len(rows), 2]: for matmul rows, the input of a last-two-axes swap that is
    operand 0 / operand 1, else -1 (also for every other row)."""
    sources = np.full((len(rows), 2), -1, np.int64)
    is_matmul = np.nonzero(func.kind[rows] == ops.OP_MATMUL)[0]
    if not len(is_matmul):
        return sources
    ndim = func.shapes.ndim
    for slot, column in enumerate((func.a0, func.a1)):
        operand = column[rows[is_matmul]]
        perm = np.nonzero(func.kind[operand] == ops.OP_PERMUTE_DIMS)[0]
        if not len(perm):
            continue
        # (attr_id, rank) pairs decide; one Python step per distinct pair
        attr_ids = func.attr_id[operand[perm]].astype(np.int64)
        ranks = ndim[func.shape_id[operand[perm]]].astype(np.int64)
        pairs, inverse = np.unique(np.stack([attr_ids, ranks], 1), axis=0, return_inverse=True)
        swaps = np.array([_swaps_last_two(func.attr_table.as_dict(int(a)).get("axes"), int(r))
                          for a, r in pairs.tolist()], bool)
        hit = perm[swaps[inverse.reshape(-1)]]
        sources[is_matmul[hit], slot] = func.a0[operand[hit]]
    return sources


def materialize_constant_permutes(func: Function) -> Function:
    """``func`` with every ``permute_dims`` of a constant rewritten into a constant (the
    transposed value); the constants no longer read are left to DeadCodeElimination."""
    def transposed(source: np.ndarray, node: int) -> np.ndarray:
        axes = func.attr_table.as_dict(int(func.attr_id[node])).get("axes")
        return np.ascontiguousarray(np.transpose(source, axes))
    return _materialize(func, ops.OP_PERMUTE_DIMS, transposed)


def materialize_constant_widenings(func: Function) -> Function:
    """``func`` with every ``astype`` of a float16/bfloat16 constant to float32 (what
    ``widen_narrow_floats`` puts before each op reading a narrow weight) rewritten into
    the float32 constant, at any size: the widening is exact, and a float16 model's
    weights were otherwise widened again on every call (a 512 x 1000 classifier: half a
    million elements per run)."""
    narrow_codes = np.zeros(len(DTYPE_NAMES), bool)
    narrow_codes[list(NARROW_FLOAT_DTYPES)] = True

    def widened(source: np.ndarray, node: int) -> np.ndarray:
        code = int(func.dtype[func.a0[node]])
        return np.ascontiguousarray(narrow.widen(source, code), np.float32)

    return _materialize(func, ops.OP_ASTYPE, widened,
                        lambda nodes: (func.dtype[nodes] == FLOAT32)
                        & narrow_codes[func.dtype[func.a0[nodes]]])


def _materialize(func: Function, opcode: int,
                 value_of: Callable[[np.ndarray, int], np.ndarray],
                 keep: Callable[[np.ndarray], np.ndarray] | None = None) -> Function:
    """``func`` with the ``opcode`` nodes whose operand is a constant (and which ``keep``
    selects) rewritten into constants of ``value_of(operand value, node)``; one-element
    ones are left to FoldConstant, which folds those at any size."""
    nodes = np.nonzero(func.kind == opcode)[0]
    nodes = nodes[(func.kind[func.a0[nodes]] == ops.OP_CONST)
                  & (func.shapes.size[func.shape_id[nodes]] > 1)]
    if keep is not None and len(nodes):
        nodes = nodes[keep(nodes)]
    if not len(nodes):
        return func
    values = [value_of(func.consts.value(int(func.a0[func.a0[node]]), func.shapes), node)
              for node in nodes.tolist()]  # one step per tensor constant rewritten
    consts, const_ids = func.consts.with_tensors(values, func.shape_id[nodes].tolist())
    kind, a0, attr_id = func.kind.copy(), func.a0.copy(), func.attr_id.copy()
    kind[nodes] = ops.OP_CONST
    a0[nodes] = const_ids
    attr_id[nodes] = 0
    return rebuild(func, kind=kind, a0=a0, attr_id=attr_id, consts=consts,
                   pass_name="LegalizeOps")


__all__ = ["materialize_constant_permutes", "materialize_constant_widenings", "swapped_sources"]
