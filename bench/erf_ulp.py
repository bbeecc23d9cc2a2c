"""The error of the compiled float32 ``erf`` over every float32 input, in ulps.

    PYTHONPATH=. .venv/bin/python bench/erf_ulp.py [--level avx512] [--lanes 16] [--step 1]

Runs the inline ``erf`` (``runtime/inline_math.py``) in a kernel vectorized by ``--lanes``
over all 2^32 bit patterns (every ``--step``-th one), 2^24 at a time, against libm's float64
``erf`` (a float64 kernel: one libm call per element, correct to within an ulp of float64).
The error is ``|got - erf(x)| / ulp`` with ulp the spacing of float32 numbers in the binade
of the exact value (``2^-149`` below the normal range), so a value just below 1 is measured
in ulps of ``[0.5, 1)``. Printed: the largest error and where, a histogram, and whether the
special values hold (NaN in gives NaN out, ``erf(-0) = -0``, ``erf(+-inf) = +-1``). About
two minutes per 2^32 inputs on one core of the development machine (most of it libm).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import runtime  # noqa: E402
from irkernel import transform  # noqa: E402
from irkernel.target import host_target  # noqa: E402
from irkernel.tir import script as T  # noqa: E402

CHUNK = 1 << 24


def erf_kernel(dtype: str, lanes: int, level: str, n: int = CHUNK):
    """``out[i] = erf(x[i])`` over ``n`` elements of ``dtype``, ``lanes`` at a time."""
    @T.prim_func(name=f"erf_{dtype}_v{lanes}")
    def f(x: T.Buffer((n,), dtype), out: T.Buffer((n,), dtype)):
        for io in T.serial(n // lanes):
            for ii in T.vectorized(lanes):
                out[io * lanes + ii] = T.erf(x[io * lanes + ii])
    with transform.PassContext(config={"target": level}):
        return runtime.build(f, cache=False)[f"erf_{dtype}_v{lanes}"]


def ulp_error(got: np.ndarray, want64: np.ndarray) -> np.ndarray:
    """``|got - want64|`` in float32 ulps of the binade of ``want64`` (NaN where it is NaN)."""
    exponent = np.frexp(want64)[1]
    ulp = np.ldexp(1.0, np.maximum(exponent - 24, -149))
    return np.abs(got.astype(np.float64) - want64) / ulp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", default=host_target().isa)
    parser.add_argument("--lanes", type=int, default=16)
    parser.add_argument("--step", type=int, default=1, help="check every step-th pattern")
    args = parser.parse_args()
    f32 = erf_kernel("float32", args.lanes, args.level)
    f64 = erf_kernel("float64", 8, args.level)
    worst, worst_x = 0.0, 0.0
    hist = np.zeros(8, np.int64)  # errors in [0, 0.5), [0.5, 1), ... [3.5, inf)
    specials_ok = True
    start = time.perf_counter()
    # buffers reused across chunks: fresh memory is slow to touch on some VMs
    offsets = np.arange(CHUNK, dtype=np.uint32) * np.uint32(args.step)
    bits, out = np.empty(CHUNK, np.uint32), np.empty(CHUNK, np.float32)
    x64, want = np.empty(CHUNK, np.float64), np.empty(CHUNK, np.float64)
    x = bits.view(np.float32)
    for base in range(0, 1 << 32, CHUNK * args.step):
        np.add(offsets, np.uint32(base), out=bits)
        f32(x, out)
        nan = np.isnan(x)
        specials_ok &= bool(np.isnan(out[nan]).all())
        with np.errstate(invalid="ignore"):  # signalling NaNs
            x64[:] = x
        x64[nan] = 0.0
        f64(x64, want)
        err = ulp_error(out[~nan], want[~nan])
        if err.size:
            k = int(err.argmax())
            if err[k] > worst:
                worst, worst_x = float(err[k]), float(x[~nan][k])
            hist += np.bincount(np.minimum(err * 2, 7).astype(np.int64), minlength=8)[:8]
    checks = np.array([-0.0, np.inf, -np.inf], np.float32)
    out = np.empty(CHUNK, np.float32)
    padded = np.zeros(CHUNK, np.float32)
    padded[:3] = checks
    f32(padded, out)
    specials_ok &= bool(out[0] == 0 and np.signbit(out[0]) and out[1] == 1 and out[2] == -1)
    print(f"level {args.level}, {args.lanes} lanes, every {args.step}. bit pattern: "
          f"{int(hist.sum()):,} non-NaN inputs in {time.perf_counter() - start:.0f} s")
    print(f"max error {worst:.4f} ulp at x = {worst_x!r}; special values "
          f"{'hold' if specials_ok else 'FAIL'}")
    for k, count in enumerate(hist):
        label = f"[{k / 2:.1f}, {(k + 1) / 2:.1f})" if k < 7 else f">= {k / 2:.1f}"
        print(f"  {label:12s} {count:>14,}")


if __name__ == "__main__":
    main()
