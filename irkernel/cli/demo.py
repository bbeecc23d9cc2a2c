"""``irkernel demo``: the product in one minute.

1. Generate a large random graph, optimize it with a textual pipeline under
   the timing instrument, and print per pass the time, nodes/s and node counts.
2. Build two graph modules to native code (an MLP and a fused chain of
   elementwise ops), run them, check them against the reference interpreter
   and time them against the same NumPy code, fairly: each side in blocks of
   its own after warm-ups with pauses between, at 1 thread and at the pool's
   default, thread counts stated (``irkernel.cli.workloads``, shared with
   ``bench/bench_e2e.py`` so the figures are the benchmark's).
3. Say where to read more.

Imports of ``passes`` and ``runtime`` are lazy (``irkernel`` never imports them
at module level); so is the generator.
"""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

import numpy as np

from irkernel.cli.workloads import (
    REPEAT,
    ROUNDS,
    WARMUPS,
    SpeedRow,
    chain_inputs,
    chain_module,
    chain_numpy,
    mlp_inputs,
    mlp_module,
    mlp_numpy,
    speed_rows,
)
from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.module import IRModule
from irkernel.testing.timing import DEFAULT_PAUSE_S, blas_threads


@contextmanager
def step(label: str, out: TextIO) -> Iterator[None]:
    """Print how long the ``with`` body took, on one aligned line."""
    start = time.perf_counter()
    yield
    print(f"  {label:<44} {(time.perf_counter() - start) * 1e3:9.1f} ms", file=out)


def function_stats(func: Function) -> dict[str, Any]:
    """Node counts per op and dtype, sizes and bytes per node (whole-array work only)."""
    by_op = np.bincount(func.kind.astype(np.int64), minlength=ops.num_ops())
    by_dtype = np.bincount(func.dtype.astype(np.int64), minlength=len(DTYPE_NAMES))
    return {
        "nodes": func.num_nodes,
        "params": len(func.params),
        "outputs": len(func.outputs),
        "constants in pool": len(func.consts),
        "distinct shapes": len(func.shapes),
        "distinct attribute sets": len(func.attr_table),
        "bytes": func.nbytes,
        "bytes/node": func.nbytes / max(func.num_nodes, 1),
        "by op": {ops.get_op(k).name: int(c) for k, c in enumerate(by_op) if c},
        "by dtype": {DTYPE_NAMES[k]: int(c) for k, c in enumerate(by_dtype) if c},
    }


def print_stats(stats: dict[str, Any], out: TextIO) -> None:
    for key, value in stats.items():
        if isinstance(value, dict):
            items = sorted(value.items(), key=lambda kv: -kv[1])
            print(f"  {key:<24} " + ", ".join(f"{k} {v}" for k, v in items), file=out)
        elif isinstance(value, float):
            print(f"  {key:<24} {value:.1f}", file=out)
        else:
            print(f"  {key:<24} {value:,}", file=out)


