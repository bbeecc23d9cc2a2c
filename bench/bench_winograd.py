"""Winograd F(2x2,3x3) against the direct implicit GEMM on resnet18's 3x3 convs.

    PYTHONPATH=. .venv/bin/python bench/bench_winograd.py [--repeat 15] [--rounds 4]
        [--threads 1] [--only 28x28]

Why within-run ratios: the two kernels of each layer (``passes/topi/winograd.py`` and
``conv.py``'s implicit GEMM, built directly, whatever the cost rule says) are timed in
alternating blocks of their own (``irkernel.testing.timing.compare``), so a busy machine
slows both alike and the ratio direct / Winograd is what the cost rule in
``winograd_worth`` rests on. The Winograd time includes its weight transform (in a
network the weights are constants, but the kernel still transforms them on every call). Also printed per
layer: the max relative error of each schedule against a float64 reference, relative to
the largest output magnitude (the figures in ``docs/lowering.md``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: name -> (input shape, weight shape): resnet18's stride-1 3x3 convs (padding 1).
LAYERS = {
    "64x56x56": ((1, 64, 56, 56), (64, 64, 3, 3)),
    "128x28x28": ((1, 128, 28, 28), (128, 128, 3, 3)),
    "256x14x14": ((1, 256, 14, 14), (256, 256, 3, 3)),
    "512x7x7": ((1, 512, 7, 7), (512, 512, 3, 3)),
}


def reference(x: np.ndarray, w: np.ndarray, pad: int = 1) -> np.ndarray:
    """The conv in float64 (a sum of nine shifted channel contractions)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(3):
        for j in range(3):
            out += np.einsum("kc,nchw->nkhw", w[:, :, i, j].astype(np.float64),
                             xp[:, :, i:i + oh, j:j + ow])
    return out


def build(x_shape, w_shape, winograd: bool):
    """``f(x, w) -> out`` of the Winograd or the direct kernel (padding 1)."""
    import runtime
    from passes.topi.conv import scheduled_conv
    from passes.topi.winograd import scheduled_winograd

    size = x_shape[2:]
    prim = (scheduled_winograd(x_shape, w_shape, (1, 1), size) if winograd else
            scheduled_conv(x_shape, w_shape, 1, (1, 1), (1, 1), (1, 1), (1, 1), size))
    exe = runtime.build(prim)
    kernel = exe[next(iter(exe))]
    out = np.empty((x_shape[0], w_shape[0], *size), np.float32)

    def run(x, w):
        kernel(x, w, out)
        return out

    return run


def main() -> None:
    import runtime
    from irkernel.testing.timing import compare

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed calls per block")
    parser.add_argument("--rounds", type=int, default=4, help="blocks per side")
    parser.add_argument("--warmups", type=int, default=3, help="untimed calls per block")
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--only", default="", help="run the layers whose name contains this")
    args = parser.parse_args()
    print(f"{'layer':10} {'thr':>3} {'direct ms':>9} {'wino ms':>9} {'direct/wino':>11}"
          f" {'err direct':>10} {'err wino':>10}")
    rng = np.random.default_rng(0)
    for name, (xs, ws) in LAYERS.items():
        if args.only not in name:
            continue
        x = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        want = reference(x, w)
        wino, direct = build(xs, ws, True), build(xs, ws, False)
        scale = np.abs(want).max()
        errs = [np.abs(f(x, w) - want).max() / scale for f in (direct, wino)]
        for t in args.threads:
            runtime.set_num_threads(t)
            cmp = compare(lambda: wino(x, w), lambda: direct(x, w),  # noqa: B023
                          repeat=args.repeat, warmups=args.warmups, rounds=args.rounds)
            print(f"{name:10} {t:>3} {cmp.ref.median * 1e3:9.3f} {cmp.ours.median * 1e3:9.3f}"
                  f" {cmp.ratio:11.2f} {errs[0]:10.2e} {errs[1]:10.2e}", flush=True)


if __name__ == "__main__":
    main()
