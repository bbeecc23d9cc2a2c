"""TIR templates of ``lstm_recurrence`` and ``gru_recurrence``: the whole time loop of one
direction in one kernel.

Why: unrolled into graph ops, each step was a matmul, four slices and eight elementwise
kernels, so a 12-step LSTM made ~450 launches whose fixed costs dwarfed the arithmetic
(a step's ``h @ R^T`` at batch 2, hidden 32 is 8k multiply-adds). Here each block of up to
``MAX_ROWS`` batch rows runs every step in one loop: the rows' hidden and cell states and
gate sums live in scratch rows (L1), the gate sums start from the input projection
(``xproj[t]``, computed for every step beforehand by one matmul outside) and take
``h @ rt`` by rows of ``rt = R^T``: for each ``k``, ``g[r, :] += h[r, k] * rt[k, :]``, so
the inner loop is unit-stride over the gate columns and vectorizes, with four rows of
``rt`` per pass over the scratch (as ``matmul_rows``). Then one vectorized pass over the
hidden units applies the activations, updates the state and writes ``Y[t]``. Batch rows
are independent, so blocks of rows run in parallel when there are several.

GRU without ``linear_before_reset`` multiplies the reset gate into ``h`` before the h
gate's matmul, so its step is two matmul passes: the z and r columns from ``h``, then the
h columns from ``r * h``. Arithmetic follows ``irkernel.ir.ops.recurrent``'s references;
sigmoid and tanh are the elementwise templates' expressions (``1 / (1 + exp(-x))``, the
``tanh`` intrinsic), so results agree with the interpreter to a few ulps per step.
Imports ``irkernel.ir``, ``irkernel.tir`` and ``passes.topi.movement``/``vector`` only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.ops.opdef import OPAQUE, TensorType
from irkernel.ir.ops.recurrent import activation_list
from irkernel.tir import script as T
from irkernel.tir.construct import call, const, select
from irkernel.tir.expr import PrimExpr, Var
from irkernel.tir.function import PrimFunc
from passes.topi.movement import nan_max, nan_min
from passes.topi.vector import current_target, vector_columns

#: Batch rows per block: every row of ``rt`` loaded is used by each row of the block.
MAX_ROWS = 4
#: Rows of ``rt`` per pass over the gate scratch (a chain of fmas per accumulator).
K_STEP = 4
#: Multiply-adds of the whole recurrence below which blocks run serially.
PARALLEL_MIN_MACS = 1 << 18

Activation = Callable[[PrimExpr], PrimExpr]


def _activation(name: str, alpha: float, beta: float) -> Activation:
    """The TIR expression of one RNN activation (``recurrent.apply_activation``)."""
    def c(v: float, x: PrimExpr) -> PrimExpr:
        return const(v, x.dtype)

    forms: dict[str, Activation] = {
        "sigmoid": lambda x: c(1, x) / (c(1, x) + call("exp", -x)),
        "tanh": lambda x: call("tanh", x),
        "relu": lambda x: nan_max(x, c(0, x)),
        "hard_sigmoid": lambda x: nan_min(nan_max(c(alpha, x) * x + c(beta, x), c(0, x)),
                                          c(1, x)),
        "leaky_relu": lambda x: select(x >= c(0, x), x, c(alpha, x) * x),
        "affine": lambda x: c(alpha, x) * x + c(beta, x),
        "thresholded_relu": lambda x: select(x > c(alpha, x), x, c(0, x)),
        "scaled_tanh": lambda x: c(alpha, x) * call("tanh", c(beta, x) * x),
        "elu": lambda x: select(x >= c(0, x), x, c(alpha, x) * (call("exp", x) - c(1, x))),
        "softsign": lambda x: x / (c(1, x) + call("fabs", x)),
        "softplus": lambda x: call("log", c(1, x) + call("exp", x)),
    }
    return forms[name]


def _gate_functions(attrs: Mapping[str, Any], op: str) -> tuple[list[Activation], Activation]:
    """One function per activation slot (its input bound once: the forms read it
    repeatedly), and the clip of gate inputs (the identity for ``clip = inf``)."""
    names = itertools.count()

    def bind(fn: Activation) -> Activation:
        def act(x: PrimExpr) -> PrimExpr:
            v = Var(f"gate{next(names)}", x.dtype)
            return T.let_expr(v, x, fn(v))
        return act

    limit = float(attrs["clip"])

    def clip(x: PrimExpr) -> PrimExpr:
        # bound once too (VectorizeLoop inlines vector lets, though: gates are stored to
        # scratch between nestings, see the GRU's ``gates``)
        if math.isinf(limit):
            return x
        v = Var(f"clip{next(names)}", x.dtype)
        return T.let_expr(v, x, nan_min(nan_max(v, const(-limit, x.dtype)),
                                        const(limit, x.dtype)))
    return [bind(_activation(*spec)) for spec in activation_list(attrs, op)], clip


def _each(m: int, width: int, lanes: int, body: Callable[[Any, PrimExpr], None]) -> None:
    """``body(r, j)`` for each of the block's ``m`` rows (unrolled) and ``j < width``."""
    for r in T.unroll(m):
        vector_columns(width, lanes, lambda j, r=r: body(r, j))


