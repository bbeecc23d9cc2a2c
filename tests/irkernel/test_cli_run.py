"""``irkernel run FILE --inputs ...`` end to end in a subprocess (build, run, errors)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik

ROOT = Path(__file__).resolve().parents[2]

GRAPH = """\
@main = graph attrs {global_symbol = "main"} {
  %0 = param x : float32[2, 3]
  %1 = param y : float32[3]
  %2 = add %0, %1 : float32[2, 3]
  %3 = exp %2 : float32[2, 3]
  %4 = sum %3 {axis = 1} : float32[2]
  return %4, %1
}
"""


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One kernel cache for the module's subprocesses (the first one compiles)."""
    return tmp_path_factory.mktemp("cli-run-cache")


def _run(tmp_path: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IRKERNEL_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "irkernel.cli", "run", *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "g.ir").write_text(GRAPH)
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((2, 3)).astype(np.float32))
    np.save(tmp_path / "y.npy", rng.standard_normal(3).astype(np.float32))
    np.save(tmp_path / "y64.npy", np.ones(3))
    np.save(tmp_path / "y4.npy", np.ones(4, np.float32))
    return {p.stem: p for p in tmp_path.iterdir()}


def test_run_end_to_end(tmp_path: Path, files: dict[str, Path], cache_dir: Path) -> None:
    out = tmp_path / "out.npz"
    proc = _run(tmp_path, cache_dir, "g.ir", "--inputs", "x.npy", "y.npy", "-o", str(out),
                "--time-passes", "-O", "3")
    assert proc.returncode == 0, proc.stderr
    assert "output 0: float32[2]" in proc.stdout
    assert "output 1: float32[3]" in proc.stdout
    assert "memory plan:" in proc.stdout
    assert "GraphLowering" in proc.stderr
    assert "LegalizeOps" in proc.stderr
    x, y = np.load(files["x"]), np.load(files["y"])
    want = ik.interpret(ik.parse(GRAPH), x, y)
    with np.load(out) as got:
        np.testing.assert_allclose(got["output0"], want[0], rtol=1e-6)
        np.testing.assert_array_equal(got["output1"], want[1])


@pytest.mark.parametrize(("args", "message"), [
    (("missing.ir", "--inputs", "x.npy", "y.npy"), "missing.ir: no such file"),
    (("g.ir", "--inputs", "x.npy", "nope.npy"),
     "cannot read input 'nope.npy' (parameter 1, 'y'): no such file"),
    (("g.ir", "--inputs", "x.npy"), "g.ir: main takes 2 inputs (x, y), got 1"),
    (("g.ir", "--inputs", "x.npy", "y64.npy"),
     "'y64.npy' (parameter 1, 'y'): holds float64[3], but the parameter is float32[3]"),
    (("g.ir", "--inputs", "x.npy", "y4.npy"),
     "'y4.npy' (parameter 1, 'y'): holds float32[4], but the parameter is float32[3]"),
    (("g.ir", "--entry", "other"), "no graph function 'other'"),
])
def test_run_errors_exit_1_without_traceback(tmp_path: Path, files: dict[str, Path],
                                             cache_dir: Path, args: tuple[str, ...],
                                             message: str) -> None:
    proc = _run(tmp_path, cache_dir, *args)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1, proc.stderr  # one line
    assert proc.stderr.startswith("irkernel run: error:")
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_run_is_in_the_help() -> None:
    from irkernel.cli.main import build_parser

    assert "run" in build_parser().format_help()


def test_run_profile_prints_the_kernel_table(tmp_path: Path, files: dict[str, Path],
                                             cache_dir: Path) -> None:
    trace = tmp_path / "trace.json"
    proc = _run(tmp_path, cache_dir, "g.ir", "--random", "--repeat", "3", "--profile",
                "--profile-json", str(trace))
    assert proc.returncode == 0, proc.stderr
    assert "profile of main: 3 run(s)" in proc.stdout
    assert "ms/run" in proc.stdout and "GFLOP/s" in proc.stdout
    lines = proc.stdout.splitlines()
    table = lines[next(k for k, line in enumerate(lines) if "ms/run" in line) + 1:]
    assert any("(add)" in line or "(add, exp" in line or "add" in line for line in table)
    events = json.loads(trace.read_text())
    assert sum(e["cat"] == "Session" for e in events) == 3
    assert sum(e["cat"] == "Node" for e in events) % 3 == 0


def test_run_profile_json_to_a_missing_directory_exits_1(tmp_path: Path,
                                                         files: dict[str, Path],
                                                         cache_dir: Path) -> None:
    proc = _run(tmp_path, cache_dir, "g.ir", "--random", "--profile-json",
                str(tmp_path / "no" / "trace.json"))
    assert proc.returncode == 1
    assert "cannot write the profile" in proc.stderr
