"""Op templates (TVM's TOPI): the TIR PrimFunc of each built-in graph op.

``templates`` holds one template per op (elementwise, reductions, layout ops,
concat, matmul dispatch) and installs them, with those of ``movement``
(strided_slice, take, pad, scatter_nd) and ``nn`` (conv, conv_transpose,
max_pool, avg_pool, lrn) and ``selection`` (topk_indices), as the ops' ``legalize`` hooks; ``matmul`` is the
scheduled float matmul, ``conv`` the scheduled float32 convs and max pool. LegalizeOps (``passes.legalize_ops``)
is their only user, which is why they live here, beside it, and not with the
op table: the op table is the IR's bottom layer and must not import TIR
construction. Imports ``irkernel.ir`` and ``irkernel.tir`` only.
"""
