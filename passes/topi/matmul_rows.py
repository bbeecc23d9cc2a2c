"""The matmul of a few rows (a batch-1 classifier, an MLP or LSTM step): B streamed by rows.

Why not the panel schedule (``matmul.py``): with one to four rows, nothing of B is reused
across row blocks, so the matmul is a pass over B and its speed is the speed of that
pass. Walking B by column panels reads each row of a panel at a stride of ``N`` floats:
past L2 every row is its own page, the prefetchers stop at page boundaries, and a
1 x 2048 @ 2048 x 4096 ran at 1.5 GFLOP/s (3 GB/s) against OpenBLAS's 13. Here each task
owns a range of columns and walks B's rows in order, four rows per step, so it reads
B sequentially (the hardware prefetchers' best case); the rows' partial sums live in a
scratch row per output row (L1: ``width`` floats), updated with exact fma in K order.

Each output element is still accumulated by one task in K order, ``acc = fma(a[k],
b[k, j], acc)`` for k = 0, 1, ..., so results equal the panel schedule's bit for bit and
do not depend on the thread count. Imports irkernel.tir and irkernel.target only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

from collections.abc import Callable

from irkernel.target import CPUTarget
from irkernel.tir import script as T
from irkernel.tir.buffer import Buffer
from irkernel.tir.expr import PrimExpr
from irkernel.tir.function import PrimFunc
from passes.topi.vector import vector_columns, vector_pieces

#: Most rows this schedule takes: each B vector loaded is used by every row.
MAX_ROWS = 4
#: Rows of B per step (a chain of fmas per accumulator vector; the scratch row is read
#: and written once per step).
K_STEP = 4
#: Fewest vectors of columns a task owns (a task reads ``K x width`` of B; too narrow and
#: the rows' pieces are too short to stream).
MIN_TASK_VECTORS = 16
#: Most tasks.
MAX_TASKS = 2


def unravel(flat: PrimExpr, dims: tuple[int, ...]) -> tuple[PrimExpr, ...]:
    """Indices of ``flat`` (below ``prod(dims)``) in C order over ``dims`` (extent-1 dims
    index 0; the outermost takes what is left, with no modulo)."""
    out: list = []
    for pos in range(len(dims) - 1, -1, -1):
        d = dims[pos]
        out.append(0 if d == 1 else flat if pos == 0 else flat % d)
        flat = flat // d
    return tuple(reversed(out))


def a_element(x0: Buffer, lead: tuple[PrimExpr, ...], r: PrimExpr, kk: PrimExpr,
              row_dims: tuple[int, ...], a_t: bool) -> PrimExpr:
    """``A[*lead, r, kk]`` of the rows flattened over ``row_dims``, read from ``x0``, which
    holds A with its last two axes swapped when ``a_t`` (``lead``: batch indices)."""
    *outer, row = unravel(r, row_dims)
    return x0[(*lead, *outer, kk, row) if a_t else (*lead, *outer, row, kk)]


def rows_ok(batches: int, m: int, n: int, target: CPUTarget, dtype: str) -> bool:
    """Whether the streamed schedule takes a problem: one batch, at most ``MAX_ROWS`` rows,
    at least one task's worth of columns."""
    return batches == 1 and m <= MAX_ROWS and n >= MIN_TASK_VECTORS * target.lanes(dtype)


def streamed_rows(m: int, n: int, k: int, dtype: str, odt: str,
                  finish: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr],
                  a_shape: tuple[int, ...], b_shape: tuple[int, ...],
                  out_shape: tuple[int, ...], row_dims: tuple[int, ...],
                  target: CPUTarget, parallel_min_macs: int, a_t: bool = False) -> PrimFunc:
    """``out[r, j] = finish(sum_k a[r, k] * b[k, j], r, j)`` for ``m`` rows, tasks over
    column ranges (the last one narrower); ``a_t``: ``x0`` holds A with its last two axes
    swapped."""
    lanes = target.lanes(dtype)
    step_cols = 4 * lanes  # four accumulator vectors per row per step
    tasks = max(1, min(MAX_TASKS, n // (MIN_TASK_VECTORS * lanes)))
    span = -(-n // tasks // lanes) * lanes
    tasks = -(-n // span)
    last = n - (tasks - 1) * span
    parallel = m * n * k >= parallel_min_macs and tasks > 1

    def a_at(x0, r, kk):
        return a_element(x0, (), r, kk, row_dims, a_t)

    def columns(x0, x1, out, c0, width, tag):
        # one scratch name per branch: FuseTIR tells buffers apart by name, and the two
        # branches' scratch rows differ in width (one name made the fused kernel size both
        # by one of them, writing past the narrower)
        acc = T.alloc_buffer((m, width), dtype, name=f"racc{tag}")
        for r in T.unroll(m):
            for j0, size in vector_pieces(width, lanes):
                for ji in T.vectorized(size):
                    acc[r, j0 + ji] = 0.0

        def rows_of_b(k0, count):
            """Fold rows ``k0 .. k0 + count`` of B into every scratch row, in K order."""
            def update(j):
                for r in T.unroll(m):
                    value = acc[r, j]
                    for dk in range(count):
                        value = T.fma(a_at(x0, r, k0 + dk), x1[k0 + dk, c0 + j], value)
                    acc[r, j] = value

            vector_columns(width, lanes, update, step_cols)

        steps, rest = divmod(k, K_STEP)
        if steps:
            for ks in T.serial(steps):
                rows_of_b(ks * K_STEP, K_STEP)
        if rest:
            rows_of_b(steps * K_STEP, rest)
        for r in T.unroll(m):
            for j0, size in vector_pieces(width, lanes):
                for ji in T.vectorized(size):
                    out[(*unravel(r, row_dims), c0 + j0 + ji)] = finish(
                        acc[r, j0 + ji], r, c0 + j0 + ji)

    @T.prim_func(private=True)
    def matmul(x0: T.Buffer(a_shape, dtype), x1: T.Buffer(b_shape, dtype),
               out: T.Buffer(out_shape, odt)):
        for task in T.parallel(tasks) if parallel else T.serial(tasks):
            if last == span:
                columns(x0, x1, out, task * span, span, "")
            else:
                with T.If(task < tasks - 1):
                    columns(x0, x1, out, task * span, span, "")
                with T.Else():
                    columns(x0, x1, out, (tasks - 1) * span, last, "t")
    return matmul.with_attr("schedule", "matmul_rows")


__all__ = ["K_STEP", "MAX_ROWS", "a_element", "rows_ok", "streamed_rows", "unravel"]
