"""Scheduled float matmul templates: packed panels, register tiles, parallel columns.

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
  the FMA peak). With narrower panels (16 columns, AVX2) a task packs a *group* of
  up to four panels in one pass over B's rows, 256 bytes of each row instead of 64
  (each row of a large B is its own page: a page walk per row read);
* an ``MR x NR`` accumulator tile is updated with exact ``fma`` over the whole K
  loop, then stored once. Storing once (no K blocking that re-reads C) is what lets
  FuseTIR fold an elementwise epilogue (bias, relu) into the store. The tile is sized
  to the register file (``passes/topi/matmul_tiles.py``): with 32 registers (AVX-512)
  6 x 4 vectors (24 accumulators), 7 or 8 rows one tile of 3 vectors; with 16 (AVX2,
  SSE) 6 x 2 vectors (twelve, the shape of OpenBLAS's Haswell kernel); rows fewer than 6
  take wider tiles. The 4 x 64 float32 tile on AVX2 needed 32 accumulators and spilled:
  17 GFLOP/s at 64 x 1024 x 1024 against OpenBLAS's 66. A matmul of few row blocks and
  few panels takes narrower panels rather than row chunks that would each pack a copy;
* when B is a constant, none of this packing runs per call: ``PackConstantWeights``
  stores B in the panels' order at build time and the call reads it in place
  (``packed=True``, ``passes/topi/matmul_packed.py``).

Used when N is at least one vector and the problem is not tiny (the last ``N % NR``
columns are one narrower unpacked panel after the parallel loop: a classifier's 1000
columns; the last ``M % MR`` rows, a shorter tile). Batched forms: ``x[..., M, K] @
w[K, N]`` (a linear layer over a sequence) is one matmul of ``prod(...) * M`` rows, read
and written in place through the batch indices; ``a[..., M, K] @ b[..., K, N]`` with
equal batch shapes (attention) is one parallel loop over (batch, column panel).
Otherwise LegalizeOps uses the canonical reduction. Imports irkernel.tir, irkernel.target
and passes.topi only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.buffer import Buffer
from irkernel.tir.expr import PrimExpr
from irkernel.tir.function import PrimFunc
from irkernel.target import CPUTarget
from passes.topi.matmul_dot import dot_ok, dot_rows
from passes.topi.matmul_rows import a_element, rows_ok, streamed_rows, unravel
from passes.topi.matmul_tiles import (
    PACKED_MAX_ROWS,
    SHORT_K,
    accumulators,
    packed_length,
    packed_tile,
    panel_group,
    register_tile,
    row_chunks,
    short_k,
    split_columns,
    tail_width,
)
from passes.topi.packing import PACKABLE
from passes.topi.vector import current_target, vector_pieces

#: Packer name of B of the 2-d, untransposed forms (``passes/topi/matmul_packed.py``).
MATMUL_B = "matmul_b"

#: Below this many multiply-adds the canonical (fusable) reduction is used instead.
MIN_WORK = 16 * 16 * 16

#: The unpacked tail's last columns (under a vector) as a tile of the block's rows.
TAIL_TILE = True

#: Multiply-adds from which the column panels run on the thread pool (below it a launch
#: costs more than the second core saves: ~3 us of work at one thread).
PARALLEL_MIN_MACS = 1 << 16

def _target(bits: int) -> CPUTarget:
    """The current target, tiled for ``bits``-wide vectors when ``bits`` is given."""
    target = current_target()
    return target.with_vector_bits(bits) if bits else target


def _identity(acc: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
    return acc


@lru_cache(maxsize=256)
def _cached(m: int, n: int, k: int, dtype: str, target: CPUTarget) -> PrimFunc | None:
    return _build((m, k), (k, n), dtype, dtype, target, _identity)


def scheduled_matmul(m: int, n: int, k: int, dtype: str, bits: int = 0) -> PrimFunc | None:
    """The scheduled PrimFunc ``(x0: (m, k), x1: (k, n), out: (m, n))``, or None when the
    shape does not fit the tiles (or is too small to be worth it). ``bits``: the vector
    width to tile for (0: the current target's)."""
    return _cached(m, n, k, dtype, _target(bits))


def matmul_with_epilogue(m: int, n: int, k: int, dtype: str, extra: Sequence[Buffer] = (),
                         epilogue: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr]
                         | None = None, out_dtype: str | None = None,
                         bits: int = 0) -> PrimFunc | None:
    """The scheduled matmul with an elementwise epilogue fused into its final store (FuseTIR).

    Parameters: ``(x0, x1, *extra, out)``; ``epilogue(acc, i, j)`` gives the value
    stored at ``out[i, j]`` from the accumulated ``acc`` (it may load ``extra``
    buffers at ``i``/``j``; ``j`` becomes a vector index, so loads along it are
    vector loads). ``out_dtype`` defaults to ``dtype``. None when the shape does
    not fit the tiles.
    """
    matmul = _build((m, k), (k, n), dtype, out_dtype or dtype, _target(bits),
                    epilogue or (lambda acc, i, j: acc))
    if matmul is None or not extra:
        return matmul
    x0, x1, out = matmul.params
    return PrimFunc((x0, x1, *extra, out), matmul.body, matmul.attrs)


