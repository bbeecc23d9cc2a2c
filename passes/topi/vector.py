"""The vector register width op templates tile for: the host's, or the config's.

Why a knob: a register tile is sized to the register file. The matmul tile of 4 rows x 4
vectors needs 16 accumulators: with AVX-512 (32 registers of 16 float32) that leaves room
for the loads; with AVX2 (16 registers of 8 float32) the same tile, 32 accumulators, spills
on every fma and ran at a fifth of OpenBLAS's speed. The host's width is read from LLVM's
view of the CPU (what the runtime compiles for); ``topi.vector_bits`` overrides it, so
tests check every tile family on any machine and a build can target a narrower CPU.
Imports irkernel.transform and llvmlite only.
"""

from __future__ import annotations

import functools

from irkernel import transform

#: Config: vector register width in bits the op templates tile for (0: the host's).
VECTOR_BITS = "topi.vector_bits"
transform.register_pass_config(
    VECTOR_BITS, int, 0,
    description="vector register width (bits) the op templates size their register tiles "
                "for: 512 (AVX-512), 256 (AVX2), 128 (SSE/NEON); 0: the host's",
    check=lambda v: None if v in (0, 128, 256, 512) else "must be 0, 128, 256 or 512")


@functools.cache
def host_vector_bits() -> int:
    """512 with AVX-512F, 256 with AVX2 and FMA, else 128."""
    import llvmlite.binding as llvm

    features = set(llvm.get_host_cpu_features().flatten().split(","))
    if "+avx512f" in features:
        return 512
    if "+avx2" in features and "+fma" in features:
        return 256
    return 128


def vector_bits() -> int:
    """The width of the current PassContext's ``topi.vector_bits``, else the host's."""
    return int(transform.PassContext.current().get_config(VECTOR_BITS)) or host_vector_bits()


def registers(bits: int) -> int:
    """Vector registers of an ISA of this width (x86-64: 32 with AVX-512, else 16)."""
    return 32 if bits >= 512 else 16


__all__ = ["VECTOR_BITS", "host_vector_bits", "registers", "vector_bits"]
