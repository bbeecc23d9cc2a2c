"""Write PrimFuncs as Python functions: ``from irkernel.tir import script as T``.

``@T.prim_func`` *traces* the decorated function once: it calls it with a
:class:`~irkernel.tir.Buffer` per ``T.Buffer(...)`` annotation (a
:class:`~irkernel.tir.Var` per ``T.int64``-style annotation) and records what
the body does: ``for i in T.serial(n)`` records a loop, ``c[i] = a[i] + b[i]``
a store, ``with T.If(cond):`` a branch, ``x = T.let(e)`` a binding and
``buf = T.alloc_buffer(...)`` an allocation (each binding scopes over the rest
of its block). Plain Python runs at trace time, so Python ``for``/``if`` over
Python values is meta-programming (it unrolls), as in TVMScript.

Design note: tracing instead of parsing the source (TVMScript's approach)
works for functions defined anywhere (REPL, ``exec``), needs no AST
front end, and gives meta-programming for free. Its cost is that loop and
binding names must be recovered: they are read from the bytecode instruction
that stores the value (``STORE_FAST i`` after ``FOR_ITER``); pass ``name=`` to
override. ``break``/``continue``/``return`` inside a traced loop are errors.
Imports the TIR node modules only; installs ``buffer.STORE`` (``buf[i] = v`` in a trace).
"""


from __future__ import annotations

import builtins
import dis
import functools
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from types import CodeType, FrameType
from typing import Any

import numpy as np

