"""The ``irkernel`` command: opt, print, verify and their error paths (demo: tests/test_demo.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import irkernel as ik
from irkernel.cli import main

PROGRAM = """\
@main = graph attrs {global_symbol = "main"} {
  %x = param x : float32[4]
  %one = const 1 : float32[]
  %two = const 2 : float32[]
  %three = add %one, %two : float32[]
  %y = add %x, %three : float32[4]
  %dead = multiply %x, %x : float32[4]
  %z = add %x, %three : float32[4]
  %w = multiply %y, %z : float32[4]
  return %w
}
"""


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog.ir"
    path.write_text(PROGRAM)
    return path


def test_opt_runs_a_textual_pipeline(program: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.ir"
    code, _ = run_cli("opt", str(program), "-p", "O2", "-o", str(target))
    assert code == 0
    optimized = ik.parse(target.read_text())
    func = optimized["main"]
    # folded 1 + 2, merged the two equal adds, dropped the dead multiply
    assert func.num_nodes == 4  # x, 3.0, x + 3, (x + 3) * (x + 3)
    x = __import__("numpy").arange(4, dtype="float32")
    expected = ik.interpret(ik.parse(PROGRAM), x)[0]
    assert (ik.interpret(optimized, x)[0] == expected).all()


def test_opt_prints_to_stdout_and_times_passes(program: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run_cli("opt", str(program), "-p", "FoldConstant,DeadCodeElimination",
                         "--time-passes")
    assert code == 0
    assert text.startswith("@main = graph")
    assert "FoldConstant" in capsys.readouterr().err


def test_print_normalizes_and_verify_reports(program: Path) -> None:
    code, text = run_cli("print", str(program))
    assert code == 0
    assert ik.structural_equal(ik.parse(text), ik.parse(PROGRAM))
    code, text = run_cli("verify", str(program))
    assert code == 0
    assert "OK (1 functions, 8 graph nodes)" in text


@pytest.mark.parametrize(("argv", "message"), [
    (("print", "missing.ir"), "missing.ir: no such file"),
    (("opt", "{prog}", "-p", "NoSuchPass"), "NoSuchPass"),
])
def test_errors_are_one_line_with_exit_code(argv: tuple[str, ...], message: str, program: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run_cli(*(a.format(prog=program) for a in argv))
    err = capsys.readouterr().err
    assert code != 0
    assert message in err
    assert "Traceback" not in err


def test_parse_error_names_line_and_column(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.ir"
    bad.write_text(PROGRAM.replace("add %x, %three", "add %x, %nope", 1))
    code, _ = run_cli("verify", str(bad))
    err = capsys.readouterr().err
    assert code != 0
    assert "6:16" in err
    assert "%nope" in err
