"""Random PrimFuncs and inputs for differential tests of TIR passes and codegen.

:func:`random_prim_func` builds a well-formed PrimFunc from a *chooser* (an
object answering ``integer(lo, hi)``): a few parameter buffers of the five
dtypes, and a sequence of loop nests, each storing a random expression into
one buffer at the loop indices. :func:`prim_funcs` is the hypothesis
strategy (the chooser draws from hypothesis, so failures shrink to small
functions); :class:`SeededChooser` gives the same functions from a seed for
benchmarks and scripts.

The generated functions respect the contracts passes and codegen rely on, so
any difference between the interpreter before and after a pass is a bug:

* every access is in bounds by construction (indices are loop vars whose
  range fits, ``(v * k + o) % n``, ``min(v, n - 1)`` or constants);
* a nest writes one buffer, only at its own loop indices, and reads that
  buffer only at those indices, so ``parallel``/``vectorized`` loops carry
  no dependence (TVM's contract for those kinds);
* with ``exact=True`` only operations that NumPy and LLVM both round
  correctly appear (no transcendental calls, no ``fma``), so compiled code
  must match the interpreter bit for bit, not within a tolerance.

Design note: drawing through a chooser instead of building nested hypothesis
strategies keeps one generator for both seeded and hypothesis use, and the
generator stays ordinary code that reads top to bottom.
Imports numpy and the TIR node modules; hypothesis only inside
:func:`prim_funcs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer
from irkernel.tir.construct import cast, const
from irkernel.tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Call,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    Sub,
    Var,
)
from irkernel.tir.function import Attrs, PrimFunc
from irkernel.tir.stmt import Allocate, BufferStore, For, IfThenElse, LetStmt, Stmt, seq

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

#: Math ops both NumPy and LLVM compute exactly (correctly rounded or exact).
EXACT_MATH = ("sqrt", "fabs", "floor", "ceil", "round")
#: Every float math op (results of the others may differ in the last ulp between libms).
ALL_MATH = (*EXACT_MATH, "exp", "log", "tanh", "pow", "exp2", "log2", "sin", "cos")
_FLOAT_OPS = (Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max)
_INT_OPS = (Add, Sub, Mul, FloorDiv, FloorMod, Div, Mod, Min, Max)
_CMP_OPS = (EQ, NE, LT, LE, GT, GE)
_LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled")


class Chooser(Protocol):
    """The source of randomness: ``integer(lo, hi)`` is uniform-ish in ``[lo, hi]``."""

    def integer(self, lo: int, hi: int) -> int: ...


class SeededChooser:
    """A :class:`Chooser` over ``numpy.random.default_rng(seed)``."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))


def _pick(c: Chooser, options: Sequence[Any]) -> Any:
    return options[c.integer(0, len(options) - 1)]