def _accumulate(g: Any, src: Any, rt: Any, m: int, hidden: int, col0: int, width: int,
                lanes: int) -> None:
    """``g[r, col0 + j] += sum_k src[r, k] * rt[k, col0 + j]`` for the block's ``m`` rows,
    ``K_STEP`` rows of ``rt`` per pass, in ``k`` order."""
    def rows_of_rt(k0: Any, count: int) -> None:
        def update(j: PrimExpr) -> None:
            for r in T.unroll(m):
                value = g[r, col0 + j]
                for dk in range(count):
                    value = T.fma(src[r, k0 + dk], rt[k0 + dk, col0 + j], value)
                g[r, col0 + j] = value
        vector_columns(width, lanes, update, 4 * lanes)

    steps, rest = divmod(hidden, K_STEP)
    if steps:
        for ks in T.serial(steps):
            rows_of_rt(ks * K_STEP, K_STEP)
    if rest:
        rows_of_rt(steps * K_STEP, rest)


def _blocks(batch: int, work: int, body: Callable[[PrimExpr, int], None]) -> None:
    """``body(first_row, rows)`` per block of batch rows: full blocks of ``MAX_ROWS`` (in
    parallel when there are several and ``work`` multiply-adds), then the rest."""
    full, tail = divmod(batch, MAX_ROWS)
    if full:
        loop = T.parallel if full > 1 and work >= PARALLEL_MIN_MACS else T.serial
        for blk in loop(full):
            body(blk * MAX_ROWS, MAX_ROWS)
    if tail:
        body(full * MAX_ROWS, tail)


def _step_index(s: PrimExpr, steps: int, reverse: bool) -> PrimExpr:
    return (steps - 1) - s if reverse else s


def lstm_recurrence(types: Sequence[TensorType], attrs: Mapping[str, Any],
                    result: TensorType) -> PrimFunc:
    (code, (steps, batch, four_h)), rt_t, h0_t, c0_t, p_t = types
    dtype, hidden = DTYPE_NAMES[code], four_h // 4
    lanes = current_target().lanes(dtype)
    (f, g_act, h_act), clip = _gate_functions(attrs, "lstm_recurrence")
    reverse, coupled = attrs["reverse"], attrs["input_forget"]

    def block(x0, x1, x2, x3, x4, out, b0, m):
        h = T.alloc_buffer((m, hidden), dtype, name="h")
        c = T.alloc_buffer((m, hidden), dtype, name="c")
        g = T.alloc_buffer((m, four_h), dtype, name="g")

        def init(r, j):
            h[r, j] = x2[b0 + r, j]
            c[r, j] = x3[b0 + r, j]
        _each(m, hidden, lanes, init)
        for s in T.serial(steps):
            t = _step_index(s, steps, reverse)

            def start(r, j):
                g[r, j] = x0[t, b0 + r, j]
            _each(m, four_h, lanes, start)
            _accumulate(g, h, x1, m, hidden, 0, four_h, lanes)

            def cell(r, j):
                cp = c[r, j]
                i = f(clip(g[r, j] + x4[0, j] * cp))
                forget = (const(1, dtype) - i if coupled
                          else f(clip(g[r, 2 * hidden + j] + x4[2, j] * cp)))
                c[r, j] = forget * cp + i * g_act(clip(g[r, 3 * hidden + j]))
                o = f(clip(g[r, hidden + j] + x4[1, j] * c[r, j]))
                h[r, j] = o * h_act(c[r, j])
                out[t, b0 + r, j] = h[r, j]
            _each(m, hidden, lanes, cell)

        def final(r, j):
            out[steps, b0 + r, j] = c[r, j]
        _each(m, hidden, lanes, final)

    @T.prim_func(private=True)
    def lstm(x0: T.Buffer((steps, batch, four_h), dtype), x1: T.Buffer(rt_t[1], dtype),
             x2: T.Buffer(h0_t[1], dtype), x3: T.Buffer(c0_t[1], dtype),
             x4: T.Buffer(p_t[1], dtype), out: T.Buffer(result[1], dtype)):
        _blocks(batch, steps * batch * hidden * four_h,
                lambda b0, m: block(x0, x1, x2, x3, x4, out, b0, m))
    return (lstm.with_attr("op_name", "lstm_recurrence").with_attr("op_pattern", OPAQUE)
            .with_attr("schedule", "recurrence"))


