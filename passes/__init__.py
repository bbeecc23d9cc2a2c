"""Transformations over irkernel IR. Imports irkernel only (never runtime).

Importing this package registers every built-in pass with
``irkernel.transform.register_pass`` (and so fills the named pipelines
``O1``..``O3``), and the pipelines of ``runtime.build`` (``passes/pipelines.py``).
"""

from __future__ import annotations

from irkernel import transform
from passes import tir as tir  # registers the TIR passes: Simplify, FlattenBuffer, ...
from passes.cse import EliminateCommonSubexpr
from passes.dead_code import DeadCodeElimination
from passes.fold_batch_norm import FoldBatchNorm
from passes.fold_constant import FoldConstant
from passes.fuse_ops import FuseOps
from passes.fuse_tir import FuseTIR
from passes.integer_kernels import IntegerKernels
from passes.legalize_ops import LegalizeOps
from passes.pack_weights import PackConstantWeights
from passes.pipelines import GRAPH_LOWERING, LOWER_TIR
from passes.share_elementwise import ShareElementwiseKernels
from passes.simplify_arith import SimplifyArith
from passes.split_concat import SplitConcat


def O2() -> transform.Pass:
    """FoldConstant, SimplifyArith, EliminateCommonSubexpr, DeadCodeElimination."""
    return transform.get_pass("O2")


def fixpoint(*passes: transform.Pass) -> transform.Pass:
    """Repeat ``passes`` (default: O2's passes) until none changes the module."""
    if not passes:
        passes = tuple(transform.get_pass(n) for n in transform.PIPELINES["O2"])
    return transform.FixedPoint(list(passes))


__all__ = [
    "GRAPH_LOWERING",
    "LOWER_TIR",
    "O2",
    "DeadCodeElimination",
    "EliminateCommonSubexpr",
    "FoldBatchNorm",
    "FoldConstant",
    "FuseOps",
    "FuseTIR",
    "IntegerKernels",
    "LegalizeOps",
    "PackConstantWeights",
    "ShareElementwiseKernels",
    "SimplifyArith",
    "SplitConcat",
    "fixpoint",
]
