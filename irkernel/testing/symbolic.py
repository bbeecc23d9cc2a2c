"""Random graphs with symbolic dims, each paired with the same graph built with the dims bound.

:func:`symbolic_case` draws a binding of a few shape variables, then builds one random
program twice in lockstep: once with the variables as symbolic dims, once with their
values. Every step is chosen from the symbolic graph's types (elementwise ops with
broadcasting, matmul and batched matmul, reductions, transpose, reshape with -1, concat,
conv and pools); a step whose symbolic rule cannot decide is skipped in both graphs, and
one the symbolic graph accepts must be accepted by the static one (else the rules
disagree: the error propagates). So the interpreter's outputs of the two must be equal,
and every symbolic shape evaluated at the binding must be the static shape. Imports
``irkernel.ir`` only; deterministic in ``seed`` (hypothesis draws the seeds).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from irkernel.ir.builder import GraphBuilder
from irkernel.ir.function import Function
from irkernel.ir.symdim import SymDim, key_value

#: (name, lower, upper) of the variables every case declares.
VARIABLES = (("batch", 1, 5), ("h", 4, 11), ("w", 3, 9), ("seq", 1, 4))
_UNARY = ("exp", "tanh", "relu", "negative", "abs")
_BINARY = ("add", "subtract", "multiply", "maximum")
_STEPS = ("unary", "binary_const", "binary_same", "matmul_const", "matmul_self", "reduce",
          "permute", "reshape", "reshape_dims", "broadcast_to", "concat", "conv", "pool")


@dataclass(frozen=True)
class SymbolicCase:
    """A symbolic function, the same graph with static dims, the binding and inputs."""

    symbolic: Function
    static: Function
    binding: dict[str, int]
    inputs: list[np.ndarray]
    skipped: int  # steps the symbolic rules refused (undecidable), left out of both


class _Pair:
    """The two builders in lockstep: values are node ids, equal in both."""

    def __init__(self, binding: dict[str, int]) -> None:
        self.sym, self.static = GraphBuilder("main"), GraphBuilder("main")
        self.dims = {name: self.sym.dim(name, lo, hi) for name, lo, hi in VARIABLES}
        self.binding = binding
        self.values: list[int] = []
        self.skipped = 0

    def bound(self, dim: Any) -> int:
        if isinstance(dim, SymDim):
            return key_value(dim.key, [self.binding[n] for n in dim.dims.names])
        return int(dim)

    def shape(self, v: int) -> tuple[Any, ...]:
        return self.sym.node_type(v)[1]

    def param(self, name: str, shape: tuple[Any, ...]) -> None:
        a = self.sym.param(name, shape, "float32")
        b = self.static.param(name, tuple(self.bound(d) for d in shape), "float32")
        assert a == b
        self.values.append(a)

    def const(self, value: np.ndarray) -> int:
        a, b = self.sym.const(value), self.static.const(value)
        assert a == b
        return a

    def call(self, op: str, *args: int, **attrs: Any) -> int | None:
        try:
            a = self.sym.call(op, *args, **attrs)
        except ValueError:  # the symbolic rule could not decide (or the step was invalid)
            self.skipped += 1
            return None
        static_attrs = {k: tuple(self.bound(d) for d in v) if isinstance(v, tuple) else v
                        for k, v in attrs.items()}  # symbolic dims of a reshape target
        b = self.static.call(op, *args, **static_attrs)  # must agree: no try
        assert a == b
        return a


def _static_mask(shape: tuple[Any, ...], rng: np.random.Generator) -> tuple[int, ...]:
    """A broadcast partner's shape: symbolic dims become 1, static ones may too."""
    return tuple(1 if isinstance(d, SymDim) or rng.random() < 0.3 else int(d) for d in shape)


