"""The inline float32 ``erf`` against libm's ``erff`` per lane (the lowering before it), A/B.

    PYTHONPATH=.:tests/frontend:bench .venv/bin/python bench/bench_erf.py \\
        [--threads 1] [--repeat 15] [--rounds 2] [--size 0] [model ...]

In one process, each case is built twice: with the inline ``erf`` of
``runtime/inline_math.py`` ("new") and with ``erf`` lowered as before ("old": a libm
``erff`` call per lane, by taking ``erf`` out of ``runtime.codegen_expr._INLINE_F32``
while that build runs; the on-disk cache is off for both). The two are timed in
alternating blocks (``irkernel.testing.timing.compare``: warm-ups, ``--repeat`` calls per
block, medians). Cases: a ``64 x 768 @ 768 x 3072`` matmul with an exact-GELU epilogue
(a BERT/ViT-B MLP's first layer), with its matmul alone (new build) as the ceiling, and the
named models of ``tests/frontend/models`` (loaded as ``bench/bench_onnx.py`` does, image
inputs resized to ``--size`` if given; ViTs keep theirs). Printed: milliseconds, GFLOP/s of the matmul and
old / new (> 1: the inline erf is faster).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "frontend"), str(ROOT / "bench")]

import irkernel as ik  # noqa: E402
import runtime  # noqa: E402
from irkernel.testing.timing import compare  # noqa: E402
from runtime import codegen_expr  # noqa: E402


@contextmanager
def libm_erf():
    """Builds inside lower float32 ``erf`` to a libm ``erff`` call per lane, as before."""
    saved = dict(codegen_expr._INLINE_F32)
    codegen_expr._INLINE_F32.pop("erf")
    try:
        yield
    finally:
        codegen_expr._INLINE_F32.clear()
        codegen_expr._INLINE_F32.update(saved)


def gelu_matmul(m: int, k: int, n: int, gelu: bool = True) -> ik.IRModule:
    """``main(a) = gelu(a @ W)`` as PyTorch exports ``nn.GELU`` (W a constant)."""
    rng = np.random.default_rng(0)
    bb = ik.GraphBuilder("main")
    a = bb.param("a", (m, k), "float32")
    y = bb.matmul(a, bb.const((rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)))
    if gelu:
        scalar = lambda v: bb.const(np.array(v, np.float32))  # noqa: E731
        t = bb.call("erf", bb.call("divide", y, scalar(math.sqrt(2))))
        y = bb.call("multiply", bb.call("multiply", y, bb.call("add", t, scalar(1.0))),
                    scalar(0.5))
    return ik.IRModule({"main": bb.finish([y])})


def ab(name: str, build: Callable[[], Callable[..., object]], args: list, repeat: int,
       rounds: int, flops: int = 0) -> None:
    """Build old and new, check they agree, time them in alternating blocks, print a row."""
    with libm_erf():
        old = build()
    new = build()
    for o, w in zip(old(*args), new(*args), strict=True):
        np.testing.assert_allclose(np.asarray(w), np.asarray(o), rtol=1e-3, atol=1e-3)
    c = compare(lambda: new(*args), lambda: old(*args), repeat=repeat, rounds=rounds)
    t_new, t_old = c.ours.median, c.ref.median
    rate = (f"  {flops / t_new / 1e9:6.1f} vs {flops / t_old / 1e9:6.1f} GFLOP/s"
            if flops else "")
    print(f"{name:34s} new {t_new * 1e3:8.3f} ms  old {t_old * 1e3:8.3f} ms  "
          f"old/new {t_old / t_new:5.2f}{rate}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="models of tests/frontend/models")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--size", type=int, default=0, help="image side (0: as exported)")
    parser.add_argument("--shape", default="64,768,3072", help="M,K,N of the GELU matmul")
    args = parser.parse_args()
    runtime.set_num_threads(args.threads)
    print(f"threads {args.threads}; old = libm erff per lane, new = inline erf")
    m, k, n = (int(v) for v in args.shape.split(","))
    a = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    flops = 2 * m * k * n
    plain = runtime.build(gelu_matmul(m, k, n, gelu=False), cache=False)["main"]
    gelu = runtime.build(gelu_matmul(m, k, n), cache=False)["main"]
    c = compare(lambda: gelu(a), lambda: plain(a), repeat=args.repeat, rounds=args.rounds)
    print(f"{m}x{k} @ {k}x{n}: matmul alone {flops / c.ref.median / 1e9:.1f} GFLOP/s, "
          f"+ GELU (inline erf) {flops / c.ours.median / 1e9:.1f} GFLOP/s")
    ab(f"{m}x{k} @ {k}x{n} + GELU", lambda: runtime.build(gelu_matmul(m, k, n),
                                                          cache=False)["main"],
       [a], args.repeat, args.rounds, flops)
    if args.models:
        from bench_onnx import resized
        from bench_onnx_import import _load
        from onnx_helpers import model_inputs

        from irkernel.frontend.onnx import from_onnx
        for name in args.models:
            model = resized(_load(name), args.size) if args.size else _load(name)
            inputs = list(model_inputs(model).values())
            ab(name, lambda: runtime.build(from_onnx(model), cache=False)["main"], inputs,
               args.repeat, args.rounds)


if __name__ == "__main__":
    main()
