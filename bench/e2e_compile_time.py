"""Compile time of the MLP graph module, cold and from the on-disk cache (``bench_e2e.py``).

Usage::

    IRKERNEL_CACHE_DIR=DIR python bench/e2e_compile_time.py   # prints one JSON object

Run it twice with the same (initially empty) ``IRKERNEL_CACHE_DIR``: the first
process compiles every kernel of the MLP (batch 64, hidden 1024, 3 layers:
graph passes, LegalizeOps, FuseOps, FuseTIR, the TIR passes, codegen, LLVM O3
and object emission); the second runs the same graph and TIR passes but loads
the objects from the cache (a fresh process: nothing is in memory).

What is reported, in seconds:

* ``import``: ``import irkernel, passes, runtime`` (Numba's own on-disk cache
  serves the graph-pass kernels; it is not in ``IRKERNEL_CACHE_DIR``).
* ``init``: the one-time process cost of the JIT (LLVM target, TargetMachine,
  first engine), paid by building a tiny kernel with ``cache=False`` so the
  directory being measured is not touched.
* ``build``: ``runtime.build(mlp_module(64, 1024, 3))``, the figure of interest.
  It includes the first use of each graph-pass Numba kernel in the process
  (loaded from Numba's cache: about 0.25 s here, paid once per process);
  ``build_again``: the same build repeated in the process (passes and cache
  look-up without any one-time cost); ``first_call``: the first call of the
  built executable (memory plan, thread pool).
* ``kernels``: kernel launches per call; ``new_objects``: cache entries the
  build added (0 when every object came from the cache).
"""

import json
import sys
import time
from pathlib import Path

start_import = time.perf_counter()
import numpy as np  # noqa: E402

import irkernel  # noqa: E402, F401
import passes  # noqa: E402, F401
import runtime  # noqa: E402

IMPORT_S = time.perf_counter() - start_import

from irkernel.cli.demo import mlp_module  # noqa: E402
from irkernel.tir import script as T  # noqa: E402

BATCH, HIDDEN, LAYERS = 64, 1024, 3


def _index_entries(directory: Path) -> int:
    index = directory / "index"
    return sum(1 for p in index.rglob("*") if p.is_file()) if index.is_dir() else 0


def measure() -> dict[str, float]:
    @T.prim_func(name="warmup")
    def warmup(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        for i in T.serial(4):
            b[i] = a[i] + 1.0

    mod = mlp_module(BATCH, HIDDEN, LAYERS)  # tracing/building the graph is not compiling
    result: dict[str, float] = {"import": IMPORT_S}
    start = time.perf_counter()
    runtime.build(warmup, cache=False)["warmup"](np.zeros(4, np.float32),
                                                 np.empty(4, np.float32))
    result["init"] = time.perf_counter() - start
    directory = runtime.default_directory()
    before = _index_entries(directory)
    start = time.perf_counter()
    ex = runtime.build(mod)
    result["build"] = time.perf_counter() - start
    new_entries = _index_entries(directory) - before
    start = time.perf_counter()
    runtime.build(mod)
    result["build_again"] = time.perf_counter() - start
    rng = np.random.default_rng(0)
    shapes = [(BATCH, HIDDEN)] + [(HIDDEN, HIDDEN), (HIDDEN,)] * LAYERS
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    start = time.perf_counter()
    ex["main"](*args)
    result["first_call"] = time.perf_counter() - start
    result["kernels"] = float(ex["main"].num_kernels)
    result["new_objects"] = float(new_entries)
    return result


if __name__ == "__main__":
    print(json.dumps(measure()))
    sys.stdout.flush()