@lru_cache(maxsize=256)
def _cached_batched(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str,
                    target: CPUTarget, a_t: bool = False, b_t: bool = False
                    ) -> PrimFunc | None:
    return _build(a_shape, b_shape, dtype, dtype, target, _identity, a_t, b_t)


def scheduled_batch_matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str,
                           bits: int = 0) -> PrimFunc | None:
    """The scheduled ``a @ b`` of an N-d ``a`` and a 2-d ``b`` (rows flattened), or of
    operands of equal batch shapes; None for other forms (broadcast batches, vectors) and
    shapes that do not fit the tiles."""
    return _cached_batched(tuple(a_shape), tuple(b_shape), dtype, _target(bits))


def scheduled_transposed_matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str,
                                a_t: bool, b_t: bool, bits: int = 0) -> PrimFunc | None:
    """The scheduled ``A @ B`` reading A and/or B through a swap of their last two axes:
    ``a_shape`` and ``b_shape`` are the shapes of the buffers the kernel reads (for
    ``a_t``, ``A`` is ``x0`` with its last two axes swapped; likewise ``b_t``), so a
    ``permute_dims`` feeding a matmul costs no kernel of its own (LegalizeOps folds it).
    A transposed A is only an index map (the tile broadcasts A's elements one by one);
    a transposed B is packed panel by panel from its rows (``K`` contiguous), or, with
    few rows, read by dot products along K (``passes.topi.matmul_dot``). None for the
    forms and shapes :func:`scheduled_batch_matmul` declines."""
    return _cached_batched(tuple(a_shape), tuple(b_shape), dtype, _target(bits), a_t, b_t)


@lru_cache(maxsize=256)
def _cached_packed(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str,
                   target: CPUTarget, a_t: bool) -> PrimFunc | None:
    return _build(a_shape, b_shape, dtype, dtype, target, _identity, a_t, packed=True)


def packed_matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str,
                  a_t: bool = False, bits: int = 0) -> PrimFunc | None:
    """The scheduled ``A @ B`` with B 2-d read pre-packed: parameters ``(x0, x1, out)`` with
    ``x1`` 1-d, B in :func:`passes.topi.matmul_packed.pack_b`'s order (``b_shape`` is B's
    shape, ``(K, N)``); ``a_t`` as for :func:`scheduled_transposed_matmul`."""
    return _cached_packed(tuple(a_shape), tuple(b_shape), dtype, _target(bits), a_t)


#: K per step of packing a transposed B: a 64-byte line of each of the panel's rows of
#: ``x1`` (float32), written to that many panel rows (``16 x NR`` elements, in L1).
TRANSPOSE_BLOCK = 16


