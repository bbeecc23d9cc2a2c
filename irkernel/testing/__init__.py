"""Testing layer: seeded random graphs and hypothesis strategies for tests, benchmarks, the CLI.

Re-exports ``spec`` (GraphSpec, DEFAULT_OPS, GENERATED_OPS), ``generate`` (random_function,
random_module, random_inputs), ``measure`` (graph_fractions, operand_lists) and ``strategies``
(hypothesis, imported lazily), ``symbolic`` (symbolic_case, symbolic_cases: random graphs
with symbolic dims paired with the same graph with the dims bound). Generators: ``bulk`` (scalar), ``small`` (tensors). ``timing``
(fair comparisons for the demo and bench/) is imported as ``irkernel.testing.timing``. May
import ``irkernel.ir`` only (and hypothesis, lazily, inside the strategies; threadpoolctl inside
``timing``).
"""

from __future__ import annotations

from irkernel.testing.generate import random_function, random_inputs, random_module
from irkernel.testing.measure import graph_fractions, operand_lists
from irkernel.testing.spec import DEFAULT_OPS, GENERATED_OPS, GraphSpec
from irkernel.testing.strategies import functions, functions_with_inputs, graph_specs, modules
from irkernel.testing.symbolic import SymbolicCase, symbolic_case, symbolic_cases

__all__ = [
    "DEFAULT_OPS",
    "GENERATED_OPS",
    "GraphSpec",
    "SymbolicCase",
    "functions",
    "functions_with_inputs",
    "graph_fractions",
    "graph_specs",
    "modules",
    "operand_lists",
    "random_function",
    "random_inputs",
    "random_module",
    "symbolic_case",
    "symbolic_cases",
]
