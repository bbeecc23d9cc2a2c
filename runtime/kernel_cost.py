"""What one kernel launch costs on paper: floating-point operations and bytes moved.

The profiler (``runtime/profile.py``) divides these by measured times to give
GFLOP/s and GB/s per kernel. Both are *estimates from the TIR* the kernel was
compiled from, not hardware counters:

* **FLOPs**: every float arithmetic node (``+ - * /``, ``min``/``max``, a math
  call; ``fma`` counts 2) in a statement's expressions, times the trip counts
  of the loops around it. An ``if`` whose condition is known (from the
  loop vars of a short loop, ``ITERATE_MAX``, which is then walked once per
  iteration: the tail panels of a matmul) counts the branch taken, any other
  its larger branch (as ``tir.analysis.trip_count`` does); a ``select``
  counts both of its values. Loop
  extents that are shape vars take the call's values; those that the
  shape-generic kernels read from their ``meta`` operand (``n0 = meta[0]``)
  take the values of that constant. An extent still unknown gives None.
  This is the work the kernel *does*, which can exceed the op's: the implicit
  GEMM of a conv also computes the few padding columns of its wide grid.
* **Bytes**: the sizes of the buffers the launch reads and writes (its
  operands and its result), each counted once: what a kernel must move at
  least, not what its cache misses move.

Alternatives considered: counting LLVM IR instructions after vectorization
(exact per lane, but the profile would then depend on the LLVM tier and lose
the link to the template), and hardware counters (perf_event; not portable,
and FLOP counters are missing on many CPUs). Imports irkernel only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from irkernel.ir.call_tir import bind_call_tir
from irkernel.tir import dtype as dt
from irkernel.tir.buffer import BufferLoad
from irkernel.tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    MAX_DEPTH,
    NE,
    Add,
    And,
    BinaryOp,
    Call,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Sub,
    Var,
)
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import free_vars, post_order
from irkernel.tir.stmt import (
    Allocate,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

#: Float nodes that count as one operation each (``fma`` counts two; other calls one).
_ARITH = (Add, Sub, Mul, Div, Min, Max)
#: Largest integer constant operand whose values may give loop extents (the ``meta``
#: operands of shape-generic kernels hold a few dozen); larger constants are data.
MAX_META_ELEMENTS = 256
#: Longest loop walked once per iteration when an ``if`` below it tests its var.
ITERATE_MAX = 64

_INT_OPS = {
    Add: lambda a, b: a + b,
    Sub: lambda a, b: a - b,
    Mul: lambda a, b: a * b,
    FloorDiv: lambda a, b: a // b if b else None,
    FloorMod: lambda a, b: a % b if b else None,
    Div: lambda a, b: int(a / b) if b else None,  # C division truncates
    Mod: lambda a, b: int(np.fmod(a, b)) if b else None,
    Min: min,
    Max: max,
    LT: lambda a, b: int(a < b),
    LE: lambda a, b: int(a <= b),
    GT: lambda a, b: int(a > b),
    GE: lambda a, b: int(a >= b),
    EQ: lambda a, b: int(a == b),
    NE: lambda a, b: int(a != b),
    And: lambda a, b: int(bool(a) and bool(b)),
    Or: lambda a, b: int(bool(a) or bool(b)),
}


@dataclass(frozen=True)
class LaunchCost:
    """The estimated work of one launch: ``flops`` (None when a loop extent is unknown)
    and ``bytes`` (its operands and result)."""

    flops: int | None
    bytes: int


def launch_cost(prim: PrimFunc, types: Sequence[tuple[np.dtype, tuple[int, ...]]],
                consts: Mapping[int, np.ndarray]) -> LaunchCost:
    """The cost of calling ``prim`` on tensors of ``types`` (operands, then the result).

    ``consts``: parameter position -> the value of a constant operand (only small
    integer ones are read, as loop extents; see ``MAX_META_ELEMENTS``).
    """
    nbytes = sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
                 for dtype, shape in types)
    env, problem = bind_call_tir(prim.params, [(np.dtype(d).name, tuple(s)) for d, s in types])
    if problem is not None:  # the launch table checked every call: a caller's mistake
        raise ValueError(f"launch_cost: {problem.describe(quote=True)}")
    tables = {}
    for pos, value in consts.items():
        if value.dtype.kind in "iu" and value.size <= MAX_META_ELEMENTS:
            tables[prim.params[pos].name] = [int(v) for v in value.reshape(-1).tolist()]
    values: dict[str, int | None] = dict(env)
    return LaunchCost(_stmt_flops(prim.body, values, tables, 0), nbytes)


def float_ops(expr: PrimExpr) -> int:
    """Float operations in one evaluation of ``expr`` (times its lanes)."""
    count = 0
    for node in post_order(expr):
        if not isinstance(node, (BinaryOp, Call)) or not dt.is_float(node.dtype):
            continue
        if isinstance(node, Call):
            count += (2 if node.op == "fma" else 1) * dt.lanes(node.dtype)
        elif isinstance(node, _ARITH):
            count += dt.lanes(node.dtype)
    return count


def _stmt_flops(s: Stmt, env: dict[str, int | None], tables: Mapping[str, list[int]],
                depth: int) -> int | None:
    """Float operations ``s`` runs once (None: an extent is unknown)."""
    if depth > 2 * MAX_DEPTH:  # statements nest only as deep as tir allows
        raise ValueError(f"launch_cost: statements nested deeper than {2 * MAX_DEPTH}")
    if isinstance(s, For):
        extent = int_value(s.extent, env, tables)
        start = int_value(s.min, env, tables)
        if (extent is not None and start is not None and 0 < extent <= ITERATE_MAX
                and _tested(s.body, s.loop_var.name)):
            total = 0
            for value in range(start, start + extent):
                count = _stmt_flops(s.body, {**env, s.loop_var.name: value}, tables, depth + 1)
                if count is None:
                    return None
                total += count
            return total
        inner = _stmt_flops(s.body, env, tables, depth + 1)
        return None if extent is None or inner is None else max(extent, 0) * inner
    if isinstance(s, SeqStmt):
        total = 0
        for part in s.stmts:
            count = _stmt_flops(part, env, tables, depth + 1)
            if count is None:
                return None
            total += count
        return total
    if isinstance(s, IfThenElse):
        known = int_value(s.condition, env, tables)
        if known is not None:
            taken = s.then_case if known else s.else_case
            return 0 if taken is None else _stmt_flops(taken, env, tables, depth + 1)
        then = _stmt_flops(s.then_case, env, tables, depth + 1)
        other = 0 if s.else_case is None else _stmt_flops(s.else_case, env, tables, depth + 1)
        return None if then is None or other is None else max(then, other)
    if isinstance(s, LetStmt):
        inner_env = {**env, s.var.name: int_value(s.value, env, tables)}
        body = _stmt_flops(s.body, inner_env, tables, depth + 1)
        return None if body is None else float_ops(s.value) + body
    if isinstance(s, Allocate):
        return _stmt_flops(s.body, env, tables, depth + 1)
    if isinstance(s, BufferStore):
        return float_ops(s.value)
    if isinstance(s, Evaluate):
        return float_ops(s.value)
    return 0


def _tested(body: Stmt, name: str) -> bool:
    """Whether an ``if`` in ``body`` tests the var ``name``."""
    return any(isinstance(n, IfThenElse) and name in free_vars(n.condition)
               for n in post_order(body))


def int_value(e: PrimExpr, env: Mapping[str, int | None],
              tables: Mapping[str, list[int]]) -> int | None:
    """The value of an integer expression over known vars and constant tables, or None."""
    if isinstance(e, IntImm):
        return int(e.value)
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, Cast) and not dt.is_float(e.dtype):
        return int_value(e.value, env, tables)
    if isinstance(e, Not):
        inner = int_value(e.a, env, tables)
        return None if inner is None else int(not inner)
    if isinstance(e, BufferLoad):
        table = tables.get(e.buffer.name)
        if table is None or len(e.indices) != 1:
            return None
        index = int_value(e.indices[0], env, tables)
        return table[index] if index is not None and 0 <= index < len(table) else None
    op = _INT_OPS.get(type(e))
    if op is None or not isinstance(e, BinaryOp) or dt.is_float(e.dtype):
        return None
    a, b = int_value(e.a, env, tables), int_value(e.b, env, tables)
    return None if a is None or b is None else op(a, b)


__all__ = ["MAX_META_ELEMENTS", "LaunchCost", "float_ops", "int_value", "launch_cost"]
