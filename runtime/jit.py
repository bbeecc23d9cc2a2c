"""LLVM IR text -> optimized module -> object code, and objects -> callable addresses.

Optimization uses llvmlite 0.50's new pass manager (the legacy
PassManagerBuilder is gone): ``create_pipeline_tuning_options`` with
``speed_level = 3`` and loop and SLP vectorization set *explicitly* (as
Numba's ``create_pass_builder`` does; the options are ``target.PIPELINE``,
which is part of every cache key), then ``create_pass_builder(tm, pto)``
and its module pass manager. The pass builder takes the host TargetMachine,
so the vectorizers' cost model sees the CPU's real vector width. Objects are
emitted by the host TargetMachine and loaded into an MCJIT ``ExecutionEngine``
(``add_object_file``) built on an empty module, so a cached object is loaded
without any compilation.

LLVM compilation is serialized by a lock (llvmlite's global context is not
meant for concurrent use). llvmlite objects never leave ``runtime/``.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

from runtime.objfile import ABI_RECORD_SIZE, ABI_SUFFIX
from runtime.target import FAST_PASSES, LEAN_SPEED_LEVEL, MINIMAL_PASSES, PIPELINE, host, target_for

_COMPILE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Compiled:
    """An object file."""

    obj: bytes


#: Optimization tiers: ``full`` (the O3 pipeline and the optimizing backend) for kernels
#: whose run time matters, ``lean`` (the O2 pipeline with the vectorizers, backend O2) for
#: shape-generic kernels, ``fast`` (``target.FAST_PASSES``, fast isel) for small kernels,
#: ``minimal`` (``target.MINIMAL_PASSES``, fast isel) for kernels of very many loops.
TIERS = ("full", "lean", "fast", "minimal")


def optimize(ir_text: str, tier: str = "full", cpu: str = "host") -> llvm.ModuleRef:
    """Parse, verify and optimize ``ir_text`` in ``tier`` for the CPU target ``cpu``."""
    target = target_for(cpu)
    module = llvm.parse_assembly(ir_text)
    module.verify()
    if tier in ("fast", "minimal"):
        pb = llvm.create_pass_builder(target.machine,
                                      llvm.create_pipeline_tuning_options(speed_level=0))
        mpm = llvm.create_new_module_pass_manager()
        for name in FAST_PASSES if tier == "fast" else MINIMAL_PASSES:
            getattr(mpm, f"add_{name}_pass")()
        mpm.run(module, pb)
        return module
    if tier not in ("full", "lean"):
        raise ValueError(f"unknown optimization tier {tier!r}; expected one of {TIERS}")
    speed = PIPELINE["speed_level"] if tier == "full" else LEAN_SPEED_LEVEL
    pto = llvm.create_pipeline_tuning_options(speed_level=speed)
    pto.loop_vectorization = PIPELINE["loop_vectorization"]
    pto.slp_vectorization = PIPELINE["slp_vectorization"]
    pto.loop_interleaving = PIPELINE["loop_interleaving"]
    pto.loop_unrolling = PIPELINE["loop_unrolling"]
    pb = llvm.create_pass_builder(target.machine, pto)
    pm = pb.getModulePassManager()
    pm.run(module, pb)
    return module


def _machine(tier: str, cpu: str = "host") -> llvm.TargetMachine:
    target = target_for(cpu)
    if tier == "full":
        return target.machine
    return target.lean_machine if tier == "lean" else target.fast_machine


def compile_ir(ir_text: str, tier: str = "full", cpu: str = "host") -> Compiled:
    """Optimize ``ir_text`` in ``tier`` and emit an object file for the CPU ``cpu``."""
    with _COMPILE_LOCK:
        module = optimize(ir_text, tier, cpu)
        return Compiled(_machine(tier, cpu).emit_object(module))


def assembly(ir_text: str, tier: str = "full", cpu: str = "host") -> str:
    """Assembly of ``ir_text`` after optimization (for ``get_source("asm")``)."""
    with _COMPILE_LOCK:
        return str(_machine(tier, cpu).emit_assembly(optimize(ir_text, tier, cpu)))


def optimized_ir(ir_text: str, tier: str = "full", cpu: str = "host") -> str:
    """The optimized LLVM IR of ``ir_text``."""
    with _COMPILE_LOCK:
        return str(optimize(ir_text, tier, cpu))


class Engine:
    """An MCJIT engine holding loaded objects; addresses stay valid while it lives."""

    def __init__(self) -> None:
        target = host()
        with _COMPILE_LOCK:
            self._empty = llvm.parse_assembly(
                f'target triple = "{target.triple}"\n'
                f'target datalayout = "{target.data_layout}"\n')
            # the engine owns (and frees) its TargetMachine: give it a private one
            self._engine = llvm.create_mcjit_compiler(self._empty, target.new_machine())
        self._objects: list[llvm.ObjectFileRef] = []

    def add_objects(self, objects: list[bytes]) -> None:
        """Link ``objects`` into the engine (their symbols resolve against the process)."""
        with _COMPILE_LOCK:
            for data in objects:
                ref = llvm.ObjectFileRef.from_data(data)
                self._engine.add_object_file(ref)
                self._objects.append(ref)
            self._engine.finalize_object()

    def address(self, symbol: str) -> int:
        """The address of a loaded function; LookupError when the objects lack it."""
        addr = self._engine.get_function_address(symbol)
        if not addr:
            raise LookupError(f"symbol {symbol!r} is not defined by the loaded objects")
        return int(addr)

    def abi_record(self, symbol: str) -> bytes:
        """The ABI record of kernel ``symbol`` (``runtime/abi.py``); b"" when the loaded
        objects lack one. Its size was checked with the object (``runtime/objfile.py``)."""
        addr = self._engine.get_global_value_address(symbol + ABI_SUFFIX)
        return ctypes.string_at(addr, ABI_RECORD_SIZE) if addr else b""

    def data_address(self, symbol: str) -> int:
        """The address of a global variable of the loaded objects; LookupError when absent."""
        addr = self._engine.get_global_value_address(symbol)
        if not addr:
            raise LookupError(f"global {symbol!r} is not defined by the loaded objects")
        return int(addr)


def load_host_ir(body: str) -> Engine:
    """An engine holding ``body`` (LLVM IR without the target lines) compiled for the
    host: the runtime's own native pieces (the launcher, the thread pool)."""
    target = host()
    text = (f'target triple = "{target.triple}"\n'
            f'target datalayout = "{target.data_layout}"\n{body}')
    engine = Engine()
    engine.add_objects([compile_ir(text).obj])
    return engine


__all__ = ["TIERS", "Compiled", "Engine", "assembly", "compile_ir", "load_host_ir", "optimize",
           "optimized_ir"]
