"""The matmul of a few rows with a transposed B (``a @ w.T``, a batch-1 linear layer stored
as ``(out, in)``): dot products along K.

Why not the panel schedule (``matmul.py``): a transposed B holds each column of B as a
contiguous row of ``x1`` (``K`` floats), so the panel schedule must pack it first, one
scalar move per element, and with up to eight rows that packing is not amortized (it
costs more than the fmas it feeds: a 5 x 902 @ (2914 x 902).T ran 15x slower packed).
Here each output element is a dot product of two contiguous rows, A's row and ``x1``'s
row, read with vector loads along K: a step takes ``cols`` rows of ``x1`` at once, so
every A vector loaded feeds ``cols`` fmas and every ``x1`` vector ``m`` fmas, into
``m x cols`` accumulator vectors (independent chains that hide the fma latency); the
lanes of each are summed once at the end. ``x1`` is read sequentially row after row, the
hardware prefetchers' best case, as in ``matmul_rows``.

The sum of the lanes makes the order of accumulation differ from the panel schedule's
(K order), so results differ from it by rounding, never by thread count: each output
element is one task's. Imports irkernel.tir and irkernel.target only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

from collections.abc import Callable

from irkernel.target import CPUTarget
from irkernel.tir import script as T
from irkernel.tir.expr import PrimExpr
from irkernel.tir.function import PrimFunc
from passes.topi.matmul_rows import a_element, unravel
from passes.topi.vector import vector_pieces

#: Most accumulator vectors (rows x columns per step): 16 of the 32 (AVX-512) or 16
#: registers leaves the A and ``x1`` vectors of a step room only on AVX-512; with 16
#: registers the compiler keeps a few accumulators in L1, which the loads hide.
MAX_ACCUMULATORS = 8
#: Fewest output columns per task.
MIN_TASK_COLUMNS = 64
#: Most tasks.
MAX_TASKS = 2


def dot_ok(batches: int, m: int) -> bool:
    """Whether the dot-product schedule takes a transposed-B problem: one batch, at most
    ``MAX_ACCUMULATORS`` rows (one column per step from five rows on; more rows than
    accumulators would read ``x1`` once per group of rows, and packing wins again)."""
    return batches == 1 and m <= MAX_ACCUMULATORS


def dot_rows(m: int, n: int, k: int, dtype: str, odt: str,
             finish: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr],
             a_shape: tuple[int, ...], b_shape: tuple[int, ...], out_shape: tuple[int, ...],
             row_dims: tuple[int, ...], a_t: bool, target: CPUTarget,
             parallel_min_macs: int) -> PrimFunc:
    """``out[r, j] = finish(sum_k a[r, k] * x1[j, k], r, j)`` for ``m`` rows, tasks over
    column ranges; ``x1`` is B transposed (``b_shape == (n, k)``)."""
    lanes = target.lanes(dtype)
    while k < lanes and lanes > 4:  # short rows: half-width vectors
        lanes //= 2
    cols = max(1, MAX_ACCUMULATORS // m)
    tasks = max(1, min(MAX_TASKS, n // MIN_TASK_COLUMNS))
    span = -(-n // tasks // cols) * cols
    tasks = -(-n // span)
    last = n - (tasks - 1) * span
    parallel = m * n * k >= parallel_min_macs and tasks > 1
    steps, rest = divmod(k, lanes)

    def a_at(x0, r, kk):
        return a_element(x0, (), r, kk, row_dims, a_t)

    def columns(x0, x1, out, j0, width):
        """Output columns ``j0 .. j0 + width`` (``width`` a multiple of ``count`` or not:
        the last step takes the rest)."""
        def step(jq, count):
            # named by its width: FuseTIR tells scratch buffers apart by name (two widths
            # under one name sized both alike and wrote past the narrower)
            acc = T.alloc_buffer((m, count, lanes), dtype, name=f"dacc{count}")
            for r in T.unroll(m):
                for q in T.unroll(count):
                    for ji in T.vectorized(lanes):
                        acc[r, q, ji] = 0.0

            def fold(k0, size):
                for r in T.unroll(m):
                    for q in T.unroll(count):
                        for ji in T.vectorized(size):
                            acc[r, q, ji] = T.fma(a_at(x0, r, k0 + ji),
                                                  x1[jq + q, k0 + ji], acc[r, q, ji])
            if steps:
                for ks in T.serial(steps):
                    fold(ks * lanes, lanes)
            for p0, size in vector_pieces(rest, lanes):
                fold(steps * lanes + p0, size)
            for r in T.unroll(m):
                for q in T.unroll(count):
                    terms = [acc[r, q, ji] for ji in range(lanes)]
                    while len(terms) > 1:  # a balanced tree: log2(lanes) dependent adds
                        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                                 for i in range(0, len(terms), 2)]
                    out[(*unravel(r, row_dims), jq + q)] = finish(terms[0], r, jq + q)

        whole, part = divmod(width, cols)
        if whole:
            for jb in T.serial(whole) if whole > 1 else (0,):
                step(j0 + jb * cols, cols)
        if part:
            step(j0 + whole * cols, part)

    @T.prim_func(private=True)
    def matmul(x0: T.Buffer(a_shape, dtype), x1: T.Buffer(b_shape, dtype),
               out: T.Buffer(out_shape, odt)):
        for task in T.parallel(tasks) if parallel else T.serial(tasks):
            if last == span:
                columns(x0, x1, out, task * span, span)
            else:
                with T.If(task < tasks - 1):
                    columns(x0, x1, out, task * span, span)
                with T.Else():
                    columns(x0, x1, out, (tasks - 1) * span, last)
    return matmul.with_attr("schedule", "matmul_dot")


__all__ = ["MAX_ACCUMULATORS", "dot_ok", "dot_rows"]
