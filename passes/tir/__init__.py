"""TIR passes (PrimFuncPasses), registered with ``irkernel.transform`` on import.

``ParallelizeNests``, ``Simplify``, ``FlattenBuffer``, ``MergeLoops``, ``UnrollLoop`` (config
``tir.UnrollLoop``), ``VectorizeLoop`` and ``LowerParallel``, plus the codegen
config ``tir.fast_math``. Each module also exposes the plain function
(``simplify(func) -> PrimFunc``, returning its input when nothing changes).
The ``LowerTIR`` pipeline (``passes/pipelines.py``) is the order ``runtime.build``
runs them in. Imports irkernel only (never runtime).
"""

from __future__ import annotations

from irkernel import transform
from passes.tir.flatten_buffer import FlattenBuffer, flatten_buffer
from passes.tir.lower_parallel import LowerParallel, lower_parallel
from passes.tir.merge_loops import MergeLoops, merge_loops
from passes.tir.parallelize import ParallelizeNests, parallelize_nests
from passes.tir.simplify import Simplify, simplify
from passes.tir.unroll_loop import UnrollLoop, UnrollLoopConfig, unroll_loop
from passes.tir.vectorize_loop import VectorizeLoop, vectorize_loop

#: Codegen option: ``fast`` flags on float operations (reassociation, contraction, no NaN/inf
#: guarantees). Off by default, so results are IEEE and reductions keep their order.
FAST_MATH = "tir.fast_math"
transform.register_pass_config(FAST_MATH, bool, False,
                               description="LLVM fast-math flags on float operations in "
                                           "compiled PrimFuncs")

__all__ = ["FAST_MATH", "FlattenBuffer", "LowerParallel", "MergeLoops", "ParallelizeNests",
           "Simplify", "UnrollLoop", "UnrollLoopConfig", "VectorizeLoop", "flatten_buffer",
           "lower_parallel", "merge_loops", "parallelize_nests", "simplify", "unroll_loop",
           "vectorize_loop"]
