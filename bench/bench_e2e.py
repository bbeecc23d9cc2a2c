"""End to end: graph modules built by ``runtime.build`` against NumPy.

Run with::

    PYTHONPATH=. .venv/bin/python -m pytest bench/bench_e2e.py --benchmark-enable -q
    # a table: add --benchmark-json=e2e.json, then python bench/report.py e2e.json

The modules, inputs and timing are the demo's (``irkernel.cli.workloads``):
``chain_module`` / ``chain_numpy`` and ``mlp_module`` / ``mlp_numpy``, built with
the default pipeline (graph passes, LegalizeOps, FuseOps, FuseTIR, TIR passes,
LLVM), called through the graph executor and timed by ``speed_rows``, the
function ``irkernel demo`` prints, at 1 and 2 threads (irkernel's pool; NumPy's
BLAS limited to the same count through threadpoolctl). What is measured:

- a chain of 8 elementwise float32 ops over 1e7 elements: NumPy's time over
  ours (NumPy makes 8 passes over memory with temporaries; fusion makes one
  parallel, vectorized loop). Target >= 4x.
- the MLP (batch 64, hidden 1024, 3 x relu(x @ W + b), float32) against
  NumPy + OpenBLAS (its default: 2 threads here): ours must be within 1.5x,
  i.e. NumPy's time over ours >= 1 / 1.5.
- compile time of the MLP module in fresh processes, cold (empty
  ``IRKERNEL_CACHE_DIR``) and from the cache (``e2e_compile_time.py``):
  recorded; asserted only that the second process compiles nothing.
- LegalizeOps, FuseOps and FuseTIR on a 1e5-node generated graph
  (``irkernel.testing.random_function``): time and ops/s per pass (recorded).

The per-kernel launch overhead is in ``bench_executor.py``. Each side is timed in
blocks of its own (2 per side, 2 warm-ups + 9 timed calls each, a 0.3 s pause
before each block; ``irkernel.testing.timing``), medians; the best calls' ratio is
recorded too. Targets apply to the 2-thread row. A figure that misses its target
fails its test, unless ``IRKERNEL_BENCH_REPORT_ONLY=1``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
import passes
import runtime
from irkernel.cli.workloads import (
    SpeedRow,
    chain_inputs,
    chain_module,
    chain_numpy,
    mlp_inputs,
    mlp_module,
    mlp_numpy,
    speed_rows,
)
from irkernel.testing import GraphSpec, random_function

sys.path.insert(0, str(Path(__file__).parent))
from benchutil import check, pool_threads

BENCH_DIR = Path(__file__).parent
THREADS = 2
CHAIN_N = 10**7
CHAIN_TARGET = 4.0
BATCH, HIDDEN, LAYERS = 64, 1024, 3
MLP_WITHIN = 1.5  # ours <= MLP_WITHIN x NumPy's time
LOWERING_NODES = 10**5


@pytest.fixture(autouse=True)
def _threads():
    with pool_threads(THREADS):
        yield


def _figures(rows: list[SpeedRow]) -> dict[str, float]:
    """Every row's figures, keyed by thread count; the unsuffixed keys are the last row's."""
    out: dict[str, float] = {}
    for row in rows:
        for key, value in (("ours_s", row.ours_s), ("numpy_s", row.numpy_s),
                           ("ratio", row.ratio), ("best_ratio", row.best_ratio),
                           ("numpy_threads", row.numpy_threads)):
            out[f"{key}_{row.threads}t"] = value
            out[key] = value
    out["loadavg_1min"] = os.getloadavg()[0]
    return out


# ---------------------------------------------------------------------------
# elementwise chain (memory bound)
# ---------------------------------------------------------------------------

@cache
def _chain():
    ex = runtime.build(chain_module(CHAIN_N))
    a, b = chain_inputs(CHAIN_N)
    return ex, a, b


def test_chain_8_ops_1e7(benchmark) -> None:
    ex, a, b = _chain()
    main = ex["main"]
    np.testing.assert_allclose(main(a, b)[0], chain_numpy(a, b), rtol=2e-6, atol=1e-7)
    tir = ex.get_source("tir")
    assert main.num_kernels == 1, "the chain did not fuse into one kernel"
    figures = _figures(speed_rows(main, [a, b], chain_numpy, (1, THREADS), uses_blas=False))
    benchmark.extra_info.update({
        "n": CHAIN_N, "threads": THREADS, **figures, "kernels": main.num_kernels,
        "parallel": "T.parallel" in tir, "ours_GB_per_s": 3 * a.nbytes / figures["ours_s"] / 1e9,
        "target_ratio": CHAIN_TARGET})
    benchmark.pedantic(lambda: main(a, b), rounds=15, iterations=1, warmup_rounds=1)
    check(figures["ratio"] >= CHAIN_TARGET,
           f"8-op chain on 1e7 float32: {figures['ratio']:.2f}x NumPy "
           f"({figures['ours_s'] * 1e3:.2f} ms vs {figures['numpy_s'] * 1e3:.2f} ms; "
           f"target {CHAIN_TARGET}x)")


# ---------------------------------------------------------------------------
# MLP (compute bound: the scheduled matmul with a fused bias + relu epilogue)
# ---------------------------------------------------------------------------

@cache
def _mlp():
    ex = runtime.build(mlp_module(BATCH, HIDDEN, LAYERS))
    return ex, mlp_inputs(BATCH, HIDDEN, LAYERS)


def test_mlp_64x1024x3(benchmark) -> None:
    ex, args = _mlp()
    main = ex["main"]
    np.testing.assert_allclose(main(*args)[0], mlp_numpy(*args), rtol=1e-4, atol=1e-4)
    figures = _figures(speed_rows(main, args, mlp_numpy, (1, THREADS), uses_blas=True))
    flops = 2 * BATCH * HIDDEN * HIDDEN * LAYERS
    benchmark.extra_info.update({
        "batch": BATCH, "hidden": HIDDEN, "layers": LAYERS, "threads": THREADS, **figures,
        "kernels": main.num_kernels, "ours_GFLOPs": flops / figures["ours_s"] / 1e9,
        "numpy_GFLOPs": flops / figures["numpy_s"] / 1e9, "target_ratio": 1 / MLP_WITHIN})
    benchmark.pedantic(lambda: main(*args), rounds=21, iterations=1, warmup_rounds=1)
    check(figures["ratio"] >= 1 / MLP_WITHIN,
           f"MLP: {1 / figures['ratio']:.2f}x NumPy+OpenBLAS's time "
           f"({figures['ours_s'] * 1e3:.2f} ms vs {figures['numpy_s'] * 1e3:.2f} ms; "
           f"target within {MLP_WITHIN}x)")


# ---------------------------------------------------------------------------
# compile time of the MLP (fresh processes)
# ---------------------------------------------------------------------------

def _run_script(env: dict[str, str]) -> dict[str, float]:
    full_env = {**os.environ, "PYTHONPATH": str(BENCH_DIR.parent), **env}
    done = subprocess.run([sys.executable, str(BENCH_DIR / "e2e_compile_time.py")],
                          env=full_env, capture_output=True, text=True, timeout=600,
                          check=False)
    if done.returncode:
        raise RuntimeError(f"e2e_compile_time.py failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_mlp_compile_time(benchmark) -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        env = {"IRKERNEL_CACHE_DIR": cache_dir}
        cold = _run_script(env)
        warm = [_run_script(env) for _ in range(3)]
    med = {k: statistics.median(w[k] for w in warm) for k in warm[0]}
    benchmark.extra_info.update({
        **{f"cold_{k}": v for k, v in cold.items()},
        **{f"cached_{k}": v for k, v in med.items()}})
    benchmark.pedantic(lambda: None, rounds=1)  # the figures are in extra_info
    assert cold["new_objects"] >= 1, "the cold process compiled nothing"
    assert max(w["new_objects"] for w in warm) == 0, "a second process missed the cache"


# ---------------------------------------------------------------------------
# legalization and fusion of a generated graph
# ---------------------------------------------------------------------------

@cache
def _generated() -> ik.IRModule:
    return ik.IRModule({"main": random_function(GraphSpec(n_nodes=LOWERING_NODES, seed=0))})


def _op_nodes(mod: ik.IRModule) -> int:
    main = mod["main"]
    return int(main.num_nodes - len(main.params)
               - np.count_nonzero(main.kind == ik.ops.OP_CONST))


@pytest.mark.parametrize("stage", ["LegalizeOps", "FuseOps", "FuseTIR"])
def test_lowering_1e5(benchmark, stage: str) -> None:
    mod = _generated()
    legal = passes.LegalizeOps()(mod)  # also the warm-up (Numba kernels loaded)
    fused = passes.FuseOps()(legal)
    run, source = {"LegalizeOps": (passes.LegalizeOps(), mod),
                   "FuseOps": (passes.FuseOps(), legal),
                   "FuseTIR": (passes.FuseTIR(), fused)}[stage]
    out = benchmark.pedantic(lambda: run(source), rounds=3, iterations=1, warmup_rounds=1)
    seconds = benchmark.stats.stats.median
    ops_count = _op_nodes(mod)
    prims = sum(1 for f in out.functions.values() if isinstance(f, ik.tir.PrimFunc))
    benchmark.extra_info.update({
        "nodes": mod["main"].num_nodes, "ops": ops_count, "seconds": seconds,
        "ops_per_s": ops_count / seconds, "prim_funcs_after": prims,
        "functions_in": len(source.functions)})
    assert prims > 0
