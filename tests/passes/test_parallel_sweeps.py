"""The parallel sweeps give the serial sweeps' output, bit for bit, at 1 and 2 threads.

``irkernel.ir.jit.parallel_sweep`` decides per call whether a sweep is split: the
tests lower its thresholds (via monkeypatch) so that small graphs are split into
many tiny chunks, which crosses chunk boundaries far more often than a 1e7-node
graph does.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import irkernel as ik
from irkernel import transform
from irkernel.ir import jit
from irkernel.testing import GraphSpec, random_function
from irkernel.testing.strategies import functions

PASSES = ("FoldConstant", "SimplifyArith", "EliminateCommonSubexpr", "DeadCodeElimination",
          "O2")
COLUMNS = ("kind", "a0", "a1", "extra", "dtype", "shape_id", "attr_id", "outputs", "params")


def _run(pass_name: str, mod: ik.IRModule, threads: int, chunk: int,
         monkeypatch: pytest.MonkeyPatch) -> ik.IRModule:
    """``pass_name`` on ``mod``: serial when ``chunk`` is 0, else split in ``chunk``s."""
    monkeypatch.setattr(jit, "PARALLEL_MIN_NODES", 1 if chunk else 1 << 62)
    monkeypatch.setattr(jit, "CHUNK_NODES", max(chunk, 1))
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        return transform.get_pass(pass_name)(mod)
    finally:
        numba.set_num_threads(before)


def _assert_same(want: ik.IRModule, got: ik.IRModule, what: str) -> None:
    assert list(want.functions) == list(got.functions), what
    for name, f in want.functions.items():
        g = got.functions[name]
        if not isinstance(f, ik.Function):
            continue
        for col in COLUMNS:
            a, b = getattr(f, col), getattr(g, col)
            assert a.dtype == b.dtype and np.array_equal(a, b), f"{what}: {name}.{col}"
        assert np.array_equal(f.consts.sval, g.consts.sval), f"{what}: {name} consts"
        assert np.array_equal(f.consts.data, g.consts.data), f"{what}: {name} const data"


def _check_all_splits(mod: ik.IRModule, pass_name: str,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    want = _run(pass_name, mod, 1, 0, monkeypatch)
    for threads in (1, 2):
        for chunk in (1, 7, 64):
            got = _run(pass_name, mod, threads, chunk, monkeypatch)
            _assert_same(want, got, f"{pass_name}, {threads} threads, chunks of {chunk}")


@pytest.mark.parametrize("pass_name", PASSES)
@pytest.mark.parametrize("spec", [
    GraphSpec(n_nodes=3000, seed=1),
    GraphSpec(n_nodes=2000, seed=2, const_fraction=0.4, const_subgraph_fraction=0.5,
              duplicate_fraction=0.3, dead_fraction=0.3),
    GraphSpec(n_nodes=1500, seed=3, shapes="small", const_fraction=0.3,
              const_subgraph_fraction=0.4, duplicate_fraction=0.2),
], ids=["scalar", "foldable", "small-tensors"])
def test_parallel_equals_serial(pass_name: str, spec: GraphSpec,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    _check_all_splits(ik.IRModule({"main": random_function(spec)}), pass_name, monkeypatch)


def test_parallel_equals_serial_at_default_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph split at the default chunk size: 1 thread vs 2 threads (splitting is off
    by default, ``jit.PARALLEL_MIN_NODES``: on here at the size it was written for)."""
    monkeypatch.setattr(jit, "PARALLEL_MIN_NODES", 1 << 17)
    mod = ik.IRModule({"main": random_function(GraphSpec(n_nodes=3 * jit.PARALLEL_MIN_NODES,
                                                         seed=5, duplicate_fraction=0.2))})
    o2 = transform.get_pass("O2")
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        want = o2(mod)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        got = o2(mod)
    finally:
        numba.set_num_threads(before)
    _assert_same(want, got, "O2 at the default chunk size")


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(func=functions())
def test_parallel_equals_serial_hypothesis(func: ik.Function,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _check_all_splits(ik.IRModule({"main": func}), "O2", monkeypatch)


def test_hash_collisions_fall_back_to_the_serial_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """All-equal hashes make the split table merge different values; the check of the
    canonical operands catches that and the serial kernel decides."""
    from passes import cse
    from irkernel.ir import ops

    func = random_function(GraphSpec(n_nodes=2000, seed=4, duplicate_fraction=0.3))
    table = ops.op_arrays()
    columns = (func.kind, func.a0, func.a1, func.extra, func.attr_id, func.dtype,
               func.shape_id, table.encoding, table.pure, table.commutative)
    vh = np.zeros(func.num_nodes, np.uint64)
    monkeypatch.setattr(jit, "PARALLEL_MIN_NODES", 1)
    monkeypatch.setattr(jit, "CHUNK_NODES", 64)
    before = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    try:
        rep, n_merged = cse._hash_cons(vh, columns, 4096)
    finally:
        numba.set_num_threads(before)
    want = np.full(func.num_nodes, -1, np.int32)
    want_merged = cse.hash_cons_kernel(vh, *columns, np.full(4096, -1, np.int64), want)
    assert n_merged == want_merged > 0
    assert np.array_equal(rep, want)


def test_one_parallel_sweep_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Numba's workqueue layer aborts on concurrent parallel kernels: a sweep that finds
    another running goes serially (it is one of several passes running at once)."""
    from irkernel.ir import jit

    monkeypatch.setattr(jit, "PARALLEL_MIN_NODES", 1 << 17)

    with jit.parallel_sweep(10**8) as outer:
        with jit.parallel_sweep(10**8) as inner:
            assert (outer, inner) == (jit.CHUNK_NODES, 0)
    with jit.parallel_sweep(10**8) as again:
        assert again == jit.CHUNK_NODES
    with jit.parallel_sweep(10) as small:
        assert small == 0