class _Gen:
    """One function's generator state: buffers, vars in scope, the op menu."""

    def __init__(self, c: Chooser, dtypes: Sequence[str], exact: bool, max_depth: int) -> None:
        self.c = c
        self.dtypes = tuple(dtypes)
        self.math = EXACT_MATH if exact else ALL_MATH
        self.max_depth = max_depth
        self.buffers: list[Buffer] = []
        self.scalars: list[Var] = []
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    # -- expressions ---------------------------------------------------------
    def const(self, dtype: str) -> PrimExpr:
        c = self.c
        if dtype == "bool":
            return const(bool(c.integer(0, 1)), "bool")
        if dt.is_int(dtype):
            lo, hi = dt.int_range(dtype)
            return const(_pick(c, (0, 1, -1, 2, 3, 7, -5, 100, lo, hi)), dtype)
        return const(_pick(c, (0.0, 1.0, -1.0, 0.5, 2.0, -0.0, 3.25, 1e30, float("inf"),
                               float("nan"))), dtype)

    def index(self, extent: int, loops: list[tuple[Var, int]]) -> PrimExpr:
        """An int64 index that is in ``[0, extent)`` for every iteration of ``loops``."""
        c = self.c
        if not loops or c.integer(0, 5) == 0:
            return IntImm(c.integer(0, extent - 1))
        var, n = _pick(c, loops)
        choice = c.integer(0, 2)
        if choice == 0 and n <= extent:
            return var
        if choice == 1:
            return Min(var, IntImm(extent - 1))
        scaled = Add(Mul(var, IntImm(c.integer(1, 3))), IntImm(c.integer(0, 4)))
        return FloorMod(scaled, IntImm(extent))

    def leaf(self, dtype: str, out: BufferStore | None, loops: list[tuple[Var, int]],
             lets: list[Var]) -> PrimExpr:
        c = self.c
        kind = _pick(c, (0, 1, 1, 1, 2, 3, 4))  # mostly loads: constants fold away
        if kind == 0 and out is not None and out.buffer.dtype == dtype:
            return out.buffer[out.indices]  # the stored element itself: no cross-lane hazard
        if kind == 1:
            sources = [b for b in self.buffers if b.dtype == dtype
                       and (out is None or b.name != out.buffer.name)]
            if sources:
                buf = _pick(c, sources)
                return buf[tuple(self.index(int(s.value), loops) for s in buf.shape)]
        if kind == 2:
            names = [v for v in (*self.scalars, *lets) if v.dtype == dtype]
            if names:
                return _pick(c, names)
        if kind == 3 and loops and dtype != "bool":
            var = _pick(c, loops)[0]
            return cast(dtype, var)
        return self.const(dtype)

    def expr(self, dtype: str, depth: int, out: BufferStore | None,
             loops: list[tuple[Var, int]], lets: list[Var]) -> PrimExpr:
        c = self.c
        if depth >= self.max_depth or c.integer(0, 3) == 0:
            return self.leaf(dtype, out, loops, lets)

        def sub(d: str = dtype) -> PrimExpr:
            return self.expr(d, depth + 1, out, loops, lets)

        kind = c.integer(0, 6)
        if kind == 6:  # a let expression
            bound = Var(self.fresh("e"), _pick(c, self.dtypes))
            value = sub(bound.dtype)
            return Let(bound, value, self.expr(dtype, depth + 1, out, loops, [*lets, bound]))
        if kind == 0:  # a cast from another dtype
            return cast(dtype, sub(_pick(c, self.dtypes)))
        if kind == 1:
            return Select(sub("bool"), sub(), sub())
        if dtype == "bool":
            if kind == 2:
                return Not(sub())
            if kind == 3:
                return _pick(c, (And, Or))(sub(), sub())
            other = _pick(c, self.dtypes)
            ops = _CMP_OPS if other != "bool" else (EQ, NE)
            return _pick(c, ops)(sub(other), sub(other))
        if dt.is_float(dtype) and kind == 2:
            op = _pick(c, self.math)
            return Call(op, tuple(sub() for _ in range(2 if op == "pow" else 1)))
        if dt.is_int(dtype) and kind == 2:
            return Call("abs", (sub(),))
        ops = _FLOAT_OPS if dt.is_float(dtype) else _INT_OPS
        return _pick(c, ops)(sub(), sub())

    # -- statements ----------------------------------------------------------
    def nest(self, out: Buffer | None = None) -> Stmt:
        """A loop nest storing into ``out`` (a random buffer); a given ``out`` is scratch:
        every element is written, none read before (it starts uninitialized)."""
        c = self.c
        scratch = out is not None
        out = out if out is not None else _pick(c, self.buffers)
        loops: list[tuple[Var, int]] = []
        kinds = []
        for axis, extent in enumerate(out.shape):
            loops.append((Var(self.fresh(f"i{axis}_")), int(extent.value)))
            inner = axis == out.ndim - 1
            kinds.append(_pick(c, _LOOP_KINDS if inner else ("serial", "parallel", "unrolled")))
        probe = BufferStore(out, const(0, out.dtype) if out.dtype != "bool" else
                            const(False), tuple(v for v, _ in loops))
        lets: list[Var] = []
        binding = None
        reads = None if scratch else probe  # scratch starts uninitialized: never read it
        if c.integer(0, 2) == 0:
            let_dtype = _pick(c, self.dtypes)
            binding = (Var(self.fresh("t"), let_dtype),
                       self.expr(let_dtype, 1, reads, loops, lets))
            lets.append(binding[0])
        value = self.expr(out.dtype, 0, reads, loops, lets)
        body: Stmt = BufferStore(out, value, probe.indices)
        if c.integer(0, 3) == 0:
            other = self.expr(out.dtype, 1, reads, loops, lets)
            body = IfThenElse(self.expr("bool", 1, reads, loops, lets), body,
                              BufferStore(out, other, probe.indices)
                              if scratch or c.integer(0, 1) else None)
        if binding is not None:
            body = LetStmt(binding[0], binding[1], body)
        for (var, extent), kind in reversed(list(zip(loops, kinds, strict=True))):
            body = For(var, IntImm(0), IntImm(extent), kind, body)
        return body

    def staged(self) -> Stmt:
        """A nest computing into an allocated scratch buffer, then copied to a parameter."""
        out = _pick(self.c, self.buffers)
        tmp = Buffer(self.fresh("tmp"), out.shape, out.dtype)
        loops = [(Var(self.fresh(f"c{axis}_")), int(n.value)) for axis, n in enumerate(out.shape)]
        index = tuple(v for v, _ in loops)
        copy: Stmt = BufferStore(out, tmp[index], index)
        for var, extent in reversed(loops):
            copy = For(var, IntImm(0), IntImm(extent), _pick(self.c, _LOOP_KINDS), copy)
        return Allocate(tmp, seq(self.nest(tmp), copy))

    def function(self) -> PrimFunc:
        c = self.c
        for k in range(c.integer(1, 4)):
            ndim = c.integer(1, 2)
            shape = tuple(_pick(c, (1, 2, 3, 4, 5, 8)) for _ in range(ndim))
            self.buffers.append(Buffer(f"b{k}", shape, _pick(c, self.dtypes)))
        for k in range(c.integer(0, 2)):
            self.scalars.append(Var(f"s{k}", _pick(c, self.dtypes)))
        parts = [self.staged() if c.integer(0, 4) == 0 else self.nest()
                 for _ in range(c.integer(1, 3))]
        stmts: list[Stmt] = []
        for part in reversed(parts):  # an allocation scopes over the rest, as T.alloc_buffer
            if isinstance(part, Allocate) and stmts:
                stmts = [Allocate(part.buffer, seq(part.body, *stmts))]
            else:
                stmts.insert(0, part)
        body = seq(*stmts)
        return PrimFunc((*self.buffers, *self.scalars), body,
                        Attrs({"global_symbol": "random_func"}))


