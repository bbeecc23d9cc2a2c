"""Hypothesis strategies drawing :class:`GraphSpec` fields (so hypothesis shrinks the spec).

Owns ``graph_specs``, ``functions``, ``modules``, ``functions_with_inputs``. Imports
``irkernel.ir.*``, ``irkernel.testing.spec`` / ``generate``; hypothesis only inside functions.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

import numpy as np

from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.module import IRModule
from irkernel.testing.generate import random_function, random_inputs, random_module
from irkernel.testing.spec import DEFAULT_OPS, GraphSpec

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def _st() -> Any:
    try:
        from hypothesis import strategies as st
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("irkernel.testing strategies need hypothesis "
                          "(pip install 'irkernel[test]')") from exc
    return st


def graph_specs(**overrides: Any) -> SearchStrategy[GraphSpec]:
    """Strategy of valid :class:`GraphSpec`; shrinks towards small, plain graphs.

    Each keyword fixes a field (a value) or draws it (a strategy). Defaults:
    ``n_nodes`` 1..200, ``shapes`` scalar or small, ``dtypes`` a non-empty
    subset, ``ops`` the default mix or a subset that always keeps ``reshape``
    (which applies to every dtype), fractions in [0, 0.3] (constants up to 0.5),
    1..3 outputs, 0..4 params.
    """
    st = _st()
    known = {f.name for f in fields(GraphSpec) if f.init}
    for key in overrides:
        if key not in known:
            raise TypeError(f"graph_specs: unknown GraphSpec field {key!r}")
    frac = st.floats(0.0, 0.3, allow_nan=False)
    ops_subset = st.lists(st.sampled_from(DEFAULT_OPS), min_size=1, max_size=8, unique=True).map(
        lambda names: tuple(sorted(set(names) | {"reshape"}, key=DEFAULT_OPS.index)))
    defaults: dict[str, Any] = {
        "n_nodes": st.integers(1, 200),
        "seed": st.integers(0, 2**32 - 1),
        "ops": st.one_of(st.just(DEFAULT_OPS), ops_subset),
        "dtypes": st.lists(st.sampled_from(DTYPE_NAMES), min_size=1, max_size=6,
                           unique=True).map(tuple),
        "shapes": st.sampled_from(("scalar", "small")),
        "max_rank": st.integers(0, 3),
        "max_dim": st.integers(1, 4),
        "n_params": st.integers(0, 4),
        "const_fraction": st.floats(0.0, 0.5, allow_nan=False),
        "const_subgraph_fraction": frac,
        "dead_fraction": frac,
        "duplicate_fraction": frac,
        "n_outputs": st.integers(1, 3),
    }

    @st.composite
    def draw_spec(draw: Any) -> GraphSpec:
        values = {}
        for name, default in defaults.items():
            given = overrides.get(name, default)
            values[name] = draw(given) if isinstance(given, st.SearchStrategy) else given
        if values["const_fraction"] == 0.0 and "const_subgraph_fraction" not in overrides:
            values["const_subgraph_fraction"] = 0.0
        if values["n_params"] == 0 and values["const_fraction"] == 0.0 and (
                "n_params" not in overrides):
            values["n_params"] = 1
        return GraphSpec(**values)

    return draw_spec()


def functions(**overrides: Any) -> SearchStrategy[Function]:
    """Strategy of random Functions: :func:`graph_specs` (same keywords) mapped through
    :func:`random_function`."""
    return graph_specs(**overrides).map(random_function)


def modules(call_funcs: Any = None, **overrides: Any) -> SearchStrategy[IRModule]:
    """Strategy of random IRModules; ``call_funcs`` is a bool, a strategy, or None (drawn)."""
    st = _st()
    calls = st.booleans() if call_funcs is None else (
        call_funcs if isinstance(call_funcs, st.SearchStrategy) else st.just(call_funcs))
    return st.tuples(graph_specs(**overrides), calls).map(
        lambda sc: random_module(sc[0], call_funcs=sc[1]))


def functions_with_inputs(module: bool = False, special_values: Any = None,
                          **overrides: Any) -> SearchStrategy[tuple[Any, list[np.ndarray]]]:
    """Strategy of ``(Function or IRModule, inputs)`` with inputs from :func:`random_inputs`.

    Parameters
    ----------
    module : bool
        Draw modules (via :func:`modules`, which may call helpers) instead of Functions.
    special_values : bool, strategy or None
        Passed to :func:`random_inputs`; drawn when None.
    **overrides
        As for :func:`graph_specs`.
    """
    st = _st()
    graphs = modules(**overrides) if module else functions(**overrides)
    specials = st.booleans() if special_values is None else (
        special_values if isinstance(special_values, st.SearchStrategy)
        else st.just(special_values))
    return st.tuples(graphs, st.integers(0, 2**32 - 1), specials).map(
        lambda t: (t[0], random_inputs(t[0], seed=t[1], special_values=t[2])))


__all__ = ["functions", "functions_with_inputs", "graph_specs", "modules"]
