"""LLVM code for the TIR integer dot product ``dot4_u8s8(acc, a, b)`` (``tir.expr.DOT_OPS``).

``acc[i] + sum_j a[j] * b[4i + j]``: int32 x L accumulators, one uint8 group ``a`` of
four for every lane, int8 x 4L ``b``. Every path is exact (the products and their sums
fit int32; only the final add wraps, as in VNNI), so all of them give the same bits,
and the interpreter's (``irkernel.tir.interp``) too:

- **VNNI** (``avx512vnni``, with ``avx512vl`` below 512 bits; or ``avxvnni`` at 256):
  one ``vpdpbusd`` per native vector.
- **vpmaddubsw + vpmaddwd** (AVX-512BW at 512 bits, AVX2 at 256, SSSE3 at 128).
  ``vpmaddubsw`` adds two u8 x s8 products into int16 *with saturation*: with ``a`` up
  to 255 and ``b`` down to -128 the pair reaches -65,280. onnxruntime's MLAS accepts
  that (its quantizer's ``reduce_range`` keeps weights to 7 bits). Here ``a`` is split
  instead: ``a & 0x7f`` makes pairs of at most 127 * 128 * 2 = 32,512 in magnitude, and
  ``a & 0x80`` (0 or 128) pairs in [-32,768, 32,512]; both fit int16 exactly, and
  ``vpmaddwd`` with ones widens each to int32 sums of four.
- **Elsewhere** (other widths, non-x86): zero- and sign-extended int32 products and
  shuffles summing each group of four.

Vectors wider than the native width are cut into native pieces. Imports llvmlite and
``runtime.codegen_expr``'s value helpers only.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from runtime.llvm_types import I8, I16, I32, undef_vector, vector_constant

#: Accumulator lanes of each native width, widest first.
_WIDTHS = (16, 8, 4)

#: The features an x86-64 level's LLVM CPU name implies (a named level's target lists
#: no features of its own: ``runtime.target.target_for``).
LEVEL_FEATURES = {"x86-64-v2": ("ssse3",), "x86-64-v3": ("ssse3", "avx2"),
                  "x86-64-v4": ("ssse3", "avx2", "avx512bw", "avx512vl")}

Intrinsic = Callable[[str, ir.Type, list[ir.Type]], ir.Function]


def dot_paths(cpu: str, has_feature: Callable[[str], bool]) -> dict[int, str]:
    """Accumulator lanes -> ``"vnni"``, ``"avxvnni"`` or ``"pmadd"``: the native path of
    each width that the LLVM CPU name ``cpu`` (a level's implied features) and its
    explicit features (``has_feature("avx512vnni")``, ...) allow."""
    implied = LEVEL_FEATURES.get(cpu, ())

    def has(name: str) -> bool:
        return name in implied or has_feature(name)

    paths: dict[int, str] = {}
    vnni = has("avx512vnni")
    if vnni:
        paths[16] = "vnni"
    elif has("avx512bw"):
        paths[16] = "pmadd"
    for lanes, isa in ((8, "avx2"), (4, "ssse3")):
        if vnni and has("avx512vl"):
            paths[lanes] = "vnni"
        elif has("avxvnni"):
            paths[lanes] = "avxvnni"
        elif has(isa):
            paths[lanes] = "pmadd"
    return paths


def _vt(elem: ir.Type, n: int) -> ir.VectorType:
    return ir.VectorType(elem, n)


def _pieces(bld: ir.IRBuilder, v: ir.Value, count: int) -> list[ir.Value]:
    """``v`` cut into ``count`` equal consecutive vectors."""
    n = v.type.count // count
    return [bld.shuffle_vector(v, undef_vector(v.type),
                               vector_constant(I32, tuple(range(p * n, (p + 1) * n))))
            for p in range(count)]


def _join(bld: ir.IRBuilder, parts: list[ir.Value]) -> ir.Value:
    while len(parts) > 1:
        n = parts[0].type.count
        parts = [bld.shuffle_vector(parts[i], parts[i + 1],
                                    vector_constant(I32, tuple(range(2 * n))))
                 for i in range(0, len(parts), 2)]
    return parts[0]


def _native(bld: ir.IRBuilder, intrinsic: Intrinsic, path: str, acc: ir.Value,
            a: ir.Value, b: ir.Value) -> ir.Value:
    """One native vector: ``acc`` <L x i32>, ``a`` and ``b`` <4L x i8>."""
    lanes = acc.type.count
    bytes_t = a.type
    if path in ("vnni", "avxvnni"):
        prefix = "llvm.x86.avx512" if path == "vnni" else "llvm.x86.avxvnni"
        fn = intrinsic(f"{prefix}.vpdpbusd.{32 * lanes}", acc.type,
                       [acc.type, bytes_t, bytes_t])
        return bld.call(fn, [acc, a, b])
    words = _vt(I16, 2 * lanes)
    ubsw, wd = {16: ("llvm.x86.avx512.pmaddubs.w.512", "llvm.x86.avx512.pmaddw.d.512"),
                8: ("llvm.x86.avx2.pmadd.ub.sw", "llvm.x86.avx2.pmadd.wd"),
                4: ("llvm.x86.ssse3.pmadd.ub.sw.128", "llvm.x86.sse2.pmadd.wd")}[lanes]
    f_ubsw = intrinsic(ubsw, words, [bytes_t, bytes_t])
    f_wd = intrinsic(wd, acc.type, [words, words])
    ones = vector_constant(I16, (1,) * (2 * lanes))
    out = acc
    for mask in (0x7F, 0x80):  # exact halves of a (module docstring)
        part = bld.and_(a, vector_constant(I8, (mask,) * (4 * lanes)))
        out = bld.add(out, bld.call(f_wd, [bld.call(f_ubsw, [part, b]), ones]))
    return out


def _portable(bld: ir.IRBuilder, acc: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    """int32 products of the extended bytes, each group of four summed by shuffles."""
    lanes = acc.type.count
    wide = _vt(I32, 4 * lanes)
    prods = bld.mul(bld.zext(a, wide), bld.sext(b, wide))
    out = acc
    for j in range(4):
        pick = vector_constant(I32, tuple(4 * i + j for i in range(lanes)))
        out = bld.add(out, bld.shuffle_vector(prods, undef_vector(wide), pick))
    return out


def lower_dot4(bld: ir.IRBuilder, intrinsic: Intrinsic, paths: dict[int, str],
               acc: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    """``dot4_u8s8`` of lowered operands: ``acc`` <L x i32>, ``a`` <4 x i8> (broadcast
    here to every lane), ``b`` <4L x i8>."""
    lanes = acc.type.count
    group = bld.bitcast(a, I32)
    first = bld.insert_element(undef_vector(_vt(I32, lanes)), group, I32(0))
    splat = bld.shuffle_vector(first, undef_vector(first.type),
                               vector_constant(I32, (0,) * lanes))
    a_all = bld.bitcast(splat, _vt(I8, 4 * lanes))
    width = next((w for w in _WIDTHS if w in paths and lanes % w == 0), 0)
    if not width:
        return _portable(bld, acc, a_all, b)
    count = lanes // width
    parts = [_native(bld, intrinsic, paths[width], c, x, y) for c, x, y in zip(
        _pieces(bld, acc, count) if count > 1 else [acc],
        _pieces(bld, a_all, count) if count > 1 else [a_all],
        _pieces(bld, b, count) if count > 1 else [b], strict=True)]
    return _join(bld, parts)


__all__ = ["LEVEL_FEATURES", "dot_paths", "lower_dot4"]
