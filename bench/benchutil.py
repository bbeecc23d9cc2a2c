"""What every benchmark suite shares: target checks, fair timing, the pool's thread count.

Comparisons time each side in blocks of its own, after warm-ups, with a pause
before every block (:func:`fair`, which is ``irkernel.testing.timing.compare``,
the same code ``irkernel demo`` uses). Alternating the two sides call by call,
as this module did before, measures their interference on this 2-core VM
(OpenBLAS's spinning threads after a matmul, our pool's after a kernel), not
either side. Targets fail their test through :func:`check` unless
``IRKERNEL_BENCH_REPORT_ONLY=1``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from irkernel.testing.timing import DEFAULT_PAUSE_S, blas_threads, compare, limit_blas

REPORT_ONLY = os.environ.get("IRKERNEL_BENCH_REPORT_ONLY", "") not in ("", "0")

__all__ = ["REPORT_ONLY", "Fair", "blas_threads", "check", "cpu_name", "fair", "limit_blas",
           "pool_threads"]


def cpu_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` ("unknown CPU" elsewhere)."""
    from pathlib import Path

    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    return next((line.split(":", 1)[1].strip() for line in lines
                 if line.startswith("model name")), "unknown CPU")


def onnx_activation(src: str, act: str) -> tuple[list, list]:
    """(ONNX nodes, initializers) applying ``act`` (relu, relu6, silu; "none" adds nothing)
    to tensor ``src`` and naming the result ``y``: the epilogues of the models' convs."""
    import numpy as np
    from onnx import helper, numpy_helper

    if act == "relu":
        return [helper.make_node("Relu", [src], ["y"])], []
    if act == "relu6":
        return ([helper.make_node("Clip", [src, "lo", "hi"], ["y"])],
                [numpy_helper.from_array(np.float32(0), "lo"),
                 numpy_helper.from_array(np.float32(6), "hi")])
    if act == "silu":
        return [helper.make_node("Sigmoid", [src], ["sig"]),
                helper.make_node("Mul", [src, "sig"], ["y"])], []
    if act != "none":
        raise ValueError(f"unknown activation {act!r}")
    return [], []


def check(ok: bool, message: str) -> None:
    """Fail the benchmark on a missed target (only record it in report-only mode)."""
    if not ok and not REPORT_ONLY:
        pytest.fail(message)


@dataclass(frozen=True)
class Fair:
    """Medians of each side's timed calls; ``ratio`` = ref / ours (> 1: we are faster)."""

    ours_s: float
    ref_s: float
    ratio: float
    best_ratio: float


def fair(ours: Callable[[], object], ref: Callable[[], object], repeat: int,
         pause: float = DEFAULT_PAUSE_S, warmups: int = 2, rounds: int = 2) -> Fair:
    """Time ``ours`` and ``ref`` in blocks of their own: ``rounds`` blocks per side (order
    ours, ref, ref, ours, ...), each ``warmups`` untimed then ``repeat`` timed calls after
    ``pause`` seconds of sleep."""
    cmp = compare(ours, ref, repeat=repeat, warmups=warmups, pause=pause, rounds=rounds)
    return Fair(cmp.ours.median, cmp.ref.median, cmp.ratio, cmp.best_ratio)


@contextmanager
def pool_threads(n: int) -> Iterator[None]:
    """Run the body with ``n`` runtime pool threads, then restore the previous count."""
    import runtime

    previous = runtime.get_num_threads()
    runtime.set_num_threads(n)
    try:
        yield
    finally:
        runtime.set_num_threads(previous)
