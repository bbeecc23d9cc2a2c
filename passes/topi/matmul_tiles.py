"""The register tiles of the float matmul: how many rows and columns one tile accumulates.

Why a module of its own: the tile decides everything else of a schedule (the panel
width, so the packing order of B, and the number of parallel tasks), for the schedules
that pack B per call (``matmul.py``) and the one that reads B packed at build time
(``matmul_packed.py``). Sized to the target's register file (``passes/topi/vector.py``).
Imports irkernel.target only.
"""

from __future__ import annotations

from irkernel.target import CPUTarget

#: Fewest tasks of a parallel matmul (balance over the pool's threads): panel grouping
#: may not leave fewer, and fewer column panels take narrower ones or row chunks.
MIN_TASKS = 8
#: Row blocks a row chunk keeps at least (two: a chunk packs its own copy of the panel).
ROW_CHUNK_BLOCKS = 2

#: Largest packed panel for the widest tile, as a fraction of L2 (256 KiB of a 1 MiB
#: L2); above it a narrower panel keeps the packed block in L2 beside A's rows and C.
WIDE_PANEL_L2_FRACTION = 4


#: Most accumulator vectors per row of a tile reading pre-packed panels with few rows:
#: eight independent chains hide the fma latency (4 cycles, two a cycle), and narrower
#: panels leave enough of them for two threads (1 x 1000 columns: 8 panels, not 3).
PACKED_MAX_VECTORS = 8
#: Most rows one tile takes whole (one pass over B; `register_tile`, `packed_tile`).
PACKED_MAX_ROWS = 8
#: Most vector pieces (a vector, then powers of two) of a narrow N taken as one tile
#: (``register_tile``: N between one and two vectors).
NARROW_PIECES = 3


def accumulators(target: CPUTarget) -> int:
    """Accumulator vectors a register tile may hold: the register file less the B vectors
    of one K step and the broadcast of A (24 of 32 with AVX-512, 12 of 16 otherwise)."""
    return target.vector_registers * 3 // 4


