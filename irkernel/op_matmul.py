"""A scheduled 2-D float matmul template: register tiles, vector lanes, parallel column panels.

Why a schedule and not the canonical form: the canonical ``out[i, j] +=
a[i, k] * b[k, j]`` nest runs at a few GFLOP/s, and matmul decides the MLP
target (within 1.5x of OpenBLAS at batch 64, hidden 1024). The schedule:

* ``C[M, N] = A[M, K] @ B[K, N]``, all C-contiguous, no alignment demanded
  (graph inputs come from the user; AVX-512 unaligned loads cost little);
* the outer loop is *parallel over NR-wide column panels* of B (``jo``): a
  panel (K x NR floats, 128 KiB at K = 1024) stays in L2 while every row block
  of A streams past it, so B is read from memory once and no packing copy is
  needed (B's rows are already contiguous NR-wide vectors);
* an ``MR x NR`` accumulator tile (8 x 32 float32 = sixteen 512-bit registers)
  is updated with exact ``fma`` over the whole K loop, then stored.

Used when M has a divisor MR in (8, 6, 4, 2) ... down to 1 and N is a
multiple of the lane tile NR (32 float32 / 16 float64 values), and the
problem is not tiny; otherwise LegalizeOps uses the canonical reduction.
Imports irkernel.tir only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from .tir import script as T
from .tir.buffer import Buffer
from .tir.expr import PrimExpr
from .tir.function import PrimFunc

#: Below this many multiply-adds the canonical (fusable) reduction is used instead.
MIN_WORK = 16 * 16 * 16


def _tile(m: int, n: int, dtype: str) -> tuple[int, int] | None:
    lanes = 16 if dtype == "float32" else 8
    nr = next((c for c in (2 * lanes, lanes) if n % c == 0), None)
    if nr is None:
        return None
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
    tile = _tile(m, n, dtype)
    if tile is None:
        return None
    mr, nr = tile
    finish = epilogue or (lambda acc, i, j: acc)
    odt = out_dtype or dtype

    @T.prim_func(private=True)
    def matmul(x0: T.Buffer((m, k), dtype), x1: T.Buffer((k, n), dtype),
               out: T.Buffer((m, n), odt)):
        for jo in T.parallel(n // nr):
            for io in T.serial(m // mr):
                acc = T.alloc_buffer((mr, nr), dtype)
                for ii in T.unroll(mr):
                    for ji in T.vectorized(nr):
                        acc[ii, ji] = 0.0
                for kk in T.serial(k):
                    for ii in T.unroll(mr):
                        for ji in T.vectorized(nr):
                            acc[ii, ji] = T.fma(x0[io * mr + ii, kk], x1[kk, jo * nr + ji],
                                                acc[ii, ji])
                for ii in T.unroll(mr):
                    for ji in T.vectorized(nr):
                        out[io * mr + ii, jo * nr + ji] = finish(
                            acc[ii, ji], io * mr + ii, jo * nr + ji)

    if not extra:
        return matmul
    x0, x1, out = matmul.params
    return PrimFunc((x0, x1, *extra, out), matmul.body, matmul.attrs)


__all__ = ["MIN_WORK", "matmul_with_epilogue", "scheduled_matmul"]
