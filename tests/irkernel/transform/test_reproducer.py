"""Crash and miscompile reproducers: ``PassContext(reproducer_dir=...)``, ``irkernel opt
--reproducer DIR`` and ``--run-reproducer FILE`` (replayed in a fresh process too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import irkernel as ik
import passes
from irkernel import instrument, transform
from irkernel.cli.main import main
from irkernel.testing.miscompile import buggy_rewrite, planted_module
from irkernel.transform.reproducer import HEADER, read_reproducer

ROOT = Path(__file__).resolve().parents[3]


def _always_fails() -> transform.Pass:
    def fail(mod: ik.IRModule, ctx: transform.PassContext) -> ik.IRModule:
        raise RuntimeError("the planted crash")

    return transform.module_pass(fail, opt_level=0, name="ReproAlwaysFails")


def _miscompiles() -> transform.Pass:
    return transform.function_pass(lambda f, m, c: buggy_rewrite(f), opt_level=0,
                                   name="ReproMiscompiles")


transform.register_pass("ReproAlwaysFails", _always_fails)
transform.register_pass("ReproMiscompiles", _miscompiles)


def _bad_fusion_module() -> ik.IRModule:
    """After LegalizeOps, with a PrimFunc whose op_pattern FuseOps rejects (an IRError)."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    f = bb.finish([bb.call("add", bb.call("exp", x), x)])
    mod = passes.LegalizeOps()(ik.IRModule({"main": f}))
    return mod.with_functions({"add_float32_4": mod["add_float32_4"].with_attr("op_pattern",
                                                                              99)})


def _replay_in_child(path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "irkernel.cli", "opt", "--run-reproducer",
                           path], env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_a_crashing_pass_writes_a_reproducer_that_replays_in_a_fresh_process(
        tmp_path: Path) -> None:
    mod = _bad_fusion_module()
    with pytest.raises(ik.IRError, match="op_pattern 99") as info, \
            transform.PassContext(opt_level=3, reproducer_dir=tmp_path,
                                  config={"irkernel.fixpoint_max_iterations": 4}):
        transform.parse_pipeline("FuseOps,FuseTIR")(mod)
    path = info.value.irkernel_reproducer
    assert [str(p) for p in tmp_path.iterdir()] == [path]
    rep = read_reproducer(Path(path).read_text())
    assert (rep.pass_text, rep.pipeline, rep.opt_level) == ("FuseOps", "FuseOps,FuseTIR", 3)
    assert rep.config == {"irkernel.fixpoint_max_iterations": 4}
    assert ik.structural_equal(rep.module, mod)
    done = _replay_in_child(path)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert f"replayed FuseOps: IRError: {info.value}" in done.stderr


def test_a_failed_semantic_check_writes_a_reproducer(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    mod = planted_module(3000, seed=0)
    with pytest.raises(Exception, match="ReproMiscompiles") as info, transform.PassContext(
            instruments=[instrument.CheckSemantics()], reproducer_dir=tmp_path):
        transform.parse_pipeline("FoldConstant,ReproMiscompiles")(mod)
    rep = read_reproducer(Path(info.value.irkernel_reproducer).read_text())
    assert rep.instruments == ("CheckSemantics",) and rep.pass_text == "ReproMiscompiles"
    assert main(["opt", "--run-reproducer", info.value.irkernel_reproducer]) == 1
    err = capsys.readouterr().err
    assert f"{type(info.value).__name__}: {' '.join(str(info.value).split())}" in err


def test_opt_reproducer_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "prog.ir").write_text(planted_module(100, seed=0).script())
    out = tmp_path / "repros"
    assert main(["opt", str(tmp_path / "prog.ir"), "-p", "FoldConstant,ReproAlwaysFails",
                 "--reproducer", str(out)]) == 1
    err = capsys.readouterr().err
    (written,) = out.iterdir()
    assert f"(reproducer: {written})" in err and "the planted crash" in err
    assert Path(written).read_text().startswith(HEADER)
    assert main(["opt", "--run-reproducer", str(written)]) == 1
    assert "RuntimeError: the planted crash" in capsys.readouterr().err
    assert main(["opt", "--run-reproducer", str(written), "-p", "O2"]) == 2
    (tmp_path / "plain.ir").write_text("@main = graph {\n}\n")
    assert main(["opt", "--run-reproducer", str(tmp_path / "plain.ir")]) == 1
    assert "not an irkernel reproducer" in capsys.readouterr().err


def test_a_build_failure_writes_a_reproducer(tmp_path: Path) -> None:
    import runtime

    with pytest.raises(ik.IRError, match="op_pattern 99") as info, \
            transform.PassContext(reproducer_dir=tmp_path):
        runtime.build(_bad_fusion_module(), opt_level=3)
    rep = read_reproducer(Path(info.value.irkernel_reproducer).read_text())
    assert rep.pass_text == "FuseOps" and rep.opt_level == 3
    assert "GraphLowering" in rep.pipeline or "FuseOps" in rep.pipeline


def test_reproducer_dir_must_be_a_path() -> None:
    with pytest.raises(TypeError, match="reproducer_dir"):
        transform.PassContext(reproducer_dir=3)  # type: ignore[arg-type]