def _build(a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str, odt: str,
           target: CPUTarget, finish: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr],
           a_t: bool = False, b_t: bool = False, packed: bool = False) -> PrimFunc | None:
    """The problem as (batches, rows, K, N) with index maps into the real buffers
    (``a_t``/``b_t``: the buffer holds the operand with its last two axes swapped).

    A 2-d, untransposed B makes the result ``packable``: given B as a constant,
    ``PackConstantWeights`` packs it at build time and calls the ``packed`` form, which
    reads ``x1`` as the 1-d packed panels of :func:`packed_tile` and never packs."""
    if dtype not in ("float32", "float64") or len(a_shape) < 2 or len(b_shape) < 2:
        return None
    *a_batch, m, k = a_shape
    *b_batch, k2, n = b_shape
    if a_t:
        m, k = k, m
    if b_t:
        k2, n = n, k2
    if k != k2:
        return None
    if not b_batch:  # x[..., M, K] @ w[K, N]: one matmul over every row
        batches, rows, row_dims = 1, math.prod(a_batch) * m, (*a_batch, m)
    elif tuple(a_batch) == tuple(b_batch):
        batches, rows, row_dims = math.prod(a_batch), m, (m,)
    else:
        return None
    if batches * rows * n * k < MIN_WORK or k == 0:
        return None
    out_shape = (*(b_batch or a_batch), m, n)
    if packed:
        if b_t or b_batch:
            raise ValueError("a packed B is 2-d and not transposed")
        ptile = packed_tile(rows, n, k, dtype, target)
        if ptile is None:
            return None
        mr, nr, lanes = ptile
        x1_shape = (packed_length(n, k, nr, lanes),)
        return _schedule(1, rows, n, k, (mr, nr), dtype, odt, finish, a_shape, x1_shape,
                         out_shape, (), row_dims, target, a_t, packed=True)
    prim = _unpacked(batches, rows, n, k, dtype, odt, finish, a_shape, b_shape, out_shape,
                     tuple(b_batch), row_dims, target, a_t, b_t)
    if prim is None or b_t or b_batch or packed_tile(rows, n, k, dtype, target) is None:
        return prim
    return prim.with_attr(PACKABLE, (MATMUL_B, 1, tuple(a_shape), tuple(b_shape), dtype, a_t))


def _unpacked(batches: int, rows: int, n: int, k: int, dtype: str, odt: str,
              finish: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr],
              a_shape: tuple[int, ...], b_shape: tuple[int, ...], out_shape: tuple[int, ...],
              b_batch: tuple[int, ...], row_dims: tuple[int, ...], target: CPUTarget,
              a_t: bool, b_t: bool) -> PrimFunc | None:
    """The schedule reading B as the graph holds it: dot products or streamed rows for a
    few rows, else packed panels."""
    if b_t and not b_batch and dot_ok(batches, rows, n, k, target, dtype, a_t):  # x1: (N, K)
        return dot_rows(rows, n, k, dtype, odt, finish, a_shape, b_shape, out_shape,
                        row_dims, a_t, target, PARALLEL_MIN_MACS)
    if not b_t and not b_batch and rows_ok(batches, rows, n, target, dtype):
        return streamed_rows(rows, n, k, dtype, odt, finish, a_shape, b_shape, out_shape,
                             row_dims, target, PARALLEL_MIN_MACS, a_t)
    tile = register_tile(rows, n, k, dtype, target)
    if tile is None and k <= SHORT_K and not b_t:  # under 4 columns: one narrow vector
        tile = (min(rows, PACKED_MAX_ROWS), n)
    if tile is None:
        return None
    tile = split_columns(tile, batches, rows, n, b_t, target, dtype)
    return _schedule(batches, rows, n, k, tile, dtype, odt, finish, a_shape, b_shape,
                     out_shape, b_batch, row_dims, target, a_t, b_t)


