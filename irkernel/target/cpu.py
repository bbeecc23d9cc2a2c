"""The CPU that kernels are scheduled and compiled for, as plain data.

Why one object: a template sizes its register tiles to the vector registers, its panels
to L2, its task counts to the cores; the code generator picks the instruction set.
When those facts were read in several places (the matmul's vector width from LLVM here,
the conv tiles as constants fitted on one AVX2 machine) the tiles of one build could
disagree with each other and with the code LLVM emitted. :class:`CPUTarget` is read
once, from LLVM's view of the host CPU (what the JIT compiles for) and from sysfs (cache
sizes), and every template and the code generator read this one value.

A build can aim at another CPU of the same family by name (:func:`cpu_target`): the
x86-64 micro-architecture levels ``x86-64-v2`` (SSE4.2), ``x86-64-v3`` (AVX2 + FMA) and
``x86-64-v4`` (AVX-512), also spelled ``sse4.2``, ``avx2``, ``avx512``. A named level
keeps the host's cache sizes and cores (they describe the machine the code runs on) and
takes the level's registers and instruction set, so an AVX-512 machine can build and
test exactly what an AVX2 machine would run.

Imports the standard library and llvmlite only (the bottom rung).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from pathlib import Path

#: The names :func:`cpu_target` accepts besides ``"host"``, and the LLVM CPU of each.
LEVELS = {"x86-64-v2": "sse4.2", "x86-64-v3": "avx2", "x86-64-v4": "avx512"}
ALIASES = {isa: level for level, isa in LEVELS.items()}

#: Cache sizes assumed where sysfs does not say (bytes): a common x86-64 core.
DEFAULT_CACHES = (32 * 1024, 1024 * 1024, 8 * 1024 * 1024)


@dataclass(frozen=True)
class CPUTarget:
    """What the templates and the code generator need to know of a CPU."""

    #: ``"host"`` or the level it was asked for (``"x86-64-v3"``).
    name: str
    #: LLVM's CPU name and feature string: what the code generator compiles for.
    llvm_cpu: str
    llvm_features: str
    #: ``"sse4.2"``, ``"avx2"`` or ``"avx512"``: the widest vector ISA the code may use.
    isa: str
    #: 8-bit dot products (``vpdpbusd``) and AMX tiles.
    vnni: bool
    amx: bool
    #: Width of a vector register and how many there are.
    vector_bits: int
    vector_registers: int
    #: Vector FMAs of ``vector_bits`` the core issues per cycle (its FMA peak).
    fma_units: int
    #: Data cache sizes in bytes: L1 and L2 of one core, L3 of the package.
    l1d: int
    l2: int
    l3: int
    #: Cores this process may run on.
    cores: int

    def lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one vector register."""
        return self.vector_bits // (8 * {"float64": 8, "int64": 8, "float16": 2,
                                          "bfloat16": 2, "int16": 2, "int8": 1,
                                          "uint8": 1}.get(dtype, 4))

    @property
    def key(self) -> str:
        """What identifies code scheduled for this target (part of every kernel key)."""
        return "|".join(map(str, (self.isa, self.vector_bits, self.vector_registers,
                                  self.fma_units, self.l1d, self.l2, self.l3, self.vnni,
                                  self.amx, self.llvm_cpu)))

    def with_vector_bits(self, bits: int) -> CPUTarget:
        """The same CPU with templates tiled for ``bits``-wide registers (``topi.vector_bits``:
        x86-64 has 32 registers with AVX-512 and 16 below it)."""
        if bits == self.vector_bits:
            return self
        return replace(self, vector_bits=bits, vector_registers=32 if bits >= 512 else 16)

    def describe(self) -> str:
        """One line for benchmark tables: CPU, ISA, registers, caches, cores."""
        flags = "".join((" +VNNI" if self.vnni else "", " +AMX" if self.amx else ""))
        return (f"{self.llvm_cpu} ({self.name}): {self.isa.upper()}{flags}, "
                f"{self.vector_registers} x {self.vector_bits}-bit registers, "
                f"{self.fma_units} FMA/cycle, L1d {self.l1d // 1024} KiB, "
                f"L2 {self.l2 // 1024} KiB, L3 {self.l3 // 1024 // 1024} MiB, "
                f"{self.cores} cores")


def _isa(features: set[str]) -> str:
    if {"+avx512f", "+avx512bw", "+avx512dq", "+avx512vl"} <= features:
        return "avx512"
    if {"+avx2", "+fma"} <= features:
        return "avx2"
    return "sse4.2"


def _fma_units(cpu: str, isa: str) -> int:
    """512-bit FMAs per cycle: AMD's Zen 4 splits them into two 256-bit halves (one a
    cycle); Intel's server cores and Zen 5 issue two. Below AVX-512 every x86-64 core
    with FMA since Haswell issues two 256-bit FMAs a cycle."""
    if isa == "avx512" and cpu == "znver4":
        return 1
    return 2


def _caches(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> tuple[int, int, int]:
    """(L1d, L2, L3) in bytes from sysfs; the defaults where it is missing."""
    found: dict[int, int] = {}
    for index in sorted(root.glob("index*")) if root.is_dir() else ():
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or not size:
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(size[-1], 1)
        try:
            found[level] = int(size.rstrip("KM")) * scale
        except ValueError:
            continue
    return tuple(found.get(level, default)  # type: ignore[return-value]
                 for level, default in zip((1, 2, 3), DEFAULT_CACHES, strict=True))


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@functools.cache
def host_target() -> CPUTarget:
    """The CPU this process runs on, as LLVM sees it (read once per process)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten()
    have = set(features.split(","))
    isa = _isa(have)
    bits = {"avx512": 512, "avx2": 256}.get(isa, 128)
    l1d, l2, l3 = _caches()
    return CPUTarget(
        name="host", llvm_cpu=cpu, llvm_features=features, isa=isa,
        vnni=bool({"+avx512vnni", "+avxvnni"} & have), amx="+amx-tile" in have,
        vector_bits=bits, vector_registers=32 if bits >= 512 else 16,
        fma_units=_fma_units(cpu, isa), l1d=l1d, l2=l2, l3=l3, cores=_cores())


@functools.cache
def cpu_target(name: str = "host") -> CPUTarget:
    """The target called ``name``: ``"host"``, an x86-64 level (``"x86-64-v3"``) or its
    ISA alias (``"avx2"``). A level above the host's is refused: its code would not run.

    Raises
    ------
    ValueError
        For an unknown name, or a level the host CPU can not run.
    """
    host = host_target()
    if name == "host":
        return host
    level = ALIASES.get(name, name)
    if level not in LEVELS:
        raise ValueError(f"target: unknown CPU target {name!r}; expected 'host' or one of "
                         f"{', '.join(sorted((*LEVELS, *ALIASES)))}")
    isa = LEVELS[level]
    order = ("sse4.2", "avx2", "avx512")
    if order.index(isa) > order.index(host.isa):
        raise ValueError(f"target: {name!r} needs {isa.upper()}, which this CPU "
                         f"({host.llvm_cpu}, {host.isa.upper()}) does not have")
    bits = {"avx512": 512, "avx2": 256}.get(isa, 128)
    return replace(host, name=level, llvm_cpu=level, llvm_features="", isa=isa,
                   vnni=host.vnni and isa == "avx512", amx=False, vector_bits=bits,
                   vector_registers=32 if bits >= 512 else 16,
                   fma_units=_fma_units(level, isa))


__all__ = ["ALIASES", "LEVELS", "CPUTarget", "cpu_target", "host_target"]
