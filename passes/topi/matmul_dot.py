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

#: Most accumulator vectors of a tile of all the rows (rows x columns per step; up to
#: that many rows): 8 of the 32 (AVX-512) or 16 registers leaves the A and ``x1`` vectors
#: of a step room on either.
MAX_ACCUMULATORS = 8
#: Rows per block when there are more rows than ``MAX_ACCUMULATORS`` (a narrow ``N``):
#: each ``x1`` vector loaded feeds this many fmas, each A vector ``cols`` of them.
BLOCK_ROWS = 4
#: Narrow: fewer output columns than this many vectors. The panel schedule's tile is
#: then mostly lanes of a tail (9 columns: one 8-lane vector and a 1-column tail) and
#: its packing of a transposed B, one scalar move per element, is not amortized over
#: a wide tile; dot products along K use every lane whatever N is.
NARROW_VECTORS = 2
#: Fewest output columns per task (a few rows: tasks over columns).
MIN_TASK_COLUMNS = 64
#: Most tasks over columns.
MAX_TASKS = 2
#: Most tasks over row blocks (many rows, a narrow N); at least two row blocks each.
MAX_ROW_TASKS = 8


def dot_ok(batches: int, m: int, n: int, k: int, target: CPUTarget, dtype: str,
           a_t: bool = False) -> bool:
    """Whether the dot-product schedule takes a transposed-B problem: one batch, and at
    most ``MAX_ACCUMULATORS`` rows (every row in one tile; more rows than accumulators
    would read ``x1`` once per group of rows, and packing wins again), or a narrow N
    (fewer than ``NARROW_VECTORS`` vectors) with K of at least a vector (the dot
    products' lanes are then full, and ``x1``, ``N x K``, is small enough to stay in
    cache while every row block reads it) and A not transposed (its rows contiguous
    along K: a transposed A's would be gathers, one per row per vector)."""
    if batches != 1:
        return False
    lanes = target.lanes(dtype)
    return m <= MAX_ACCUMULATORS or (n < NARROW_VECTORS * lanes and k >= lanes and not a_t)


