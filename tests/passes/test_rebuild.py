"""``irkernel.ir.rebuild``: the one compaction path every graph pass goes through.

Checked against a plain-Python model of the protocol (keep mask + replacement
map with chains) on random graphs, plus its error rules and ownership of the
arrays a pass hands over. Every test runs twice: with the serial kernel, and
split into chunks of 3 nodes by the parallel kernels (``jit.parallel_sweep``).
"""

from __future__ import annotations

import numpy as np
import pytest
from passes_helpers import assert_same_results, ops_of

import irkernel as ik
from irkernel.ir import jit
from irkernel.ir.ids import NONE
from irkernel.ir.rebuild import rebuild
from irkernel.testing import random_function, random_inputs


@pytest.fixture(autouse=True, params=["serial", "chunks of 3"])
def _split(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param != "serial":
        monkeypatch.setattr(jit, "PARALLEL_MIN_NODES", 1)
        monkeypatch.setattr(jit, "CHUNK_NODES", 3)


def _chain() -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "float32")
    a = bb.exp(x)                       # 1
    b = bb.exp(x)                       # 2 (duplicate of 1)
    c = bb.add(a, b)                    # 3
    d = bb.call("concat", b, c, x)      # 4
    bb.tanh(d)                          # 5 (dead)
    return bb.finish([d, b])


def _model(func: ik.Function, keep: np.ndarray, rep: np.ndarray) -> list[tuple]:
    """(op, operands, type) of each surviving node, by the protocol's definition."""
    n = func.num_nodes
    target = list(range(n))
    for i in range(n):
        if rep[i] != NONE:
            target[i] = target[rep[i]]
    alive = [rep[i] == NONE and keep[i] for i in range(n)]
    new_id = np.cumsum(alive) - 1
    rows = []
    for i in range(n):
        if alive[i]:
            operands = tuple(int(new_id[target[v]]) for v in func.operands(i))
            rows.append((func.op(i).name, operands, func.node_type(i), func.node_attrs(i)))
    return rows


def _rows(func: ik.Function) -> list[tuple]:
    return [(func.op(i).name, func.operands(i), func.node_type(i), func.node_attrs(i))
            for i in range(func.num_nodes)]


def test_keep_and_rep_follow_the_protocol() -> None:
    func = _chain()
    keep = np.array([True, True, True, True, True, False])
    rep = np.array([NONE, NONE, 1, NONE, NONE, NONE], np.int32)
    out = rebuild(func, keep=keep, rep=rep)
    ik.verify(out)
    assert _rows(out) == _model(func, keep, rep)
    assert ops_of(out) == ["param", "exp", "add", "concat"]
    assert out.outputs.tolist() == [3, 1]
    assert out.extra.tolist() == [1, 2, 0]
    x = np.array([0.5, np.nan], np.float32)
    assert_same_results(ik.interpret(func, x), ik.interpret(out, x))


def test_replacement_chains_are_resolved() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int32")
    a = bb.negative(x)
    b = bb.negative(x)
    c = bb.negative(x)
    func = bb.finish([bb.add(c, b), a])
    rep = np.array([NONE, NONE, a, b, NONE], np.int32)  # c -> b -> a
    out = rebuild(func, rep=rep)
    assert ops_of(out) == ["param", "negative", "add"]
    assert out.operands(2) == (1, 1)


@pytest.mark.parametrize("seed", range(6))
def test_random_keep_and_rep_match_the_model(seed: int) -> None:
    func = random_function(400, seed=seed, shapes="small" if seed % 2 else "scalar")
    n = func.num_nodes
    rng = np.random.default_rng(seed)
    is_param = np.zeros(n, bool)
    is_param[func.params] = True
    rep = np.full(n, NONE, np.int32)
    for i in range(n):  # replace some nodes by an earlier node of the same type
        same = [j for j in range(i) if func.node_type(j) == func.node_type(i)]
        if same and not is_param[i] and rng.random() < 0.3:
            rep[i] = same[int(rng.integers(len(same)))]
    target = np.arange(n)
    for i in range(n):
        if rep[i] != NONE:
            target[i] = target[rep[i]]
    keep = is_param | (rng.random(n) < 0.4)
    keep[target[func.outputs]] = True
    for i in range(n - 1, -1, -1):  # what a surviving node reads must survive
        if keep[i] and rep[i] == NONE:
            keep[target[list(func.operands(i))]] = True
    out = rebuild(func, keep=keep, rep=rep)
    assert _rows(out) == _model(func, keep, rep)
    survivors = np.cumsum(keep & (rep == NONE)) - 1
    assert out.params.tolist() == survivors[func.params].tolist()
    assert out.outputs.tolist() == survivors[target[func.outputs]].tolist()