class NodeCounts:
    """Instrument recording graph node counts and wall time around each pass."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, float]] = []
        self._stack: list[tuple[int, float]] = []

    @staticmethod
    def _count(mod: IRModule) -> int:
        return sum(f.num_nodes for f in mod.functions.values() if isinstance(f, Function))

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        self._stack.append((self._count(mod), time.perf_counter()))

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        before, start = self._stack.pop()
        self.rows.append((info.name, before, self._count(mod), time.perf_counter() - start))


# ---------------------------------------------------------------------------
# Part 1: optimize a large generated graph
# ---------------------------------------------------------------------------

def optimize_generated(n_nodes: int, seed: int, pipeline_text: str, out: TextIO) -> None:
    import passes  # noqa: F401  (registers the graph passes)
    from irkernel import instrument, transform
    from irkernel.ir.verify import verify
    from irkernel.testing import GraphSpec, random_function

    print(f"1. Optimize a generated {n_nodes:,}-node graph (seed {seed})\n", file=out)
    with step("generate (bulk GraphBuilder)", out):
        mod = IRModule({"main": random_function(GraphSpec(n_nodes=n_nodes, seed=seed))})
    with step("verify", out):
        verify(mod)
    print("\n  Statistics of the generated graph:", file=out)
    print_stats(function_stats(mod["main"]), out)

    counts = instrument.pass_instrument(NodeCounts)()
    timing = instrument.PassTimingInstrument()
    pipeline = transform.parse_pipeline(pipeline_text)
    print(f"\n  {pipeline_text} (the first call includes Numba JIT or its cache load):", file=out)
    with transform.PassContext(opt_level=3, instruments=[timing, counts]), \
            step(f"{pipeline_text}, first call", out):
        pipeline(mod)
    counts.rows.clear()
    with transform.PassContext(opt_level=3, instruments=[timing, counts]), \
            step(f"{pipeline_text}, warm", out):
        optimized = pipeline(mod)
    print(f"\n  {'pass':<26} {'ms':>9} {'M nodes/s':>10} {'nodes before':>14} "
          f"{'nodes after':>13}", file=out)
    for name, before, after, seconds in counts.rows:
        if name == "pipeline":  # parse_pipeline's wrapper around the text: same as its child
            continue
        rate = before / max(seconds, 1e-9) / 1e6
        print(f"  {name:<26} {seconds * 1e3:9.1f} {rate:10.1f} {before:14,} {after:13,}",
              file=out)
    print("\n  Pass timing tree (warm run):\n" + timing.render(), file=out)
    with step("verify optimized", out):
        verify(optimized)


# ---------------------------------------------------------------------------
# Part 2: compile graph modules to native code
# ---------------------------------------------------------------------------

def _thread_label(row: SpeedRow) -> str:
    """``irkernel / NumPy`` threads of a row; ``?`` when no BLAS library was found."""
    return f"{row.threads} / {row.numpy_threads if row.numpy_threads is not None else '?'}"


def compile_and_compare(label: str, mod: IRModule, inputs: Sequence[np.ndarray],
                        reference: Callable[..., np.ndarray], uses_blas: bool, out: TextIO,
                        timing: dict[str, Any]) -> list[SpeedRow]:
    """Build, check against the interpreter and NumPy, then time per thread count."""
    import runtime
    from irkernel.ir.interp import interpret

    print(f"\n  {label}", file=out)
    with step("build (graph passes, legalize, fuse, LLVM)", out):
        ex = runtime.build(mod)
    main = ex["main"]
    plan = ex.memory_plan("main")
    print(f"  {'kernels launched per call (after fusion)':<44} {main.num_kernels:9d}", file=out)
    print(f"  {'intermediate bytes, unplanned -> planned':<44} "
          f"{plan.naive_bytes:,} -> {plan.planned_bytes:,}", file=out)
    with step("run once (compiled)", out):
        got = main(*inputs)[0]
    with step("reference interpreter", out):
        want = interpret(mod, *inputs)[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(got, reference(*inputs), rtol=2e-5, atol=1e-5)
    print(f"  {'matches the interpreter and NumPy':<44} {'yes':>9}", file=out)
    rows = speed_rows(main, inputs, reference, uses_blas=uses_blas, **timing)
    print(f"  {'threads: irkernel / NumPy':<28} {'irkernel ms':>12} {'NumPy ms':>10} "
          f"{'speed vs NumPy':>15}", file=out)
    for row in rows:
        print(f"  {_thread_label(row):<28} {row.ours_s * 1e3:12.2f} "
              f"{row.numpy_s * 1e3:10.2f} {row.ratio:14.2f}x", file=out)
    return rows


def run_compiled(out: TextIO, chain_elements: int, hidden: int, repeat: int = REPEAT,
                 pause: float = DEFAULT_PAUSE_S) -> None:
    import runtime

    print("\n2. Compile graph modules to native code (llvmlite) and run them", file=out)
    pool = runtime.get_num_threads()
    threads = sorted({1, min(2, pool), pool})  # bench_e2e.py measures 1 and 2
    blas = blas_threads()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    note = (f"Timing: irkernel and NumPy each in blocks of their own ({ROUNDS} per side, "
            f"{WARMUPS} warm-ups + {repeat} timed calls each, a {pause:g} s pause before "
            "each block), medians; 'speed vs NumPy' = NumPy's time / irkernel's (> 1: "
            f"irkernel is faster). irkernel's pool: {pool} threads by default; NumPy's BLAS: "
            + (f"{blas} threads by default, limited to irkernel's count in every row"
               if blas is not None else "no BLAS library found by threadpoolctl (not limited)")
            + f"; elementwise NumPy: 1 thread. Machine: {os.cpu_count()} CPUs, 1-min load "
            f"{load:.1f} (other jobs slow both sides).")
    print("\n" + textwrap.fill(note, width=92, initial_indent="  ", subsequent_indent="  "),
          file=out)
    timing = {"threads": threads, "repeat": repeat, "pause": pause}
    batch, layers = 64, 3
    compile_and_compare(f"MLP: {layers} x relu(x @ W + b), batch {batch}, hidden {hidden}",
                        mlp_module(batch, hidden, layers), mlp_inputs(batch, hidden, layers),
                        mlp_numpy, True, out, timing)
    compile_and_compare(f"Chain of 8 elementwise ops over {chain_elements:,} float32",
                        chain_module(chain_elements), chain_inputs(chain_elements), chain_numpy,
                        False, out, timing)


def run_demo(n_nodes: int, seed: int, pipeline_text: str, chain_elements: int, hidden: int,
             out: TextIO, repeat: int = REPEAT, pause: float = DEFAULT_PAUSE_S) -> int:
    start = time.perf_counter()
    optimize_generated(n_nodes, seed, pipeline_text, out)
    run_compiled(out, chain_elements, hidden, repeat, pause)
    print("\n3. Read more: README.md (quick start), docs/pass_infra.md (passes and "
          "instruments), docs/tir.md (loop kernels and the runtime), docs/lowering.md "
          "(graph to native code), bench/README.md (measured figures).", file=out)
    print(f"\nDemo finished in {time.perf_counter() - start:.1f} s.", file=out)
    return 0
