"""Pickling: Function, IRModule and PrimFunc with protocol 5, columns out of band, no copy.

Loaded Functions are structurally equal, read-only and validated; buffers the
caller hands to ``pickle.loads`` are wrapped, not copied (unless misaligned).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings

import irkernel as ik
from irkernel import testing
from irkernel.ir.function import _COLUMNS
from irkernel.ir.pools import ConstPool

N_COLUMN_BUFFERS = len(_COLUMNS) + 5  # nine columns, five pool columns


def _dump(obj, protocol=5):
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=protocol, buffer_callback=buffers.append)
    return data, buffers


def _address(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def _legalized_module() -> ik.IRModule:
    """A graph calling PrimFuncs (call_tir) and a helper (call_func)."""
    import passes

    mod = testing.random_module(testing.GraphSpec(n_nodes=40, seed=5, shapes="small"),
                                call_funcs=True)
    return passes.LegalizeOps()(mod)


def test_function_columns_go_out_of_band_and_load_without_copy():
    func = testing.random_function(500, seed=1)
    data, buffers = _dump(func)
    assert len(buffers) == N_COLUMN_BUFFERS
    assert len(data) < 2000  # the stream holds the small tables, not the columns
    owned = [bytearray(b.raw()) for b in buffers]  # writeable memory the receiver owns
    loaded = pickle.loads(data, buffers=owned)
    assert ik.structural_equal(loaded, func)
    for name in _COLUMNS:
        col = getattr(loaded, name)
        assert not col.flags.writeable
    for pos, name in enumerate(_COLUMNS):
        col = getattr(loaded, name)
        if col.nbytes:
            assert _address(col) == _address(np.frombuffer(owned[pos], np.uint8))
    pool = loaded.consts
    assert not pool.sval.flags.writeable
    assert np.shares_memory(pool.sval, np.frombuffer(owned[len(_COLUMNS) + 2], np.uint8))


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_protocol_round_trips_in_band(protocol):
    mod = testing.random_module(300, seed=2, call_funcs=True)
    loaded = pickle.loads(pickle.dumps(mod, protocol=protocol))
    assert ik.structural_equal(loaded, mod)
    assert list(loaded.functions) == list(mod.functions)
    assert not loaded["main"].kind.flags.writeable


def test_module_attrs_and_function_attrs_survive():
    func = testing.random_function(50, seed=3).with_attr("SkipOptimization", True)
    mod = ik.IRModule({"main": func}, attrs={"origin": "sweep-7", "dims": (1, 2)})
    loaded = pickle.loads(pickle.dumps(mod, protocol=5))
    assert dict(loaded.attrs) == {"origin": "sweep-7", "dims": (1, 2)}
    assert loaded["main"].attrs["SkipOptimization"] is True
    assert ik.structural_equal(loaded, mod)


def test_prim_funcs_and_calls_pickle():
    mod = _legalized_module()
    assert any(ik.transform.is_prim_func(f) for f in mod.functions.values())
    data, buffers = _dump(mod)
    loaded = pickle.loads(data, buffers=buffers)
    assert ik.structural_equal(loaded, mod)
    ik.verify(loaded)


def test_lone_prim_func_pickles():
    mod = _legalized_module()
    name, prim = next((n, f) for n, f in mod.functions.items() if ik.transform.is_prim_func(f))
    loaded = pickle.loads(pickle.dumps(prim, protocol=5))
    assert loaded == prim
    assert loaded.script(name) == prim.script(name)


@settings(max_examples=25)
@given(testing.modules())
def test_random_modules_round_trip(mod):
    data, buffers = _dump(mod)
    loaded = pickle.loads(data, buffers=[bytes(b.raw()) for b in buffers])
    assert ik.structural_equal(loaded, mod)
    assert ik.structural_hash(loaded) == ik.structural_hash(mod)
    assert ik.interpret(loaded, *testing.random_inputs(mod, seed=1)) is not None


def test_shared_tables_are_pickled_once():
    func = testing.random_function(2000, seed=4)
    mod = ik.IRModule({"a": func, "b": func.with_attr("global_symbol", "b")})
    data, buffers = _dump(mod)
    # the second Function shares the first one's arrays: the memo sends them once
    assert len(buffers) == N_COLUMN_BUFFERS
    loaded = pickle.loads(data, buffers=buffers)
    assert loaded["a"].kind is loaded["b"].kind


def test_corrupt_column_is_an_irerror_naming_the_rule():
    func = testing.random_function(200, seed=6)
    data, buffers = _dump(func)
    owned = [bytearray(b.raw()) for b in buffers]
    a0 = np.frombuffer(owned[1], np.int32)  # column order: kind, a0, ...
    a0[-1] = 10**6  # an operand id past the end
    with pytest.raises(ik.IRError, match=r"unpickled: .*node \d+.*column a0.*out of range"):
        pickle.loads(data, buffers=owned)


def test_wrong_column_dtype_is_a_type_error():
    func = testing.random_function(20, seed=7)
    reducer, state = func.__reduce__()
    bad = (state[0].astype(np.int64), *state[1:])
    with pytest.raises(TypeError, match="column 'kind'"):
        reducer(*bad)
    with pytest.raises(TypeError, match="fields"):
        reducer(*state[:3])


def test_misaligned_buffer_is_copied_to_an_aligned_array():
    func = testing.random_function(300, seed=8)
    data, buffers = _dump(func)
    shifted = []
    for b in buffers:
        raw = bytes(b.raw())
        backing = bytearray(len(raw) + 1)
        backing[1:] = raw
        shifted.append(memoryview(backing)[1:])  # one byte off: misaligned for int32
    loaded = pickle.loads(data, buffers=shifted)
    assert ik.structural_equal(loaded, func)
    assert loaded.a0.flags.aligned
    assert _address(loaded.a0) % 4 == 0
    assert _address(loaded.consts.data) % ConstPool.ALIGN == 0


def test_pool_with_constants_held_by_reference_round_trips():
    """Pools that hold large constants by reference (``ConstPool.external``) keep them out
    of band too."""
    weights = np.arange(1 << 15, dtype=np.float32).reshape(256, 128)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (256, 128), "float32")
    bb_out = bb.add(x, bb.const(weights))
    func = bb.finish([bb_out])
    data, buffers = _dump(func)
    loaded = pickle.loads(data, buffers=buffers)
    assert ik.structural_equal(loaded, func)
    assert any(np.shares_memory(arr, np.frombuffer(b.raw(), np.uint8)) for b in buffers
               for arr in loaded.consts.external.values())


@pytest.mark.slow
def test_million_node_module_dumps_and_loads_equal():
    """The 1e6-node case of the issue (its time is measured in bench/bench_scale_out.py)."""
    mod = testing.random_module(1_000_000, seed=1)
    data, buffers = _dump(mod)
    loaded = pickle.loads(data, buffers=buffers)
    assert ik.structural_equal(loaded, mod)
    assert not loaded["main"].a0.flags.writeable
    assert np.shares_memory(loaded["main"].a0, mod["main"].a0)  # loads wrapped, never copied
