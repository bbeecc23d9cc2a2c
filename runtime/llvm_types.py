"""LLVM types and constants of TIR dtypes: register and memory types, intrinsic name
suffixes, and vector constants shared or spelled short (both only save IR text).

The code generators (``codegen_expr``, ``lower``, ``int_dot``) build on these; split out of
``codegen_expr`` so that module holds expression lowering only. llvmlite objects never
leave ``runtime/``.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from irkernel.tir import dtype as dt

I1, I8, I16, I32, I64 = (ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32),
                         ir.IntType(64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
#: Register types; float16/bfloat16 are float32 in registers and i16 in memory.
ELEM = {"float32": F32, "float64": F64, "int32": I32, "int64": I64, "bool": I1,
        "float16": F32, "bfloat16": F32, "int8": I8, "uint8": I8, "int16": I16, "uint16": I16}


def value_type(dtype: str) -> ir.Type:
    """The register type of a TIR dtype (``<n x T>`` for vectors)."""
    elem = ELEM[dt.element(dtype)]
    n = dt.lanes(dtype)
    return elem if n == 1 else ir.VectorType(elem, n)


def memory_type(dtype: str) -> ir.Type:
    """The in-memory type (bools are bytes, float16/bfloat16 their 16 bits)."""
    elem = (I8 if dt.is_bool(dtype) else I16 if dt.is_narrow_float(dtype)
            else ELEM[dt.element(dtype)])
    n = dt.lanes(dtype)
    return elem if n == 1 else ir.VectorType(elem, n)


def element_type(typ: ir.Type) -> ir.Type:
    return typ.element if isinstance(typ, ir.VectorType) else typ


def mangle(typ: ir.Type) -> str:
    """The overload suffix of an intrinsic name: ``f32``, ``i64``, ``v16f32``."""
    if isinstance(typ, ir.VectorType):
        return f"v{typ.count}{mangle(typ.element)}"
    if isinstance(typ, ir.IntType):
        return f"i{typ.width}"
    return {F32: "f32", F64: "f64"}[typ]


#: Shared vector constants by (element type, lane reprs); see :func:`vector_constant`.
_VECTORS: dict[tuple[str, tuple[str, ...]], ir.Constant] = {}
_VECTORS_MAX = 1024


def vector_constant(elem: ir.Type, values: tuple[Any, ...]) -> ir.Constant:
    """The constant vector ``<values>`` of ``elem``, one shared object per distinct vector.

    llvmlite formats a vector constant element by element (a ``Constant`` per
    lane) and caches the text per *object*; splat masks, ramp steps and
    splatted immediates repeat in every statement of an unrolled tile, so
    sharing the object formats each distinct vector once instead of once per
    use (a measurable part of codegen for 64-lane code). Constants are
    immutable values, not instructions: sharing them between instructions and
    modules is safe. The key uses ``repr`` of each lane, so ``0.0``/``-0.0``,
    ``1``/``1.0`` and NaNs never collide.
    """
    key = (str(elem), tuple(map(repr, values)))
    const = _VECTORS.get(key)
    if const is None:
        if len(_VECTORS) >= _VECTORS_MAX:
            _VECTORS.clear()
        const = _VECTORS[key] = ir.Constant(ir.VectorType(elem, len(values)), list(values))
    return const


def undef_vector(typ: ir.VectorType) -> ir.Constant:
    """``<N x T> undef`` as one token.

    ``ir.Constant(vector_type, ir.Undefined)`` spells out every lane
    (``<float undef, float undef, ...>``: ~1 KB of IR text for 64 lanes, twice
    per splat); LLVM parses both forms to the same ``UndefValue``, so the
    short one only saves formatting and parsing.
    """
    return _UndefVector(typ)


class _UndefVector(ir.Constant):
    """An undef vector constant built without ``Type.wrap_constant_value``'s per-lane
    expansion (``Constant._get_reference`` prints an ``Undefined`` constant as ``undef``)."""

    def __init__(self, typ: ir.VectorType) -> None:  # no super().__init__: see the class doc
        self.type = typ
        self.constant = ir.Undefined


__all__ = ["ELEM", "F16", "F32", "F64", "I1", "I8", "I16", "I32", "I64", "PTR",
           "element_type", "mangle", "memory_type", "undef_vector", "value_type",
           "vector_constant"]
