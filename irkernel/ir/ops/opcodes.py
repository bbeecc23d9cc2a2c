"""Opcodes of the built-in graph ops: ``OP_<NAME>`` ints, fixed forever.

Numba caches kernels that read these numbers as compile-time constants, so
they never change between versions; new built-in ops are appended. The op
table (:mod:`irkernel.ir.ops`) checks at import that its rows come in this
order. Kept apart from the table so the compiled scalar semantics
(:mod:`irkernel.ir.ops.scalar`), which the table's references call, can read
opcodes without importing the table. Imports nothing.
"""

from __future__ import annotations

#: Names of the built-in ops; the index of a name is its opcode.
BUILTIN_OP_NAMES = (
    "param", "const", "add", "subtract", "multiply", "divide", "maximum", "minimum",
    "power", "negative", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs",
    "where", "equal", "less", "greater", "matmul", "sum", "max", "mean", "reshape",
    "permute_dims", "broadcast_to", "astype", "concat", "call_func", "call_tir",
    # issue 15 (ops an ONNX frontend needs), appended in the order of its op contract
    "erf", "floor", "ceil", "round", "logical_not", "logical_and", "logical_or", "logical_xor",
    "floor_mod", "fmod", "min", "prod", "argmax", "argmin", "strided_slice", "take", "pad",
    "scatter_nd", "conv", "conv_transpose", "max_pool", "avg_pool", "lrn",
    # issue 26 (the ops that real exports use)
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
    "cumsum", "cumprod", "topk_indices",
    # issue 31 (recurrent ops as one kernel over the time loop)
    "lstm_recurrence", "gru_recurrence",
)

OP_PARAM, OP_CONST, OP_ADD, OP_SUBTRACT, OP_MULTIPLY, OP_DIVIDE, OP_MAXIMUM, OP_MINIMUM, \
    OP_POWER, OP_NEGATIVE, OP_EXP, OP_LOG, OP_SQRT, OP_TANH, OP_SIGMOID, OP_RELU, OP_ABS, \
    OP_WHERE, OP_EQUAL, OP_LESS, OP_GREATER, OP_MATMUL, OP_SUM, OP_MAX, OP_MEAN, OP_RESHAPE, \
    OP_PERMUTE_DIMS, OP_BROADCAST_TO, OP_ASTYPE, OP_CONCAT, OP_CALL_FUNC, OP_CALL_TIR, \
    OP_ERF, OP_FLOOR, OP_CEIL, OP_ROUND, OP_LOGICAL_NOT, OP_LOGICAL_AND, OP_LOGICAL_OR, \
    OP_LOGICAL_XOR, OP_FLOOR_MOD, OP_FMOD, OP_MIN, OP_PROD, OP_ARGMAX, OP_ARGMIN, \
    OP_STRIDED_SLICE, OP_TAKE, OP_PAD, OP_SCATTER_ND, OP_CONV, OP_CONV_TRANSPOSE, OP_MAX_POOL, \
    OP_AVG_POOL, OP_LRN, \
    OP_SIN, OP_COS, OP_TAN, OP_ASIN, OP_ACOS, OP_ATAN, OP_SINH, OP_COSH, OP_ASINH, OP_ACOSH, \
    OP_ATANH, OP_CUMSUM, OP_CUMPROD, OP_TOPK_INDICES, \
    OP_LSTM_RECURRENCE, OP_GRU_RECURRENCE = range(len(BUILTIN_OP_NAMES))

#: The trigonometric and hyperbolic ops: one contiguous opcode range (libm functions).
TRIG_OPS = BUILTIN_OP_NAMES[OP_SIN:OP_ATANH + 1]
