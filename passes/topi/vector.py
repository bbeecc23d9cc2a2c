"""The target op templates tile for: the host's, or the one the PassContext names.

Why a knob: a register tile is sized to the register file. The matmul tile of 4 rows x 4
vectors needs 16 accumulators: with AVX-512 (32 registers of 16 float32) that leaves room
for the loads; with AVX2 (16 registers of 8 float32) the same tile, 32 accumulators, spills
on every fma and ran at a fifth of OpenBLAS's speed. Every template reads its tiles from
one :class:`irkernel.target.CPUTarget`: config ``target`` names it (``"host"``,
``"x86-64-v3"``, ``"avx2"``, ...; the code generator compiles for the same one), and
``topi.vector_bits`` still overrides only the width the tiles are sized for, so tests
check every tile family on any machine. Imports irkernel.transform, irkernel.target and irkernel.tir.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from irkernel import transform
from irkernel.target import ALIASES, LEVELS, CPUTarget, cpu_target
from irkernel.tir import script as T
from irkernel.tir.expr import PrimExpr

#: Config: the CPU target templates tile for and the code generator compiles for.
TARGET = "target"
transform.register_pass_config(
    TARGET, str, "host",
    description="CPU target: 'host', or an x86-64 level the host can run: "
                "x86-64-v2 (sse4.2), x86-64-v3 (avx2), x86-64-v4 (avx512)",
    check=lambda v: None if v == "host" or v in LEVELS or v in ALIASES
    else f"must be 'host' or one of {', '.join(sorted((*LEVELS, *ALIASES)))}")

#: Config: vector register width in bits the op templates tile for (0: the target's).
VECTOR_BITS = "topi.vector_bits"
transform.register_pass_config(
    VECTOR_BITS, int, 0,
    description="vector register width (bits) the op templates size their register tiles "
                "for: 512 (AVX-512), 256 (AVX2), 128 (SSE/NEON); 0: the target's",
    check=lambda v: None if v in (0, 128, 256, 512) else "must be 0, 128, 256 or 512")


#: Config: L1 data cache bytes the op templates block for (0: the target's).
L1D_BYTES = "topi.l1d_bytes"
transform.register_pass_config(
    L1D_BYTES, int, 0,
    description="L1 data cache size (bytes) the op templates size their blocks for "
                "(tile runs, depthwise bands): 0: the target's; tests set a small one to "
                "exercise the blocked forms on small shapes",
    check=lambda v: None if v == 0 or v >= 256 else "must be 0 or at least 256")


def current_target() -> CPUTarget:
    """The current PassContext's target, with its ``topi.vector_bits`` and
    ``topi.l1d_bytes`` applied."""
    ctx = transform.PassContext.current()
    target = cpu_target(str(ctx.get_config(TARGET)))
    bits = int(ctx.get_config(VECTOR_BITS))
    target = target.with_vector_bits(bits) if bits else target
    l1d = int(ctx.get_config(L1D_BYTES))
    return replace(target, l1d=l1d) if l1d and l1d != target.l1d else target


def vector_bits() -> int:
    """The vector width the current target's templates tile for."""
    return current_target().vector_bits


def vector_pieces(width: int, lanes: int) -> list[tuple[int, int]]:
    """``(offset, size)`` pieces of a row of ``width`` elements: whole vectors of ``lanes``,
    then powers of two. LLVM scalarizes vector types of other lengths (a tile 3 vectors
    wide written as one ``<48 x float>`` ran at 5 GFLOP/s instead of 40)."""
    pieces, j = [], 0
    while width - j >= lanes:
        pieces.append((j, lanes))
        j += lanes
    size = lanes
    while j < width:
        size //= 2
        if width - j >= size:
            pieces.append((j, size))
            j += size
    return pieces


def vector_columns(width: int, lanes: int, body: Callable[[PrimExpr], None],
                   step: int | None = None) -> None:
    """Emit ``body(j)`` for ``j`` in ``[0, width)``: vectorized chunks of ``step`` (default
    one vector of ``lanes``) in a serial loop, then the tail in :func:`vector_pieces`."""
    step = step or lanes
    full = width // step
    if full:
        for jc in T.serial(full):
            for ji in T.vectorized(step):
                body(jc * step + ji)
    for j0, size in vector_pieces(width - full * step, lanes):
        for ji in T.vectorized(size):
            body(full * step + j0 + ji)


def registers(bits: int) -> int:
    """Vector registers of an ISA of this width (x86-64: 32 with AVX-512, else 16)."""
    return 32 if bits >= 512 else 16


__all__ = ["L1D_BYTES", "TARGET", "VECTOR_BITS", "current_target", "registers", "vector_bits",
           "vector_columns", "vector_pieces"]
