"""Seeded random graphs and hypothesis strategies for tests, benchmarks and the CLI.

Owns :class:`GraphSpec` (what to generate), :func:`random_function`,
:func:`random_module`, :func:`random_inputs`, :func:`graph_fractions` (what a
graph measures as) and the hypothesis strategies :func:`graph_specs`,
:func:`functions`, :func:`modules` and :func:`functions_with_inputs`.

Two generators sit behind one spec:

- ``shapes="scalar"`` (``irkernel.testing.bulk``): whole-array construction through
  ``GraphBuilder.add_nodes``; a 1e7-node graph takes about as long as the
  builder's own type sweep. Every fraction is exact by construction (see that
  module's docstring for how).
- ``shapes="small"`` (``irkernel.testing.small``): one builder call per node with
  tensors of rank <= ``max_rank`` and dims <= ``max_dim`` that broadcast
  against each other, covering every op; candidates the op rules reject are
  skipped, so the generator never re-implements a type rule.

The same spec and seed always give a structurally identical graph (NumPy
``Generator`` and the kernel's splitmix64 are seeded from ``seed``; nothing
depends on hash order). Every generated graph passes ``irkernel.verify``.
Hypothesis is imported lazily, so ``import irkernel.testing`` works without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES, ENC_BINARY, ENC_UNARY, ENC_VARIADIC, NUMPY_DTYPES
from irkernel.ir.module import IRModule

_NOT_GENERATED = ("param", "const", "call_func", "call_tir")
#: Ops a random graph may use by default: every built-in op except the leaves and calls.
DEFAULT_OPS: tuple[str, ...] = tuple(
    op.name for op in ops.BUILTIN_OPS if op.name not in _NOT_GENERATED)
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
    dtypes: tuple[str, ...] = DTYPE_NAMES
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


def _as_spec(spec_or_n_nodes: GraphSpec | int, seed: int | None,
             fields_: Mapping[str, Any]) -> GraphSpec:
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


def random_function(spec_or_n_nodes: GraphSpec | int, seed: int | None = None,
                    **fields_: Any) -> Function:
    """A random graph Function named ``main`` (parameters ``p0, p1, ...``).

    Parameters
    ----------
    spec_or_n_nodes : GraphSpec or int
        A spec, or the node count of a spec built from ``seed`` and ``fields_``.
    seed : int, optional
        Overrides the spec's seed (default 0 for an int).
    **fields_
        Any other :class:`GraphSpec` field, overriding the spec's.

    Returns
    -------
    Function
        Deterministic for a spec; accepted by ``irkernel.verify``.

    Examples
    --------
    >>> f = random_function(1000, seed=3, dtypes=("float32", "bool"))
    >>> f.num_nodes
    1000
    """
    spec = _as_spec(spec_or_n_nodes, seed, fields_)
    return _build(spec, "main", private=False)


def _build(spec: GraphSpec, name: str, private: bool,
           helpers: Mapping[str, Function] | None = None, call_weight: float = 0.0,
           base: tuple[int, ...] | None = None, helper: bool = False) -> Function:
    if spec.shapes == "scalar":
        from irkernel.testing.bulk import build_scalar_function

        return build_scalar_function(spec, name, private, helpers or {}, call_weight)
    from irkernel.testing.small import build_small_function

    return build_small_function(spec, name, private, helpers or {}, call_weight, base, helper)


def random_module(spec_or_n_nodes: GraphSpec | int, seed: int | None = None,
                  call_funcs: bool = False, n_helpers: int = 3, **fields_: Any) -> IRModule:
    """A module with ``main`` and, when ``call_funcs``, private helpers that ``main`` calls.

    Helpers are small random Functions of the same spec kind (scalar or small
    shapes, same dtypes and op mix; at most 3 params and one output) without a
    ``global_symbol``; ``main`` calls them through ``call_func`` nodes whose
    arguments match their signatures, so ``verify`` accepts the module.

    Parameters
    ----------
    spec_or_n_nodes, seed, **fields_
        As for :func:`random_function` (the spec describes ``main``).
    call_funcs : bool
        Add helpers and ``call_func`` nodes.
    n_helpers : int
        How many helpers (when ``call_funcs``).
    """
    spec = _as_spec(spec_or_n_nodes, seed, fields_)
    if not call_funcs:
        return IRModule({"main": _build(spec, "main", private=False)})
    if isinstance(n_helpers, bool) or not isinstance(n_helpers, int) or n_helpers < 0:
        raise ValueError(f"n_helpers must be an int >= 0, got {n_helpers!r}")
    rng = np.random.default_rng([spec.seed, 0xCA11])
    base = None
    if spec.shapes == "small":
        from irkernel.testing.small import base_shape

        base = base_shape(spec)  # helpers share main's shapes so that calls can match
    helpers: dict[str, Function] = {}
    for k in range(n_helpers):
        hspec = spec.replace(n_nodes=int(rng.integers(3, 12)), seed=int(rng.integers(2**31)),
                             n_params=int(rng.integers(1, 4)), n_outputs=1, dead_fraction=0.0,
                             duplicate_fraction=0.0)
        func = _build(hspec, f"helper{k}", private=True, base=base, helper=True)
        if len(func.outputs) == 1 and 1 <= len(func.params) <= 3:
            helpers[f"helper{k}"] = func
    main = _build(spec, "main", private=False, helpers=helpers, call_weight=_call_weight(spec))
    return IRModule({"main": main, **helpers})


def _call_weight(spec: GraphSpec) -> float:
    total = sum(w for _, w in spec.ops)
    return total / max(len(spec.ops), 1)


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

def random_inputs(func: Function | IRModule, seed: int = 0,
                  special_values: bool = True) -> list[np.ndarray]:
    """Arrays for ``func``'s params (entry ``main`` of a module), of the right dtype and shape.

    Parameters
    ----------
    func : Function or IRModule
    seed : int
        Equal seeds give equal arrays.
    special_values : bool
        Floats: about 5 % of entries become NaN, +inf, -inf or -0.0. Ints: about
        6 % become the dtype's min or max (overflow wraps, so nothing is undefined).

    Returns
    -------
    list of numpy.ndarray
        One C-contiguous array per parameter, in signature order. Floats are
        normal draws (scale 2), ints lie in [-50, 50], bools are fair coins.
    """
    if isinstance(func, IRModule):
        func = func["main"]
    if not isinstance(func, Function):
        raise TypeError(f"random_inputs: expected a Function or IRModule, got "
                        f"{type(func).__name__}")
    rng = np.random.default_rng([seed, 0x1A9])
    out = []
    for p in func.params:
        dt = NUMPY_DTYPES[int(func.dtype[p])]
        shape = func.shapes[int(func.shape_id[p])]
        size = int(np.prod(shape, dtype=np.int64))
        if dt.kind == "b":
            arr = rng.random(size) < 0.5
        elif dt.kind == "i":
            arr = rng.integers(-50, 51, size).astype(dt)
            if special_values:
                info = np.iinfo(dt)
                pick = rng.random(size)
                arr[pick < 0.03] = info.max
                arr[(pick >= 0.03) & (pick < 0.06)] = info.min
        else:
            arr = (rng.standard_normal(size) * 2.0).astype(dt)
            if special_values:
                pick = rng.random(size)
                arr[pick < 0.02] = np.nan
                arr[(pick >= 0.02) & (pick < 0.03)] = np.inf
                arr[(pick >= 0.03) & (pick < 0.04)] = -np.inf
                arr[(pick >= 0.04) & (pick < 0.05)] = -0.0
        out.append(arr.reshape(shape).copy())
    return out


# ---------------------------------------------------------------------------
# Measuring a graph
# ---------------------------------------------------------------------------

def operand_lists(func: Function) -> tuple[np.ndarray, np.ndarray]:
    """CSR of every node's operands: ``(ptr int64[n+1], args int32[k])`` (whole-array work)."""
    enc = ops.op_arrays().encoding[func.kind]
    count = np.where(enc == ENC_BINARY, 2, np.where(enc == ENC_UNARY, 1, 0)).astype(np.int64)
    variadic = enc == ENC_VARIADIC
    count[variadic] = func.a1[variadic]
    ptr = np.zeros(func.num_nodes + 1, np.int64)
    np.cumsum(count, out=ptr[1:])
    args = np.empty(int(ptr[-1]), np.int32)
    fixed = (enc == ENC_UNARY) | (enc == ENC_BINARY)
    args[ptr[:-1][fixed]] = func.a0[fixed]
    binary = enc == ENC_BINARY
    args[ptr[:-1][binary] + 1] = func.a1[binary]
    vnodes = np.nonzero(variadic)[0]
    if len(vnodes):
        cnt = count[vnodes]
        within = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        args[np.repeat(ptr[vnodes], cnt) + within] = func.extra[
            np.repeat(func.a0[vnodes].astype(np.int64), cnt) + within]
    return ptr, args


