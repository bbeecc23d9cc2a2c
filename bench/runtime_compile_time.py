"""Compile time of the benchmark kernels, cold and from the on-disk cache (``bench_runtime.py``).

Usage::

    IRKERNEL_CACHE_DIR=DIR python bench/runtime_compile_time.py   # prints one JSON object

Run it twice with the same (initially empty) ``IRKERNEL_CACHE_DIR``: the
first process compiles every kernel (cold: TIR passes, codegen, the O3
pipeline and object emission), the second loads them from the cache (a fresh
process, so nothing is in memory). The kernels are traced before any timing
(tracing is Python, not compilation).

What is reported, in seconds:

* ``init``: the one-time cost in a process: LLVM's native target, the host
  TargetMachine, libmvec, the code-version digest, the first JIT engine.
  It is paid by building a tiny kernel that is not one of the measured ones
  (with ``cache=False``, so it never touches the directory being measured).
* ``<kernel>``: ``runtime.build(kernel)`` of each kernel after that; ``max``
  and ``median`` over them.
* ``hits``: how many of the kernels were served from the cache (their
  index entry existed before the build), so a caller can tell the two runs apart.
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import kernels
import numpy as np

import runtime
from irkernel.tir import script as T

MATMUL_N = 1024
REDUCE_N = 10**7


def _kernels() -> dict[str, object]:
    out = {f"ew_{op}": kernels.elementwise(op) for op in ("add", "exp", "fma")}
    out["vsum"] = kernels.vsum(REDUCE_N)
    out["matmul"] = kernels.matmul(MATMUL_N, MATMUL_N, MATMUL_N)
    return out


def _index_entries(directory: Path) -> int:
    return sum(1 for p in (directory / "index").rglob("*") if p.is_file()) \
        if (directory / "index").is_dir() else 0


def measure() -> dict[str, float]:
    @T.prim_func(name="warmup")
    def warmup(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        for i in T.serial(4):
            b[i] = a[i] + 1.0

    funcs = _kernels()
    start = time.perf_counter()
    ex = runtime.build(warmup, cache=False)
    out = np.empty(4, np.float32)
    ex["warmup"](np.zeros(4, np.float32), out)
    result: dict[str, float] = {"init": time.perf_counter() - start}
    directory = runtime.default_directory()
    before = _index_entries(directory)
    times = []
    for name, func in funcs.items():
        start = time.perf_counter()
        runtime.build(func)
        result[name] = time.perf_counter() - start
        times.append(result[name])
    result["max"] = max(times)
    result["median"] = statistics.median(times)
    result["hits"] = float(len(funcs) - (_index_entries(directory) - before))
    return result


if __name__ == "__main__":
    print(json.dumps(measure()))