def register_tile(m: int, n: int, k: int, dtype: str, target: CPUTarget,
                  whole_narrow: bool = True) -> tuple[int, int] | None:
    """(MR, NR) for ``target``'s register file, or None when N is below 4 (fewer columns
    than a vector take vectors of half the width, down to 4 lanes).

    The tile depends on the register file and on M only through "fewer rows than a
    tile": rows and columns past a multiple of the tile go to tail tiles (which cost
    in proportion to their size), so a prime M gets the same main tile as a round one.
    Many rows: ``MR x V`` vectors with V = 4 (AVX-512: 6 x 4, 24 accumulators) or 2
    (AVX2: 6 x 2, OpenBLAS's Haswell shape); a panel above ``l2 / WIDE_PANEL_L2_FRACTION``
    halves V to stay in L2 (a quarter of it). Fewer rows than MR (a batch-1 classifier, a
    GEMV) take wider tiles, up to 8 vectors: independent accumulators hide the FMA latency,
    which a single 1-vector chain exposes (4 cycles per fma on a core that issues two a cycle).
    Between one and two vectors of columns (20 of 16 lanes), with ``whole_narrow``, the
    tile takes the whole row as pieces (16 + 4) and fewer rows (``accumulators // pieces``,
    up to 8), so there is no tail tile.
    """
    itemsize = 4 if dtype == "float32" else 8
    lanes = target.lanes(dtype)
    while n < lanes and lanes > 4:  # narrow N: half-width vectors (same register file)
        lanes //= 2
    vectors = n // lanes
    if vectors == 0:
        return None
    budget = accumulators(target)
    wide = 4 if target.vector_registers >= 32 else 2
    if k * wide * lanes * itemsize > target.l2 // WIDE_PANEL_L2_FRACTION:
        wide = max(1, wide // 2)
    v = min(wide, vectors)
    mr = min(budget // v, 8)
    pieces = vectors + bin(n % lanes).count("1")  # vector_pieces(n, lanes)
    if whole_narrow and vectors == 1 and 1 < pieces <= NARROW_PIECES and m > PACKED_MAX_ROWS:
        # one vector and a part, B read unpacked: the whole row in one tile (pieces of
        # 16 + 4 for 20 columns), not a vector tile and a tail tile that would each run
        # the K loop, A broadcast twice (B packed at build time pads its tail panel to
        # whole vectors instead: ``packed_tile``)
        return min(PACKED_MAX_ROWS, budget // pieces), n
    if m < mr:
        mr = m
        v = min(vectors, budget // m, 24)
    elif m <= PACKED_MAX_ROWS and budget // m >= 2:  # 7 or 8 rows: one tile, not 6 + 1
        mr, v = m, min(vectors, budget // m)
    return mr, v * lanes


def packed_tile(m: int, n: int, k: int, dtype: str, target: CPUTarget
                ) -> tuple[int, int, int] | None:
    """(MR, NR, lanes) of the tile that reads B pre-packed at build time
    (``passes/topi/matmul_packed.py``), or None when N is below 4.

    Up to ``PACKED_MAX_ROWS`` rows take one tile of all the rows (each B vector loaded
    once, used by every row: 8 x 3, 4 x 6, 2 x 8 or 1 x 8 vectors with AVX-512), so the
    matmul is one sequential pass over the packed panels, bound by the fmas when B is in
    cache and by its bandwidth when not; more rows take :func:`register_tile`'s tile."""
    tile = register_tile(m, n, k, dtype, target, whole_narrow=False)
    if tile is None:
        return None
    mr, nr = tile
    lanes = target.lanes(dtype)
    while n < lanes and lanes > 4:
        lanes //= 2
    if m <= PACKED_MAX_ROWS:
        mr = m
        v = min(n // lanes, max(1, accumulators(target) // m), PACKED_MAX_VECTORS)
        nr = v * lanes
    return mr, nr, min(lanes, nr)


def tail_width(tail: int, lanes: int) -> int:
    """Columns of a packed tail panel of ``tail`` columns: whole vectors of the narrowest
    power-of-two width that holds the tail, up to ``lanes`` (31 of 16 lanes: 32; 5: 8;
    1: 1). Rounding a 1-column tail up to a whole 16-lane vector made its task as costly
    as a full panel's (17 columns: twice the work)."""
    width = 1
    while width < min(tail, lanes):
        width *= 2
    return -(-tail // width) * width


def packed_length(n: int, k: int, nr: int, lanes: int) -> int:
    """Elements of B packed for a tile ``nr`` wide: ``N // nr`` panels of ``K x nr``, then
    the ``N % nr`` tail columns zero-padded to :func:`tail_width`, ``K x tpad``."""
    full, tail = divmod(n, nr)
    return (full * nr + tail_width(tail, lanes)) * k


def split_columns(tile: tuple[int, int], batches: int, m: int, n: int, b_t: bool,
                  target: CPUTarget, dtype: str) -> tuple[int, int]:
    """The tile, narrowed (half the vectors, more rows) while a packing matmul would
    otherwise be split into row chunks of few row blocks: fewer than ``MIN_TASKS`` column
    panels and ``2 * ROW_CHUNK_BLOCKS`` to ``MIN_TASKS`` row blocks (``row_chunks``;
    with more row blocks the packing is amortized and row chunks cost little).

    Why: every row chunk packs its own copy of its panel, so with a few row blocks per
    chunk the packing, a large part of the work, nearly doubles (24 x 1024 @ 1024 x 256:
    four 64-column panels, each packed twice). Narrower panels split N instead: the same
    packing in more, smaller tasks (eight 32-column panels, each packed once)."""
    mr, nr = tile
    lanes = target.lanes(dtype)
    budget = accumulators(target)
    if -(-m // mr) <= 1 and not b_t or nr % lanes:  # unpacked: read in place; or narrow
        return tile
    while (nr > lanes and 2 * ROW_CHUNK_BLOCKS <= m // mr < MIN_TASKS
           and batches * -(-n // nr) < MIN_TASKS):
        v = nr // lanes // 2
        mr, nr = min(budget // v, 8, m), v * lanes
    return mr, nr


#: Bytes of each B row a task packs at least (panels are grouped up to this): every row
#: of a packed panel is a separate page of B when N is large, so a 64-byte panel row
#: costs a TLB walk per 64 bytes; four panels per pass read 256.
PACK_ROW_BYTES = 256


def panel_group(full: int, k: int, nr: int, itemsize: int, max_bytes: int) -> int:
    """Panels per task: up to ``PACK_ROW_BYTES`` per packed row, dividing the panel count,
    within ``max_bytes`` (half of L2: the panels stay there while the task's row blocks
    stream) and leaving ``MIN_TASKS`` tasks."""
    for group in range(max(1, PACK_ROW_BYTES // (nr * itemsize)), 1, -1):
        if (full % group == 0 and full // group >= MIN_TASKS
                and group * k * nr * itemsize <= max_bytes):
            return group
    return 1


def row_chunks(col_tasks: int, blocks: int) -> int:
    """Row chunks per column task, so that a matmul with few column panels (N of one or
    two panels, M in the thousands) still has ``MIN_TASKS`` tasks; each chunk keeps at
    least two row blocks (a chunk of a packing schedule packs its own copy of the panel)."""
    if col_tasks >= MIN_TASKS:
        return 1
    return max(1, min(-(-MIN_TASKS // col_tasks), blocks // ROW_CHUNK_BLOCKS))


#: Largest K of a *short* matmul (``matmul._schedule``): its tile runs few fmas per element
#: stored, so C's stores weigh. Tasks then split the rows, not the columns, each walking
#: whole rows of C (full cache lines, written once, in order) and reading B in place
#: (``K x N`` within half of L2), not packing it. Measured old/new in one process, one
#: thread: K of 9-16 1.2-1.4x, 24-32 1.0-1.16x (3000 x 32 x 1000 with a transposed A).
SHORT_K = 32

#: Widest row of B (bytes) read in place rather than packed per call: the rows of a
#: panel are then at most this far apart, a few cache lines, sequential enough for the
#: prefetchers and in as few pages as the packed copy (packing a 2 x 44 x 1079 @ 1079 x
#: 20 cost as much as its fmas).
NARROW_ROW_BYTES = 256


def short_k(k: int, n: int, itemsize: int, target: CPUTarget) -> bool:
    """Whether an untransposed B is read in place by tasks over row chunks (the *short*
    schedule of ``matmul._schedule``): a short K (``SHORT_K``), or B's rows within a few
    cache lines (``NARROW_ROW_BYTES``: read in place sequentially enough; a packed copy
    pays off only when the rows of a panel sit pages apart), and B within half of L2,
    where it stays while every row block reads it."""
    return (k <= SHORT_K or n * itemsize <= NARROW_ROW_BYTES) \
        and k * n * itemsize <= target.l2 // 2

__all__ = ["MIN_TASKS", "NARROW_PIECES", "NARROW_ROW_BYTES", "PACKED_MAX_ROWS",
           "PACKED_MAX_VECTORS", "PACK_ROW_BYTES", "ROW_CHUNK_BLOCKS", "SHORT_K",
           "WIDE_PANEL_L2_FRACTION", "accumulators", "packed_length", "packed_tile",
           "panel_group", "register_tile", "row_chunks", "short_k", "split_columns",
           "tail_width"]
