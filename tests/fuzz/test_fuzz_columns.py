"""Random corruptions of valid Functions' raw columns, fed to every consumer.

Issue 14: a Function made with ``dataclasses.replace`` and one id out of range
crashed DeadCodeElimination, FoldConstant, EliminateCommonSubexpr and O2 with
SIGSEGV (626 of 3,000 random corruptions), and raised IndexError or KeyError in
about 1,300 more. Here hypothesis corrupts the columns and tables of valid
modules *directly* (never through the builder, which would refuse) and every
consumer must either work or raise a documented error: IRError (ParseError is
one), TypeError or ValueError. A signal would end the test process, so a crash
fails the run as loudly as a wrong exception.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from fuzz_budget import budget
from hypothesis import given
from hypothesis import strategies as st

import irkernel as ik
import passes
from irkernel.ir.pools import AttrTable, ConstPool
from irkernel.testing import random_inputs, random_module
from runtime.memory_plan import plan_memory

DOCUMENTED = (ik.IRError, TypeError, ValueError)
COLUMNS = ("kind", "a0", "a1", "dtype", "shape_id", "attr_id", "extra", "params", "outputs")
LIMITS = {"kind": (-2**15, 2**15 - 1), "dtype": (-128, 127)}


@cache
def bases() -> tuple[ik.IRModule, ...]:
    """Small valid modules: scalar and tensor graphs, constants, variadic ops, call_func."""
    mods = [random_module(40, seed=seed, shapes="small" if seed % 2 else "scalar",
                          call_funcs=seed % 3 == 0, const_fraction=0.3,
                          const_subgraph_fraction=0.3) for seed in range(6)]
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), "float32")
    c = bb.const(np.arange(6, dtype=np.float32).reshape(2, 3))
    s = bb.call("sum", bb.add(x, c), axis=(1,))
    t = bb.call("permute_dims", bb.where(bb.less(x, c), x, c), axes=(1, 0))
    cat = bb.call("concat", s, bb.call("reshape", t, shape=(6,)), bb.call("mean", x, axis=(0,)))
    mods.append(ik.IRModule({"main": bb.finish([cat, s])}))
    for mod in mods:
        ik.verify(mod)
    return tuple(mods)


def _set(arr: np.ndarray, index: int, value: int) -> np.ndarray:
    out = np.array(arr)
    lo, hi = LIMITS.get(str(arr.dtype), (np.iinfo(arr.dtype).min, np.iinfo(arr.dtype).max))
    out[index] = min(max(value, lo), hi)
    return out


@st.composite
def column_edits(draw: st.DrawFn, func: ik.Function) -> dict[str, Any]:
    """1-3 single-entry edits of the id columns (values near the edges of their ranges)."""
    changes: dict[str, Any] = {}
    n = func.num_nodes
    for _ in range(draw(st.integers(1, 3))):
        col = draw(st.sampled_from([c for c in COLUMNS if len(getattr(func, c))]))
        arr = changes.get(col, getattr(func, col))
        index = draw(st.integers(0, len(arr) - 1))
        old = int(arr[index])
        value = draw(st.one_of(
            st.sampled_from([-2**31, -2, -1, 0, 1, n - 1, n, n + 1, 2**15 - 1, 2**31 - 1]),
            st.integers(-3, 3).map(lambda d, old=old: old + d),
            st.integers(-2**31, 2**31 - 1)))
        changes[col] = _set(arr, index, value)
    return changes


@st.composite
def table_edits(draw: st.DrawFn, func: ik.Function) -> dict[str, Any]:
    """An attribute set swapped for another op's, or a constant pool entry bent."""
    if draw(st.booleans()) and len(func.attr_table) > 1:
        records = list(func.attr_table.records)
        i = draw(st.integers(1, len(records) - 1))
        records[i] = records[draw(st.integers(0, len(records) - 1))]
        return {"attr_table": AttrTable(records)}
    pool = func.consts
    if not len(pool):
        return {"outputs": np.array([], np.int32)}
    cols = {"dtype": np.array(pool.dtype), "shape_id": np.array(pool.shape_id),
            "offset": np.array(pool.offset)}
    name = draw(st.sampled_from(sorted(cols)))
    cols[name] = _set(cols[name], draw(st.integers(0, len(cols[name]) - 1)),
                      draw(st.integers(-3, len(pool.data) + 64)))
    return {"consts": ConstPool(cols["dtype"], cols["shape_id"], pool.sval, cols["offset"],
                                pool.data)}


def _consumers(orig: ik.IRModule) -> dict[str, Callable[[ik.IRModule], object]]:
    inputs = random_inputs(orig, seed=1)
    return {
        "DeadCodeElimination": passes.DeadCodeElimination(),
        "FoldConstant": passes.FoldConstant(),
        "EliminateCommonSubexpr": passes.EliminateCommonSubexpr(),
        "SimplifyArith": passes.SimplifyArith(),
        "O2": passes.O2(),
        "LegalizeOps+FuseOps": lambda m: passes.FuseOps()(passes.LegalizeOps()(m)),
        "interpret": lambda m: ik.interpret(m, *inputs),
        "script": lambda m: m.script(),
        "structural_hash": ik.structural_hash,
        "structural_equal": lambda m: ik.structural_equal(m, orig),
        "verify": ik.verify,
        "plan_memory": lambda m: plan_memory(m["main"]),
        "operands": lambda m: [m["main"].operands(i) for i in range(m["main"].num_nodes)],
    }


def _corrupt(mod: ik.IRModule, changes: dict[str, Any]) -> ik.IRModule | None:
    try:
        bad = dataclasses.replace(mod["main"], **changes)
    except DOCUMENTED:  # the constructor's own checks (lengths, dtypes)
        return None
    return mod.with_functions({"main": bad})


def _feed(mod: ik.IRModule, bad: ik.IRModule) -> dict[str, str]:
    outcome = {}
    for name, consume in _consumers(mod).items():
        try:
            consume(bad)
            outcome[name] = "ok"
        except DOCUMENTED as exc:
            outcome[name] = type(exc).__name__
    return outcome


@budget(300)
@given(data=st.data())
def test_column_corruptions_work_or_raise_documented_errors(data: st.DataObject) -> None:
    mod = data.draw(st.sampled_from(bases()))
    bad = _corrupt(mod, data.draw(column_edits(mod["main"])))
    if bad is not None:
        _feed(mod, bad)


@budget(120)
@given(data=st.data())
def test_table_corruptions_work_or_raise_documented_errors(data: st.DataObject) -> None:
    mod = data.draw(st.sampled_from(bases()))
    bad = _corrupt(mod, data.draw(table_edits(mod["main"])))
    if bad is not None:
        _feed(mod, bad)
