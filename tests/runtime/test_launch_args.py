"""The launch table stores each argument once (int32 indices into a short array of
distinct values, resolved by the native launcher): the executor's state per node, the
resolved arguments, launches of many arguments and the int64 variant of the launcher."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.testing import random_inputs
from runtime.launcher import HEAD

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import graph_families  # noqa: E402

#: The bound bench/bench_build_phases.py reports against (issue: <= 64 bytes per node).
MAX_STATE_BYTES_PER_NODE = 64


@pytest.mark.parametrize("family", ["wide", "consts", "fanin", "outputs"])
def test_executor_state_is_at_most_64_bytes_per_node(family: str) -> None:
    mod = graph_families.FAMILIES[family](20_000, 0)
    ex = runtime.build(mod, cache=False)
    nodes = int(mod["main"].num_nodes)
    table, binding = ex["main"].state_nbytes
    assert (table + binding) / nodes <= MAX_STATE_BYTES_PER_NODE
    launches = ex["main"].launch_table
    assert launches.args.dtype == np.int32 and launches.starts.dtype == np.int32
    assert len(launches.values) < len(launches.args) // 2  # distinct values, not one each


def _concat_module(parts: int) -> ik.IRModule:
    """A concat of ``parts`` inputs, plus a constant added (a launch of parts + 3 args on
    a shape-generic kernel: buffers, then shape vars)."""
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"x{k}", (k + 2, 3), "float32") for k in range(parts)]
    cat = bb.call("concat", *xs, axis=0)
    rows = sum(k + 2 for k in range(parts))
    c = bb.const(np.arange(rows * 3, dtype=np.float32).reshape(rows, 3))
    return ik.IRModule({"main": bb.finish([bb.call("add", cat, c)])})


def _check(ex: runtime.Executable, mod: ik.IRModule) -> None:
    inputs = random_inputs(mod["main"], seed=1, special_values=False)
    want = ik.interpret(mod, *inputs)
    for got, ref in zip(ex["main"](*inputs), want, strict=True):
        np.testing.assert_array_equal(got, ref)
    for got, ref in zip(ex["main"].run(list(inputs), 0), want, strict=True):  # general path
        np.testing.assert_array_equal(got, ref)


def test_launches_of_more_arguments_than_the_unrolled_head() -> None:
    mod = _concat_module(2 * HEAD + 1)
    with transform.PassContext(disabled_pass=["FuseOps", "FuseTIR"]):
        ex = runtime.build(mod, cache=False)
    table = ex["main"].launch_table
    assert int(np.diff(table.starts).max()) > HEAD
    _check(ex, mod)


def test_resolved_arguments_are_the_arena_const_and_call_addresses() -> None:
    mod = _concat_module(3)
    with transform.PassContext(disabled_pass=["FuseOps", "FuseTIR"]):
        ex = runtime.build(mod, cache=False)
    graph = ex["main"]
    table = graph.launch_table
    binding = graph._take()  # noqa: SLF001 (a binding's values are what the launcher reads)
    try:
        values = binding.values
        assert binding.arena is not None
        base = binding.arena.ctypes.data
        arena = values[table.arena_begin:table.arena_end]
        assert np.all(arena >= base) and np.all(arena < base + graph.planned_bytes)
        assert np.all((arena - base) % 64 == 0)
        for s in range(len(table.kernel_ids)):
            args = table.args[table.starts[s]:table.starts[s + 1]]
            assert np.all(args < len(values))
    finally:
        graph._free.append(binding)  # noqa: SLF001


def test_the_launcher_with_int64_starts_runs_the_same() -> None:
    mod = graph_families.FAMILIES["wide"](3_000, 0)
    ex = runtime.build(mod, cache=False)
    graph = ex["main"]
    inputs = random_inputs(mod["main"], seed=0, special_values=False)
    want = graph(*inputs)
    table = graph.launch_table
    table.starts = table.starts.astype(np.int64)  # what a table past 2**31 arguments has
    assert table.wide
    graph._wide, graph._free = True, []  # noqa: SLF001 (fresh bindings see the new starts)
    for got, ref in zip(graph(*inputs), want, strict=True):
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("family", ["outputs", "consts", "wide"])
def test_families_run_as_the_interpreter(family: str) -> None:
    """Outputs kernels write (dynamic values), constants and arena slots, resolved by the
    launcher, give the interpreter's results."""
    mod = graph_families.FAMILIES[family](600, 0)
    ex = runtime.build(mod, cache=False)
    inputs = random_inputs(mod["main"], seed=2, special_values=False)
    for got, ref in zip(ex["main"](*inputs), ik.interpret(mod, *inputs), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
