"""LegalizeOps' bulk path (passes/legalize_bulk.py): flat elementwise signatures on
generic kernels take one Python step per kernel key, not per shape. It must give the
same kernels and results as the per-signature path, and fall back to that path when a
key's lead disagrees with the flat meta."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.testing import random_inputs
from passes import legalize_bulk, legalize_ops

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import graph_families  # noqa: E402

GENERIC = {"runtime.generic_max_elements": 1 << 20}  # every lane on generic kernels


def _legalized(mod: ik.IRModule) -> ik.IRModule:
    return legalize_ops.LegalizeOps(generic_max_elements=1 << 20)(mod)


def _calls(mod: ik.IRModule) -> list[tuple[str, tuple[int, ...]]]:
    """(callee, result shape) of every call_tir of main, in node order."""
    func = mod["main"]
    calls = np.flatnonzero(func.kind == ik.ops.OP_CALL_TIR)
    records = [dict(func.attr_table[int(a)]) for a in func.attr_id[calls]]
    return [(r["callee"], r["shape"]) for r in records]


def _no_bulk(func, reps, limits):  # noqa: ANN001, ANN202 (monkeypatch stand-in)
    return np.zeros(len(reps), bool)


def test_the_bulk_path_makes_the_per_signature_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = graph_families.shapes(600, 3)  # 30 lanes, shapes (1,) .. (30,)
    bulk = _legalized(mod)
    monkeypatch.setattr(legalize_bulk, "flat_map_groups", _no_bulk)
    slow = _legalized(mod)
    assert _calls(bulk) == _calls(slow)
    assert sorted(bulk.functions) == sorted(slow.functions)
    inputs = random_inputs(mod["main"], seed=1, special_values=False)
    np.testing.assert_array_equal(ik.interpret(bulk, *inputs)[0], ik.interpret(slow, *inputs)[0])


def test_a_lead_that_disagrees_sends_its_key_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A generic kernel whose meta is not the flat formula (simulated by a wrong formula)
    must not get the bulk path's meta: every group of its key is lowered one by one."""
    mod = graph_families.shapes(1000, 4)
    inputs = random_inputs(mod["main"], seed=2, special_values=False)
    want = ik.interpret(mod, *inputs)[0]
    real = legalize_bulk.flat_meta
    monkeypatch.setattr(legalize_bulk, "flat_meta", lambda k, n: real(k, n + 1))
    out = _legalized(mod)
    np.testing.assert_allclose(ik.interpret(out, *inputs)[0], want, rtol=1e-5, atol=1e-4)
    with transform.PassContext(config=GENERIC):
        ex = runtime.build(mod, cache=False)
    np.testing.assert_allclose(ex["main"](*inputs)[0], want, rtol=1e-5, atol=1e-4)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**16), lanes=st.integers(2, 30), steps=st.integers(4, 12))
def test_random_lanes_against_the_interpreter(seed: int, lanes: int, steps: int) -> None:
    mod = graph_families.shapes(lanes * steps, seed, steps=steps)
    inputs = random_inputs(mod["main"], seed=seed, special_values=False)
    with transform.PassContext(config=GENERIC):
        ex = runtime.build(mod, cache=False)
    np.testing.assert_allclose(ex["main"](*inputs)[0], ik.interpret(mod, *inputs)[0],
                               rtol=1e-4, atol=1e-3)


def test_flat_map_groups_takes_only_one_shape_ops() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4, 5), "float32")
    r = bb.param("r", (1, 5), "float32")
    ops = [bb.add(x, x), bb.add(x, r), bb.exp(x), bb.sum(x, axis=(1,)),
           bb.exp(bb.param("s", (1,), "float32"))]
    func = bb.finish(ops)
    reps = np.array(ops, np.int64)
    got = legalize_bulk.flat_map_groups(func, reps, np.full(len(reps), 1 << 20))
    # broadcasting, a reduction and a one-element tensor are not flat maps
    assert got.tolist() == [True, False, True, False, False]
    small = legalize_bulk.flat_map_groups(func, reps, np.full(len(reps), 10))
    assert not small.any()  # 20 elements over the limit of 10
