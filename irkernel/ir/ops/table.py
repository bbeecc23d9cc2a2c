"""The built-in op table: one :class:`OpDef` row per graph op, in opcode order.

Each row declares the op's operand encoding, arity, typed attributes, dtype and
shape rule (``infer``), NumPy reference, fusion pattern kind (TVM's
OpPatternKind values), purity and a one-line doc. Importing this module
registers the rows (:mod:`irkernel.ir.ops.registry`); the opcodes are
``irkernel.ir.ops.opcodes`` and never change between versions (Numba caches
kernels that read them), so rows are appended, and an import-time check keeps
the two lists in one order. Imports numpy and the other ``irkernel.ir.ops``
modules, never the package itself (its ``__init__`` imports this module).

Semantics worth stating once (the interpreter and every backend follow them):
binary ops need operands of one dtype (no implicit promotion, as in TVM Relax)
and broadcast as NumPy does; integer ``divide`` is floor division with
``x // 0 == 0`` (NumPy's result); ``floor_mod`` is ``np.mod`` (sign of the
divisor) and ``fmod`` C's ``fmod`` (sign of the dividend), both with integer
``x % 0 == 0``; ``round`` rounds half to even (``np.round``); ``astype`` from
float to int truncates, maps NaN to 0 and saturates out-of-range values (LLVM's
``fptosi.sat``); integer arithmetic wraps; reductions keep the input dtype
(``prod`` too), ``argmax``/``argmin`` give int64 and count NaN as the maximum /
minimum (NumPy). Index operands (``take``, ``scatter_nd``) never read out of
bounds: an index ``i`` in ``[-d, d)`` selects ``i mod d``, others are clamped
into ``[0, d - 1]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from irkernel.ir.ids import (
    ALL_DTYPES,
    BOOL,
    ENC_BINARY,
    ENC_CONST,
    ENC_PARAM,
    ENC_UNARY,
    ENC_VARIADIC,
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
)
from irkernel.ir.ops.nn_references import (
    avg_pool_ref,
    conv_ref,
    conv_transpose_ref,
    lrn_ref,
    max_pool_ref,
)
from irkernel.ir.ops.nn_rules import conv_rule, conv_transpose_rule, lrn_rule, pool_rule
from irkernel.ir.ops.opcodes import BUILTIN_OP_NAMES, OP_ERF, OP_POWER
from irkernel.ir.ops.opdef import (
    A_AXES,
    A_BOOL,
    A_DIMS,
    A_DTYPE,
    A_FLOAT,
    A_FLOATS,
    A_INT,
    A_INTS,
    A_STR,
    BROADCAST,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OUT_EWISE_FUSABLE,
    REDUCE,
    AttrSpec,
    FloatAttr,
    OpDef,
)
from irkernel.ir.ops.references import (
    arg_reduce_ref,
    astype_ref,
    broadcast_to_ref,
    concat_ref,
    cumulative_ref,
    divide,
    float_math,
    floor_mod,
    fmod,
    mean,
    nan_max,
    nan_min,
    pad_ref,
    permute_ref,
    reduce_ref,
    relu,
    reshape_ref,
    scatter_nd_ref,
    strided_slice_ref,
    take_ref,
    topk_indices_ref,
    ufunc,
)
from irkernel.ir.ops.recurrent import gru_ref, gru_rule, lstm_ref, lstm_rule
from irkernel.ir.ops.registry import register_op
from irkernel.ir.ops.type_rules import (
    arg_reduce_rule,
    astype_rule,
    broadcast_to_rule,
    call_rule,
    concat_rule,
    cumulative_rule,
    elementwise_rule,
    leaf_rule,
    matmul_rule,
    pad_rule,
    permute_rule,
    reduce_rule,
    reshape_rule,
    scatter_nd_rule,
    strided_slice_rule,
    take_rule,
    topk_rule,
    where_rule,
)

# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

_AXIS = (AttrSpec("axis", A_AXES, None), AttrSpec("keepdims", A_BOOL, False))
_ARG_AXIS = (AttrSpec("axis", A_INT, 0), AttrSpec("keepdims", A_BOOL, False),
             AttrSpec("select_last_index", A_BOOL, False))
_SLICE = (AttrSpec("begin", A_INTS), AttrSpec("end", A_INTS), AttrSpec("strides", A_INTS))
_PAD = (AttrSpec("pad_width", A_INTS), AttrSpec("mode", A_STR, "constant"))
# NN window attributes: one entry per spatial axis (padding: begins, then ends); () = default
_WINDOW = (AttrSpec("strides", A_INTS, ()), AttrSpec("padding", A_INTS, ()),
           AttrSpec("dilation", A_INTS, ()))
_CONV = (*_WINDOW, AttrSpec("groups", A_INT, 1))
_POOL = (AttrSpec("kernel", A_INTS), *_WINDOW, AttrSpec("ceil_mode", A_BOOL, False))
_SCAN = (AttrSpec("axis", A_INT, 0), AttrSpec("exclusive", A_BOOL, False),
         AttrSpec("reverse", A_BOOL, False))
_CALL = (AttrSpec("callee", A_STR), AttrSpec("dtype", A_DTYPE), AttrSpec("shape", A_INTS))
# one direction of an RNN (ir/ops/recurrent.py): activations f, g(, h) by name, their
# parameters (empty: defaults), the gate-input bound (inf: none), the step order
_RNN = (AttrSpec("activation_alpha", A_FLOATS, ()), AttrSpec("activation_beta", A_FLOATS, ()),
        AttrSpec("clip", A_FLOAT, FloatAttr(math.inf)), AttrSpec("reverse", A_BOOL, False))
_NUM, _FLOAT, _ALL, _BOOL = NUMERIC_DTYPES, FLOAT_DTYPES, ALL_DTYPES, frozenset({BOOL})


def _binary(name: str, fn: Callable[..., Any], allowed: frozenset[int] = _NUM,
            result_bool: bool = False, commutative: bool = False, doc: str = "") -> OpDef:
    return OpDef(name, ENC_BINARY, 2, elementwise_rule(allowed, result_bool), ufunc(fn),
                 BROADCAST, commutative=commutative, doc=doc, symbolic=True)


def _unary(name: str, fn: Callable[..., Any] | None, allowed: frozenset[int], doc: str) -> OpDef:
    ref = float_math(BUILTIN_OP_NAMES.index(name)) if fn is None else ufunc(fn)
    return OpDef(name, ENC_UNARY, 1, elementwise_rule(allowed), ref, ELEMWISE, doc=doc,
                 symbolic=True)


BUILTIN_OPS: tuple[OpDef, ...] = (
    OpDef("param", ENC_PARAM, 0, leaf_rule, None, OPAQUE, doc="a0 = position; a function input"),
    OpDef("const", ENC_CONST, 0, leaf_rule, None, OPAQUE, doc="a0 = const_id in the pool"),
    _binary("add", np.add, commutative=True, doc="x + y; ints wrap"),
    _binary("subtract", np.subtract, doc="x - y; ints wrap"),
    _binary("multiply", np.multiply, commutative=True, doc="x * y; ints wrap"),
    _binary("divide", divide, doc="x / y for floats; floor division (x // 0 == 0) for ints"),
    _binary("maximum", nan_max, commutative=True, doc="elementwise max, NaN propagates"),
    _binary("minimum", nan_min, commutative=True, doc="elementwise min, NaN propagates"),
    OpDef("power", ENC_BINARY, 2, elementwise_rule(_FLOAT), float_math(OP_POWER), BROADCAST,
          doc="x ** y (floats; libm pow)", symbolic=True),
    _unary("negative", np.negative, _NUM, "-x; ints wrap"),
    _unary("exp", None, _FLOAT, "e ** x (libm)"),
    _unary("log", None, _FLOAT, "natural log (libm); log(0) = -inf, log(x < 0) = NaN"),
    _unary("sqrt", np.sqrt, _FLOAT, "square root; NaN below 0"),
    _unary("tanh", None, _FLOAT, "hyperbolic tangent (libm)"),
    _unary("sigmoid", None, _FLOAT, "1 / (1 + exp(-x)) in the input dtype"),
    _unary("relu", relu, _NUM, "maximum(x, 0); NaN propagates"),
    _unary("abs", np.abs, _NUM, "|x|; abs(INT_MIN) wraps"),
    OpDef("where", ENC_VARIADIC, 3, where_rule, ufunc(np.where), BROADCAST,
          doc="operands (cond bool, x, y) in extra; broadcasting select", symbolic=True),
    _binary("equal", np.equal, _ALL, result_bool=True, commutative=True, doc="x == y -> bool"),
    _binary("less", np.less, _ALL, result_bool=True, doc="x < y -> bool"),
    _binary("greater", np.greater, _ALL, result_bool=True, doc="x > y -> bool"),
    OpDef("matmul", ENC_BINARY, 2, matmul_rule, ufunc(np.matmul), OUT_EWISE_FUSABLE,
          doc="NumPy matmul (1-D promotion, batch broadcasting); ints wrap", symbolic=True),
    OpDef("sum", ENC_UNARY, 1, reduce_rule(_NUM, True), reduce_ref(np.sum, True), REDUCE,
          _AXIS, doc="sum over axis (None = all), accumulated in the input dtype", symbolic=True),
    OpDef("max", ENC_UNARY, 1, reduce_rule(_NUM, False), reduce_ref(np.max, False), REDUCE,
          _AXIS, doc="max over axis; NaN propagates; empty axes rejected", symbolic=True),
    OpDef("mean", ENC_UNARY, 1, reduce_rule(_FLOAT, True), reduce_ref(mean, True), REDUCE,
          _AXIS, doc="mean over axis in the input dtype (floats)", symbolic=True),
    OpDef("reshape", ENC_UNARY, 1, reshape_rule, reshape_ref, INJECTIVE,
          (AttrSpec("shape", A_DIMS),), doc="row-major reshape; one -1 is inferred", symbolic=True),
    OpDef("permute_dims", ENC_UNARY, 1, permute_rule, permute_ref, INJECTIVE,
          (AttrSpec("axes", A_AXES, None),), doc="transpose; axes None reverses", symbolic=True),
    OpDef("broadcast_to", ENC_UNARY, 1, broadcast_to_rule, broadcast_to_ref, BROADCAST,
          (AttrSpec("shape", A_DIMS),), doc="NumPy broadcast_to, materialized", symbolic=True),
    OpDef("astype", ENC_UNARY, 1, astype_rule, astype_ref, ELEMWISE,
          (AttrSpec("dtype", A_DTYPE),), doc="convert; float->int truncates, NaN->0, saturates",
          symbolic=True),
    OpDef("concat", ENC_VARIADIC, -1, concat_rule, concat_ref, INJECTIVE,
          (AttrSpec("axis", A_INT, 0),), doc="operands in extra; join along axis", symbolic=True),
    OpDef("call_func", ENC_VARIADIC, -1, call_rule, None, OPAQUE, _CALL,
          doc="operands in extra; call graph function `callee` (one output of dtype/shape)"),
    OpDef("call_tir", ENC_VARIADIC, -1, call_rule, None, OPAQUE, _CALL,
          doc="operands in extra; call tir.PrimFunc `callee`, whose last buffer is the result"),
    # -- issue 15: the ops an ONNX frontend needs: elementwise --
    OpDef("erf", ENC_UNARY, 1, elementwise_rule(_FLOAT), float_math(OP_ERF), ELEMWISE,
          doc="error function (libm erf/erff)", symbolic=True),
    _unary("floor", np.floor, _FLOAT, "round toward -inf"),
    _unary("ceil", np.ceil, _FLOAT, "round toward +inf"),
    _unary("round", np.round, _FLOAT, "round half to even (np.round)"),
    _unary("logical_not", np.logical_not, _BOOL, "not x (bool)"),
    _binary("logical_and", np.logical_and, _BOOL, commutative=True, doc="x and y (bool)"),
    _binary("logical_or", np.logical_or, _BOOL, commutative=True, doc="x or y (bool)"),
    _binary("logical_xor", np.logical_xor, _BOOL, commutative=True, doc="x != y (bool)"),
    _binary("floor_mod", floor_mod, doc="np.mod: sign of y; ints x % 0 == 0"),
    _binary("fmod", fmod, doc="C fmod: sign of x; ints x % 0 == 0"),
    # -- reductions --
    OpDef("min", ENC_UNARY, 1, reduce_rule(_NUM, False), reduce_ref(np.min, False), REDUCE,
          _AXIS, doc="min over axis; NaN propagates; empty axes rejected", symbolic=True),
    OpDef("prod", ENC_UNARY, 1, reduce_rule(_NUM, True), reduce_ref(np.prod, True), REDUCE,
          _AXIS, doc="product over axis (None = all), in the input dtype; ints wrap",
          symbolic=True),
    OpDef("argmax", ENC_UNARY, 1, arg_reduce_rule, arg_reduce_ref(True), REDUCE, _ARG_AXIS,
          doc="int64 index of the max along axis; NaN is the max; first (or last) of ties",
          symbolic=True),
    OpDef("argmin", ENC_UNARY, 1, arg_reduce_rule, arg_reduce_ref(False), REDUCE, _ARG_AXIS,
          doc="int64 index of the min along axis; NaN is the min; first (or last) of ties",
          symbolic=True),
    # -- movement --
    OpDef("strided_slice", ENC_UNARY, 1, strided_slice_rule, strided_slice_ref, INJECTIVE,
          _SLICE, doc="NumPy x[b0:e0:s0, ...] (one begin/end/stride per axis; clamps)",
          symbolic=True),
    OpDef("take", ENC_BINARY, 2, take_rule, take_ref, INJECTIVE, (AttrSpec("axis", A_INT, 0),),
          doc="gather data along axis at int indices; i in [-d, d) is i mod d, others clamp"),
    OpDef("pad", ENC_BINARY, 2, pad_rule, pad_ref, INJECTIVE, _PAD,
          doc="(x, 0-d value); pad_width = begins then ends; mode constant/reflect/edge/wrap"),
    OpDef("scatter_nd", ENC_VARIADIC, 3, scatter_nd_rule, scatter_nd_ref, OPAQUE,
          (AttrSpec("reduction", A_STR, "none"),),
          doc="(data, indices[..., k], updates) in extra; ONNX ScatterND: rows in order, "
              "reduction none (last wins)/add/mul/max/min"),
    # -- neural network (NCHW; weights OIHW) --
    OpDef("conv", ENC_BINARY, 2, conv_rule, conv_ref, OUT_EWISE_FUSABLE, _CONV,
          doc="(x[N, C, *S], w[O, C/groups, *K]) -> [N, O, *S_out]; 1-3 spatial axes",
          symbolic=True),
    OpDef("conv_transpose", ENC_BINARY, 2, conv_transpose_rule, conv_transpose_ref,
          OUT_EWISE_FUSABLE, (*_CONV, AttrSpec("output_padding", A_INTS, ())),
          doc="(x[N, C, *S], w[C, O/groups, *K]) -> [N, O, *S_out]; ONNX ConvTranspose"),
    OpDef("max_pool", ENC_UNARY, 1, pool_rule, max_pool_ref, OUT_EWISE_FUSABLE,
          _POOL, doc="max over windows; padding never wins; NaN propagates; ONNX sizes",
          symbolic=True),
    OpDef("avg_pool", ENC_UNARY, 1, pool_rule, avg_pool_ref, OUT_EWISE_FUSABLE,
          (*_POOL, AttrSpec("count_include_pad", A_BOOL, False)),
          doc="mean over windows; divisor as onnxruntime (count_include_pad, ceil_mode)",
          symbolic=True),
    OpDef("lrn", ENC_UNARY, 1, lrn_rule, lrn_ref, OUT_EWISE_FUSABLE,
          (AttrSpec("size", A_INT), AttrSpec("alpha", A_FLOAT, FloatAttr(1e-4)),
           AttrSpec("beta", A_FLOAT, FloatAttr(0.75)), AttrSpec("bias", A_FLOAT, FloatAttr(1.0))),
          doc="ONNX LRN over channels: x / (bias + alpha/size * sum of squares) ** beta"),
    # -- issue 26: trigonometric and hyperbolic functions (libm; NaN outside the domain) --
    _unary("sin", None, _FLOAT, "sine (libm sin/sinf)"),
    _unary("cos", None, _FLOAT, "cosine (libm)"),
    _unary("tan", None, _FLOAT, "tangent (libm)"),
    _unary("asin", None, _FLOAT, "arcsine (libm); NaN outside [-1, 1]"),
    _unary("acos", None, _FLOAT, "arccosine (libm); NaN outside [-1, 1]"),
    _unary("atan", None, _FLOAT, "arctangent (libm)"),
    _unary("sinh", None, _FLOAT, "hyperbolic sine (libm)"),
    _unary("cosh", None, _FLOAT, "hyperbolic cosine (libm)"),
    _unary("asinh", None, _FLOAT, "inverse hyperbolic sine (libm)"),
    _unary("acosh", None, _FLOAT, "inverse hyperbolic cosine (libm); NaN below 1"),
    _unary("atanh", None, _FLOAT, "inverse hyperbolic tangent (libm); +-inf at +-1, NaN beyond"),
    # -- scans --
    OpDef("cumsum", ENC_UNARY, 1, cumulative_rule, cumulative_ref(True), OPAQUE, _SCAN,
          doc="running sum along axis in order, in the input dtype; exclusive, reverse"),
    OpDef("cumprod", ENC_UNARY, 1, cumulative_rule, cumulative_ref(False), OPAQUE, _SCAN,
          doc="running product along axis in order, in the input dtype; exclusive, reverse"),
    # -- selection --
    OpDef("topk_indices", ENC_UNARY, 1, topk_rule, topk_indices_ref, OPAQUE,
          (AttrSpec("k", A_INT), AttrSpec("axis", A_INT, -1), AttrSpec("largest", A_BOOL, True),
           AttrSpec("sorted", A_BOOL, True)),
          doc="int64 positions of the k largest/smallest along axis, best first, ties in "
              "index order, NaN above all; sorted=False: index order"),
    # -- issue 31: recurrences (one kernel over the time loop) --
    OpDef("lstm_recurrence", ENC_VARIADIC, 5, lstm_rule, lstm_ref, OPAQUE,
          (AttrSpec("activations", A_STR, "sigmoid,tanh,tanh"), *_RNN,
           AttrSpec("input_forget", A_BOOL, False)),
          doc="(xproj[T, B, 4H], rt[H, 4H], h0, c0[B, H], p[3, H]) in extra -> [T + 1, B, H]: "
              "ONNX LSTM steps (gates i, o, f, c); rows Y then the final cell state"),
    OpDef("gru_recurrence", ENC_VARIADIC, 4, gru_rule, gru_ref, OPAQUE,
          (AttrSpec("activations", A_STR, "sigmoid,tanh"), *_RNN,
           AttrSpec("linear_before_reset", A_BOOL, False)),
          doc="(xproj[T, B, 3H], rt[H, 3H], rbh[H], h0[B, H]) in extra -> Y[T, B, H]: ONNX GRU "
              "steps (gates z, r, h)"),
)

if tuple(op.name for op in BUILTIN_OPS) != BUILTIN_OP_NAMES:
    raise AssertionError("BUILTIN_OPS must list the ops in opcode order (ops.opcodes)")

for _op in BUILTIN_OPS:
    register_op(_op)

__all__ = ["BUILTIN_OPS"]
