"""TIR: loop-level kernels (PrimFuncs) as immutable dataclass trees.

Write them with ``from irkernel.tir import script as T`` and ``@T.prim_func``
(see docs/tir.md), or build the nodes directly. Modules: ``dtype`` (dtype
strings), ``expr`` / ``buffer`` / ``stmt`` / ``function`` (the nodes),
``construct`` (expressions from Python values: ``const``, ``cast``, ...),
``functor`` (traversal, ``Mutator``, ``substitute``), ``analysis`` (bounds,
affine forms), ``printer``, ``verify``, ``script`` (the tracer) and
``interp`` (a slow reference interpreter, the semantic oracle for passes and
codegen). Lower modules call higher ones only through hooks
(``irkernel.ir.hooks``) that the higher ones install when imported here:
``expr.BINARY`` (construct), ``buffer.STORE`` (script), ``function.PRINT``
(printer), ``function.VERIFY`` (verify). May import ``irkernel.ir`` only.
"""

from __future__ import annotations

# construct, printer, script, verify and interp install hooks: importing them here sets
# every hook before any use
from irkernel.tir import analysis, construct, dtype, functor, printer, script, verify  # noqa: F401
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.construct import as_expr, call, cast, const, eq, ne, select, truncdiv, truncmod
from irkernel.tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    MATH_OPS,
    MAX_DEPTH,
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
    Mod,
    Mul,
    Node,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from irkernel.tir.function import Attrs, PrimFunc
from irkernel.tir.functor import Mutator, free_vars, post_order, substitute
from irkernel.tir.interp import run as interpret
from irkernel.tir.stmt import (
    FOR_KINDS,
    Allocate,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    seq,
)
from irkernel.tir.verify import verify_prim_func

__all__ = [
    "EQ", "FOR_KINDS", "GE", "GT", "LE", "LT", "MATH_OPS", "MAX_DEPTH", "NE", "Add", "Allocate",
    "And", "Attrs", "BinaryOp", "Broadcast", "Buffer", "BufferLoad", "BufferStore", "Call",
    "Cast", "Div", "Evaluate", "FloatImm", "FloorDiv", "FloorMod", "For", "IfThenElse",
    "IntImm", "Let", "LetStmt", "Max", "Min", "Mod", "Mul", "Mutator", "Node", "Not", "Or",
    "PrimExpr", "PrimFunc", "Ramp", "Select", "SeqStmt", "Stmt", "Sub", "Var", "analysis",
    "as_expr", "call", "cast", "const", "dtype", "eq", "free_vars", "functor", "interpret",
    "ne", "post_order", "script", "select", "seq", "substitute", "truncdiv", "truncmod",
    "verify_prim_func",
]
