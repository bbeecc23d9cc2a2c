"""``runtime.explain``: a reason for every producer-consumer edge, agreeing with FuseOps."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
import passes
import runtime
from irkernel import testing, transform
from irkernel.cli.main import main
from irkernel.ir.operands import operand_csr
from passes import fuse_ops
from runtime.explain import explain_function

ROOT = Path(__file__).resolve().parents[2]


def _fused_by_fuse_ops(mod: ik.IRModule, name: str, max_group_size: int) -> int:
    with transform.PassContext() as ctx:
        passes.FuseOps(max_group_size)(mod)
    return int(ctx.statistics.get("FuseOps", {}).get("nodes_fused", 0))


def _check_against_fuse_ops(mod: ik.IRModule, name: str, max_group_size: int) -> np.ndarray:
    func = mod[name]
    fe = explain_function(func, name, mod, max_group_size)
    ptr, ids = operand_csr(func)
    assert len(fe.why) == len(fe.reason) == len(ids)  # every edge has a verdict
    assert np.array_equal(fe.producer, ids) and np.all(fe.reason < len(fuse_ops.REASON_NAMES))
    root, size = fuse_ops.fusion_groups(func, mod, max_group_size)
    together = (root[fe.producer] == root[fe.consumer]) & (size[root[fe.consumer]] >= 2)
    assert np.array_equal(fe.fused, together)
    # FuseOps drops every fused producer from the caller: the count it reports
    assert len(np.unique(fe.producer[fe.fused])) == _fused_by_fuse_ops(mod, name,
                                                                       max_group_size)
    return fe.reason


@pytest.mark.parametrize("max_group_size", [2, 64])
def test_every_edge_of_random_graphs_is_fused_or_has_a_reason(max_group_size: int) -> None:
    seen: set[int] = set()
    for seed in range(8):
        func = testing.random_function(150, seed=seed, shapes="small", n_outputs=2)
        mod = passes.LegalizeOps()(ik.IRModule({"main": func}))
        seen |= set(_check_against_fuse_ops(mod, "main", max_group_size).tolist())
    assert {fuse_ops.FUSED, fuse_ops.PRODUCER_OPAQUE, fuse_ops.SEVERAL_CONSUMERS} <= seen
    if max_group_size == 2:
        assert fuse_ops.GROUP_SIZE in seen


def test_resnet18_every_edge_is_accounted_for() -> None:
    pytest.importorskip("onnx")
    sys.path.insert(0, str(ROOT / "tests" / "frontend"))
    from model_weights import load

    from irkernel.frontend.onnx import from_onnx

    report = runtime.explain(from_onnx(load("resnet18")))
    fe = report.functions["main"]
    reasons = _check_against_fuse_ops(report.module, "main", fuse_ops.MAX_GROUP_SIZE)
    assert fe.fused.sum() > 10 and len(set(reasons.tolist())) >= 4
    text = report.render()
    assert text.count("\n  %") == len(fe.why) and "fused into the group of" in text


def test_a_layout_change_after_a_matmul_is_named() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (64, 64), "float32")
    m = bb.call("matmul", x, x)
    t = bb.call("permute_dims", m, axes=(1, 0))
    mod = ik.IRModule({"main": bb.finish([bb.call("exp", t)])})
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        fe = runtime.explain(mod).functions["main"]
    (k,) = np.nonzero(fe.reason == fuse_ops.HEAVY_EPILOGUE_INJECTIVE)[0]
    assert "layout change" in fe.why[k]


def test_viz_explain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    func = testing.random_function(40, seed=1, shapes="small")
    (tmp_path / "g.ir").write_text(ik.IRModule({"main": func}).script())
    assert main(["viz", str(tmp_path / "g.ir"), "--explain"]) == 0
    assert "edges" in capsys.readouterr().out
    dot = tmp_path / "g.dot"
    assert main(["viz", str(tmp_path / "g.ir"), "--explain", "-o", str(dot)]) == 0
    assert "tooltip=" in dot.read_text()
    assert main(["viz", str(tmp_path / "g.ir"), "--explain", "-p", "O2"]) == 2
