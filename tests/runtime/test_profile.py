"""Executable.profile: the per-kernel profiler (runtime/profile.py, runtime/kernel_cost.py).

No timing asserts beyond what holds on any machine: times are positive and every
launch lies inside its run, so the kernels' total is at most the runs' total.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from executor_helpers import add4, rowsum, scale4, tir_call

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.tir import script as T
from runtime.kernel_cost import ITERATE_MAX, launch_cost
from runtime.profile import KernelRow, Profile, ops_of, schedule_of


def _conv_relu_matmul(c: int = 32, hw: int = 32) -> ik.IRModule:
    """conv + bias + relu (one fused kernel at these sizes), reshape, matmul, and a
    small row sum (a shape-generic kernel)."""
    rng = np.random.default_rng(0)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, c, hw, hw), "float32")
    w = bb.const(rng.standard_normal((16, c, 3, 3)).astype(np.float32))
    b = bb.const(rng.standard_normal((1, 16, 1, 1)).astype(np.float32))
    y = bb.relu(bb.add(bb.conv(x, w, padding=[1, 1, 1, 1]), b))
    r = bb.reshape(y, shape=[16, hw * hw])
    m = bb.const(rng.standard_normal((hw * hw, 64)).astype(np.float32))
    z = bb.matmul(r, m)
    s = bb.sum(z, axis=1)
    return ik.IRModule({"main": bb.finish([z, s])})


@pytest.fixture(scope="module")
def model() -> tuple[ik.IRModule, runtime.Executable, np.ndarray]:
    mod = _conv_relu_matmul()
    x = np.random.default_rng(1).standard_normal((1, 32, 32, 32)).astype(np.float32)
    return mod, runtime.build(mod), x


def _launches(graph) -> list[str]:
    """Kernel names of one call's launches, call_func callees included (table order)."""
    table = graph.launch_table
    return [table.kernel_names[int(k)] for k in table.kernel_ids.tolist()]


def test_profiled_outputs_equal_unprofiled_and_interpret(model) -> None:
    mod, ex, x = model
    plain = ex["main"](x)
    profile = ex.profile(x, repeat=3)
    want = ik.interpret(mod, x)
    assert len(profile.outputs) == len(plain) == 2
    for got, same, ref in zip(profile.outputs, plain, want, strict=True):
        np.testing.assert_array_equal(got, same)      # the same kernels on the same data
        np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-3)


def test_every_kernel_has_a_row_with_positive_times(model) -> None:
    _, ex, x = model
    profile = ex.profile(x, repeat=4)
    launched = _launches(ex["main"])
    assert sorted(r.kernel for r in profile.rows) == sorted(set(launched))
    assert sum(r.calls for r in profile.rows) == len(launched)
    assert profile.repeat == 4 and len(profile.run_times) == 4
    assert all(r.time > 0 and r.total >= r.time for r in profile.rows)
    assert [r.time for r in profile.rows] == sorted((r.time for r in profile.rows),
                                                    reverse=True)
    assert sum(r.share for r in profile.rows) == pytest.approx(1.0)
    # every launch lies inside its run: the kernels' total is at most the runs' total
    assert 0 < sum(r.total for r in profile.rows) <= sum(profile.run_times)
    assert 0 < profile.kernel_time and 0 < profile.run_time
    assert all(isinstance(r, KernelRow) for r in profile.rows)


def test_rows_name_ops_schedules_and_costs(model) -> None:
    _, ex, x = model
    rows = {r.kernel: r for r in ex.profile(x, repeat=1).rows}
    conv = next(r for r in rows.values() if "conv" in r.ops)
    assert conv.ops == ("conv", "add", "relu")         # one fused kernel
    assert conv.schedule.startswith("conv_implicit_gemm[")
    matmul = next(r for r in rows.values() if r.ops == ("matmul",))
    assert matmul.schedule == "matmul_packed"            # its constant weight packed at build
    assert matmul.flops == 2 * 16 * 64 * 1024          # M * N * K multiply-adds
    assert matmul.bytes == 4 * (16 * 1024 + 1024 * 64 + 16 * 64)
    assert matmul.gflops is not None and matmul.gflops > 0
    assert matmul.gbps is not None and matmul.gbps > 0
    # a conv does at least its multiply-adds (the wide grid adds a few padding columns)
    assert conv.flops is not None and conv.flops >= 2 * 16 * 32 * 9 * 1024
    total = next(r for r in rows.values() if r.ops == ("sum",))
    assert total.schedule == "generic"                 # 16 x 64: a shape-generic kernel
    assert total.flops == 16 * 64                      # extents read from its meta operand


def test_render_lists_every_kernel(model) -> None:
    _, ex, x = model
    profile = ex.profile(x, repeat=2)
    text = profile.render()
    assert text.startswith("profile of main: 2 run(s)")
    for row in profile.rows:
        assert row.kernel in text
    assert "conv_implicit_gemm" in text and "total" in text.splitlines()[-1]


