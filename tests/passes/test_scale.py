"""Every pass on a 1e6-long chain and a 1e6-wide fan-in: sweeps, never recursion.

The graphs are built with ``GraphBuilder.add_nodes`` (whole arrays) and are
shaped so that each pass has 1e6 nodes of work: a chain of foldable
constants, a chain of identities (``x * 1``), two interleaved equal chains, a
dead chain; a ``concat`` reading 1e6 nodes and a balanced ``add`` tree over
1e6 leaves. Outputs are checked by their structure (node counts, verify), and
a 1000-node version of each graph through the interpreter.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import pytest
from passes_helpers import PASS_FACTORIES, assert_same_results, make_pass

import irkernel as ik
from irkernel import ops
from irkernel.testing import random_inputs

N = 1_000_000
pytestmark = pytest.mark.slow


def _ids(*parts: object) -> np.ndarray:
    return np.concatenate([np.atleast_1d(np.asarray(p, np.int64)) for p in parts]).astype(np.int32)


def _nodes(bb: ik.GraphBuilder, op: int, n: int, a0: np.ndarray,
           a1: np.ndarray | None = None) -> np.ndarray:
    return bb.add_nodes(np.full(n, op, np.int16), a0, a1)


def const_chain(n: int) -> ik.Function:
    """c, c+1, (c+1)+1, ...: all foldable; the output adds x to the last one."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float64")
    one = bb.const(np.float64(1.0))
    chain = _nodes(bb, ops.OP_ADD, n, _ids(one, np.arange(one + 1, one + n)),
                   np.full(n, one, np.int32))
    return bb.finish([bb.add(x, int(chain[-1]))])


def identity_chain(n: int) -> ik.Function:
    """((x * 1) * 1) * ...: SimplifyArith collapses it to x in one sweep."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int64")
    one = bb.const(np.int64(1))
    chain = _nodes(bb, ops.OP_MULTIPLY, n, _ids(x, np.arange(one + 1, one + n)),
                   np.full(n, one, np.int32))
    return bb.finish([int(chain[-1])])


def twin_chains(n: int) -> ik.Function:
    """a_k = a_{k-1} + x and b_k = b_{k-1} + x interleaved: CSE merges b into a."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int32")
    half = n // 2
    k = np.arange(2 * half)
    a0 = np.where(k < 2, x, k - 1)  # node 1 + k reads node 1 + k - 2 (= k - 1)
    chain = _nodes(bb, ops.OP_ADD, 2 * half, a0.astype(np.int32),
                   np.full(2 * half, x, np.int32))
    return bb.finish([int(chain[-2]), int(chain[-1])])


def dead_chain(n: int) -> ik.Function:
    """exp(x) is returned; a chain of n negatives hangs off x unread."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float32")
    out = bb.exp(x)
    _nodes(bb, ops.OP_NEGATIVE, n, _ids(x, np.arange(out + 1, out + n)))
    return bb.finish([out])


def concat_fan_in(n: int) -> ik.Function:
    """One concat reading n nodes: negative(x) (all equal) and c + c (all foldable)."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1,), "float32")
    c = bb.const(np.array([0.5], np.float32))
    kind = np.where(np.arange(n) % 2 == 0, ops.OP_NEGATIVE, ops.OP_ADD).astype(np.int16)
    a0 = np.where(kind == ops.OP_NEGATIVE, x, c).astype(np.int32)
    a1 = np.where(kind == ops.OP_NEGATIVE, -1, c).astype(np.int32)
    leaves = bb.add_nodes(kind, a0, a1)
    cat = bb.add_nodes(np.array([ops.OP_CONCAT], np.int16), np.array([0], np.int32),
                       np.array([n], np.int32), extra=leaves)
    return bb.finish([int(cat[0])])


def add_tree(n: int) -> ik.Function:
    """A balanced add tree over n leaves: the left half constants, the right half x * k."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float64")
    half = n // 2
    cids = bb.add_scalar_consts(np.arange(half, dtype=np.float64), "float64")
    consts = bb.add_nodes(np.full(half, ops.OP_CONST, np.int16), cids)
    scale = bb.add_nodes(np.full(n - half, ops.OP_CONST, np.int16),
                         bb.add_scalar_consts(np.arange(n - half, dtype=np.float64) + 0.5,
                                              "float64"))
    level = np.concatenate([consts, _nodes(bb, ops.OP_MULTIPLY, n - half,
                                           np.full(n - half, x, np.int32), scale)])
    while len(level) > 1:
        pairs = len(level) // 2
        summed = _nodes(bb, ops.OP_ADD, pairs, level[0:2 * pairs:2].copy(),
                        level[1:2 * pairs:2].copy())
        level = np.concatenate([summed, level[2 * pairs:]])
    return bb.finish([int(level[0])])


GRAPHS: dict[str, Callable[[int], ik.Function]] = {
    "const_chain": const_chain, "identity_chain": identity_chain, "twin_chains": twin_chains,
    "dead_chain": dead_chain, "concat_fan_in": concat_fan_in, "add_tree": add_tree}

# Node count of main after each pass (None: not checked); rows: graph, columns: pass.
_P = ("FoldConstant", "DeadCodeElimination", "EliminateCommonSubexpr", "SimplifyArith", "O2",
      "fixpoint")
EXPECTED: dict[str, dict[str, int | None]] = {
    "const_chain": dict(zip(_P, (N + 3, None, None, None, 3, 3))),
    "identity_chain": dict(zip(_P, (None, None, None, 2, 1, 1))),
    "twin_chains": dict(zip(_P, (None, None, N // 2 + 1, None, N // 2 + 1, N // 2 + 1))),
    "dead_chain": dict(zip(_P, (None, 2, None, None, 2, 2))),
    "concat_fan_in": dict(zip(_P, (N + 3, None, 5, None, 4, 4))),
    "add_tree": dict(zip(_P, (None, None, None, None, None, None))),
}


@pytest.fixture(scope="module")
def big_graphs() -> dict[str, ik.IRModule]:
    return {name: ik.IRModule({"main": make(N)}) for name, make in GRAPHS.items()}


def test_the_graphs_are_big_and_valid(big_graphs: dict[str, ik.IRModule]) -> None:
    for name, mod in big_graphs.items():
        assert mod["main"].num_nodes >= N, name
        ik.verify(mod)


@pytest.mark.parametrize("graph", list(GRAPHS))
@pytest.mark.parametrize("name", list(PASS_FACTORIES))
def test_passes_sweep_a_million_nodes(name: str, graph: str,
                                      big_graphs: dict[str, ik.IRModule]) -> None:
    # Times are measured in bench/bench_scaling.py (no wall-clock asserts in tests).
    mod = big_graphs[graph]
    limit = sys.getrecursionlimit()
    out = make_pass(name)(mod)
    assert sys.getrecursionlimit() == limit
    ik.verify(out)
    want = EXPECTED[graph][name]
    if want is not None:
        assert out["main"].num_nodes == want, (graph, name)


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_small_versions_keep_their_values(graph: str) -> None:
    mod = ik.IRModule({"main": GRAPHS[graph](1000)})
    inputs = random_inputs(mod, seed=3, special_values=False)
    expected = ik.interpret(mod, *inputs)
    for name in PASS_FACTORIES:
        out = make_pass(name)(mod)
        ik.verify(out)
        assert_same_results(expected, ik.interpret(out, *inputs), f"{name} on {graph}")
