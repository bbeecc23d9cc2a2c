"""runtime.memory_plan: liveness-based reuse, never overlapping two live intermediates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import irkernel as ik
from runtime.memory_plan import ALIGN, plan_memory

SHAPES = [(), (3,), (4,), (17,), (64,), (8, 8), (5, 30)]


def _tir(bb: ik.GraphBuilder, *operands: int, shape=(4,), dtype="float32") -> int:
    return bb.call("call_tir", *operands, callee="k", dtype=dtype, shape=tuple(shape))


def _chain(n_ops: int, shape=(4,)) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, "float32")
    y = x
    for _ in range(n_ops):
        y = _tir(bb, y, x, shape=shape)
    return bb.finish([y])


def _live_intervals_disjoint(func: ik.Function) -> None:
    """Every two intermediates whose lifetimes meet occupy disjoint arena bytes."""
    plan = plan_memory(func)
    start = plan.node_ids.astype(np.int64)
    stop = plan.last_use.astype(np.int64)
    lo = plan.offsets
    hi = plan.offsets + plan.nbytes
    assert (plan.offsets % ALIGN == 0).all()
    assert (hi <= plan.planned_bytes).all()
    assert (stop >= start).all()
    both_live = (start[:, None] <= stop[None, :]) & (start[None, :] <= stop[:, None])
    overlap = (lo[:, None] < hi[None, :]) & (lo[None, :] < hi[:, None])
    clash = both_live & overlap & ~np.eye(len(start), dtype=bool)
    clash &= (plan.nbytes[:, None] > 0) & (plan.nbytes[None, :] > 0)
    assert not clash.any(), np.argwhere(clash)[:5]
    assert plan.planned_bytes <= plan.naive_bytes
    assert plan.peak_live_bytes <= plan.planned_bytes


def test_chain_reuses_two_buffers() -> None:
    plan = plan_memory(_chain(100, (64,)))
    assert plan.num_buffers == 99  # the last result is the output: not planned
    assert len(plan.token_bytes) == 2
    assert plan.planned_bytes == 2 * 256 < plan.naive_bytes == 99 * 256
    assert plan.peak_live_bytes == 2 * 256
    assert "99 intermediates in 2 buffers" in plan.summary()


def test_operand_and_result_of_one_node_never_share() -> None:
    # y1 is last read by y2: y2 must not reuse y1's buffer (kernels are noalias).
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (16,), "float32")
    y1 = _tir(bb, x, shape=(16,))
    y2 = _tir(bb, y1, shape=(16,))
    y3 = _tir(bb, y2, shape=(16,))
    plan = plan_memory(bb.finish([_tir(bb, y3, shape=(16,))]))
    off = plan.offset_of()
    assert off[y1] != off[y2]
    assert off[y2] != off[y3]
    assert off[y3] == off[y1]  # y1 is dead once y2 ran


def test_params_consts_outputs_and_calls_are_not_planned() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    c = bb.const(np.ones(4, np.float32))
    f = bb.call_func("helper", x, dtype="float32", shape=(4,))
    t = _tir(bb, f, c)
    out = _tir(bb, t, x)
    plan = plan_memory(bb.finish([out, x]))
    assert plan.node_ids.tolist() == [t]


def test_dead_intermediate_is_freed_at_once() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (64,), "float32")
    dead = _tir(bb, x, shape=(64,))
    a = _tir(bb, x, shape=(64,))
    plan = plan_memory(bb.finish([_tir(bb, a, shape=(64,))]))
    off = plan.offset_of()
    assert off[dead] == off[a]
    assert plan.planned_bytes == 256


def test_larger_request_grows_a_free_buffer() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    small = _tir(bb, x, shape=(4,))
    mid = _tir(bb, small, shape=(4,))
    big = _tir(bb, mid, shape=(64,))        # small is free: it grows to 256 B
    plan = plan_memory(bb.finish([_tir(bb, big, shape=(4,))]))
    off = plan.offset_of()
    assert off[big] == off[small]
    assert plan.planned_bytes == 256 + 64


def test_empty_function_and_zero_size() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (0,), "float32")
    plan = plan_memory(bb.finish([x]))
    assert plan.num_buffers == 0
    assert plan.planned_bytes == plan.naive_bytes == 0
    _live_intervals_disjoint(_chain(5, (0,)))


def test_rejects_non_function() -> None:
    with pytest.raises(TypeError, match="plan_memory: func must be a graph Function"):
        plan_memory("main")  # type: ignore[arg-type]


@st.composite
def random_graphs(draw: st.DrawFn) -> ik.Function:
    bb = ik.GraphBuilder("main")
    n_params = draw(st.integers(1, 3))
    nodes = [bb.param(f"p{i}", SHAPES[draw(st.integers(0, len(SHAPES) - 1))], "float32")
             for i in range(n_params)]
    if draw(st.booleans()):
        nodes.append(bb.const(np.arange(3, dtype=np.int32)))
    for _ in range(draw(st.integers(0, 40))):
        k = draw(st.integers(1, 3))
        operands = [nodes[draw(st.integers(0, len(nodes) - 1))] for _ in range(k)]
        shape = SHAPES[draw(st.integers(0, len(SHAPES) - 1))]
        dtype = draw(st.sampled_from(["float32", "float64", "int32", "bool"]))
        nodes.append(_tir(bb, *operands, shape=shape, dtype=dtype))
    n_out = draw(st.integers(1, 3))
    return bb.finish([nodes[draw(st.integers(0, len(nodes) - 1))] for _ in range(n_out)])


@given(random_graphs())
def test_random_graphs_never_overlap_live_buffers(func: ik.Function) -> None:
    _live_intervals_disjoint(func)


def test_plan_of_a_large_graph_is_a_sweep() -> None:
    # Its time is measured in bench/bench_scaling.py (no wall-clock asserts in tests).
    plan = plan_memory(_chain(50_000))
    assert plan.num_buffers == 49_999
    assert len(plan.token_bytes) == 2