#: The dtypes random kernels use by default: the narrow ones (float16, int8, ...) have no
#: TVMScript spelling of their constants (``T.float16``) and compute through float32 or
#: wrap, which the graph path's random tests cover (``tests/e2e/test_e2e_random.py``).
WIDE_DTYPES = ("float32", "float64", "int32", "int64", "bool")


def random_prim_func(chooser: Chooser | int, *, dtypes: Sequence[str] = WIDE_DTYPES,
                     exact: bool = False, max_depth: int = 3) -> PrimFunc:
    """A random well-formed PrimFunc (see the module docstring for what it guarantees).

    Parameters
    ----------
    chooser : Chooser or int
        The source of choices, or a seed for a :class:`SeededChooser`.
    dtypes : sequence of str
        The element dtypes buffers, scalars and expressions use.
    exact : bool
        Only ops whose results NumPy and LLVM agree on bit for bit.
    max_depth : int
        Maximum expression nesting.
    """
    if isinstance(chooser, int):
        chooser = SeededChooser(chooser)
    bad = [d for d in dtypes if d not in dt.ELEMENT_DTYPES]
    if bad or not dtypes:
        raise ValueError(f"random_prim_func: dtypes must be a non-empty subset of "
                         f"{dt.ELEMENT_DTYPES}, got {list(dtypes)}")
    return _Gen(chooser, dtypes, exact, max_depth).function()


def random_arguments(func: PrimFunc, seed: int = 0) -> list[Any]:
    """Arguments for ``func``: random arrays (with NaN, inf, -0.0, extremes) and scalars."""
    rng = np.random.default_rng(seed)
    out: list[Any] = []
    for p in func.params:
        shape = tuple(int(s.value) for s in p.shape) if isinstance(p, Buffer) else ()
        out.append(_random_values(rng, p.dtype, shape) if isinstance(p, Buffer)
                   else _random_values(rng, p.dtype, ()).item())
    return out


def _random_values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dt.is_int(dtype):
        lo, hi = dt.int_range(dtype)
        values = rng.integers(-20, 21, size=shape).astype(dtype)
        special = rng.random(shape) < 0.1
        return np.where(special, rng.choice(np.array([lo, hi, 0], dtype), size=shape), values)
    values = (rng.standard_normal(shape) * 4).astype(dtype)
    special = rng.random(shape) < 0.1
    picks = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], dtype), size=shape)
    return np.where(special, picks, values).astype(dtype)


def same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise-equal results, except that any NaN equals any NaN (payloads may differ)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    both_nan = np.isnan(a) & np.isnan(b)
    same_bits = a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}")
    return bool(np.all(both_nan | same_bits))


def prim_funcs(*, dtypes: Sequence[str] = WIDE_DTYPES, exact: bool = False,
               max_depth: int = 3) -> SearchStrategy[PrimFunc]:
    """A hypothesis strategy of :func:`random_prim_func` results (shrinks well)."""
    try:
        from hypothesis import strategies as st
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("irkernel.tir.testing.prim_funcs needs hypothesis") from exc

    class _Draws:
        def __init__(self, draw: Any) -> None:
            self.draw = draw

        def integer(self, lo: int, hi: int) -> int:
            return int(self.draw(st.integers(lo, hi)))

    @st.composite
    def strategy(draw: Any) -> PrimFunc:
        return random_prim_func(_Draws(draw), dtypes=dtypes, exact=exact, max_depth=max_depth)

    return strategy()


__all__ = ["ALL_MATH", "EXACT_MATH", "Chooser", "SeededChooser", "prim_funcs",
           "random_arguments", "random_prim_func", "same_values"]
