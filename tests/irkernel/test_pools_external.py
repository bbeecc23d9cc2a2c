"""Large constants are held by reference: no reader and no pass copies them."""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import passes
import runtime
from irkernel.ir.pools import LARGE_CONST_BYTES, ConstPool, ConstPoolBuilder
from irkernel.ir.verify import verify

N = LARGE_CONST_BYTES // 4 * 2  # float32 elements: twice the threshold


def _weights(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


def _module(w: np.ndarray) -> ik.IRModule:
    """out = (x + w) * (2 + 3): a foldable scalar, a tensor fold (w * 1 stays), a large const."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (N,), "float32")
    c = bb.const(w)
    two = bb.const(np.float32(2))
    three = bb.const(np.float32(3))
    small = bb.const(np.arange(4, dtype=np.float32))
    folded = bb.sum(bb.multiply(small, small))  # a tensor fold: FoldConstant extends the pool
    y = bb.multiply(bb.add(x, c), bb.add(two, three))
    return ik.IRModule({"main": bb.finish([bb.add(y, folded)])})


def _const_arrays(mod: ik.IRModule) -> list[np.ndarray]:
    f = mod["main"]
    ids = np.flatnonzero(f.kind == ik.ops.OP_CONST)
    return [f.const_value(int(i)) for i in ids]


def _holds(mod: ik.IRModule, w: np.ndarray) -> bool:
    return any(a.size == w.size and np.shares_memory(a, w) for a in _const_arrays(mod))


def test_builder_holds_large_constant_by_reference():
    w = _weights()
    mod = _module(w)
    pool = mod["main"].consts
    assert _holds(mod, w)
    assert len(pool.external) == 1 and pool.external_nbytes == w.nbytes
    assert len(pool.data) < w.nbytes  # not in the flat buffer
    held = next(iter(pool.external.values()))
    assert not held.flags.writeable and w.flags.writeable  # the caller's array is untouched
    verify(mod)


def test_small_constants_are_copied_into_data():
    bb = ik.GraphBuilder("main")
    small = np.arange(8, dtype=np.float32)
    bb.const(small)
    f = bb.finish([0])
    assert not f.consts.external
    assert not np.shares_memory(f.const_value(0), small)


def test_same_array_is_one_entry_and_equal_copies_are_two():
    w = _weights()
    bb = ik.GraphBuilder("main")
    a, b, c = bb.const(w), bb.const(w), bb.const(w.copy())
    f = bb.finish([bb.add(bb.add(a, b), c)])
    assert f.a0[a] == f.a0[b] != f.a0[c]  # identity, not bytes, decides (documented)


def test_passes_and_pipeline_keep_the_reference():
    w = _weights()
    mod = _module(w)
    folded = passes.FoldConstant()(mod)
    assert folded is not mod and len(folded["main"].consts) > len(mod["main"].consts)
    assert _holds(folded, w)
    for p in (passes.SimplifyArith(), passes.EliminateCommonSubexpr(),
              passes.DeadCodeElimination()):
        folded = p(folded)
        assert _holds(folded, w), p.info.name
    o3 = ik.transform.get_pass("O3")(mod)
    assert _holds(o3, w)
    legal = passes.LegalizeOps()(o3)
    assert _holds(legal, w)
    verify(legal)


def test_pool_extended_from_base_carries_external_without_copy():
    w = _weights()
    pool = _module(w)["main"].consts
    shapes = _module(w)["main"].shapes
    builder = ConstPoolBuilder(pool, shapes)
    extra = builder.add(np.ones(3, np.float32), 1)
    again = builder.add(next(iter(pool.external.values())), 1)
    new = builder.freeze()
    assert len(new) == extra + 1 and again in pool.external
    assert all(np.shares_memory(new.external[c], pool.external[c]) for c in pool.external)


def test_structural_equality_and_hash_compare_contents():
    w = _weights()
    a, b = _module(w), _module(w.copy())
    assert ik.structural_equal(a, b)
    assert ik.structural_hash(a) == ik.structural_hash(b)
    w2 = w.copy()
    w2[-1] += 1
    c = _module(w2)
    assert not ik.structural_equal(a, c)
    assert ik.structural_hash(a) != ik.structural_hash(c)


def test_text_round_trip_of_large_constant():
    w = _weights()[: LARGE_CONST_BYTES // 4]  # exactly the threshold
    bb = ik.GraphBuilder("main")
    x = bb.param("x", w.shape, "float32")
    mod = ik.IRModule({"main": bb.finish([bb.add(x, bb.const(w))])})
    assert mod["main"].consts.external
    assert ik.structural_equal(ik.parse(mod.script()), mod)


def test_interpreter_and_executor_read_the_reference():
    w = _weights()
    mod = _module(w)
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    expected = (x + w) * np.float32(5) + np.float32(14)
    (got,) = ik.interpret(mod, x)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    ex = runtime.build(mod)
    (out,) = ex["main"](x)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    graph = ex["main"]
    consts = [a for a in _executor_consts(graph) if a.size == N]
    assert consts and all(np.shares_memory(a, w) for a in consts)


def _executor_consts(graph: object) -> list[np.ndarray]:
    """The constant arrays whose addresses a GraphExecutor's launch table passes to its
    kernels (private state)."""
    return [a for a in graph._table.keep if isinstance(a, np.ndarray)]


def test_verify_rejects_a_bad_external_entry():
    w = _weights()
    f = _module(w)["main"]
    pool = f.consts
    (cid,) = pool.external
    wrong = np.zeros(3, np.float32)
    wrong.setflags(write=False)
    bad = ConstPool(pool.dtype, pool.shape_id, pool.sval, pool.offset, pool.data, {cid: wrong})
    g = ik.Function(**{**{k: getattr(f, k) for k in f.__dataclass_fields__}, "consts": bad})
    with pytest.raises(ik.IRError, match="held by reference"):
        verify(ik.IRModule({"main": g}))


def test_pool_rejects_writeable_external():
    z = np.zeros(1, np.int64)
    with pytest.raises(ValueError, match="read-only"):
        ConstPool(np.zeros(1, np.int8), np.ones(1, np.int32), z, np.zeros(2, np.int64),
                  np.zeros(0, np.uint8), {0: np.zeros(5, np.float32)})


def test_with_tensors_keeps_constants_held_by_reference():
    """Regression: LegalizeOps appends the generic kernels' meta arrays with
    ``with_tensors``, which once dropped ``external`` (the pool then claimed bytes it
    did not hold, and validation rejected the legalized function)."""
    w = _weights()
    pool = _module(w)["main"].consts
    grown, ids = pool.with_tensors([np.arange(6, dtype=np.int64)], [0])
    assert dict(grown.external).keys() == dict(pool.external).keys()
    assert all(a is pool.external[c] for c, a in grown.external.items())
    assert ids.tolist() == [len(pool)]
