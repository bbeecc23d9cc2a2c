"""The host target: LLVM initialization, triple, CPU name and features, the TargetMachine.

One ``Target`` per process (the host does not change while we run), created
on first use. It also knows whether glibc's vector math library (libmvec)
is available, which ISA variant of it the CPU can run, and loads it into the
process so that JIT-linked objects resolve its symbols.

``llvm.initialize()`` no longer exists in llvmlite 0.50 (it raises); the
native target and asm printer are initialized instead, as Numba does.
llvmlite objects never leave ``runtime/``.
"""

from __future__ import annotations

import ctypes.util
import functools
import threading
from dataclasses import dataclass
from typing import Any

import llvmlite
import llvmlite.binding as llvm

from irkernel.target import cpu_target

#: libmvec ISA letters and the (float32, float64) lane counts of each.
_MVEC_ISA = (("avx512f", "e", 16, 8), ("avx2", "d", 8, 4), ("sse4.2", "b", 4, 2))


#: Options of the O3 pipeline (``runtime/jit.py``); part of every cache key, since they
#: change the generated code. LLVM's own loop unroller is off: TIR schedules unroll
#: explicitly (``T.unroll``, ``tir.UnrollLoop``), and LLVM's runtime unrolling of loops
#: that are already vector blocks only adds code (and 25-40% to compile time).
PIPELINE = {"speed_level": 3, "loop_vectorization": True, "slp_vectorization": True,
            "loop_interleaving": True, "loop_unrolling": False}

#: The *lean* tier, for shape-generic kernels (one per op and dtypes, run by every small op of
#: every graph): the O2 pipeline with the vectorizers and the backend at O2. Measured per
#: generic kernel: 40 ms against 110 ms for O3 (full) and 11 ms for the fast tier, whose
#: code (no loop-invariant motion, fast register allocation) ran the strided loops of these
#: kernels 2-3x slower (a mixed 1e5-op graph: 10.6 ms a run, against 3.6 ms).
LEAN_SPEED_LEVEL = 2

#: The *fast* tier, for small kernels (every tensor small, or shape-generic kernels): a
#: short list of IR passes and LLVM's fast instruction selector and register allocator
#: (TargetMachine opt level 0). Measured on a batch of shape-generic kernels: about 2 ms a
#: kernel against 10-40 ms for O3 plus the optimizing backend, whose code is no faster
#: on tensors of a few hundred elements, where a launch costs more than the loop.
FAST_PASSES = ("always_inliner", "sroa", "instruction_combine", "simplify_cfg",
               "loop_rotate", "loop_strength_reduce")
#: The *minimal* tier, for kernels of very many loops (a concat of thousands of parts):
#: LLVM's loop rotation and strength reduction grow faster than linearly with the loops
#: of one function (21 s for 2,000 copy loops, against 0.35 s for these passes).
MINIMAL_PASSES = ("always_inliner", "instruction_combine", "simplify_cfg")


@dataclass(frozen=True)
class Target:
    """The host CPU as LLVM sees it (immutable; get it with :func:`host`)."""

    triple: str
    cpu: str
    features: str
    data_layout: str
    #: ``(isa letter, float32 lanes, float64 lanes)`` of usable libmvec variants, or None.
    mvec: tuple[str, int, int] | None
    machine: Any  # llvm.TargetMachine (kept here; never returned to callers outside runtime)
    #: Whether the CPU has fused multiply-add instructions (x86-64-v3 and up). Without
    #: them TIR ``fma`` is a multiply and an add (``runtime/codegen_expr.py``).
    fma: bool = True

    @property
    def key(self) -> str:
        """What identifies generated code for this target (part of every cache key)."""
        return "|".join((self.triple, self.cpu, self.features, str(self.mvec),
                         llvmlite.__version__, ".".join(map(str, llvm.llvm_version_info)),
                         repr(sorted(PIPELINE.items())), repr(FAST_PASSES),
                         repr(MINIMAL_PASSES)))

    def has_feature(self, name: str) -> bool:
        return f"+{name}" in self.features.split(",")

    def new_machine(self, opt: int = 3) -> Any:
        """A fresh TargetMachine (an MCJIT engine takes ownership of the one it is given
        and frees it with the engine, so engines never get the shared ``machine``)."""
        return _create_machine(self.triple, self.cpu, self.features, opt)

    @functools.cached_property
    def lean_machine(self) -> Any:
        """The TargetMachine of the lean tier (opt level 2), shared like ``machine``."""
        return self.new_machine(opt=2)

    @functools.cached_property
    def fast_machine(self) -> Any:
        """The TargetMachine of the fast tier (opt level 0: fast isel and register
        allocation), shared like ``machine``."""
        return self.new_machine(opt=0)


def _create_machine(triple: str, cpu: str, features: str, opt: int = 3) -> Any:
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=opt, codemodel="jitdefault", jit=True)


_LOCK = threading.Lock()


@functools.cache
def host() -> Target:
    """The host target, created once per process.

    Returns
    -------
    Target
        With an O3 ``TargetMachine`` for the host CPU name and features
        (JIT code model, so objects load anywhere in the address space).
    """
    with _LOCK:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        triple = llvm.get_process_triple()
        cpu = llvm.get_host_cpu_name()
        features = llvm.get_host_cpu_features().flatten()
        machine = _create_machine(triple, cpu, features)
        mvec = _load_libmvec(features) if triple.startswith("x86_64") else None
        return Target(triple, cpu, features, str(machine.target_data), mvec, machine,
                      fma="+fma" in features.split(","))


#: The ISA of each libmvec variant, as ``irkernel.target`` names it.
_MVEC_LEVEL = {"avx512f": "avx512", "avx2": "avx2", "sse4.2": "sse4.2"}
_ISA_ORDER = ("sse4.2", "avx2", "avx512")


@functools.cache
def target_for(name: str = "host") -> Target:
    """The target of the CPU called ``name`` (``irkernel.target.cpu_target``: ``"host"``
    or an x86-64 level the host can run): its own TargetMachine, and the widest libmvec
    variant of its ISA. Code for a level runs on every CPU of that level, so an AVX-512
    machine can build exactly what an AVX2 machine would run (``target="avx2"``)."""
    if name == "host":
        return host()
    cpu, base = cpu_target(name), host()
    machine = _create_machine(base.triple, cpu.llvm_cpu, cpu.llvm_features)
    mvec = None
    if base.mvec is not None:
        mvec = next(((letter, f32, f64) for feature, letter, f32, f64 in _MVEC_ISA
                     if _ISA_ORDER.index(_MVEC_LEVEL[feature]) <= _ISA_ORDER.index(cpu.isa)),
                    None)
    return Target(base.triple, cpu.llvm_cpu, cpu.llvm_features, str(machine.target_data),
                  mvec, machine, fma=cpu.isa != "sse4.2")


def _load_libmvec(features: str) -> tuple[str, int, int] | None:
    """Load glibc's libmvec into the process; the widest variant this CPU runs."""
    path = ctypes.util.find_library("mvec")
    if path is None:
        return None
    try:
        llvm.load_library_permanently(path)
    except RuntimeError:
        return None
    have = set(features.split(","))
    for feature, letter, f32_lanes, f64_lanes in _MVEC_ISA:
        if f"+{feature}" in have:
            return letter, f32_lanes, f64_lanes
    return None


__all__ = ["FAST_PASSES", "MINIMAL_PASSES", "PIPELINE", "Target", "host", "target_for"]
