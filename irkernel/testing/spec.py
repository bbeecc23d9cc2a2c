"""What a random graph should be: :class:`GraphSpec` (validated when built) and ``DEFAULT_OPS``.

Also ``as_spec`` (a spec from ``random_function``'s arguments). Imports ``irkernel.ir.*`` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.ids import DTYPE_NAMES

#: The default dtypes of a GraphSpec: the five of irkernel 0.1 (float16 ... uint16 are
#: opt-in, so that the graphs of a given seed stay the same).
CLASSIC_DTYPES = DTYPE_NAMES[:5]

_NOT_GENERATED = ("param", "const", "call_func", "call_tir")
#: Ops a random graph may use by default: the ops of the original table (opcodes up to
#: ``call_tir``) except the leaves and calls. Ops appended later (the elementwise ops,
#: reductions and NN ops of issue 15) are generated only when named in ``ops=``
#: (``GENERATED_OPS`` lists those the generators know how to make), so seeded graphs,
#: and the benchmark figures recorded on them, stay what they were.
DEFAULT_OPS: tuple[str, ...] = tuple(
    op.name for op in ops.BUILTIN_OPS[: ops.OP_CALL_TIR + 1] if op.name not in _NOT_GENERATED)
#: Every op the random generators can make when asked for it by name.
GENERATED_OPS: tuple[str, ...] = (*DEFAULT_OPS, "erf", "floor", "ceil", "round",
                                  "logical_not", "logical_and", "logical_or", "logical_xor",
                                  "floor_mod", "fmod", "min", "prod", "argmax", "argmin",
                                  "strided_slice")
_FRACTIONS = ("const_fraction", "const_subgraph_fraction", "dead_fraction", "duplicate_fraction")


@dataclass(frozen=True)
class GraphSpec:
    """What :func:`random_function` generates. All fields are validated on construction.

    Parameters
    ----------
    n_nodes : int
        Total node count (params and constants included); the result has exactly
        this many nodes.
    seed : int
        Any non-negative int; equal specs give structurally equal graphs.
    ops : tuple of str or mapping of str to float
        Op names (equal weights) or ``{name: weight}``. Stored normalized as
        ``((name, weight), ...)`` in op-table order. Ops that cannot apply
        (``matmul`` on scalars, compares when ``"bool"`` is not allowed) are
        skipped; ValueError when none applies.
    dtypes : tuple of str
        Allowed dtypes of every node.
    shapes : {"scalar", "small"}
        Scalars only (bulk, fast), or small tensors with broadcasting.
    max_rank, max_dim : int
        Bounds of generated shapes in ``"small"`` mode.
    n_params : int
        Parameters (capped at ``n_nodes``).
    const_fraction : float
        Share of all nodes that are CONST nodes.
    const_subgraph_fraction : float
        Share of op nodes whose operands are all constant-derived (foldable).
    dead_fraction : float
        Share of op nodes that no output reaches.
    duplicate_fraction : float
        Share of op nodes that repeat an earlier node's op, operands and attributes.
    n_outputs : int
        Outputs. When the op mix cannot join its dtype lanes (say ``ops=("add",)``
        over two dtypes) the graph keeps one output per lane sink instead of
        leaving nodes dead, so it may have more.

    Notes
    -----
    Fractions are exact counts in scalar mode, except for the first few nodes
    (a dtype with no parameter-derived node yet cannot host a node that must
    read one) and the last ``min(64, m/4)`` op nodes, which merge the graph's
    sinks into the outputs. Small mode aims at them per node and lands near
    them. Limits: with ``n_params=0`` every op node is constant-derived; a
    duplicate reads nothing new, so above about 0.4 duplicates the other live
    nodes cannot read every live node and the extra sinks become outputs.
    """

    n_nodes: int
    seed: int = 0
    ops: Any = DEFAULT_OPS
    dtypes: tuple[str, ...] = CLASSIC_DTYPES
    shapes: str = "scalar"
    max_rank: int = 3
    max_dim: int = 4
    n_params: int = 4
    const_fraction: float = 0.2
    const_subgraph_fraction: float = 0.1
    dead_fraction: float = 0.1
    duplicate_fraction: float = 0.1
    n_outputs: int = 1

    def __post_init__(self) -> None:
        for name in ("n_nodes", "seed", "max_rank", "max_dim", "n_params", "n_outputs"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                raise ValueError(f"GraphSpec.{name} must be an int, got {value!r}")
            object.__setattr__(self, name, int(value))
        for name, low in (("n_nodes", 1), ("seed", 0), ("max_rank", 0), ("max_dim", 1),
                          ("n_params", 0), ("n_outputs", 1)):
            if getattr(self, name) < low:
                raise ValueError(f"GraphSpec.{name} must be >= {low}, got {getattr(self, name)}")
        if self.n_nodes > 2**31 - 2:
            raise ValueError(f"GraphSpec.n_nodes must be <= {2**31 - 2}")
        for name in _FRACTIONS:
            value = getattr(self, name)
            if (not isinstance(value, (int, float, np.floating, np.integer))
                    or isinstance(value, bool) or not 0.0 <= float(value) <= 1.0):
                raise ValueError(f"GraphSpec.{name} must be a number in [0, 1], got {value!r}")
            object.__setattr__(self, name, float(value))
        if self.const_fraction == 0.0 and self.const_subgraph_fraction > 0.0:
            raise ValueError("GraphSpec.const_subgraph_fraction must be 0 when const_fraction "
                             "is 0 (constant subgraphs need constants)")
        if self.shapes not in ("scalar", "small"):
            raise ValueError(f"GraphSpec.shapes must be 'scalar' or 'small', got {self.shapes!r}")
        object.__setattr__(self, "dtypes", _normalize_dtypes(self.dtypes))
        object.__setattr__(self, "ops", _normalize_ops(self.ops))

    def replace(self, **changes: Any) -> GraphSpec:
        """A copy with some fields changed (and validated)."""
        return replace(self, **changes)


def _normalize_dtypes(dtypes: object) -> tuple[str, ...]:
    if isinstance(dtypes, str) or not isinstance(dtypes, Sequence) or not dtypes:
        raise ValueError(f"GraphSpec.dtypes must be a non-empty sequence of dtype names, "
                         f"got {dtypes!r}")
    out = []
    for d in dtypes:
        if d not in DTYPE_NAMES:
            raise ValueError(f"GraphSpec.dtypes: unknown dtype {d!r} (valid: "
                             f"{', '.join(DTYPE_NAMES)})")
        if d not in out:
            out.append(d)
    return tuple(sorted(out, key=DTYPE_NAMES.index))


def _normalize_ops(spec_ops: object) -> tuple[tuple[str, float], ...]:
    if isinstance(spec_ops, Mapping):
        items = list(spec_ops.items())
    elif isinstance(spec_ops, Sequence) and not isinstance(spec_ops, str):
        items = [(o, 1.0) if isinstance(o, str) else tuple(o) for o in spec_ops]
    else:
        raise ValueError(f"GraphSpec.ops must be a sequence of op names or a mapping of op "
                         f"name to weight, got {spec_ops!r}")
    weights: dict[str, float] = {}
    for item in items:
        if len(item) != 2:
            raise ValueError(f"GraphSpec.ops: bad entry {item!r}")
        name, weight = item
        try:
            op = ops.get_op(name)
        except (ValueError, TypeError):
            raise ValueError(f"GraphSpec.ops: unknown op {name!r}") from None
        if op.name in _NOT_GENERATED:
            raise ValueError(f"GraphSpec.ops: {name!r} is not generated as an op "
                             f"(params and constants have their own fields; calls come "
                             f"from random_module)")
        if (not isinstance(weight, (int, float, np.integer, np.floating)) or isinstance(
                weight, bool) or not np.isfinite(weight) or weight < 0):
            raise ValueError(f"GraphSpec.ops: weight of {name!r} must be a finite number "
                             f">= 0, got {weight!r}")
        weights[name] = weights.get(name, 0.0) + float(weight)
    if not any(w > 0 for w in weights.values()):
        raise ValueError("GraphSpec.ops must name at least one op with a positive weight")
    return tuple((name, weights[name]) for name in (o.name for o in ops.all_ops())
                 if name in weights)


def as_spec(spec_or_n_nodes: GraphSpec | int, seed: int | None,
            fields_: Mapping[str, Any]) -> GraphSpec:
    """The spec ``random_function(spec_or_n_nodes, seed, **fields_)`` builds from."""
    if isinstance(spec_or_n_nodes, GraphSpec):
        changes = dict(fields_)
        if seed is not None:
            changes["seed"] = seed
        return spec_or_n_nodes.replace(**changes) if changes else spec_or_n_nodes
    known = {f.name for f in fields(GraphSpec) if f.init}
    for key in fields_:
        if key not in known:
            raise TypeError(f"unknown GraphSpec field {key!r} (valid: {', '.join(sorted(known))})")
    if isinstance(spec_or_n_nodes, bool) or not isinstance(spec_or_n_nodes, (int, np.integer)):
        raise TypeError(f"spec_or_n_nodes must be a GraphSpec or an int, got "
                        f"{type(spec_or_n_nodes).__name__}")
    return GraphSpec(int(spec_or_n_nodes), seed=0 if seed is None else seed, **fields_)


__all__ = ["DEFAULT_OPS", "GraphSpec", "as_spec"]