def _step(g: _Pair, kind: str, rng: np.random.Generator) -> None:
    v = g.values[int(rng.integers(len(g.values)))]
    shape = g.shape(v)
    rank = len(shape)
    out: int | None = None
    if kind == "unary":
        out = g.call(str(rng.choice(_UNARY)), v)
    elif kind == "binary_const":
        partner = _static_mask(shape, rng)[int(rng.integers(rank + 1)):]
        c = g.const(rng.standard_normal(partner).astype(np.float32))
        args = (v, c) if rng.random() < 0.5 else (c, v)
        out = g.call(str(rng.choice(_BINARY)), *args)
    elif kind == "binary_same":
        same = [u for u in g.values if g.shape(u) == shape]
        out = g.call(str(rng.choice(_BINARY)), v, same[int(rng.integers(len(same)))])
    elif kind == "matmul_const" and rank >= 1 and not isinstance(shape[-1], SymDim):
        k = int(shape[-1])
        c = g.const(rng.standard_normal((k, int(rng.integers(1, 4)))).astype(np.float32))
        out = g.call("matmul", v, c)
    elif kind == "matmul_self" and rank >= 2:
        axes = (*range(rank - 2), rank - 1, rank - 2)
        t = g.call("permute_dims", v, axes=axes)
        out = None if t is None else g.call("matmul", v, t)
    elif kind == "reduce" and rank >= 1:
        op = str(rng.choice(("sum", "max", "mean")))
        out = g.call(op, v, axis=int(rng.integers(rank)), keepdims=bool(rng.random() < 0.5))
    elif kind == "permute" and rank >= 2:
        out = g.call("permute_dims", v, axes=tuple(int(a) for a in rng.permutation(rank)))
    elif kind == "reshape" and rank >= 1 and (
            sum(isinstance(d, SymDim) for d in shape) <= 1 or rng.random() < 0.2):
        static = math.prod(int(d) for d in shape if not isinstance(d, SymDim))
        target = (-1, static) if rng.random() < 0.5 else (static, -1)
        out = g.call("reshape", v, shape=target)
    elif kind == "reshape_dims" and rank >= 1:  # a target naming symbolic dims
        target = list(shape)
        target[int(rng.integers(rank))] = -1
        j = int(rng.integers(max(rank - 1, 1)))
        a, b = target[j], target[j + 1] if j + 1 < rank else -1
        if -1 not in (a, b) and not (isinstance(a, SymDim) and isinstance(b, SymDim)):
            target[j:j + 2] = [a * b]  # merge two axes (a constant times at most one symbol)
        out = g.call("reshape", v, shape=tuple(target))
    elif kind == "broadcast_to" and rank >= 1:
        partner = _static_mask(shape, rng)
        c = g.const(rng.standard_normal(partner).astype(np.float32))
        out = g.call("broadcast_to", c, shape=shape)
    elif kind == "concat" and rank >= 1:
        same = [u for u in g.values if g.shape(u) == shape]
        out = g.call("concat", v, same[int(rng.integers(len(same)))],
                     axis=int(rng.integers(-rank, rank)))
    elif kind in ("conv", "pool") and rank == 4 and not isinstance(shape[1], SymDim):
        out = _window_step(g, kind, v, int(shape[1]), rng)
    if out is not None:
        g.values.append(out)


def _window_step(g: _Pair, kind: str, v: int, channels: int, rng: np.random.Generator
                 ) -> int | None:
    k = int(rng.integers(1, 4))
    strides = (int(rng.integers(1, 3)),) * 2
    pad = int(rng.integers(0, k))
    padding = (pad,) * 4
    if kind == "conv":
        w = g.const(rng.standard_normal((int(rng.integers(1, 4)), channels, k, k))
                    .astype(np.float32))
        return g.call("conv", v, w, strides=strides, padding=padding)
    op = str(rng.choice(("max_pool", "avg_pool")))
    return g.call(op, v, kernel=(k, k), strides=strides, padding=padding,
                  ceil_mode=bool(rng.random() < 0.2))


def symbolic_case(seed: int, n_steps: int = 12,
                  steps: tuple[str, ...] = _STEPS) -> SymbolicCase:
    """One random case (see the module docstring); deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    binding = {name: int(rng.integers(lo, hi + 1)) for name, lo, hi in VARIABLES}
    g = _Pair(binding)
    d = g.dims
    g.param("image", (d["batch"], 2, d["h"], d["w"]))
    g.param("tokens", (d["batch"], d["seq"], 3))
    g.param("pairs", (2 * d["batch"], d["seq"] + 1))
    for _ in range(n_steps):
        _step(g, str(rng.choice(steps)), rng)
    outs = g.values[-int(rng.integers(1, 4)):]
    static = g.static.finish(outs)
    inputs = [rng.standard_normal(static.shapes[int(static.shape_id[p])]).astype(np.float32)
              for p in static.params.tolist()]
    return SymbolicCase(g.sym.finish(outs), static, binding, inputs, g.skipped)


def symbolic_cases(n_steps: Any = None) -> Any:
    """Hypothesis strategy of :class:`SymbolicCase` (seeds and step counts drawn)."""
    from hypothesis import strategies as st

    steps = st.integers(1, 16) if n_steps is None else st.just(n_steps)
    make: Callable[[tuple[int, int]], SymbolicCase] = lambda t: symbolic_case(t[0], t[1])
    return st.tuples(st.integers(0, 2**32 - 1), steps).map(make)


__all__ = ["VARIABLES", "SymbolicCase", "symbolic_case", "symbolic_cases"]