from irkernel.tir import dtype as dt
from irkernel.tir.buffer import STORE, index_lanes
from irkernel.tir.buffer import Buffer as _BufferNode
from irkernel.tir.construct import as_expr, binary, call, cast, const, eq, ne, truncdiv, truncmod
from irkernel.tir.construct import select as _select
from irkernel.tir.expr import Broadcast as _Broadcast
from irkernel.tir.expr import Call as _Call
from irkernel.tir.expr import FloorDiv, FloorMod, Let, Max, Min, PrimExpr, Sub, Var
from irkernel.tir.expr import Ramp as _Ramp
from irkernel.tir.function import Attrs, PrimFunc
from irkernel.tir.stmt import (
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

_STATE = threading.local()


class _Frame:
    """Statements (and let/alloc markers scoping over what follows) of one open block."""

    __slots__ = ("attrs", "error", "items", "kind", "names")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.items: list[Any] = []
        self.attrs: dict[str, Any] = {}
        self.error: str | None = None
        self.names: set[str] = set()

    def close(self) -> Stmt:
        body: list[Stmt] = []
        for item in reversed(self.items):
            if isinstance(item, Stmt):
                body.append(item)
            elif item[0] == "alloc":
                body = [Allocate(item[1], _seq(body))]
            else:
                body = [LetStmt(item[1], item[2], _seq(body))]
        return _seq(body)


def _seq(reversed_body: list[Stmt]) -> Stmt:
    return seq(*reversed(reversed_body)) if reversed_body else SeqStmt(())


def _frames() -> list[_Frame]:
    frames = getattr(_STATE, "frames", None)
    if frames is None:
        frames = _STATE.frames = []
    return frames


def _top(what: str) -> _Frame:
    frames = _frames()
    if not frames:
        raise RuntimeError(f"{what} is only valid while a @T.prim_func body is being traced; "
                           "outside one, build the tir nodes directly")
    return frames[-1]


def _emit(stmt: Stmt) -> None:
    _top(type(stmt).__name__).items.append(stmt)


def _store(buffer: _BufferNode, indices: tuple[Any, ...], value: Any) -> None:
    """``buffer[indices] = value`` inside a trace (called by ``Buffer.__setitem__``)."""
    frame = _top(f"storing to buffer {buffer.name!r}")
    probe = buffer[indices]  # checks and converts the indices
    want = dt.with_lanes(buffer.dtype, index_lanes(probe.indices))
    value = as_expr(value, want)
    if value.lanes == 1 and dt.lanes(want) > 1:
        value = _Broadcast(value, dt.lanes(want))
    frame.items.append(BufferStore(buffer, value, probe.indices))


# ---------------------------------------------------------------------------
# names from bytecode
# ---------------------------------------------------------------------------

_STORES = {"STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF"}
_SKIP = {"CACHE", "EXTENDED_ARG", "NOP", "FOR_ITER", "PRECALL", "CALL", "GET_ITER"}


@functools.lru_cache(maxsize=512)
def _instructions(code: CodeType) -> tuple[dis.Instruction, ...]:
    return tuple(dis.get_instructions(code))


def _stored_names(frame: FrameType | None) -> list[str] | None:
    """Names the instruction after the current one stores to (``None`` when unknown)."""
    if frame is None:
        return None
    instrs = _instructions(frame.f_code)
    # f_lasti may point into the inline CACHE entries after a CALL: take the last
    # instruction starting at or before it
    pos = next((k for k in range(len(instrs) - 1, -1, -1)
                if instrs[k].offset <= frame.f_lasti), None)
    if pos is None:
        return None
    k = pos + 1
    while k < len(instrs) and instrs[k].opname in _SKIP:
        k += 1
    if k >= len(instrs):
        return None
    ins = instrs[k]
    if ins.opname == "UNPACK_SEQUENCE":
        names = []
        for nxt in instrs[k + 1:]:
            if len(names) == ins.argval:
                break
            val = nxt.argval if isinstance(nxt.argval, tuple) else (nxt.argval,)
            if nxt.opname.startswith("STORE_"):
                names.extend(val)
            else:
                return None
        return names[: ins.argval] if len(names) >= ins.argval else None
    if ins.opname in _STORES or ins.opname.startswith("STORE_FAST"):
        val = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
        return [str(val[0])]
    return None


def _name(given: str | None, frame: FrameType | None, fallback: str) -> str:
    if given is not None:
        return given
    names = _stored_names(frame)
    return names[0] if names else fallback


# ---------------------------------------------------------------------------
# the decorator
# ---------------------------------------------------------------------------


class _BufferSpec:
    """What ``T.Buffer(shape, dtype)`` means in a parameter annotation."""

    def __init__(self, shape: Any, dtype: str = "float32", *, strides: Any = (),
                 align: int = 0) -> None:
        self.shape = shape if isinstance(shape, (tuple, list)) else (shape,)
        self.dtype = dtype
        self.strides = strides
        self.align = align

    def make(self, name: str) -> _BufferNode:
        return _BufferNode(name, tuple(self.shape), self.dtype, tuple(self.strides), self.align)


def Buffer_(shape: Any, dtype: str = "float32", *, strides: Any = (),
            align: int = 0) -> _BufferSpec:
    """Annotation for a buffer parameter: ``a: T.Buffer((n, 4), "float32", align=64)``."""
    return _BufferSpec(shape, dtype, strides=strides, align=align)


class _DTypeSpec:
    """``T.float32``: a scalar-parameter annotation, and ``T.float32(1.5)`` a constant."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, value: Any) -> PrimExpr:
        if isinstance(value, str):
            value = float(value)
        return const(value, self.name)

    def __repr__(self) -> str:
        return f"T.{self.name}"


def prim_func(fn: Callable[..., Any] | None = None, *, name: str | None = None,
              private: builtins.bool = False) -> Any:
    """Trace ``fn`` into a :class:`~irkernel.tir.PrimFunc`.

    Parameters
    ----------
    fn : callable
        Every parameter is annotated with ``T.Buffer(...)`` or a dtype
        (``T.int64``, ``T.float32``, ...); the body uses the ``T`` constructs.
    name : str, optional
        The ``global_symbol`` attribute; defaults to ``fn.__name__``.
    private : bool
        When true, no ``global_symbol`` attribute is set.

    Returns
    -------
    PrimFunc

    Examples
    --------
    >>> from irkernel.tir import script as T
    >>> @T.prim_func
    ... def add(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32"),
    ...         c: T.Buffer((8,), "float32")):
    ...     for i in T.serial(8):
    ...         c[i] = a[i] + b[i]
    >>> add.attrs["global_symbol"]
    'add'
    """
    if fn is None:
        return functools.partial(prim_func, name=name, private=private)
    # string annotations (``from __future__ import annotations``) are evaluated with
    # the decorating scope's locals too, so shapes from an enclosing function work
    scope = sys._getframe(1).f_locals
    try:
        hints = inspect.get_annotations(fn, locals=dict(scope), eval_str=True)
    except NameError as exc:
        raise NameError(f"prim_func {fn.__name__}: cannot evaluate a parameter annotation "
                        f"({exc}); string annotations see the module's globals and the "
                        "locals where @T.prim_func is applied") from exc
    params: list[_BufferNode | Var] = []
    for pname in inspect.signature(fn).parameters:
        spec = hints.get(pname)
        if isinstance(spec, _BufferSpec):
            params.append(spec.make(pname))
        elif isinstance(spec, _DTypeSpec):
            params.append(Var(pname, spec.name))
        else:
            raise TypeError(f"prim_func {fn.__name__}: parameter {pname!r} needs an annotation "
                            f"T.Buffer(shape, dtype) or a dtype such as T.int64, got {spec!r}")
    frame = _Frame("func")
    _frames().append(frame)
    try:
        result = fn(*params)
    finally:
        _frames().pop()
    if result is not None:
        raise TypeError(f"prim_func {fn.__name__}: the body must not return a value "
                        "(outputs are buffers the caller passes in)")
    if frame.error:
        raise SyntaxError(f"prim_func {fn.__name__}: {frame.error}")
    attrs = {} if private else {"global_symbol": name or fn.__name__}
    attrs.update(frame.attrs)
    return PrimFunc(tuple(params), frame.close(), Attrs(attrs))


def func_attr(attrs: dict[str, Any]) -> None:
    """Set function attributes from inside the body."""
    frame = next((f for f in reversed(_frames()) if f.kind == "func"), None)
    if frame is None:
        raise RuntimeError("T.func_attr is only valid inside a @T.prim_func body")
    frame.attrs.update(attrs)


# ---------------------------------------------------------------------------
# loops, branches, bindings
# ---------------------------------------------------------------------------


class _Loops:
    """The iterable behind ``T.serial``/``T.grid``: yields the loop var(s) exactly once."""

    def __init__(self, ranges: list[tuple[Any, Any]], kind: str, names: list[str] | None,
                 annotations: dict[str, Any] | None) -> None:
        self.ranges = ranges
        self.kind = kind
        self.names = names
        self.annotations = annotations or {}

    def __iter__(self) -> Iterator[Any]:
        names = self.names or _stored_names(sys._getframe(1)) or []
        return self._trace(names)

    def _trace(self, names: list[str]) -> Iterator[Any]:
        parent = _top(f"T.{self.kind}")
        loop_vars = []
        for k, (lo, ext) in enumerate(self.ranges):
            vdt = next((x.dtype for x in (ext, lo) if isinstance(x, PrimExpr)), dt.INDEX)
            name = names[k] if k < len(names) else f"v{len(parent.items)}_{k}"
            loop_vars.append(Var(name, vdt))
        frame = _Frame("loop")
        _frames().append(frame)
        done = False
        try:
            yield loop_vars[0] if len(loop_vars) == 1 else tuple(loop_vars)
            done = True
        finally:
            if _frames() and _frames()[-1] is frame:
                _frames().pop()
            if done:
                body = frame.close()
                for var, (lo, ext) in reversed(list(zip(loop_vars, self.ranges, strict=True))):
                    body = For(var, as_expr(lo, var.dtype), as_expr(ext, var.dtype), self.kind,
                               body, tuple(sorted(self.annotations.items())))
                parent.items.append(body)
            else:
                parent.error = ("a traced loop was left early (break, return or an exception); "
                                "use T.If for conditional code")


def _range(start: Any, stop: Any, extent: Any) -> tuple[Any, Any]:
    if extent is not None:
        if stop is not None:
            raise TypeError("give either stop or extent=, not both")
        return start, extent
    if stop is None:
        return 0, start
    if isinstance(start, int) and isinstance(stop, int):
        return start, stop - start
    return start, binary(Sub, stop, start)


def _loop(kind: str) -> Callable[..., _Loops]:
    def make(start: Any, stop: Any = None, *, extent: Any = None, name: str | None = None,
             annotations: dict[str, Any] | None = None) -> _Loops:
        return _Loops([_range(start, stop, extent)], kind, [name] if name else None,
                      annotations)
    make.__name__ = {"unrolled": "unroll"}.get(kind, kind)
    make.__doc__ = (f"A {kind} loop: ``for i in T.{make.__name__}(n)`` or "
                    f"``T.{make.__name__}(start, stop)`` / ``(start, extent=n)``.")
    return make


serial = _loop("serial")
parallel = _loop("parallel")
vectorized = _loop("vectorized")
unroll = _loop("unrolled")


def grid(*extents: Any, kind: str = "serial") -> _Loops:
    """Nested loops: ``for i, j in T.grid(4, 8)``."""
    return _Loops([(0, e) for e in extents], kind, None, None)


def _condition(value: Any, what: str) -> PrimExpr:
    if isinstance(value, (builtins.bool, np.bool_)):
        raise TypeError(f"{what}: the condition is a Python bool ({value}), not an expression; "
                        "'==' on TIR expressions compares structure: use T.eq(a, b) / "
                        "T.ne(a, b), and a Python 'if' for Python values")
    return as_expr(value, "bool")


class If:
    """``with T.If(cond):`` records an IfThenElse; a following ``with T.Else():`` its else."""

    def __init__(self, condition: Any) -> None:
        self.condition = _condition(condition, "T.If")
        self.frame = _Frame("if")

    def __enter__(self) -> None:
        self.parent = _top("T.If")
        _frames().append(self.frame)

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        _frames().pop()
        if exc_type is None:
            self.parent.items.append(IfThenElse(self.condition, self.frame.close()))


class Else:
    """The else block of the ``T.If`` right before it."""

    def __enter__(self) -> None:
        self.parent = _top("T.Else")
        last = self.parent.items[-1] if self.parent.items else None
        if not isinstance(last, IfThenElse) or last.else_case is not None:
            raise SyntaxError("T.Else() must directly follow a T.If(...) block")
        self.if_stmt = last
        self.frame = _Frame("else")
        _frames().append(self.frame)

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        _frames().pop()
        if exc_type is None:
            self.parent.items[-1] = self.if_stmt.replace(else_case=self.frame.close())


def let(value: Any, *, name: str | None = None) -> Var:
    """Bind ``value`` to a new var for the rest of the block: ``x = T.let(a[i] * 2.0)``."""
    frame = _top("T.let")
    value = as_expr(value)
    if value.lanes > 1:
        raise TypeError("T.let binds scalars; vector values appear after VectorizeLoop")
    var = Var(_name(name, sys._getframe(1), f"v{len(frame.items)}"), value.dtype)
    frame.items.append(("let", var, value))
    return var


def alloc_buffer(shape: Any, dtype: str = "float32", *, align: int = 0,
                 name: str | None = None) -> _BufferNode:
    """Allocate a scratch buffer for the rest of the block: ``acc = T.alloc_buffer((16,))``."""
    frame = _top("T.alloc_buffer")
    shape = shape if isinstance(shape, (tuple, list)) else (shape,)
    buf = _BufferNode(_name(name, sys._getframe(1), f"buf{len(frame.items)}"), tuple(shape), dtype,
                 (), align)
    frame.items.append(("alloc", buf))
    return buf


def evaluate(value: Any) -> None:
    """Record an ``Evaluate`` statement."""
    _emit(Evaluate(as_expr(value)))


def var(dtype: str = dt.INDEX, *, name: str | None = None) -> Var:
    """A free var (a shape variable): ``n = T.var("int64")``."""
    return Var(_name(name, sys._getframe(1), "n"), dtype)


# ---------------------------------------------------------------------------
# expressions
# ---------------------------------------------------------------------------


def select(condition: Any, true_value: Any, false_value: Any) -> PrimExpr:
    """``true_value if condition else false_value`` (both evaluated); see :func:`If` on ``==``."""
    return _select(_condition(condition, "T.select"), true_value, false_value)


def ramp(base: Any, stride: Any, lanes: int) -> PrimExpr:
    """``[base, base + stride, ...]``: a vector index."""
    base = as_expr(base)
    return _Ramp(base, as_expr(stride, base.dtype), lanes)


def broadcast(value: Any, lanes: int) -> PrimExpr:
    return _Broadcast(as_expr(value), lanes)


def let_expr(v: Var, value: Any, body: Any) -> PrimExpr:
    """The expression ``body`` with ``v`` bound to ``value``."""
    value = as_expr(value, v.dtype)
    return Let(v, value, as_expr(body))


def min(a: Any, b: Any) -> PrimExpr:
    return binary(Min, a, b)


def max(a: Any, b: Any) -> PrimExpr:
    return binary(Max, a, b)


def floordiv(a: Any, b: Any) -> PrimExpr:
    return binary(FloorDiv, a, b)


def floormod(a: Any, b: Any) -> PrimExpr:
    return binary(FloorMod, a, b)


def abs(x: Any) -> PrimExpr:
    """``fabs`` for floats, ``abs`` for ints."""
    x = as_expr(x)
    return call("fabs" if dt.is_float(x.dtype) else "abs", x)


def _math(op: str) -> Callable[..., PrimExpr]:
    def fn(*args: Any) -> PrimExpr:
        return call(op, *args)
    fn.__name__ = op
    fn.__doc__ = f"The math intrinsic ``{op}`` (lowered to ``llvm.{op}``)."
    return fn


exp, exp2, log, log2, sqrt, tanh = (_math(n) for n in ("exp", "exp2", "log", "log2", "sqrt",
                                                        "tanh"))
sin, cos, fabs, floor, ceil, round = (_math(n) for n in ("sin", "cos", "fabs", "floor", "ceil",
                                                          "round"))
pow, fma, erf, fmod = _math("pow"), _math("fma"), _math("erf"), _math("fmod")
tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh = (
    _math(n) for n in ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"))



def dot4_u8s8(acc: PrimExpr, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``acc[i] + sum_j a[j] * b[4i + j]``: int32 x L accumulators, one uint8x4 group
    ``a`` for every lane, int8 x 4L ``b`` (``irkernel.tir.expr.DOT_OPS``)."""
    return _Call("dot4_u8s8", (acc, a, b))


float32, float64, int32, int64 = (_DTypeSpec(n) for n in ("float32", "float64", "int32",
                                                          "int64"))
bool = _DTypeSpec("bool")
Buffer = Buffer_

STORE.install(_store)

__all__ = [
    "Buffer", "Else", "If", "abs", "acos", "acosh", "alloc_buffer", "asin", "asinh", "atan",
    "atanh", "bool", "cosh", "dot4_u8s8", "sinh", "tan", "broadcast", "cast", "ceil", "cos",
    "eq", "erf", "evaluate", "exp", "exp2", "fabs", "float32", "float64", "floor", "floordiv",
    "floormod", "fma", "fmod", "func_attr", "grid", "int32", "int64", "let", "let_expr", "log", "log2",
    "max", "min", "ne", "parallel", "pow", "prim_func", "ramp", "round", "select", "serial",
    "sin", "sqrt", "tanh", "truncdiv", "truncmod", "unroll", "var", "vectorized",
]
