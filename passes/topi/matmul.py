"""A scheduled 2-D float matmul template: packed panels, register tiles, parallel columns.

Why a schedule and not the canonical form: the canonical ``out[i, j] +=
a[i, k] * b[k, j]`` nest runs at a few GFLOP/s, and matmul decides the MLP
target (within 1.5x of OpenBLAS at batch 64, hidden 1024). The schedule:

* ``C[M, N] = A[M, K] @ B[K, N]``, all C-contiguous, no alignment demanded
  (graph inputs come from the user; AVX-512 unaligned loads cost little);
* the outer loop is *parallel over NR-wide column panels* of B (``jo``);
* each task first **packs** its ``K x NR`` panel of B into a contiguous
  scratch buffer (when more than one row block will read it). Unpacked, the
  panel's rows sit ``N`` floats apart: at N = 1024 that is a 4 KiB stride, so
  every row maps to the same few L1/L2 sets (the panel thrashes instead of
  staying in L2) and the hardware prefetcher, which stops at page boundaries,
  never runs ahead. Packed, the row blocks of A stream past a panel that
  stays in L2 (``K * NR * 4`` bytes: 256 KiB at K = 1024, NR = 64) and is read
  sequentially. Measured on this VM at 64 x 1024 x 1024, one thread: 1.57 ms
  unpacked 8x32 -> 1.04 ms packed 4x64 (medians; ~185 GFLOP/s at best, near
  the FMA peak);
* an ``MR x NR`` accumulator tile (4 x 64 or 8 x 32 float32: sixteen 512-bit
  registers; one broadcast of A and ``NR / 16`` vector loads of the panel per
  ``NR / 16 * MR`` FMAs) is updated with exact ``fma`` over the whole K loop,
  then stored once. Storing once (no K blocking that re-reads C) is what lets
  FuseTIR fold an elementwise epilogue (bias, relu) into the store.

Used when N is at least a lane tile (16 float32 / 8 float64 values) and the problem
is not tiny (the last ``N % NR`` columns, when N is not a multiple of a lane tile, are
one narrower unpacked panel after the parallel loop: a classifier's 1000 columns);
M takes the largest row tile dividing it. Otherwise
LegalizeOps uses the canonical reduction. Imports irkernel.tir only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.buffer import Buffer
from irkernel.tir.expr import PrimExpr
from irkernel.tir.function import PrimFunc

#: Below this many multiply-adds the canonical (fusable) reduction is used instead.
MIN_WORK = 16 * 16 * 16


#: Largest packed panel (bytes) for the wide 4 x (4 lanes) tile; above it a narrower
#: panel keeps the packed block in L2.
WIDE_PANEL_BYTES = 256 * 1024


def _tile(m: int, n: int, k: int, dtype: str) -> tuple[int, int] | None:
    """(MR, NR): 4 x 4 lanes when it fits (fewest loads per FMA at 16 accumulators), else
    the widest NR of 2 or 1 lanes with the largest row tile dividing M."""
    lanes = 16 if dtype == "float32" else 8
    itemsize = 4 if dtype == "float32" else 8
    if m % 4 == 0 and n % (4 * lanes) == 0 and k * 4 * lanes * itemsize <= WIDE_PANEL_BYTES:
        return 4, 4 * lanes
    nr = next((c for c in (2 * lanes, lanes) if n % c == 0), None)
    if nr is None:
        if n < lanes:
            return None
        nr = lanes  # the last n % lanes columns are a narrower tail panel
    mr = next(c for c in (8, 6, 4, 3, 2, 1) if m % c == 0)
    return mr, nr


@lru_cache(maxsize=256)
def scheduled_matmul(m: int, n: int, k: int, dtype: str) -> PrimFunc | None:
    """The scheduled PrimFunc ``(x0: (m, k), x1: (k, n), out: (m, n))``, or None when the
    shape does not fit the tiles (or is too small to be worth it)."""
    return matmul_with_epilogue(m, n, k, dtype)


def matmul_with_epilogue(m: int, n: int, k: int, dtype: str, extra: Sequence[Buffer] = (),
                         epilogue: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr]
                         | None = None, out_dtype: str | None = None) -> PrimFunc | None:
    """The scheduled matmul with an elementwise epilogue fused into its final store (FuseTIR).

    Parameters: ``(x0, x1, *extra, out)``; ``epilogue(acc, i, j)`` gives the value
    stored at ``out[i, j]`` from the accumulated ``acc`` (it may load ``extra``
    buffers at ``i``/``j``; ``j`` becomes a vector index, so loads along it are
    vector loads). ``out_dtype`` defaults to ``dtype``. None when the shape does
    not fit the tiles.
    """
    if dtype not in ("float32", "float64") or m * n * k < MIN_WORK or k == 0:
        return None
    tile = _tile(m, n, k, dtype)
    if tile is None:
        return None
    mr, nr = tile
    finish = epilogue or (lambda acc, i, j: acc)
    odt = out_dtype or dtype

    matmul = _schedule(m, n, k, mr, nr, dtype, odt, finish)
    if not extra:
        return matmul
    x0, x1, out = matmul.params
    return PrimFunc((x0, x1, *extra, out), matmul.body, matmul.attrs)


def _schedule(m: int, n: int, k: int, mr: int, nr: int, dtype: str, odt: str,  # noqa: C901
              finish: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr]) -> PrimFunc:
    """One task per NR-wide column panel; its row blocks stream past the panel.

    Specialized at trace time (plain Python ``if``/``for``): with several row blocks
    the panel is packed first (see the module docstring); with one (M == MR) each
    panel is read once, so a packed copy would only add a pass, and the row-block
    loop disappears.
    """
    rows = m // mr
    pack = rows > 1
    full, tail = divmod(n, nr)

    def tile(x0, io, width, b_of, name):
        """Emit one ``MR x width`` register tile of rows ``io * MR...``: zeroed, then exact
        fma over K (``b_of(kk, ji)`` reads B); the caller stores it once."""
        acc = T.alloc_buffer((mr, width), dtype, name=name)
        for ii in T.unroll(mr):
            for ji in T.vectorized(width):
                acc[ii, ji] = 0.0
        for kk in T.serial(k):
            for ii in T.unroll(mr):
                for ji in T.vectorized(width):
                    acc[ii, ji] = T.fma(x0[io * mr + ii, kk], b_of(kk, ji), acc[ii, ji])
        return acc

    def store(out, acc, io, col0, width):
        for ii in T.unroll(mr):
            for ji in T.vectorized(width):
                out[io * mr + ii, col0 + ji] = finish(acc[ii, ji], io * mr + ii, col0 + ji)

    @T.prim_func(private=True)
    def matmul(x0: T.Buffer((m, k), dtype), x1: T.Buffer((k, n), dtype),
               out: T.Buffer((m, n), odt)):
        for jo in T.parallel(full):
            if pack:
                panel = T.alloc_buffer((k, nr), dtype)
                for kk in T.serial(k):
                    for ji in T.vectorized(nr):
                        panel[kk, ji] = x1[kk, jo * nr + ji]
            for io in T.serial(rows) if pack else (0,):
                acc = tile(x0, io, nr, (lambda kk, ji: panel[kk, ji]) if pack  # noqa: B023
                           else (lambda kk, ji: x1[kk, jo * nr + ji]), "acc")  # noqa: B023
                store(out, acc, io, jo * nr, nr)
        if tail:  # the last n % nr columns: one narrower, unpacked panel
            for io in T.serial(rows):
                # its own name: FuseTIR renames a callee's allocations by name
                tacc = tile(x0, io, tail, lambda kk, ji: x1[kk, full * nr + ji], "tacc")
                store(out, tacc, io, full * nr, tail)
    return matmul


__all__ = ["MIN_WORK", "WIDE_PANEL_BYTES", "matmul_with_epilogue", "scheduled_matmul"]
