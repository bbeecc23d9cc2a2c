"""Where the coefficients of the inline float32 ``erf`` come from (``runtime/inline_math.py``).

    PYTHONPATH=. .venv/bin/python bench/fit_erf_f32.py [--check 2000000]

The approximation has two branch-free pieces, both computed for every lane:

* ``|x| < 0.921875``: ``erf(x) = x + x * p(x^2)``, ``p`` of degree 5 fitted to
  ``erf(x) / x - 1`` for the least maximal *relative* error of the result;
* above: ``erf(x) = copysign(1 - exp(q(t) - t^2), x)`` with ``t = min(|x|, 4)``, ``q`` of
  degree 6 fitted to ``log(erfc(t)) + t^2`` for the least maximal *absolute* error of
  ``erf`` (an error ``d`` in ``q`` is ``erfc(t) * d`` in ``erf``, so the fit weighs it by
  ``erfc(t)``: beyond 3 the fit may be loose). ``erfc(4) = 1.5e-8`` is below half an ulp of
  1, so clamping ``t`` at 4 saturates to +-1 (``erf`` rounds to 1 from 3.919 on).

Both fits are weighted minimax by Lawson's iteration (iteratively reweighted least squares)
against float64 ``math.erf``/``math.erfc`` on 20,000 points; the coefficients are then
rounded to float32. ``--check`` simulates the float32 evaluation (one rounding per
multiply-add, an exactly rounded ``exp``) on that many points plus a binade of ``[0.5, 1)``
and prints the largest error in ulps; the compiled kernel's own error is measured by
``bench/erf_ulp.py``. Printed constants are pasted into ``runtime/inline_math.py``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

SMALL_END = 0.921875  # 59/64: where the polynomial in x^2 hands over to 1 - exp(...)
CLAMP = 4.0
SMALL_DEGREE, LARGE_DEGREE = 5, 6


def lawson(x: np.ndarray, y: np.ndarray, weight: np.ndarray, degree: int,
           iterations: int = 300) -> tuple[np.ndarray, float]:
    """Coefficients (lowest degree first) of the polynomial minimising ``max weight * |p - y|``."""
    basis = np.stack([x ** k for k in range(degree + 1)], 1)
    lam = np.full(len(x), 1.0 / len(x))
    best: tuple[np.ndarray, float] | None = None
    for _ in range(iterations):
        sw = np.sqrt(lam) * weight
        coef = np.linalg.lstsq(basis * sw[:, None], y * sw, rcond=None)[0]
        err = np.abs(basis @ coef - y) * weight
        if best is None or err.max() < best[1]:
            best = (coef, float(err.max()))
        lam = lam * err
        lam /= lam.sum()
    assert best is not None
    return best


def fit() -> tuple[np.ndarray, np.ndarray]:
    """float32 coefficients (lowest degree first) of ``p`` and ``q``."""
    erf, erfc = np.vectorize(math.erf), np.vectorize(math.erfc)
    xs = np.linspace(1e-6, SMALL_END, 20_000)
    p, err = lawson(xs * xs, erf(xs) / xs - 1, xs / erf(xs), SMALL_DEGREE)
    print(f"p: relative error of the fit {err:.3g} ({err / 2 ** -24:.3f} ulp at most)")
    xl = np.linspace(SMALL_END, CLAMP, 20_000)
    q, err = lawson(xl, np.log(erfc(xl)) + xl * xl, erfc(xl) / 2.0 ** -24, LARGE_DEGREE)
    print(f"q: absolute error of erf from the fit {err:.3g} ulp of 1")
    return p.astype(np.float32), q.astype(np.float32)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray | float) -> np.ndarray:
    """float32 ``a * b + c`` rounded once (the float64 product of float32s is exact)."""
    return (a.astype(np.float64) * b.astype(np.float64) + c).astype(np.float32)


def simulate(x: np.ndarray, p: np.ndarray, q: np.ndarray,
             exp: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The float32 evaluation order of ``erf_f32``: Horner for ``p``, Estrin for ``q``."""
    t = np.abs(x)
    s = (t * t).astype(np.float32)
    acc = np.full_like(x, p[-1])
    for k in p[-2::-1]:
        acc = _fma(acc, s, float(k))
    small = _fma(x, acc, x)
    tc = np.minimum(t, np.float32(CLAMP))
    t2 = (tc * tc).astype(np.float32)
    a, b, c = (_fma(np.full_like(x, q[k + 1]), tc, float(q[k])) for k in (0, 2, 4))
    poly = _fma(_fma(_fma(np.full_like(x, q[6]), t2, c), t2, b), t2, a)
    r = _fma(-tc, tc, poly)
    large = np.copysign((1 - exp(r)).astype(np.float32), x)
    return np.where(t < np.float32(SMALL_END), small, large)


def ulps(x: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - erf(x)| in ulps of erf(x) rounded to float32 (float64 ``math.erf``)."""
    want64 = np.vectorize(math.erf)(x.astype(np.float64))
    want = want64.astype(np.float32)
    spacing = np.spacing(np.maximum(np.abs(want), np.finfo(np.float32).smallest_subnormal))
    return np.abs(got.astype(np.float64) - want64) / spacing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", type=int, default=2_000_000, help="points to simulate")
    args = parser.parse_args()
    p, q = fit()
    for name, coef in (("_ERF_SMALL", p), ("_ERF_LARGE", q)):  # shortest float32 digits
        digits = ", ".join(np.format_float_scientific(v, unique=True) for v in coef[::-1])
        print(f"{name} = ({digits})  # highest degree first")
    x = np.linspace(0, 4.5, args.check, dtype=np.float32)
    binade = (np.arange(0, 2 ** 23, 17, dtype=np.int32) + np.int32(0x3F000000)).view(np.float32)
    x = np.concatenate([x, binade])
    u = ulps(x, simulate(x, p, q, lambda r: np.exp(r.astype(np.float64)).astype(np.float32)))
    print(f"simulated with an exactly rounded exp: max {u.max():.3f} ulp at x = {x[u.argmax()]}")


if __name__ == "__main__":
    main()