def _schedule(batches: int, m: int, n: int, k: int, tile: tuple[int, int],  # noqa: C901
              dtype: str, odt: str, finish: Callable[[PrimExpr, PrimExpr, PrimExpr], PrimExpr],
              a_shape: tuple[int, ...], b_shape: tuple[int, ...], out_shape: tuple[int, ...],
              batch_dims: tuple[int, ...], row_dims: tuple[int, ...],
              target: CPUTarget, a_t: bool = False, b_t: bool = False,
              packed: bool = False) -> PrimFunc:
    """One task per (batch, row chunk, column panel group); its row blocks stream past
    the packed panel.

    Specialized at trace time (plain Python ``if``/``for``): with several row blocks
    the panel is packed first (see the module docstring); with one each panel is read
    once, so a packed copy would only add a pass, and the row-block loop disappears.
    The ``N % NR`` tail columns are one more task per (batch, row chunk), in the same
    parallel loop: packed, its panel is zero-padded to whole vectors, so the tile runs
    full-width fmas and only the store is narrower; unpacked (one row block), its whole
    vectors take one tile and the last ``N % lanes`` columns a row-at-a-time tile.
    Every output element is accumulated by one task in K order, so results do not
    depend on the thread count. A transposed B (``b_t``) is always packed: its panel's
    elements sit ``K`` apart along N, so only the packing loop, which reads B's rows
    along K in blocks, may touch it; the tile's loop is the same. ``packed``: ``x1`` is
    B packed at build time (:func:`packed_length`), read panel by panel in place.
    """
    mr, nr = tile
    itemsize = 4 if dtype == "float32" else 8
    lanes = target.lanes(dtype)  # a narrow N tiles with half-width vectors (powers of two)
    while lanes > nr:
        lanes //= 2
    blocks, rtail = divmod(m, mr)
    short = short_k(k, n, itemsize, target) and not b_t
    pack = (blocks + (rtail > 0) > 1 or b_t) and not packed and not short
    full, tail = divmod(n, nr)
    group = panel_group(full, k, nr, itemsize, target.l2 // 2) if pack else 1
    main = full // group  # main column tasks per (batch, chunk)
    col_tasks = 1 if short else main + (tail > 0)
    chunks = row_chunks(batches * col_tasks, blocks) if pack or packed or short else 1
    per_chunk = -(-blocks // chunks)  # row blocks per chunk (the last may have fewer)
    tasks = batches * chunks * col_tasks
    parallel = batches * m * n * k >= PARALLEL_MIN_MACS and tasks > 1
    tpad = tail_width(tail, lanes)  # the packed tail panel, zero-padded to whole vectors
    tvec = tail // lanes * lanes      # unpacked: the tail's whole vectors
    # unpacked, the rest of the tail (power-of-two pieces under a vector) takes a tile of
    # the block's rows when their accumulators fit the register file (a row at a time,
    # one short fma chain per row, is bound by the fma latency)
    tail_tile = TAIL_TILE and mr * len(vector_pieces(tail - tvec, lanes)) <= accumulators(target)

    def batch_index(b):
        return () if not batch_dims else unravel(b, batch_dims)

    def a_at(x0, b, r, kk):
        return a_element(x0, batch_index(b), r, kk, row_dims, a_t)

    def b_at(x1, b, kk, j):
        return x1[(*batch_index(b), j, kk) if b_t else (*batch_index(b), kk, j)]

    def pack_panel(x1, b, at, col0, widths):
        """``at(p, kk, j) <- B[kk, col0 + p * nr + j]`` for each panel ``p`` of ``widths``:
        along B's rows (whole vectors, every panel per row), or, transposed, along K in
        ``TRANSPOSE_BLOCK`` steps: a step reads one cache line of each of the panel's
        rows of ``x1`` and writes ``TRANSPOSE_BLOCK`` panel rows, which stay in L1 (a
        plain loop down K would write each panel row in L2 once per column)."""
        if not b_t:
            for kk in T.serial(k):
                for p, width in enumerate(widths):
                    for j0, size in vector_pieces(width, lanes):
                        for ji in T.vectorized(size):
                            at(p, kk, j0 + ji, b_at(x1, b, kk, col0 + p * nr + j0 + ji))
            return
        steps, rest = divmod(k, TRANSPOSE_BLOCK)
        for k0, count, n_steps in ((0, TRANSPOSE_BLOCK, steps),
                                   (steps * TRANSPOSE_BLOCK, rest, 1 if rest else 0)):
            if not n_steps:
                continue
            for ks in T.serial(n_steps) if n_steps > 1 else (0,):
                for p, width in enumerate(widths):
                    for jj in T.serial(width):
                        for kq in T.unroll(count):
                            kk = k0 + ks * TRANSPOSE_BLOCK + kq
                            at(p, kk, jj, b_at(x1, b, kk, col0 + p * nr + jj))

    def tile_of(x0, b, row0, height, width, b_of, name):
        """Emit one ``height x width`` register tile of rows ``row0...``: zeroed, then exact
        fma over K (``b_of(kk, ji)`` reads B); the caller stores it once."""
        acc = T.alloc_buffer((height, width), dtype, name=name)
        for ii in T.unroll(height):
            for j0, size in vector_pieces(width, lanes):
                for ji in T.vectorized(size):
                    acc[ii, j0 + ji] = 0.0
        for kk in T.serial(k):
            for ii in T.unroll(height):
                for j0, size in vector_pieces(width, lanes):
                    for ji in T.vectorized(size):
                        acc[ii, j0 + ji] = T.fma(a_at(x0, b, row0 + ii, kk),
                                                 b_of(kk, j0 + ji), acc[ii, j0 + ji])
        return acc

    def store(out, acc, b, row0, height, col0, width):
        for ii in T.unroll(height):
            for j0, size in vector_pieces(width, lanes):
                for ji in T.vectorized(size):
                    r, j = row0 + ii, j0 + ji
                    out[(*batch_index(b), *unravel(r, row_dims), col0 + j)] = finish(
                        acc[ii, j], r, col0 + j)

    def row_blocks(x0, out, b, chunk, col0, width, stored, b_of, name):
        """The chunk's row blocks of one panel (``width`` columns computed, ``stored``
        kept), then, in the last chunk, the ``M % MR`` rows."""
        def block(io):
            acc = tile_of(x0, b, io * mr, mr, width, b_of, name)
            store(out, acc, b, io * mr, mr, col0, stored)
        if chunks == 1:
            for io in T.serial(blocks) if blocks > 1 else ((0,) if blocks else ()):
                block(io)
        else:  # constant extents (the LLVM tier is chosen by trip count): a guard, not a min
            for jo in T.serial(per_chunk):
                if blocks % chunks == 0:
                    block(chunk * per_chunk + jo)
                else:
                    with T.If(chunk * per_chunk + jo < blocks):
                        block(chunk * per_chunk + jo)
        if rtail:
            def rows():
                racc = tile_of(x0, b, blocks * mr, rtail, width, b_of, "r" + name)
                store(out, racc, b, blocks * mr, rtail, col0, stored)
            if chunks == 1:
                rows()
            else:
                with T.If(T.eq(chunk, chunks - 1)):
                    rows()

    def main_panels(x0, x1, out, b, chunk, ct):
        jg = ct * group  # the task's first panel
        if pack:  # its ``group`` panels in one pass over B's rows
            panel = T.alloc_buffer((group, k, nr), dtype)

            def put(p, kk, j, value):
                panel[p, kk, j] = value
            pack_panel(x1, b, put, jg * nr, [nr] * group)
        if packed:  # panel ``ct`` of the build-time packing: K x NR, row after row
            row_blocks(x0, out, b, chunk, ct * nr, nr, nr,
                       lambda kk, ji: x1[(ct * k + kk) * nr + ji], "acc")
            return
        for g in T.serial(group) if group > 1 else (0,):
            # scratch names are unique per shape: FuseTIR renames a callee's allocations
            row_blocks(x0, out, b, chunk, (jg + g) * nr, nr, nr,
                       (lambda kk, ji: panel[g, kk, ji]) if pack  # noqa: B023
                       else (lambda kk, ji: b_at(x1, b, kk, (jg + g) * nr + ji)),  # noqa: B023
                       "acc")

    def tail_panel(x0, x1, out, b, chunk):
        col0 = full * nr
        if packed:  # after the main panels: K x tpad, zero-padded at build time
            row_blocks(x0, out, b, chunk, col0, tpad, tail,
                       lambda kk, ji: x1[full * k * nr + kk * tpad + ji], "tacc")
            return
        if pack:
            tpanel = T.alloc_buffer((k, tpad), dtype)

            def put(p, kk, j, value):
                tpanel[kk, j] = value
            pack_panel(x1, b, put, col0, [tail])
            for kk in T.serial(k):
                for j0, size in vector_pieces(tpad - tail, lanes):
                    for ji in T.vectorized(size):
                        tpanel[kk, tail + j0 + ji] = 0.0
            row_blocks(x0, out, b, chunk, col0, tpad, tail,
                       lambda kk, ji: tpanel[kk, ji], "tacc")
            return
        if tvec:
            row_blocks(x0, out, b, chunk, col0, tvec, tvec,
                       lambda kk, ji: b_at(x1, b, kk, col0 + ji), "tacc")
        if tail > tvec and tail_tile:  # the last columns, under a vector: one tile
            row_blocks(x0, out, b, chunk, col0 + tvec, tail - tvec, tail - tvec,
                       lambda kk, ji: b_at(x1, b, kk, col0 + tvec + ji), "eacc")
        elif tail > tvec:  # too many pieces for the register file: a row at a time
            for r in T.serial(m) if m > 1 else (0,):
                acc = tile_of(x0, b, r, 1, tail - tvec,
                              lambda kk, ji: b_at(x1, b, kk, col0 + tvec + ji), "eacc")
                store(out, acc, b, r, 1, col0 + tvec, tail - tvec)

    def block_row(x0, x1, out, b, row0, height, name):
        """A short K: rows ``row0 .. row0 + height`` across every column, panel after
        panel (C written along its rows), B read where it is (unpacked or packed)."""
        def one(col0, width, stored, b_of, nm):
            store(out, tile_of(x0, b, row0, height, width, b_of, nm), b, row0, height,
                  col0, stored)
        for ct in T.serial(full) if full > 1 else ((0,) if full else ()):
            if packed:  # panel ``ct`` of the build-time packing, read in place
                b_of = lambda kk, ji: x1[(ct * k + kk) * nr + ji]  # noqa: B023, E731
            else:
                b_of = lambda kk, ji: b_at(x1, b, kk, ct * nr + ji)  # noqa: B023, E731
            one(ct * nr, nr, nr, b_of, name)
        if tail and packed:  # zero-padded to whole vectors at build time
            one(full * nr, tpad, tail, lambda kk, ji: x1[full * k * nr + kk * tpad + ji],
                "t" + name)
        elif tail:  # whole vectors, then the rest as in ``tail_panel``
            col0 = full * nr
            if tvec:
                one(col0, tvec, tvec, lambda kk, ji: b_at(x1, b, kk, col0 + ji), "t" + name)
            rest = tail - tvec

            def b_rest(kk, ji):
                return b_at(x1, b, kk, col0 + tvec + ji)
            if rest and tail_tile:
                one(col0 + tvec, rest, rest, b_rest, "e" + name)
            elif rest:  # too many pieces for the register file: a row at a time
                for rr in T.serial(height) if height > 1 else (0,):
                    store(out, tile_of(x0, b, row0 + rr, 1, rest, b_rest, "x" + name), b,
                          row0 + rr, 1, col0 + tvec, rest)

    def short_rows(x0, x1, out, b, chunk):
        for jo in T.serial(per_chunk) if per_chunk > 1 else ((0,) if blocks else ()):
            if blocks % chunks == 0:
                block_row(x0, x1, out, b, (chunk * per_chunk + jo) * mr, mr, "acc")
            else:
                with T.If(chunk * per_chunk + jo < blocks):
                    block_row(x0, x1, out, b, (chunk * per_chunk + jo) * mr, mr, "acc")
        if rtail and chunks == 1:
            block_row(x0, x1, out, b, blocks * mr, rtail, "racc")
        elif rtail:
            with T.If(T.eq(chunk, chunks - 1)):
                block_row(x0, x1, out, b, blocks * mr, rtail, "racc")

    @T.prim_func(private=True)
    def matmul(x0: T.Buffer(a_shape, dtype), x1: T.Buffer(b_shape, dtype),
               out: T.Buffer(out_shape, odt)):
        for task in T.parallel(tasks) if parallel else T.serial(tasks):
            ct = task % col_tasks if col_tasks > 1 else 0
            rest = task // col_tasks if col_tasks > 1 else task
            chunk = rest % chunks if chunks > 1 else 0
            b = rest // chunks if batches > 1 else 0
            if short:
                short_rows(x0, x1, out, b, chunk)
            elif not tail:
                main_panels(x0, x1, out, b, chunk, ct)
            else:
                with T.If(ct < main):
                    main_panels(x0, x1, out, b, chunk, ct)
                with T.Else():
                    tail_panel(x0, x1, out, b, chunk)
    return matmul.with_attr("schedule", "matmul_packed" if packed else "matmul")


__all__ = ["MATMUL_B", "MIN_WORK", "PARALLEL_MIN_MACS", "matmul_with_epilogue",
           "packed_matmul", "scheduled_batch_matmul", "scheduled_matmul",
           "scheduled_transposed_matmul"]
