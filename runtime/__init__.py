"""TIR -> LLVM lowering, JIT, on-disk cache and executors (llvmlite stays in here).

``runtime.build(mod)`` compiles every PrimFunc of a module for the host CPU
and returns an :class:`Executable`; ``ex["f"](*arrays)`` runs one
(destination-passing: outputs are arrays the caller allocates). Modules:
``target`` (host CPU), ``lower`` + ``codegen_expr`` (TIR -> ``llvmlite.ir``),
``jit`` (O3 pipeline, objects, engine), ``cache`` (on-disk objects), ``abi``
(argument checks), ``threadpool`` (parallel loops), ``executable``, ``build``,
``memory_plan`` (arena of a graph's intermediates) and ``executor`` (runs graphs:
``runtime.build(graph_mod)["main"](*arrays) -> list of arrays``).
Imports irkernel and passes; nothing imports runtime.
"""

from __future__ import annotations

from runtime.abi import empty
from runtime.build import build
from runtime.explain import explain
from runtime.cache import DiskCache, default_directory
from runtime.executable import Executable, Kernel
from runtime.executor import GraphExecutor
from runtime.memory_plan import MemoryPlan, plan_memory
from runtime.threadpool import get_num_threads, set_num_threads
from runtime.tune import TuneReport, tune

__all__ = ["DiskCache", "Executable", "GraphExecutor", "Kernel", "MemoryPlan", "TuneReport", "build",
           "default_directory", "empty", "explain", "get_num_threads", "plan_memory",
           "set_num_threads", "tune"]
