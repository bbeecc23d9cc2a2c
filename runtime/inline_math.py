"""Math functions as inline LLVM IR: float32 ``exp`` and ``erf`` without a libm call.

Why: ``llvm.exp.f32`` becomes a call of libm's ``expf``, and LLVM's loop vectorizer
does not vectorize a loop with a call in it (no vector library is mapped here). The
fused kernels of a network's activations (``x * sigmoid(x)``, softmax) are such loops:
efficientnet_b0's SiLU kernels ran at 18 ns an element, a quarter of the model's time.
Inline, the same loop vectorizes (8 lanes on AVX2) and a scalar call costs a few
multiply-adds.

The method is Cephes' ``expf``: ``n = round(x * log2(e))``, ``r = x - n * ln 2`` in two
parts (the first exact for ``|n| < 2^14``), a degree-5 polynomial for ``exp(r) - 1 - r``
on ``|r| <= ln(2) / 2``, then ``2^n`` as two exponent-field scalings (so results down to
the subnormal range come out, not zero). The multiply-adds are ``llvm.fmuladd`` (one
fma where the target has FMA, a multiply and an add on SSE4.2) and the polynomial is
evaluated by Estrin's scheme: a vectorized ``exp`` loop is bound by the latency of this
chain, not by throughput (the core can only hold so many iterations in flight), and
with 8-lane AVX2 vectors it ran at 1.65x the time of 16-lane AVX-512 on the same Zen 4
core; the fused, shorter chain made SiLU 25-30% faster on both. Relative error within 2 ulp of the true value
on the whole range (checked against NumPy in the tests); ``x`` is clamped to
``[-104, 89]`` first, which gives ``inf`` above 88.73, ``0`` below -103.97, and the
special values of IEEE ``exp`` (``exp(-inf) = 0``, ``exp(inf) = inf``); NaN passes
through. float64 keeps libm's ``exp``.

With AVX-512 (``vscalefps``: ``y * 2^n`` with IEEE overflow and gradual underflow in one
instruction, at every vector width with AVX512VL), ``2^n`` is ``llvm.ldexp`` instead of the
two exponent-field scalings: seven instructions fewer per vector, the largest part of the
SiLU epilogue of efficientnet's convs after the polynomial. Elsewhere ``llvm.ldexp``
would be a libm call per lane, so the scalings stay.

``erf`` (``erf_f32``) is two fitted polynomials and this ``exp``, for the exact-GELU
epilogue of transformer and ConvNeXt matmuls: with ``erff`` per lane, a 64x768 @ 768x3072
matmul + GELU ran at 72 GFLOP/s, inline at 107 (the matmul alone: 111). Within 1.32 ulp
over every float32 input (``bench/erf_ulp.py``; the fit: ``bench/fit_erf_f32.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

_I32 = ir.IntType(32)

#: Cephes expf: the ln 2 split and the polynomial coefficients (highest degree first).
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_LOG2E = 1.44269504088896341
_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
         1.6666665459e-1, 5.0000001201e-1)
_LOW, _HIGH = -104.0, 89.0

#: erf: below ``_ERF_SMALL_END`` ``x + x * p(x^2)``, above ``1 - exp(q(t) - t^2)`` with
#: ``t = min(|x|, 4)``; coefficients highest degree first, from ``bench/fit_erf_f32.py``.
_ERF_SMALL_END, _ERF_CLAMP = 0.921875, 4.0
_ERF_SMALL = (-5.9908634e-04, 4.993182e-03, -2.6766617e-02, 1.1281816e-01, -3.7612495e-01,
              1.2837915e-01)
_ERF_LARGE = (1.9473513e-04, -3.0316075e-03, 2.2181427e-02, -1.0383897e-01, 3.6271432e-01,
              -1.1276155e+00, -2.099018e-04)


def exp_f32(bld: ir.IRBuilder, x: ir.Value, const: Callable[[ir.Type, object], ir.Value],
            intrinsic: Callable[[str, ir.Type], ir.Function],
            scalef: Callable[[ir.Type], ir.Function] | None = None) -> ir.Value:
    """``exp(x)`` of a float32 scalar or vector ``x`` (see the module docstring).

    ``const(type, value)`` makes a (splat) constant; ``intrinsic(name, type)`` declares
    a one-overload LLVM intrinsic such as ``llvm.maxnum`` for ``type``; ``scalef(type)``,
    when given, declares ``llvm.ldexp`` of ``type`` and the integer vector of its lanes
    (only where that is one instruction: AVX-512's ``vscalefps``).
    """
    typ = x.type

    def call(name: str, *args: ir.Value) -> ir.Value:
        return bld.call(intrinsic(name, typ), list(args))

    xc = call("llvm.minnum", call("llvm.maxnum", x, const(typ, _LOW)), const(typ, _HIGH))
    y = _exp_in_range(bld, xc, const, intrinsic, scalef)
    return bld.select(bld.fcmp_unordered("uno", x, x), x, y)


def _exp_in_range(bld: ir.IRBuilder, x: ir.Value, const: Callable[[ir.Type, object], ir.Value],
                  intrinsic: Callable[[str, ir.Type], ir.Function],
                  scalef: Callable[[ir.Type], ir.Function] | None) -> ir.Value:
    """``exp(x)`` for ``x`` in ``[-104, 89]`` (no NaN): ``exp_f32`` without its clamp."""
    typ = x.type
    ityp = ir.VectorType(_I32, typ.count) if isinstance(typ, ir.VectorType) else _I32

    def f(v: float) -> ir.Value:
        return const(typ, v)

    def muladd(a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        return bld.call(intrinsic("llvm.fmuladd", typ), [a, b, c])

    n = bld.call(intrinsic("llvm.rint", typ), [bld.fmul(x, f(_LOG2E))])
    r = muladd(n, f(-_LN2_LO), muladd(n, f(-_LN2_HI), x))
    # Estrin's scheme: (a r^2 + b) r^2 + c with a, b, c linear in r (half Horner's depth)
    r2 = bld.fmul(r, r)
    a, b, c = (muladd(f(_POLY[i]), r, f(_POLY[i + 1])) for i in (0, 2, 4))
    p = muladd(muladd(a, r2, b), r2, c)
    y = bld.fadd(muladd(p, r2, r), f(1.0))
    k = bld.fptosi(n, ityp)
    if scalef is not None:  # y * 2^k in one step, subnormal and overflowing results included
        return bld.call(scalef(typ), [y, k])
    half = bld.ashr(k, const(ityp, 1))
    rest = bld.sub(k, half)
    for part in (half, rest):  # 2^k as 2^half * 2^rest: each a normal float's exponent
        scale = bld.bitcast(bld.shl(bld.add(part, const(ityp, 127)), const(ityp, 23)), typ)
        y = bld.fmul(y, scale)
    return y


def erf_f32(bld: ir.IRBuilder, x: ir.Value, const: Callable[[ir.Type, object], ir.Value],
            intrinsic: Callable[[str, ir.Type], ir.Function],
            scalef: Callable[[ir.Type], ir.Function] | None = None) -> ir.Value:
    """``erf(x)`` of a float32 scalar or vector ``x``; arguments as ``exp_f32``'s, and
    ``intrinsic`` also declares ``llvm.fabs`` and ``llvm.copysign``.

    Both pieces are computed for every lane and one is selected (no branch, so a loop of
    it vectorizes): ``x + x * p(x^2)`` below 0.921875 (its first term exact, so tiny and
    subnormal ``x`` and ``-0`` come out right), ``copysign(1 - exp(q(t) - t^2), x)`` with
    ``t = min(|x|, 4)`` above (``erfc(4)`` is below half an ulp of 1: +-1 from 3.92 on,
    and for +-inf). ``exp``'s argument is within ``[-16.1, -0.85]``, so it skips its clamp.
    The select takes the first piece for NaN too (an unordered compare), which passes
    NaN through.
    """
    typ = x.type

    def f(v: float) -> ir.Value:
        return const(typ, v)

    def call(name: str, *args: ir.Value) -> ir.Value:
        return bld.call(intrinsic(name, typ), list(args))

    def horner(coefs: tuple[float, ...], v: ir.Value) -> ir.Value:
        acc = f(coefs[0])
        for c in coefs[1:]:
            acc = call("llvm.fmuladd", acc, v, f(c))
        return acc

    t = call("llvm.fabs", x)
    small = call("llvm.fmuladd", x, horner(_ERF_SMALL, bld.fmul(x, x)), x)
    tc = call("llvm.minnum", t, f(_ERF_CLAMP))
    # q by Estrin's scheme (the exp after it makes this piece the longer chain):
    # ((q6 t^2 + q5 t + q4) t^2 + q3 t + q2) t^2 + q1 t + q0
    t2 = bld.fmul(tc, tc)
    q = _ERF_LARGE
    pairs = [call("llvm.fmuladd", f(q[k]), tc, f(q[k + 1])) for k in (1, 3, 5)]
    poly = f(q[0])
    for pair in pairs:
        poly = call("llvm.fmuladd", poly, t2, pair)
    r = call("llvm.fmuladd", bld.fsub(f(-0.0), tc), tc, poly)  # q(t) - t^2, rounded once
    large = call("llvm.copysign", bld.fsub(f(1.0), _exp_in_range(bld, r, const, intrinsic,
                                                                 scalef)), x)
    return bld.select(bld.fcmp_unordered("<", t, f(_ERF_SMALL_END)), small, large)


__all__ = ["erf_f32", "exp_f32"]