def dot_lanes(k: int, lanes: int) -> int:
    """Vector width (a power of two, 4 to ``lanes``) of the dot products of rows of ``k``:
    the fewest operations per output element, the fmas along K (``k // w`` vectors, then
    the pieces of ``k % w``) plus the final sum of the lanes, about ``1.5 * (w - 1)``
    (extracts, shuffles and adds: 22 instructions for 16 lanes). A short K takes narrow
    vectors (K of 17: 4 lanes, 5 fmas and a 3-add sum, not 2 fmas and a 22-instruction
    sum); a long K full ones (K of 64: 8 lanes; 2039: 16)."""
    def cost(w: int) -> float:
        return k // w + bin(k % w).count("1") + 1.5 * (w - 1)
    widths = [lanes]
    while widths[-1] > 4:
        widths.append(widths[-1] // 2)
    return min(widths, key=cost)  # the widest of equal costs (min keeps the first)


def dot_tile(m: int, n: int, target: CPUTarget) -> tuple[int, int]:
    """(rows, columns) per step: every row and ``MAX_ACCUMULATORS // m`` columns for a
    few rows; else ``BLOCK_ROWS`` rows and as many columns as the register file holds
    besides the A vectors and one ``x1`` vector (6 with AVX-512's 32 registers: 24
    accumulators; 2 with 16: 8), and when N is narrower than that, more rows (up to
    ``MAX_ACCUMULATORS``: a GEMV, N = 1, takes 8 rows per pass over its column)."""
    if m <= MAX_ACCUMULATORS:
        return m, max(1, MAX_ACCUMULATORS // m)
    cols = min(n, max(1, (target.vector_registers - BLOCK_ROWS - 2) // BLOCK_ROWS))
    # fewer columns than that (N of 1 to 5): more rows, up to MAX_ACCUMULATORS
    rows = max(BLOCK_ROWS, min(MAX_ACCUMULATORS, (target.vector_registers - 2) // (cols + 1)))
    return rows, cols


def dot_rows(m: int, n: int, k: int, dtype: str, odt: str,  # noqa: C901
             finish: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr],
             a_shape: tuple[int, ...], b_shape: tuple[int, ...], out_shape: tuple[int, ...],
             row_dims: tuple[int, ...], a_t: bool, target: CPUTarget,
             parallel_min_macs: int) -> PrimFunc:
    """``out[r, j] = finish(sum_k a[r, k] * x1[j, k], r, j)``; ``x1`` is B transposed
    (``b_shape == (n, k)``). A few rows: one tile of every row, tasks over column
    ranges. More rows (a narrow N): blocks of ``BLOCK_ROWS`` rows (the last ``m %
    BLOCK_ROWS`` rows one shorter block), tasks over ranges of row blocks, each block
    sweeping every column (``x1`` stays in cache, the block's A rows in L1)."""
    lanes = dot_lanes(k, target.lanes(dtype))
    mr, cols = dot_tile(m, n, target)
    blocks, rtail = divmod(m, mr)
    if blocks == 1 and not rtail:  # every row in one tile: tasks over columns
        tasks = max(1, min(MAX_TASKS, n // MIN_TASK_COLUMNS))
        span = -(-n // tasks // cols) * cols
        tasks = -(-n // span)
        per = 0
    else:  # tasks over row blocks, the row tail in the last
        tasks = max(1, min(MAX_ROW_TASKS, blocks // 2))
        per = -(-blocks // tasks)
        tasks = -(-blocks // per)
        span = n
    last = n - (tasks - 1) * span if not per else n
    parallel = m * n * k >= parallel_min_macs and tasks > 1
    steps, rest = divmod(k, lanes)

    def a_at(x0, r, kk):
        return a_element(x0, (), r, kk, row_dims, a_t)

    def step(x0, x1, out, row0, rows, jq, count):
        """Rows ``row0 .. row0 + rows`` by columns ``jq .. jq + count``."""
        # named by its shape: FuseTIR tells scratch buffers apart by name (two widths
        # under one name sized both alike and wrote past the narrower)
        acc = T.alloc_buffer((rows, count, lanes), dtype, name=f"dacc{rows}x{count}")
        for r in T.unroll(rows):
            for q in T.unroll(count):
                for ji in T.vectorized(lanes):
                    acc[r, q, ji] = 0.0

        def fold(k0, size):
            for r in T.unroll(rows):
                for q in T.unroll(count):
                    for ji in T.vectorized(size):
                        acc[r, q, ji] = T.fma(a_at(x0, row0 + r, k0 + ji),
                                              x1[jq + q, k0 + ji], acc[r, q, ji])
        if steps:
            for ks in T.serial(steps):
                fold(ks * lanes, lanes)
        for p0, size in vector_pieces(rest, lanes):
            fold(steps * lanes + p0, size)
        for r in T.unroll(rows):
            for q in T.unroll(count):
                terms = [acc[r, q, ji] for ji in range(lanes)]
                while len(terms) > 1:  # a balanced tree: log2(lanes) dependent adds
                    terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                             for i in range(0, len(terms), 2)]
                out[(*unravel(row0 + r, row_dims), jq + q)] = finish(terms[0], row0 + r,
                                                                     jq + q)

    def columns(x0, x1, out, row0, rows, j0, width):
        """Output columns ``j0 .. j0 + width`` of rows ``row0 .. row0 + rows`` (the last
        step takes what is left of ``width``)."""
        whole, part = divmod(width, cols)
        if whole:
            for jb in T.serial(whole) if whole > 1 else (0,):
                step(x0, x1, out, row0, rows, j0 + jb * cols, cols)
        if part:
            step(x0, x1, out, row0, rows, j0 + whole * cols, part)

    def row_range(x0, x1, out, task):
        """The task's ``per`` row blocks (fewer in the last), then, in the last task, the
        ``m % mr`` rows."""
        def block(io):
            columns(x0, x1, out, io * mr, mr, 0, n)
        if per == 1:
            block(task)
        elif blocks % per == 0:
            for jo in T.serial(per):
                block(task * per + jo)
        else:  # constant extents (the LLVM tier is chosen by trip count): a guard
            for jo in T.serial(per):
                with T.If(task * per + jo < blocks):
                    block(task * per + jo)
        if rtail:
            if tasks == 1:
                columns(x0, x1, out, blocks * mr, rtail, 0, n)
            else:
                with T.If(T.eq(task, tasks - 1)):
                    columns(x0, x1, out, blocks * mr, rtail, 0, n)

    @T.prim_func(private=True)
    def matmul(x0: T.Buffer(a_shape, dtype), x1: T.Buffer(b_shape, dtype),
               out: T.Buffer(out_shape, odt)):
        for task in T.parallel(tasks) if parallel else T.serial(tasks):
            if per:
                row_range(x0, x1, out, task)
            elif last == span:
                columns(x0, x1, out, 0, m, task * span, span)
            else:
                with T.If(task < tasks - 1):
                    columns(x0, x1, out, 0, m, task * span, span)
                with T.Else():
                    columns(x0, x1, out, 0, m, (tasks - 1) * span, last)
    return matmul.with_attr("schedule", "matmul_dot")


__all__ = ["BLOCK_ROWS", "MAX_ACCUMULATORS", "NARROW_VECTORS", "dot_lanes", "dot_ok",
           "dot_rows", "dot_tile"]