def graph_fractions(func: Function) -> dict[str, float]:
    """The spec's fractions as measured on ``func``.

    Returns ``const_fraction`` (CONST nodes / nodes) and, over op nodes (neither
    param nor const), ``dead_fraction`` (not reached from an output),
    ``const_subgraph_fraction`` (every operand constant-derived) and
    ``duplicate_fraction`` (same op, operands and attributes as an earlier
    node). Uses a Python loop over nodes for reachability: meant for tests on
    graphs up to ~1e5 nodes.
    """
    n = func.num_nodes
    kind = func.kind
    is_leaf = (kind == ops.OP_PARAM) | (kind == ops.OP_CONST)
    is_op = ~is_leaf
    ptr, args = operand_lists(func)
    ptr_l, args_l = ptr.tolist(), args.tolist()
    live = np.zeros(n, bool)
    live[func.outputs] = True
    live_l = live.tolist()
    for i in range(n - 1, -1, -1):
        if live_l[i]:
            for v in args_l[ptr_l[i]:ptr_l[i + 1]]:
                live_l[v] = True
    cderived = (kind == ops.OP_CONST).tolist()
    for i in range(n):
        if is_op[i]:
            vs = args_l[ptr_l[i]:ptr_l[i + 1]]
            cderived[i] = bool(vs) and all(cderived[v] for v in vs)
    keys: set[tuple[int, ...]] = set()
    dups = 0
    attr = func.attr_id.tolist()
    for i in np.nonzero(is_op)[0].tolist():
        key = (int(kind[i]), attr[i], *args_l[ptr_l[i]:ptr_l[i + 1]])
        if key in keys:
            dups += 1
        keys.add(key)
    m = max(int(is_op.sum()), 1)
    return {
        "const_fraction": float((kind == ops.OP_CONST).sum()) / max(n, 1),
        "dead_fraction": float((is_op & ~np.array(live_l)).sum()) / m,
        "const_subgraph_fraction": float((is_op & np.array(cderived)).sum()) / m,
        "duplicate_fraction": dups / m,
    }


# ---------------------------------------------------------------------------
# Hypothesis strategies (irkernel.testing.strategies; hypothesis is imported lazily)
# ---------------------------------------------------------------------------

from irkernel.testing.strategies import functions, functions_with_inputs, graph_specs, modules  # noqa: E402

__all__ = [
    "DEFAULT_OPS",
    "GraphSpec",
    "functions",
    "functions_with_inputs",
    "graph_fractions",
    "graph_specs",
    "modules",
    "operand_lists",
    "random_function",
    "random_inputs",
    "random_module",
]