def test_nothing_to_do_returns_the_input() -> None:
    func = _chain()
    assert rebuild(func) is func


def test_all_kept_is_an_equal_copy() -> None:
    func = _chain()
    out = rebuild(func, keep=np.ones(func.num_nodes, bool))
    assert ik.structural_equal(out, func)


def test_output_columns_are_frozen_and_exactly_sized() -> None:
    func = _chain()
    keep = np.array([True, True, True, True, True, False])
    out = rebuild(func, keep=keep)
    for col in ("kind", "a0", "a1", "dtype", "shape_id", "attr_id", "extra", "params",
                "outputs"):
        arr = getattr(out, col)
        assert not arr.flags.writeable, col
        assert arr.flags.c_contiguous, col
    assert len(out.kind) == 5 and len(out.extra) == 3


def test_rewritten_rows_are_taken_over_without_a_copy() -> None:
    """A pass's rewritten columns become the new Function's (frozen), not copied again."""
    func = _chain()
    kind = func.kind.copy()
    out = rebuild(func, kind=kind)
    assert out.kind is kind or np.shares_memory(out.kind, kind)
    assert not out.kind.flags.writeable
    assert out.a0 is func.a0


def test_dropping_a_param_is_an_error() -> None:
    func = _chain()
    keep = np.ones(func.num_nodes, bool)
    keep[0] = False
    with pytest.raises(ik.IRError, match=r"MyPass: node 0: is a param"):
        rebuild(func, keep=keep, pass_name="MyPass")


def test_replacing_a_param_is_an_error() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int32")
    y = bb.param("y", (), "int32")
    func = bb.finish([bb.add(x, y)])
    with pytest.raises(ik.IRError, match=r"node 1: is a param"):
        rebuild(func, rep=np.array([NONE, x, NONE], np.int32))


@pytest.mark.parametrize("target", [2, 3, -5])
def test_a_replacement_must_point_to_an_earlier_node(target: int) -> None:
    func = _chain()
    rep = np.full(func.num_nodes, NONE, np.int32)
    rep[2] = target
    with pytest.raises(ik.IRError, match=r"node 2: replacement does not point to an earlier"):
        rebuild(func, rep=rep)


@pytest.mark.parametrize(("dropped", "reader"), [(1, 3), (3, 4), (2, 3)])
def test_a_kept_node_reading_a_dropped_one_is_an_error(dropped: int, reader: int) -> None:
    func = _chain()
    keep = np.ones(func.num_nodes, bool)
    keep[dropped] = False
    with pytest.raises(ik.IRError, match=rf"node {reader}: reads a node that was removed"):
        rebuild(func, keep=keep)


def test_dropping_an_output_is_an_error() -> None:
    func = _chain()
    keep = np.ones(func.num_nodes, bool)
    keep[4:] = False
    with pytest.raises(ik.IRError, match=r"node 4: reads a node that was removed"):
        rebuild(func, keep=keep)


def test_bad_mask_types_are_a_type_error() -> None:
    func = _chain()
    with pytest.raises(TypeError, match="keep must be bool"):
        rebuild(func, keep=np.ones(func.num_nodes, np.int8))
    with pytest.raises(TypeError, match="rep int32"):
        rebuild(func, rep=np.full(func.num_nodes, -1, np.int64))


def test_large_drops_do_not_keep_oversized_buffers() -> None:
    func = random_function(20_000, seed=3)
    keep = np.zeros(func.num_nodes, bool)
    keep[func.params] = True
    keep[func.outputs] = True
    live = keep.copy()
    for i in range(func.num_nodes - 1, -1, -1):
        if live[i]:
            live[list(func.operands(i))] = True
    out = rebuild(func, keep=live)
    for col in ("kind", "a0", "a1", "dtype", "shape_id", "attr_id"):
        arr = getattr(out, col)
        base = arr
        while isinstance(base.base, np.ndarray):
            base = base.base
        assert base.nbytes <= 2 * arr.nbytes + 64, col
    inputs = random_inputs(func, seed=0)
    assert_same_results(ik.interpret(func, *inputs), ik.interpret(out, *inputs))
