"""Seeded random graphs and inputs: ``random_function``, ``random_module``, ``random_inputs``.

Dispatches a :class:`GraphSpec` to one of the two generators, ``bulk`` (``shapes="scalar"``)
or ``small`` (``shapes="small"``), imported on first use. Imports ``irkernel.ir.*`` and
``irkernel.testing.spec`` / ``bulk`` / ``small``.
"""

# Two generators sit behind one spec:
# - shapes="scalar" (bulk): whole-array construction through GraphBuilder.add_nodes; a
#   1e7-node graph takes about as long as the builder's own type sweep. Every fraction is
#   exact by construction (see bulk_kernels for how).
# - shapes="small" (small): one builder call per node with tensors of rank <= max_rank and
#   dims <= max_dim that broadcast against each other, covering every op; candidates the op
#   rules reject are skipped, so the generator never re-implements a type rule.
# The same spec and seed always give a structurally identical graph (NumPy Generator and the
# kernel's splitmix64 are seeded from the seed; nothing depends on hash order). Every
# generated graph passes irkernel.verify.

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from irkernel.ir.function import Function
from irkernel.ir import narrow
from irkernel.ir.ids import INT_DTYPES, NARROW_FLOAT_DTYPES, NUMPY_DTYPES
from irkernel.ir.module import IRModule
from irkernel.testing.spec import GraphSpec, as_spec


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
    spec = as_spec(spec_or_n_nodes, seed, fields_)
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
    spec = as_spec(spec_or_n_nodes, seed, fields_)
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
        code = int(func.dtype[p])
        dt = NUMPY_DTYPES[code]
        shape = func.shapes[int(func.shape_id[p])]
        size = int(np.prod(shape, dtype=np.int64))
        if dt.kind == "b":
            arr = rng.random(size) < 0.5
        elif code in INT_DTYPES:
            info = np.iinfo(dt)
            arr = rng.integers(max(int(info.min), -50), min(int(info.max), 50) + 1,
                               size).astype(dt)
            if special_values:
                pick = rng.random(size)
                arr[pick < 0.03] = info.max
                arr[(pick >= 0.03) & (pick < 0.06)] = info.min
        else:
            arr = (rng.standard_normal(size) * 2.0).astype(np.float64)
            if special_values:
                pick = rng.random(size)
                arr[pick < 0.02] = np.nan
                arr[(pick >= 0.02) & (pick < 0.03)] = np.inf
                arr[(pick >= 0.03) & (pick < 0.04)] = -np.inf
                arr[(pick >= 0.04) & (pick < 0.05)] = -0.0
            # float16/bfloat16 are rounded (bfloat16 as uint16 bits: irkernel.ir.narrow)
            arr = narrow.to_storage(arr, code) if code in NARROW_FLOAT_DTYPES else arr.astype(dt)
        out.append(arr.reshape(shape).copy())
    return out


__all__ = ["random_function", "random_inputs", "random_module"]
