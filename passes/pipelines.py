"""The pipelines ``runtime.build`` runs, registered by name: ``GraphLowering`` and ``LowerTIR``.

They are made of this package's passes, so they are registered here (beside
the passes, through the ``irkernel.passes`` entry point), as text: one place
says what a build runs, ``transform.pipeline_text_of(name)`` prints it, and the
config ``pipeline.<name>`` replaces it for one context (say, to drop
``SplitConcat`` or add a pass of a plugin). The runtime adds nothing of its
own between these passes: what it lowers and what a kernel key digests is
this text (``runtime/code_digest.py``).
Imports irkernel only (never runtime).
"""

from __future__ import annotations

from irkernel import transform

#: Graph modules, before their kernels compile: graph simplification, ``IntegerKernels``
#: (exact 8-bit matmuls -> int32 kernels over packed weights), ``LegalizeOps``
#: (graph ops -> ``call_tir``; ``runtime.build`` gives it ``generic_max_elements`` from
#: its config when the text names it bare), ``PackConstantWeights`` (constant weights in
#: the order their kernels read them), ``FuseOps`` + ``FuseTIR`` (fused PrimFuncs)
#: and ``DeadCodeElimination`` (drops unused PrimFuncs).
GRAPH_LOWERING = ("FoldConstant,FoldBatchNorm,SimplifyArith,EliminateCommonSubexpr,"
                  "DeadCodeElimination,SplitConcat,IntegerKernels,LegalizeOps,PackConstantWeights,"
                  "FuseOps,FuseTIR,ShareElementwiseKernels,"
                  "DeadCodeElimination")

#: Each PrimFunc, before LLVM: independent outer loops of graph lowering's kernels
#: parallel, then parallel loops made launchable (outlining needs them final), flat
#: indices so vector ramps come out contiguous, contiguous loop pairs merged (no short
#: rows for LLVM to tail-fold into masked stores), vector code before unrolling (unrolled
#: copies of vector statements), then cleanup.
LOWER_TIR = ("ParallelizeNests,LowerParallel,FlattenBuffer,MergeLoops,Simplify,VectorizeLoop,"
             "UnrollLoop,Simplify")

transform.register_pipeline("GraphLowering", GRAPH_LOWERING,
                            description="runtime.build's lowering of graph functions")
transform.register_pipeline("LowerTIR", LOWER_TIR,
                            description="runtime.build's lowering of each PrimFunc")

__all__ = ["GRAPH_LOWERING", "LOWER_TIR"]