def gru_recurrence(types: Sequence[TensorType], attrs: Mapping[str, Any],
                   result: TensorType) -> PrimFunc:
    (code, (steps, batch, three_h)), rt_t, rbh_t, h0_t = types
    dtype, hidden = DTYPE_NAMES[code], three_h // 3
    lanes = current_target().lanes(dtype)
    (f, g_act), clip = _gate_functions(attrs, "gru_recurrence")
    reverse, linear = attrs["reverse"], attrs["linear_before_reset"]
    one = const(1, dtype)

    def block(x0, x1, x2, x3, out, b0, m):
        h = T.alloc_buffer((m, hidden), dtype, name="h")
        g = T.alloc_buffer((m, three_h), dtype, name="g")
        rh = T.alloc_buffer((m, hidden), dtype, name="rh")

        def init(r, j):
            h[r, j] = x3[b0 + r, j]
        _each(m, hidden, lanes, init)
        for s in T.serial(steps):
            t = _step_index(s, steps, reverse)

            def start(r, j):
                g[r, j] = x0[t, b0 + r, j]
            _each(m, 2 * hidden, lanes, start)

            def start_h(r, j):  # the h gate: Rbh alone (linear) or with X Wh + Wbh
                g[r, 2 * hidden + j] = (x2[j] if linear
                                        else x0[t, b0 + r, 2 * hidden + j] + x2[j])
            _each(m, hidden, lanes, start_h)
            _accumulate(g, h, x1, m, hidden, 0, three_h if linear else 2 * hidden, lanes)
            if not linear:
                def reset(r, j):
                    g[r, j] = f(clip(g[r, j]))  # z, kept for the update
                    rh[r, j] = f(clip(g[r, hidden + j])) * h[r, j]
                _each(m, hidden, lanes, reset)
                _accumulate(g, rh, x1, m, hidden, 2 * hidden, hidden, lanes)

            if linear:
                def gates(r, j):  # z and r stored, not nested into the candidate's expression
                    g[r, j] = f(clip(g[r, j]))
                    g[r, hidden + j] = f(clip(g[r, hidden + j]))
                _each(m, hidden, lanes, gates)

            def cell(r, j):
                if linear:
                    z = g[r, j]
                    cand = g_act(clip(x0[t, b0 + r, 2 * hidden + j]
                                      + g[r, hidden + j] * g[r, 2 * hidden + j]))
                else:
                    z = g[r, j]
                    cand = g_act(clip(g[r, 2 * hidden + j]))
                h[r, j] = (one - z) * cand + z * h[r, j]
                out[t, b0 + r, j] = h[r, j]
            _each(m, hidden, lanes, cell)

    @T.prim_func(private=True)
    def gru(x0: T.Buffer((steps, batch, three_h), dtype), x1: T.Buffer(rt_t[1], dtype),
            x2: T.Buffer(rbh_t[1], dtype), x3: T.Buffer(h0_t[1], dtype),
            out: T.Buffer(result[1], dtype)):
        _blocks(batch, steps * batch * hidden * three_h,
                lambda b0, m: block(x0, x1, x2, x3, out, b0, m))
    return (gru.with_attr("op_name", "gru_recurrence").with_attr("op_pattern", OPAQUE)
            .with_attr("schedule", "recurrence"))


TEMPLATES = {"lstm_recurrence": lstm_recurrence, "gru_recurrence": gru_recurrence}

__all__ = ["MAX_ROWS", "TEMPLATES", "gru_recurrence", "lstm_recurrence"]
