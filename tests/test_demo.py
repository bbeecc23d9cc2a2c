"""``irkernel demo`` end to end at a small size: all three parts run and check themselves."""

from __future__ import annotations

import io
import re

from irkernel.cli import main


def test_demo_optimizes_compiles_verifies_and_points_to_the_docs() -> None:
    out = io.StringIO()
    # 8192 elements: above runtime.generic_max_elements (4096), so the chain is one fused kernel
    code = main(["demo", "--nodes", "20000", "--chain-elements", "8192", "--hidden", "64",
                 "--repeat", "2", "--pause", "0"], out=out)
    text = out.getvalue()
    assert code == 0
    assert "1. Optimize a generated 20,000-node graph" in text
    for name in ("FoldConstant", "SimplifyArith", "EliminateCommonSubexpr",
                 "DeadCodeElimination"):
        assert re.search(rf"^  {name} +[0-9.]+ +[0-9.]+ +[0-9,]+ +[0-9,]+$", text, re.M), name
    # part 2 asserts its results against the interpreter and NumPy before printing this
    assert text.count("matches the interpreter and NumPy") == 2
    assert re.search(r"Chain of 8 elementwise ops.*?kernels launched per call \(after fusion\) +1",
                     text, re.S)
    assert "speed vs NumPy" in text
    # each workload: one row per thread count (1, 2 and the pool's default), both medians;
    # the MLP's NumPy (BLAS) runs at irkernel's count, the chain's elementwise NumPy at 1
    rows = re.findall(r"^  (\d+) / (\d+|\?) +([0-9.]+) +([0-9.]+) +([0-9.]+)x$", text, re.M)
    assert rows, text
    assert len(rows) % 2 == 0
    mlp, chain = rows[: len(rows) // 2], rows[len(rows) // 2:]
    assert mlp[0][0] == chain[0][0] == "1"
    assert all(ours == numpy for ours, numpy, *_ in mlp), mlp
    assert all(numpy == "1" for _, numpy, *_ in chain), chain
    assert re.search(r"NumPy's BLAS:\s+\d+\s+threads\s+by\s+default", text), text
    assert "unknown" not in text
    assert "blocks of their own" in text
    assert "3. Read more" in text
    assert "docs/lowering.md" in text


def test_demo_times_each_side_in_blocks_with_the_shared_helper(monkeypatch) -> None:
    """The demo's figures come from irkernel.cli.workloads.speed_rows (what bench_e2e
    records), with BLAS limited to the row's thread count for the MLP."""
    from irkernel.cli import demo, workloads
    from irkernel.testing import timing

    calls: list[tuple[str, int, bool]] = []
    real = workloads.speed_rows

    def spy(run, inputs, reference, threads, uses_blas, **kw):
        calls.append((reference.__name__, tuple(threads), uses_blas))
        return real(run, inputs, reference, threads, uses_blas, **kw)

    blocks: list[str] = []
    real_block = timing.time_block

    def block_spy(fn, repeat, warmups=2):
        blocks.append(fn.__code__.co_name)
        return real_block(fn, repeat, warmups)

    monkeypatch.setattr(demo, "speed_rows", spy)
    monkeypatch.setattr(timing, "time_block", block_spy)
    out = io.StringIO()
    assert main(["demo", "--nodes", "2000", "--chain-elements", "1024", "--hidden", "32",
                 "--repeat", "1", "--pause", "0"], out=out) == 0
    assert [c[0] for c in calls] == ["mlp_numpy", "chain_numpy"]
    assert all(c[1][0] == 1 for c in calls)
    assert [c[2] for c in calls] == [True, False]
    # per thread count: ours, ref, ref, ours (each a block of its own)
    assert len(blocks) == 4 * sum(len(c[1]) for c in calls)


def test_threadpoolctl_is_a_core_dependency() -> None:
    """A plain ``pip install .`` must be able to read and limit NumPy's BLAS threads, or the
    demo's MLP rows would compare irkernel at 1 thread with NumPy at all of them."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    core = re.search(r"^dependencies = \[(.*?)\]", text, re.M | re.S)
    assert core, "no [project] dependencies in pyproject.toml"
    assert re.search(r'"threadpoolctl[<>=!~ ]', core.group(1)), core.group(1)
