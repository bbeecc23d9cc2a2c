"""runtime.memory_plan: liveness-based reuse, never overlapping two live intermediates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
from runtime.memory_plan import ALIGN, plan_memory, plan_tokens

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


# ---------------------------------------------------------------------------
# The size-segregated planner against the scan it replaced (the oracle lives here only)
# ---------------------------------------------------------------------------

def _scan_plan_tokens(node_ids, last, sizes) -> tuple[list[int], list[int]]:
    """The former planner: for each request, scan every token (O(values x tokens)).

    Best fit is the smallest free token that fits (lowest id among equals); else the
    largest free token (lowest id among equals) grows; else a new token.
    """
    order = np.argsort(last, kind="stable")
    token: list[int] = [0] * len(node_ids)
    token_bytes: list[int] = []
    free: list[bool] = []
    released = 0
    for k, node in enumerate(node_ids):
        while released < len(order) and last[order[released]] < node:
            free[token[order[released]]] = True
            released += 1
        need = int(sizes[k])
        fits = [t for t in range(len(free)) if free[t] and token_bytes[t] >= need]
        spare = [t for t in range(len(free)) if free[t]]
        if fits:
            best = min(fits, key=lambda t: (token_bytes[t], t))
        elif spare:
            best = min(spare, key=lambda t: (-token_bytes[t], t))
            token_bytes[best] = need
        else:
            best = len(free)
            token_bytes.append(need)
            free.append(False)
        free[best] = False
        token[k] = best
    return token, token_bytes


@st.composite
def request_sequences(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intermediates in execution order with lifetimes from instant to the whole graph."""
    m = draw(st.integers(0, 120))
    gaps = draw(st.lists(st.integers(1, 3), min_size=m, max_size=m))
    node_ids = np.cumsum(np.array(gaps, np.int64)).astype(np.int32)
    horizon = int(node_ids[-1]) + 5 if m else 1
    spans = draw(st.lists(st.one_of(st.integers(0, 4), st.integers(0, horizon)),
                          min_size=m, max_size=m))
    last = (node_ids + np.array(spans, np.int64)).astype(np.int32)
    classes = draw(st.sampled_from([(1, 2), (1, 2, 3, 8), tuple(range(1, 40)), (1, 1000)]))
    sizes = np.array(draw(st.lists(st.sampled_from(classes), min_size=m, max_size=m)),
                     np.int64) * ALIGN
    return node_ids, last, sizes


def _assert_tokens_valid(node_ids, last, sizes, token, token_bytes) -> None:
    """Each token holds its requests, and no two requests of one token are alive together."""
    token = np.asarray(token, np.int64)
    assert (np.asarray(token_bytes, np.int64)[token] >= sizes).all()
    for t in range(len(token_bytes)):
        users = np.nonzero(token == t)[0]  # in execution order
        # consecutive users of one token: the next starts after the previous' last reader
        assert (node_ids[users[1:]] > last[users[:-1]]).all(), t


@settings(max_examples=300, deadline=None)
@given(request_sequences())
def test_planner_makes_the_arena_of_the_scan(case) -> None:
    node_ids, last, sizes = case
    token, token_bytes = plan_tokens(node_ids, last, sizes)
    want_token, want_bytes = _scan_plan_tokens(node_ids, last, sizes)
    assert token.dtype == np.int32 and token_bytes.dtype == np.int64
    # Equal-size tokens are interchangeable: the same sizes, maybe under other ids.
    assert sorted(token_bytes.tolist()) == sorted(want_bytes)
    assert int(token_bytes.sum()) == sum(want_bytes)
    _assert_tokens_valid(node_ids, last, sizes, token, token_bytes)
    _assert_tokens_valid(node_ids, last, sizes, want_token, want_bytes)


def test_planner_across_chunks(monkeypatch) -> None:
    """State carried between kernel calls: small chunks plan what one call plans."""
    import runtime.memory_plan as memory_plan

    rng = np.random.default_rng(5)
    m = 3000
    node_ids = np.arange(m, dtype=np.int32) * 2
    last = (node_ids + np.where(rng.random(m) < 0.2, rng.integers(0, 2 * m, m),
                                rng.integers(0, 6, m))).astype(np.int32)
    sizes = rng.choice(np.array([1, 2, 5, 64, 300], np.int64) * ALIGN, m)
    whole = plan_tokens(node_ids, last, sizes)
    monkeypatch.setattr(memory_plan, "PLAN_CHUNK", 7)
    chunked = plan_tokens(node_ids, last, sizes)
    np.testing.assert_array_equal(whole[0], chunked[0])
    np.testing.assert_array_equal(whole[1], chunked[1])
    assert sorted(whole[1].tolist()) == sorted(_scan_plan_tokens(node_ids, last, sizes)[1])
    _assert_tokens_valid(node_ids, last, sizes, *whole)


def test_values_alive_together_get_a_token_each() -> None:
    """10^5 values alive at once (the wide DAGs of issue 27; a scan of every token per
    request took minutes here): one token each, exactly their sizes."""
    m = 100_000
    node_ids = np.arange(m, dtype=np.int32)
    last = np.full(m, m, np.int32)
    sizes = (np.arange(m, dtype=np.int64) % 50 + 1) * ALIGN
    token, token_bytes = plan_tokens(node_ids, last, sizes)
    assert len(token_bytes) == m
    assert int(token_bytes.sum()) == int(sizes.sum())


# ---------------------------------------------------------------------------
# Through runtime.build: a reused buffer never changes a result
# ---------------------------------------------------------------------------

LANE_SHAPES = [(4,), (8,), (2, 8), (3, 5)]
EXACT_UNARY = ["negative", "relu", "abs"]
EXACT_BINARY = ["add", "subtract", "maximum", "minimum"]


@st.composite
def long_lived_graphs(draw: st.DrawFn) -> ik.Function:
    """Lanes of mixed shapes whose nodes read their lane's last value and one from far
    back (values alive across many nodes, freed in any order), concats joining (4,) into
    (8,), sums joining (2, 8) into (8,); exact ops only, so results must be bit-equal."""
    bb = ik.GraphBuilder("main")
    lanes = [[bb.param(f"x{k}", s, "float32")] for k, s in enumerate(LANE_SHAPES)]
    for _ in range(draw(st.integers(4, 45))):
        c = draw(st.integers(0, len(LANE_SHAPES) - 1))
        lane = lanes[c]
        near, far = lane[-1], lane[draw(st.integers(0, len(lane) - 1))]
        form = draw(st.sampled_from(["unary", "binary", "binary", "join"]))
        if form == "join" and c == 0:  # two (4,) values -> an (8,) value
            lanes[1].append(bb.call("concat", near, far, axis=0))
        elif form == "join" and c == 2:  # (2, 8) -> (8,)
            lanes[1].append(bb.call("sum", far, axis=(0,)))
        elif form == "unary":
            lane.append(bb.call(draw(st.sampled_from(EXACT_UNARY)), far))
        else:
            lane.append(bb.call(draw(st.sampled_from(EXACT_BINARY)), near, far))
    return bb.finish([lane[-1] for lane in lanes])


@settings(max_examples=12, deadline=None)
@given(long_lived_graphs(), st.integers(0, 2**16))
def test_built_graphs_with_long_lived_values_equal_the_interpreter(func, seed) -> None:
    import runtime

    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-50, 50, s).astype(np.float32) for s in LANE_SHAPES]
    ex = runtime.build(ik.IRModule({"main": func}))
    got = ex["main"](*inputs)
    want = ik.interpret(func, *inputs)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
    _live_intervals_disjoint(ex["main"].func)