def test_chrome_trace_has_one_event_per_launch(model, tmp_path: Path) -> None:
    _, ex, x = model
    profile = ex.profile(x, repeat=3)
    path = tmp_path / "trace.json"
    profile.to_chrome_trace(path)
    events = json.loads(path.read_text())
    nodes = [e for e in events if e["cat"] == "Node"]
    runs = [e for e in events if e["cat"] == "Session"]
    assert len(runs) == 3
    assert len(nodes) == 3 * len(_launches(ex["main"])) == len(profile.events)
    assert all(e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0 for e in events)
    assert {e["name"] for e in nodes} == {r.kernel for r in profile.rows}
    assert [e["args"]["run"] for e in nodes] == sorted(e["args"]["run"] for e in nodes)


def test_unprofiled_call_makes_no_timer_call(model, monkeypatch: pytest.MonkeyPatch) -> None:
    _, ex, x = model
    want = ex["main"](x)

    def no_clock() -> int:
        raise AssertionError("the unprofiled path read a clock")

    monkeypatch.setattr(time, "perf_counter_ns", no_clock)
    monkeypatch.setattr(time, "perf_counter", no_clock)
    got = ex["main"](x)
    monkeypatch.undo()
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


_tir = tir_call


def test_call_func_callees_are_profiled_too() -> None:
    helper = ik.GraphBuilder("helper", private=True)
    h = helper.param("h", (4,), "float32")
    helper_fn = helper.finish([_tir(helper, "scale4", h)])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    m = bb.param("m", (2, 4), "float32")
    y = _tir(bb, "add4", x, bb.const(np.arange(4, dtype=np.float32)))
    y = bb.call_func("helper", _tir(bb, "scale4", y), dtype="float32", shape=(4,))
    z = _tir(bb, "add4", _tir(bb, "add4", y, x), x)
    mod = ik.IRModule({"main": bb.finish([z, _tir(bb, "rowsum", m, shape=(2,))]),
                       "helper": helper_fn, "add4": add4, "scale4": scale4, "rowsum": rowsum})
    with transform.PassContext(disabled_pass=["FuseOps", "FuseTIR"]):
        ex = runtime.build(mod)
    rng = np.random.default_rng(0)
    xs = (rng.standard_normal(4).astype(np.float32),
          rng.standard_normal((2, 4)).astype(np.float32))
    profile = ex.profile(*xs, repeat=2)
    for got, want in zip(profile.outputs, ik.interpret(mod, *xs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    rows = {r.kernel: r for r in profile.rows}
    assert {k: r.calls for k, r in rows.items()} == {"add4": 3, "scale4": 2, "rowsum": 1}
    assert {k: r.flops for k, r in rows.items()} == {"add4": 12, "scale4": 8, "rowsum": 8}
    assert {r.schedule for r in rows.values()} == {"user"}
    assert {e.function for e in profile.events} == {"main", "helper"}
    assert len(profile.events) == 2 * 6


def test_bad_repeat_and_unknown_function(model) -> None:
    _, ex, x = model
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="repeat must be an int >= 1"):
            ex.profile(x, repeat=bad)
    with pytest.raises(KeyError, match="no graph function 'nope'"):
        ex.profile(x, function="nope")
    with pytest.raises(TypeError):
        ex.profile(x.astype(np.float64))


def test_ops_of_parses_fused_names() -> None:
    def prim(op_name: str):
        return add4.with_attr("op_name", op_name)

    assert ops_of(prim("conv")) == ("conv",)
    assert ops_of(prim("fused_conv_add_relu")) == ("conv", "add", "relu")
    assert ops_of(prim("fused_max_pool_add")) == ("max_pool", "add")
    assert ops_of(prim("fused_conv_transpose_add_etc")) == ("conv_transpose", "add", "...")
    assert ops_of(add4) == ()
    assert schedule_of(add4) == "user"
    assert schedule_of(prim("add")) == "canonical"
    assert schedule_of(prim("add").with_attr("schedule", "matmul")) == "matmul"


def _branchy(rows: int):
    @T.prim_func(private=True)
    def branchy(a: T.Buffer((rows, 4), "float32"), c: T.Buffer((rows,), "float32")):
        for i in T.serial(rows):
            with T.If(i < 4):
                c[i] = T.fma(a[i, 0], a[i, 1], a[i, 2]) * 2.0
            with T.Else():
                c[i] = a[i, 3]

    return branchy


def test_launch_cost_counts_fma_twice_and_the_branch_taken() -> None:
    f32 = np.dtype(np.float32)
    cost = launch_cost(_branchy(8), [(f32, (8, 4)), (f32, (8,))], {})
    assert cost.flops == 4 * 3                      # fma (2) + mul (1) where i < 4
    assert cost.bytes == 4 * (32 + 8)
    # a loop longer than ITERATE_MAX is not walked per iteration: the larger branch
    rows = ITERATE_MAX + 1
    cost = launch_cost(_branchy(rows), [(f32, (rows, 4)), (f32, (rows,))], {})
    assert cost.flops == rows * 3


def test_profile_is_a_frozen_record(model) -> None:
    _, ex, x = model
    profile = ex.profile(x, repeat=1)
    assert isinstance(profile, Profile)
    with pytest.raises(AttributeError):
        profile.rows = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        profile.rows[0].time = 0.0  # type: ignore[misc]
