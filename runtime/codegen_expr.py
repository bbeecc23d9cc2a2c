"""Expression lowering: TIR expressions -> ``llvmlite.ir`` values (the base of ``Lowerer``).

Semantics match ``irkernel.tir.interp`` exactly (except math functions,
which are libm/libmvec's, and fast math when enabled):

* ints wrap (no ``nsw``/``nuw`` on data arithmetic); integer division never
  traps: ``x / 0``, ``x % 0``, ``x // 0`` give 0 and ``MIN / -1`` wraps, via a
  divisor patched to 1 (constant divisors skip the guard, powers of two use
  shifts and masks);
* floats are IEEE unless the ``tir.fast_math`` config sets ``fast`` flags;
  ``min``/``max`` are ``llvm.minimum``/``llvm.maximum`` (NaN-propagating, as
  NumPy, and ``-0.0 < 0.0``, which the interpreter follows); ``//`` on floats is ``floor(a / b)``, ``%`` NumPy's remainder;
* float -> int casts are ``llvm.fptosi.sat``/``fptoui.sat`` (saturating, NaN is 0);
* uint8/uint16 compare, divide and min/max unsigned; ints of one width convert bitwise;
* float16/bfloat16 are ``i16`` in memory and float32 in registers: a load widens
  exactly, a store and a Cast to them round to nearest even (float16 with
  ``fptrunc``/``fpext`` on ``half``, bfloat16 with integer ops, NaNs quieted);
* bools are ``i1`` in registers and one byte in memory;
* float32 ``exp`` and ``erf`` are inline IR (``runtime/inline_math.py``: a loop holding
  them still vectorizes; with AVX-512 exp's ``2^n`` is one ``vscalefps``), on float16
  and bfloat16 registers too;
* other math calls are LLVM intrinsics (``llvm.exp.f64`` ...), except ``fmod`` (the
  ``frem`` instruction), float64 ``erf`` and tan/asin/.../atanh (libm's ``erf``,
  ``tan``/``tanf`` ..., called once per lane: LLVM has no intrinsic for them); a *vector* call of a
  transcendental becomes calls of glibc's libmvec variants (``_ZGVeN16v_expf``)
  when the target has them: LLVM would otherwise scalarize it into libm
  calls, and it does not map intrinsics to libmvec itself here.

llvmlite objects never leave ``runtime/``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from llvmlite import ir

from irkernel.ir import narrow
from irkernel.ir.ids import DTYPE_NAMES
from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import (
    DOT_OPS,
    EQ,
    GE,
    GT,
    LE,
    LIBM_TRIG,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Broadcast,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from runtime.inline_math import erf_f32, exp_f32
from runtime.llvm_types import (
    ELEM,
    F16,
    F32,
    F64,
    I1,
    I8,
    I16,
    I32,
    I64,
    PTR,
    element_type,
    mangle,
    memory_type,
    undef_vector,
    value_type,
    vector_constant,
)


_CMP = {EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">="}
_INTRINSIC = {"exp": "llvm.exp", "exp2": "llvm.exp2", "log": "llvm.log", "log2": "llvm.log2",
              "sqrt": "llvm.sqrt", "tanh": "llvm.tanh", "sin": "llvm.sin", "cos": "llvm.cos",
              "fabs": "llvm.fabs", "floor": "llvm.floor", "ceil": "llvm.ceil",
              "round": "llvm.roundeven", "pow": "llvm.pow", "fma": "llvm.fma"}
#: Operands of the intrinsics inline math declares (one where not listed).
_INTRINSIC_ARITY = {"llvm.minnum": 2, "llvm.maxnum": 2, "llvm.fmuladd": 3, "llvm.copysign": 2}
#: Math ops on float32 registers (float32, float16, bfloat16) lowered to inline IR
#: (``runtime/inline_math.py``), not calls.
_INLINE_F32 = {"exp": exp_f32, "erf": erf_f32}
#: Math ops that are plain libm calls (no LLVM intrinsic).
_LIBM = frozenset({"erf", *LIBM_TRIG})
#: Math ops with libmvec variants (the rest are single instructions on x86).
_MVEC = frozenset({"exp", "exp2", "log", "log2", "tanh", "sin", "cos", "pow"})


def known_multiple(e: PrimExpr) -> int:
    """A positive int that divides every value of ``e`` (0 for the constant 0)."""
    if isinstance(e, IntImm):
        return abs(e.value)
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, IntImm):
                return known_multiple(x) * abs(y.value)
        return known_multiple(e.a) * known_multiple(e.b)
    if isinstance(e, (Add, Sub)):
        return math.gcd(known_multiple(e.a), known_multiple(e.b))
    if isinstance(e, Cast):
        return known_multiple(e.value)
    return 1


def _imm_value(e: PrimExpr) -> int | None:
    if isinstance(e, Broadcast):
        e = e.value
    return e.value if isinstance(e, IntImm) else None


class ExprCodegen:
    """Lowers expressions with ``self.builder``; subclasses set the state below."""

    module: ir.Module
    builder: ir.IRBuilder
    values: dict[str, ir.Value]
    buffers: dict[str, tuple[ir.Value, Buffer]]
    fast_math: bool
    nontemporal: bool
    mvec: tuple[str, int, int] | None
    #: Whether the target has FMA instructions (``fma`` is then one exact ``llvm.fma``).
    fused: bool
    #: Whether the target has AVX-512 F and VL: float32 ``exp`` scales by ``2^n`` with one
    #: ``vscalefps`` (``llvm.ldexp``) at every vector width (``runtime/inline_math.py``).
    scalef: bool = False

    # -- helpers -----------------------------------------------------------
    @property
    def _fm(self) -> tuple[str, ...]:
        return ("fast",) if self.fast_math else ()

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type],
                  overloads: list[ir.Type]) -> ir.Function:
        full = ".".join([name, *(mangle(t) for t in overloads)])
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), full)
        return fn

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn

    def const(self, typ: ir.Type, value: Any) -> ir.Constant:
        if isinstance(typ, ir.VectorType):
            return vector_constant(typ.element, (value,) * typ.count)
        return ir.Constant(typ, value)

    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        vt = ir.VectorType(v.type, lanes)
        first = self.builder.insert_element(undef_vector(vt), v, I32(0))
        return self.builder.shuffle_vector(first, undef_vector(vt),
                                           vector_constant(I32, (0,) * lanes))

    def index64(self, v: ir.Value) -> ir.Value:
        elem = v.type.element if isinstance(v.type, ir.VectorType) else v.type
        if elem == I64:
            return v
        lanes = v.type.count if isinstance(v.type, ir.VectorType) else 1
        return self.builder.sext(v, I64 if lanes == 1 else ir.VectorType(I64, lanes))

    # -- dispatch ----------------------------------------------------------
    #: The values of the expression being lowered, by node identity (None between
    #: expressions): an expression is a DAG after unrolling, vectorizing and inlining lets
    #: (a fused epilogue's value at every use), and each shared node is emitted once, not
    #: once per path. The scope is one call from the statement lowerer: its instructions
    #: are straight-line code in one block (expressions make no blocks), and the values
    #: it reads (vars, loads) cannot change within it. Entries keep the node itself, so an
    #: id is never matched by a different, later object.
    _memo: dict[int, tuple[PrimExpr, ir.Value]] | None = None

    def expr(self, e: PrimExpr) -> ir.Value:
        memo = self._memo
        if memo is None:
            self._memo = {}
            try:
                return self.expr(e)
            finally:
                self._memo = None
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = self._lower_expr(e)
        memo[id(e)] = (e, out)
        return out

    def _lower_expr(self, e: PrimExpr) -> ir.Value:
        method: Callable[[Any], ir.Value] | None = getattr(self, "_e_" + type(e).__name__, None)
        if method is None:
            if isinstance(e, BinaryOp):
                return self._binary(e)
            raise TypeError(f"codegen: unsupported expression {type(e).__name__}")
        return method(e)

    def _e_IntImm(self, e: IntImm) -> ir.Value:
        return ir.Constant(ELEM[e.dtype], e.value)

    def _e_FloatImm(self, e: FloatImm) -> ir.Value:
        if dt.is_narrow_float(e.dtype):  # the float32 of the value rounded to the dtype
            code = DTYPE_NAMES.index(e.dtype)
            return ir.Constant(F32, float(narrow.widen(narrow.narrow(e.value, code), code)))
        return ir.Constant(ELEM[e.dtype], e.value)

    def _e_Var(self, e: Var) -> ir.Value:
        try:
            return self.values[e.name]
        except KeyError:
            raise TypeError(f"codegen: var {e.name!r} is not bound (verify the PrimFunc)") \
                from None

    def _e_Broadcast(self, e: Broadcast) -> ir.Value:
        return self.splat(self.expr(e.value), e.lanes)

    def _e_Ramp(self, e: Ramp) -> ir.Value:
        vt = value_type(e.dtype)
        steps = vector_constant(vt.element, tuple(range(e.lanes)))
        base = self.splat(self.expr(e.base), e.lanes)
        stride = _imm_value(e.stride)
        if stride != 1:
            steps = self.builder.mul(steps, self.splat(self.expr(e.stride), e.lanes))
        return self.builder.add(base, steps)

    def _e_Let(self, e: Let) -> ir.Value:
        saved = self.values.get(e.var.name)
        self.values[e.var.name] = self.expr(e.value)
        # the body's values may use the var: they stay in a memo of the body's own
        outer = self._memo
        self._memo = dict(outer) if outer is not None else None
        try:
            return self.expr(e.body)
        finally:
            self._memo = outer
            if saved is None:
                del self.values[e.var.name]
            else:
                self.values[e.var.name] = saved

    def _e_Not(self, e: Not) -> ir.Value:
        a = self.expr(e.a)
        return self.builder.xor(a, self.const(a.type, 1))

    def _e_Select(self, e: Select) -> ir.Value:
        return self.builder.select(self.expr(e.condition), self.expr(e.true_value),
                                   self.expr(e.false_value))

    def _e_BufferLoad(self, e: BufferLoad) -> ir.Value:
        from_memory = self.load(e.buffer, e.indices[0] if e.indices else IntImm(0), e.lanes)
        if dt.is_bool(e.dtype):
            return self.builder.icmp_unsigned("!=", from_memory,
                                              self.const(from_memory.type, 0))
        if dt.is_narrow_float(e.dtype):
            return self.widen_narrow(from_memory, dt.element(e.dtype))
        return from_memory

    # -- float16 / bfloat16 (stored as i16, float32 in registers) ------------
    def _like(self, v: ir.Value, elem: ir.Type) -> ir.Type:
        """``elem``, or a vector of it with ``v``'s lane count."""
        return ir.VectorType(elem, v.type.count) if isinstance(v.type, ir.VectorType) else elem

    def widen_narrow(self, bits: ir.Value, elem: str) -> ir.Value:
        """The float32 of stored float16/bfloat16 bits (exact)."""
        bld = self.builder
        if elem == "float16":
            return bld.fpext(bld.bitcast(bits, self._like(bits, F16)), self._like(bits, F32))
        wide = bld.shl(bld.zext(bits, self._like(bits, I32)), self.const(self._like(bits, I32), 16))
        return bld.bitcast(wide, self._like(bits, F32))

    def narrow_bits(self, v: ir.Value, elem: str) -> ir.Value:
        """The float16/bfloat16 bits of float32 ``v``, rounded to nearest even (``fptrunc``
        for float16; integer rounding for bfloat16, NaNs quieted, as ``ir.narrow``)."""
        bld = self.builder
        if elem == "float16":
            return bld.bitcast(bld.fptrunc(v, self._like(v, F16)), self._like(v, I16))
        i32 = self._like(v, I32)
        u = bld.bitcast(v, i32)
        lsb = bld.and_(bld.lshr(u, self.const(i32, 16)), self.const(i32, 1))
        rounded = bld.lshr(bld.add(bld.add(u, self.const(i32, 0x7FFF)), lsb),
                           self.const(i32, 16))
        quiet = bld.or_(bld.lshr(u, self.const(i32, 16)), self.const(i32, 0x40))
        is_nan = bld.icmp_unsigned(">", bld.and_(u, self.const(i32, 0x7FFFFFFF)),
                                   self.const(i32, 0x7F800000))
        return bld.trunc(bld.select(is_nan, quiet, rounded), self._like(v, I16))

    def round_narrow(self, v: ir.Value, elem: str) -> ir.Value:
        """float32 ``v`` rounded to float16/bfloat16, as a float32 register."""
        return self.widen_narrow(self.narrow_bits(v, elem), elem)

    # -- arithmetic ----------------------------------------------------------
    def _binary(self, e: BinaryOp) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        elem = dt.element(e.a.dtype)
        if elem == "bool":
            return self._bool_binary(e, a, b)
        if type(e) in _CMP:
            op = _CMP[type(e)]
            if elem in dt.FLOAT_ELEMENTS:
                if isinstance(e, NE):
                    return self.builder.fcmp_unordered(op, a, b, flags=self._fm)
                return self.builder.fcmp_ordered(op, a, b, flags=self._fm)
            if elem in dt.UNSIGNED_ELEMENTS:
                return self.builder.icmp_unsigned(op, a, b)
            return self.builder.icmp_signed(op, a, b)
        if elem in dt.FLOAT_ELEMENTS:
            return self._float_binary(e, a, b)
        return self._int_binary(e, a, b)

    def _bool_binary(self, e: BinaryOp, a: ir.Value, b: ir.Value) -> ir.Value:
        if isinstance(e, (And, Min)):
            return self.builder.and_(a, b)
        if isinstance(e, (Or, Max)):
            return self.builder.or_(a, b)
        if type(e) in _CMP:
            return self.builder.icmp_unsigned(_CMP[type(e)], a, b)
        raise TypeError(f"codegen: {type(e).__name__} is not defined for bools")

    def _float_binary(self, e: BinaryOp, a: ir.Value, b: ir.Value) -> ir.Value:
        bld, fm = self.builder, self._fm
        if isinstance(e, Add):
            return bld.fadd(a, b, flags=fm)
        if isinstance(e, Sub):
            return bld.fsub(a, b, flags=fm)
        if isinstance(e, Mul):
            return bld.fmul(a, b, flags=fm)
        if isinstance(e, Div):
            return bld.fdiv(a, b, flags=fm)
        if isinstance(e, FloorDiv):
            return self.math("floor", [bld.fdiv(a, b, flags=fm)])
        if isinstance(e, FloorMod):  # NumPy: r = fmod(a, b); r + b when r and b differ in
            r = bld.frem(a, b, flags=fm)  # sign; a zero r takes b's sign (copysign(0, b))
            zero = self.const(a.type, 0.0)
            differ = bld.xor(bld.fcmp_ordered("<", r, zero), bld.fcmp_ordered("<", b, zero))
            fix = bld.and_(bld.fcmp_ordered("!=", r, zero), differ)
            fixed = bld.select(fix, bld.fadd(r, b, flags=fm), r)
            copysign = self.intrinsic("llvm.copysign", a.type, [a.type, a.type], [a.type])
            signed_zero = bld.call(copysign, [zero, b])
            return bld.select(bld.fcmp_ordered("==", r, zero), signed_zero, fixed)
        if isinstance(e, (Min, Max)):
            name = "llvm.minimum" if isinstance(e, Min) else "llvm.maximum"
            fn = self.intrinsic(name, a.type, [a.type, a.type], [a.type])
            return bld.call(fn, [a, b], fastmath=fm)
        raise TypeError(f"codegen: {type(e).__name__} is not defined for floats")

    def _int_binary(self, e: BinaryOp, a: ir.Value, b: ir.Value) -> ir.Value:
        bld = self.builder
        if isinstance(e, Add):
            return bld.add(a, b)
        if isinstance(e, Sub):
            return bld.sub(a, b)
        if isinstance(e, Mul):
            return bld.mul(a, b)
        unsigned = dt.is_unsigned(e.a.dtype)
        if isinstance(e, (Min, Max)):
            name = ("llvm.umin" if isinstance(e, Min) else "llvm.umax") if unsigned else \
                ("llvm.smin" if isinstance(e, Min) else "llvm.smax")
            return bld.call(self.intrinsic(name, a.type, [a.type, a.type], [a.type]), [a, b])
        if unsigned:
            return self._uint_division(e, a, b)
        return self._int_division(e, a, b, _imm_value(e.b))

    def _uint_division(self, e: BinaryOp, a: ir.Value, b: ir.Value) -> ir.Value:
        """Unsigned ``/``, ``//`` (the same), ``%``: ``x / 0`` and ``x % 0`` are 0."""
        bld = self.builder
        zero, one = self.const(a.type, 0), self.const(a.type, 1)
        is_zero = bld.icmp_unsigned("==", b, zero)
        divisor = bld.select(is_zero, one, b)
        out = bld.udiv(a, divisor) if isinstance(e, (Div, FloorDiv)) else bld.urem(a, divisor)
        return bld.select(is_zero, zero, out)

    def _int_division(self, e: BinaryOp, a: ir.Value, b: ir.Value,
                      c: int | None) -> ir.Value:
        bld = self.builder
        floor = isinstance(e, (FloorDiv, FloorMod))
        want_quotient = isinstance(e, (Div, FloorDiv))
        if c is not None and c > 0 and c & (c - 1) == 0 and floor:
            if want_quotient:  # floor division by 2^k is an arithmetic shift
                return bld.ashr(a, self.const(a.type, c.bit_length() - 1))
            return bld.and_(a, self.const(a.type, c - 1))
        zero, one = self.const(a.type, 0), self.const(a.type, 1)
        guarded = c is None or c in (0, -1)
        if guarded:  # never trap: divide by 1 instead of 0 or -1 and patch the result
            is_zero = bld.icmp_signed("==", b, zero)
            is_m1 = bld.icmp_signed("==", b, self.const(a.type, -1))
            divisor = bld.select(bld.or_(is_zero, is_m1), one, b)
        else:
            divisor = b
        q, r = bld.sdiv(a, divisor), bld.srem(a, divisor)
        if floor:
            differ = bld.xor(bld.icmp_signed("<", r, zero), bld.icmp_signed("<", divisor, zero))
            fix = bld.and_(bld.icmp_signed("!=", r, zero), differ)
            if want_quotient:
                q = bld.sub(q, bld.zext(fix, a.type))
            else:
                r = bld.select(fix, bld.add(r, divisor), r)
        out = q if want_quotient else r
        if guarded:
            if want_quotient:
                out = bld.select(is_m1, bld.sub(zero, a), out)
            out = bld.select(is_zero, zero, out)
        return out

    # -- casts and math ----------------------------------------------------
    def _e_Cast(self, e: Cast) -> ir.Value:
        v = self.expr(e.value)
        src, dst = dt.element(e.value.dtype), dt.element(e.dtype)
        target = value_type(e.dtype)
        bld = self.builder
        if src == dst:
            return v
        if dst == "bool":
            if src in dt.FLOAT_ELEMENTS:
                return bld.fcmp_unordered("!=", v, self.const(v.type, 0.0))
            return bld.icmp_signed("!=", v, self.const(v.type, 0))
        if src == "bool":
            return bld.uitofp(v, target) if dst in dt.FLOAT_ELEMENTS else bld.zext(v, target)
        if dst in dt.FLOAT_ELEMENTS:
            if src in dt.FLOAT_ELEMENTS:  # narrow floats are float32 registers
                if target != v.type:  # float32 <-> float64 (scalars or vectors)
                    v = bld.fpext(v, target) if element_type(target) == F64 \
                        else bld.fptrunc(v, target)
            elif src in dt.UNSIGNED_ELEMENTS:
                v = bld.uitofp(v, target)
            else:
                v = bld.sitofp(v, target)
            # to float16/bfloat16: through float32 (``irkernel.ir.narrow``), then rounded
            return self.round_narrow(v, dst) if dst in dt.NARROW_FLOAT_ELEMENTS else v
        if src in dt.INT_ELEMENTS:
            width, src_width = element_type(target).width, element_type(v.type).width
            if width == src_width:  # int16 <-> uint16, int8 <-> uint8: the same bits
                return v
            if width < src_width:
                return bld.trunc(v, target)
            return bld.zext(v, target) if src in dt.UNSIGNED_ELEMENTS else bld.sext(v, target)
        name = "llvm.fptoui.sat" if dst in dt.UNSIGNED_ELEMENTS else "llvm.fptosi.sat"
        fn = self.intrinsic(name, target, [v.type], [target, v.type])
        return bld.call(fn, [v])

    def _e_Call(self, e: Call) -> ir.Value:
        args = [self.expr(a) for a in e.args]
        if e.op in DOT_OPS:
            return self.int_dot(*args)
        if e.op == "fmod":
            return self.builder.frem(args[0], args[1], flags=self._fm)
        if e.op in _INLINE_F32 and element_type(args[0].type) == F32:  # float16 too
            return _INLINE_F32[e.op](self.builder, args[0], self.const,
                                     lambda name, typ: self.intrinsic(
                                         name, typ, [typ] * _INTRINSIC_ARITY.get(name, 1), [typ]),
                                     self._ldexp if self.scalef else None)
        if e.op in _LIBM:
            return self.libm_call(e.op, args[0], dt.element(e.dtype))
        if e.op == "abs" and dt.is_unsigned(e.dtype):
            return args[0]
        if e.op == "abs":
            fn = self.intrinsic("llvm.abs", args[0].type, [args[0].type, I1], [args[0].type])
            return self.builder.call(fn, [args[0], I1(0)])
        if e.op == "fma" and not self.fused:
            # exact fma without FMA instructions is a libm call per element (the SSE4.2
            # build's convs ran 100x slower than the AVX2 one): a multiply and an add
            return self.builder.fadd(self.builder.fmul(args[0], args[1], flags=self._fm),
                                     args[2], flags=self._fm)
        if e.lanes > 1 and e.op in _MVEC and self.mvec is not None:
            return self.vector_math(e.op, args, dt.element(e.dtype))
        return self.math(e.op, args)

    def _ldexp(self, typ: ir.Type) -> ir.Function:
        """``llvm.ldexp`` of float32 ``typ`` (scalar or vector) and its lanes' i32 type."""
        ityp = ir.VectorType(I32, typ.count) if isinstance(typ, ir.VectorType) else I32
        return self.intrinsic("llvm.ldexp", typ, [typ, ityp], [typ, ityp])

    def int_dot(self, acc: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        """``dot4_u8s8`` (``irkernel.tir.expr.DOT_OPS``); the lowerer knows the CPU."""
        raise TypeError("codegen: this code generator has no integer dot product")

    def math(self, op: str, args: list[ir.Value]) -> ir.Value:
        typ = args[0].type
        fn = self.intrinsic(_INTRINSIC[op], typ, [typ] * len(args), [typ])
        return self.builder.call(fn, args, fastmath=self._fm)

    def libm_call(self, op: str, arg: ir.Value, elem: str) -> ir.Value:
        """A one-argument libm function (``tan``/``tanf``), lane by lane for vectors
        (``tanf`` for every float32 register: float16 and bfloat16 too)."""
        scalar = ELEM[elem]
        fn = self.declare(op + ("f" if scalar == F32 else ""), scalar, [scalar])
        bld = self.builder
        if not isinstance(arg.type, ir.VectorType):
            return bld.call(fn, [arg])
        out = undef_vector(arg.type)
        for k in range(arg.type.count):
            lane = bld.call(fn, [bld.extract_element(arg, I32(k))])
            out = bld.insert_element(out, lane, I32(k))
        return out

    def vector_math(self, op: str, args: list[ir.Value], elem: str) -> ir.Value:
        """``op`` on vectors through libmvec, in chunks of the variant's width."""
        assert self.mvec is not None
        isa, w32, w64 = self.mvec
        width = w32 if elem == "float32" else w64
        lanes = args[0].type.count
        vt = ir.VectorType(ELEM[elem], width)
        name = f"_ZGV{isa}N{width}{'v' * len(args)}_{op}{'f' if elem == 'float32' else ''}"
        fn = self.declare(name, vt, [vt] * len(args))
        bld = self.builder
        chunks = []
        for start in range(0, lanes, width):
            mask = vector_constant(I32, tuple(min(start + k, lanes - 1) for k in range(width)))
            parts = [bld.shuffle_vector(a, a, mask) for a in args]
            chunks.append(bld.call(fn, parts))
        while len(chunks) > 1:  # concatenate pairwise (pad with the last chunk)
            if len(chunks) % 2:
                chunks.append(chunks[-1])
            n = chunks[0].type.count
            cat = vector_constant(I32, tuple(range(2 * n)))
            chunks = [bld.shuffle_vector(chunks[k], chunks[k + 1], cat)
                      for k in range(0, len(chunks), 2)]
        out = chunks[0]
        if out.type.count != lanes:
            out = bld.shuffle_vector(out, out, vector_constant(I32, tuple(range(lanes))))
        return out

    # -- memory ------------------------------------------------------------
    def address(self, buf: Buffer, index: ir.Value) -> ir.Value:
        ptr = self.buffers[buf.name][0]
        return self.builder.gep(ptr, [self.index64(index)], inbounds=True,
                                source_etype=memory_type(buf.dtype))

    def alignment(self, buf: Buffer, base: PrimExpr) -> int:
        """Bytes of alignment provable for ``buf[base]``."""
        declared = self.buffers[buf.name][1].align
        elem = dt.ELEMENT_BYTES[buf.dtype]
        multiple = known_multiple(base) * elem
        if multiple == 0:
            return declared
        return min(declared, multiple & -multiple)

    def load(self, buf: Buffer, index: PrimExpr, lanes: int) -> ir.Value:
        bld = self.builder
        elem_t = memory_type(buf.dtype)
        if lanes == 1:
            return bld.load(self.address(buf, self.expr(index)), typ=elem_t,
                            align=self.alignment(buf, index))
        if isinstance(index, Ramp) and _imm_value(index.stride) == 1:
            addr = self.address(buf, self.expr(index.base))
            return bld.load(addr, typ=ir.VectorType(elem_t, lanes),
                            align=self.alignment(buf, index.base))
        if isinstance(index, Broadcast):
            return self.splat(self.load(buf, index.value, 1), lanes)
        vi = self.expr(index)  # gather, one lane at a time
        out = undef_vector(ir.VectorType(elem_t, lanes))
        for k in range(lanes):
            addr = self.address(buf, bld.extract_element(vi, I32(k)))
            out = bld.insert_element(out, bld.load(addr, typ=elem_t,
                                                   align=dt.ELEMENT_BYTES[buf.dtype]), I32(k))
        return out

    def store(self, buf: Buffer, index: PrimExpr, value: ir.Value, lanes: int) -> None:
        bld = self.builder
        if dt.is_bool(buf.dtype):
            value = bld.zext(value, memory_type(dt.with_lanes("bool", lanes)))
        elif dt.is_narrow_float(buf.dtype):  # rounded as it is stored
            value = self.narrow_bits(value, dt.element(buf.dtype))
        if lanes == 1:
            bld.store(value, self.address(buf, self.expr(index)),
                      align=self.alignment(buf, index))
        elif isinstance(index, Ramp) and _imm_value(index.stride) == 1:
            st = bld.store(value, self.address(buf, self.expr(index.base)),
                           align=self.alignment(buf, index.base))
            if self.nontemporal:
                st.set_metadata("nontemporal", self.module.add_metadata([I32(1)]))
        else:  # scatter, one lane at a time, in lane order
            vi = self.expr(index)
            for k in range(lanes):
                addr = self.address(buf, bld.extract_element(vi, I32(k)))
                bld.store(bld.extract_element(value, I32(k)), addr,
                          align=dt.ELEMENT_BYTES[buf.dtype])


__all__ = ["F16", "F32", "F64", "I1", "I8", "I16", "I32", "I64", "PTR", "ExprCodegen", "known_multiple",
           "memory_type", "value_type"]
