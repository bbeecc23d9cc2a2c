"""The integer matmul: 8-bit activations times constant 8-bit weights, int32 accumulators.

``out[r, j] = odt(sum_k (x[r, k] - zx) * C[k, j])`` for ``x`` uint8 or int8 and ``C`` a
constant integer matrix, computed as ``sum_k xu[r, k] * S[k, j]`` with ``xu`` uint8
and ``S`` int8 (the TIR ``dot4_u8s8``: ``vpdpbusd`` with VNNI, an exact
``vpmaddubsw``/``vpmaddwd`` sequence on AVX2, ``runtime/int_dot.py``) plus per-column
int32 corrections. The rewrite into that form is exact integer algebra:

- an int8 ``x`` becomes uint8 by flipping its sign bit (``x + 128``), its zero point
  moving up by 128 with it;
- each column ``C[:, j]`` becomes an int8 column ``S[:, j] = C[:, j] - o_j`` with
  ``o_j = 0`` when the column already fits int8 (weights with a zero zero point, the
  usual case), else the smallest shift that makes it fit (uint8 weights, a range of at
  most 255 per column);
- so ``sum_k (xu - zu) C = sum_k xu S + o_j * rowsum(xu) - zu * colsum(C)_j``: the last
  term is a constant per column (``corr``), the middle one is computed only when some
  ``o_j`` is not 0.

Every partial sum is an integer below 2**31 (the pass checks it), so the int32 sums are
exact whatever their order, and the result equals the exact float matmul bit for bit.

**Packing at build time** (:func:`pack_weights`): ``S`` is stored as ``[N / L, K / 4,
4L]`` int8 (L = int32 lanes of a vector): for each block of L columns, each group of
four ``k``, the four bytes of every column side by side, which is what ``vpdpbusd``
multiplies against four bytes of a row of ``x`` broadcast to every lane. Padding
columns and the ``k`` of the last group past K are zeros, so a row's last group may
read any in-bounds bytes (its indices are clamped to K - 1).

**Schedule**: tiles of ``mr`` rows by ``nr`` column blocks (``mr * nr`` accumulator
vectors, 16 with 32 registers, 8 with 16), the K groups innermost; each packed vector
feeds ``mr`` dot products and each broadcast row group ``nr``. Row tiles run in
parallel (the column steps when there is one row tile). The store is a plain
(vectorized) loop of ``out[r, j] = ...``, so FuseOps' epilogues (the requantization:
scale, round, zero point, saturate) fold into it.
Imports irkernel.tir, irkernel.target and NumPy only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import itertools
import math

import numpy as np

from irkernel.target import CPUTarget
from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.topi.matmul_rows import unravel
from passes.topi.vector import vector_pieces

#: Fewest multiply-adds for a parallel loop over row tiles.
PARALLEL_MIN_MACS = 1 << 16
#: Most rows per tile.
MAX_TILE_ROWS = 4


def dot_lanes(target: CPUTarget) -> int:
    """int32 accumulator lanes of one vector on ``target`` (at least 4)."""
    return max(4, target.vector_bits // 32)


def column_offsets(c: np.ndarray) -> np.ndarray | None:
    """int64[N]: the shift ``o_j`` making each column of the integer matrix ``c`` fit
    int8 (0 where it already does), or None when a column spans more than 255 values."""
    lo, hi = c.min(axis=0, initial=0), c.max(axis=0, initial=0)
    if np.any(hi - lo > 255):
        return None
    fits = (lo >= -128) & (hi <= 127)
    return np.where(fits, 0, lo + 128).astype(np.int64)


def pack_weights(c: np.ndarray, offsets: np.ndarray, lanes: int) -> np.ndarray:
    """``c - offsets`` (``[K, N]`` integers) as int8 ``[ceil(N / L), ceil(K / 4), 4L]``
    (module docstring), zero padded."""
    k, n = c.shape
    blocks, groups = -(-n // lanes), -(-k // 4)
    s = np.zeros((groups * 4, blocks * lanes), np.int8)
    s[:k, :n] = (c - offsets[None, :]).astype(np.int8)
    # [g, 4, b, L] -> [b, g, L, 4]
    return np.ascontiguousarray(s.reshape(groups, 4, blocks, lanes).transpose(2, 0, 3, 1)
                                .reshape(blocks, groups, 4 * lanes))


def int_matmul(a_shape: tuple[int, ...], a_dtype: str, n: int, odt: str, lanes: int,
               with_rowsum: bool, target: CPUTarget) -> PrimFunc:
    """The PrimFunc ``(x, packed, corr[, offsets]) -> out``: ``x`` of ``a_shape``
    (uint8 or int8, rows over the leading axes), ``packed`` from :func:`pack_weights`,
    ``corr`` and ``offsets`` int32 ``[n]``; ``out`` is ``a_shape[:-1] + (n,)`` of
    ``odt`` (module docstring)."""
    if a_dtype not in ("uint8", "int8"):
        raise TypeError(f"int_matmul: activations must be uint8 or int8, got {a_dtype}")
    *row_dims_l, k = a_shape
    row_dims = tuple(row_dims_l)
    rows = math.prod(row_dims)
    blocks, groups = -(-n // lanes), -(-k // 4)
    whole_groups = k // 4
    out_shape = (*row_dims, n)
    packed_shape = (blocks, groups, 4 * lanes)
    budget = 16 if target.vector_registers >= 32 else 8
    mr = min(MAX_TILE_ROWS, rows)
    nr = max(1, min(n // lanes, budget // mr))
    row_tiles, row_rest = divmod(rows, mr)
    short = n % lanes  # a last block of fewer columns, stored alone
    full_blocks = n // lanes
    col_steps, col_rest = divmod(full_blocks, nr)
    big = rows * n * k >= PARALLEL_MIN_MACS
    parallel = row_tiles > 1 and big
    # one row tile (a batch-1 linear layer): the column steps are the parallel loop
    parallel_cols = not parallel and not row_rest and col_steps > 1 and big
    flip = a_dtype == "int8"

    def group(x0, r, k0, clamp):
        idx = T.ramp(k0, 1, 4)
        if clamp:  # the last, short group: any bytes in bounds (their weights are 0)
            idx = T.min(idx, k - 1)
        v = x0[(*unravel(r, row_dims), idx)]
        return T.cast("uint8", v) + 128 if flip else v

    def tile(x0, x1, x2, x3, out, r0, m, jb0, count, pieces):
        """Rows ``r0 .. r0 + m`` by column blocks ``jb0 .. jb0 + count``, each stored in
        ``pieces`` (the last block: its valid columns only)."""
        # a name per tile: scratch buffers live to the end of their block, and FuseTIR
        # tells them apart by name
        tag = next(tags)
        acc = T.alloc_buffer((m, count, lanes), "int32", name=f"qacc{tag}")
        for i in T.unroll(m):
            for q in T.unroll(count):
                acc[i, q, T.ramp(0, 1, lanes)] = T.broadcast(T.int32(0), lanes)

        def step(kq, clamp):
            for i in T.unroll(m):
                a = group(x0, r0 + i, kq * 4, clamp)
                for q in T.unroll(count):
                    at = (i, q, T.ramp(0, 1, lanes))
                    acc[at] = T.dot4_u8s8(acc[at], a, x1[jb0 + q, kq, T.ramp(0, 1, 4 * lanes)])
        if whole_groups:
            for kq in T.serial(whole_groups):
                step(kq, False)
        if groups > whole_groups:
            step(whole_groups, True)
        rs = None
        if with_rowsum:
            rs = T.alloc_buffer((m,), "int32", name=f"qrow{tag}")
            for i in T.unroll(m):
                rs[i] = T.int32(0)
                for kk in T.serial(k):
                    rs[i] = rs[i] + row_byte(x0, r0 + i, kk)
        for i in T.unroll(m):
            for q in T.unroll(count):
                j0 = (jb0 + q) * lanes
                for p0, size in pieces:
                    for ji in T.vectorized(size):
                        j = j0 + p0 + ji
                        v = acc[i, q, p0 + ji] + x2[j]
                        if rs is not None:
                            v = v + x3[j] * rs[i]
                        out[(*unravel(r0 + i, row_dims), j)] = T.cast(odt, v)

    def row_byte(x0, r, kk):
        v = T.cast("int32", x0[(*unravel(r, row_dims), kk)])
        return v + 128 if flip else v

    whole = [(0, lanes)]
    tags = itertools.count()

    def rows_of(x0, x1, x2, x3, out, r0, m):
        if col_steps:
            loop = T.parallel if parallel_cols else T.serial
            for js in loop(col_steps) if col_steps > 1 else (0,):
                tile(x0, x1, x2, x3, out, r0, m, js * nr, nr, whole)
        if col_rest:
            tile(x0, x1, x2, x3, out, r0, m, col_steps * nr, col_rest, whole)
        if short:
            tile(x0, x1, x2, x3, out, r0, m, full_blocks, 1, vector_pieces(short, lanes))

    def body(x0, x1, x2, x3, out):
        if row_tiles:
            for rt in T.parallel(row_tiles) if parallel else T.serial(row_tiles):
                rows_of(x0, x1, x2, x3, out, rt * mr, mr)
        if row_rest:
            rows_of(x0, x1, x2, x3, out, row_tiles * mr, row_rest)

    if with_rowsum:
        @T.prim_func(private=True)
        def int_mm(x0: T.Buffer(a_shape, a_dtype), x1: T.Buffer(packed_shape, "int8"),
                   x2: T.Buffer((n,), "int32"), x3: T.Buffer((n,), "int32"),
                   out: T.Buffer(out_shape, odt)):
            body(x0, x1, x2, x3, out)
    else:
        @T.prim_func(private=True)
        def int_mm(x0: T.Buffer(a_shape, a_dtype), x1: T.Buffer(packed_shape, "int8"),
                   x2: T.Buffer((n,), "int32"), out: T.Buffer(out_shape, odt)):
            body(x0, x1, x2, None, out)
    return int_mm.with_attr("schedule", "int_matmul")


__all__ = ["PARALLEL_MIN_MACS", "column_offsets", "dot_lanes", "int_matmul", "pack_weights"]
