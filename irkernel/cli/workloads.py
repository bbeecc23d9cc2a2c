"""The demo's compiled workloads and their fair comparison with NumPy.

``irkernel demo`` prints these rows and ``bench/bench_e2e.py`` records them:
both call :func:`speed_rows` with the same modules, inputs and timing
parameters, so the demo's figures are what the benchmark measures. Each
comparison times irkernel and NumPy in blocks of their own after warm-ups,
with a pause between blocks (:mod:`irkernel.testing.timing`), once per thread
count: irkernel's pool is set to ``t`` threads and NumPy's BLAS is limited to
``t`` too (through ``threadpoolctl``, a dependency; elementwise NumPy runs on
one thread whatever the setting), and each row records the count NumPy's BLAS
actually ran at, read back inside the limit.

``runtime`` is imported inside :func:`speed_rows` (the CLI imports it lazily).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from irkernel.ir.builder import GraphBuilder
from irkernel.ir.module import IRModule
from irkernel.testing.timing import DEFAULT_PAUSE_S, blas_threads, compare, limit_blas

#: Timing of every comparison of the demo and of bench_e2e (per side and thread count:
#: 2 blocks of 2 warm-ups + 9 timed calls).
REPEAT, WARMUPS, ROUNDS = 9, 2, 2


def mlp_module(batch: int, hidden: int, layers: int) -> IRModule:
    """``relu(x @ W + b)`` ``layers`` times; weights and biases are parameters."""
    bb = GraphBuilder("main")
    h = bb.param("x", (batch, hidden), "float32")
    for k in range(layers):
        w = bb.param(f"w{k}", (hidden, hidden), "float32")
        b = bb.param(f"b{k}", (hidden,), "float32")
        h = bb.call("relu", bb.call("add", bb.call("matmul", h, w), b))
    return IRModule({"main": bb.finish([h])})


def mlp_numpy(x: np.ndarray, *weights: np.ndarray) -> np.ndarray:
    h = x
    for w, b in zip(weights[0::2], weights[1::2], strict=False):
        h = np.maximum(h @ w + b, np.float32(0))
    return h


def mlp_inputs(batch: int, hidden: int, layers: int, seed: int = 0) -> list[np.ndarray]:
    """``x`` then ``w0, b0, w1, b1, ...`` (float32, scaled so activations stay O(1))."""
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal((batch, hidden)).astype(np.float32)]
    for _ in range(layers):
        inputs.append((rng.standard_normal((hidden, hidden)) / np.sqrt(hidden))
                      .astype(np.float32))
        inputs.append(rng.standard_normal(hidden).astype(np.float32) * np.float32(0.1))
    return inputs


def chain_module(n: int) -> IRModule:
    """Eight elementwise ops over ``n`` float32: what fusion turns into one loop."""
    bb = GraphBuilder("main")
    a = bb.param("a", (n,), "float32")
    b = bb.param("b", (n,), "float32")
    half = bb.const(np.float32(0.5))
    t = bb.call("multiply", a, b)
    t = bb.call("add", t, a)
    t = bb.call("multiply", t, half)
    t = bb.call("subtract", t, b)
    t = bb.call("maximum", t, a)
    t = bb.call("multiply", t, t)
    t = bb.call("add", t, half)
    t = bb.call("sqrt", t)
    return IRModule({"main": bb.finish([t])})


def chain_numpy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    half = np.float32(0.5)
    t = a * b
    t = t + a
    t = t * half
    t = t - b
    t = np.maximum(t, a)
    t = t * t
    t = t + half
    return np.sqrt(t)


def chain_inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)]


@dataclass(frozen=True)
class SpeedRow:
    """One comparison at one thread count (seconds are medians of the timed calls)."""

    threads: int  # irkernel's pool
    numpy_threads: int | None  # NumPy's BLAS (1 for elementwise code); None: no BLAS found
    ours_s: float
    numpy_s: float
    ratio: float  # numpy_s / ours_s: > 1 means irkernel is faster
    best_ratio: float  # fastest NumPy call / fastest irkernel call


def speed_rows(run: Callable[..., object], inputs: Sequence[np.ndarray],
               reference: Callable[..., object], threads: Sequence[int], uses_blas: bool,
               repeat: int = REPEAT, warmups: int = WARMUPS, pause: float = DEFAULT_PAUSE_S,
               rounds: int = ROUNDS) -> list[SpeedRow]:
    """Time ``run(*inputs)`` (irkernel) against ``reference(*inputs)`` (NumPy) per thread
    count, each side in blocks of its own; restores the pool's thread count after.

    ``uses_blas`` says whether the NumPy side calls BLAS (matmul): then BLAS is
    limited to the same thread count, else NumPy is reported as one thread.
    """
    import runtime

    previous = runtime.get_num_threads()
    rows = []
    try:
        for t in threads:
            runtime.set_num_threads(t)
            with limit_blas(t) if uses_blas else nullcontext(False):
                numpy_threads = blas_threads() if uses_blas else 1
                cmp = compare(lambda: run(*inputs), lambda: reference(*inputs), repeat,
                              warmups, pause, rounds)
            rows.append(SpeedRow(t, numpy_threads, cmp.ours.median, cmp.ref.median, cmp.ratio,
                                 cmp.best_ratio))
    finally:
        runtime.set_num_threads(previous)
    return rows


__all__ = ["REPEAT", "ROUNDS", "WARMUPS", "SpeedRow", "chain_inputs", "chain_module",
           "chain_numpy", "mlp_inputs", "mlp_module", "mlp_numpy", "speed_rows"]
