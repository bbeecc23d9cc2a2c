"""One exit-code rule for every ``irkernel`` command (issue 28 part 3).

0 success; 1 an error in the input or the run; 2 a usage error. Each command
is run with each kind of bad input that applies to it, and must exit with the
code of its kind and print exactly one line ``irkernel CMD: error: ...`` on
stderr, with no traceback. In-process (``main``), since every case stops before
a build; one case per code runs the console entry in a child process too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from irkernel.cli.errors import EXIT_STATUS
from irkernel.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """\
@main = graph attrs {global_symbol = "main"} {
  %x = param x : float32[2, 3]
  %twice = add %x, %x : float32[2, 3]
  return %twice
}
"""

#: (command, kind, argv, exit code). Files are made by the ``work`` fixture.
CASES = [
    *[(cmd, "missing file", [cmd, "missing.ir", *extra], 1) for cmd, extra in
      [("run", ["--random"]), ("opt", ["-p", "O2"]), ("print", []), ("verify", []),
       ("viz", [])]],
    ("import", "missing file", ["import", "missing.onnx"], 1),
    *[(cmd, "directory", [cmd, "adir", *extra], 1) for cmd, extra in
      [("run", ["--random"]), ("opt", ["-p", "O2"]), ("print", []), ("verify", []),
       ("viz", []), ("import", [])]],
    *[(cmd, "bad IR text", [cmd, "bad.ir", *extra], 1) for cmd, extra in
      [("run", ["--random"]), ("opt", ["-p", "O2"]), ("print", []), ("verify", []),
       ("viz", [])]],
    ("import", "bad ONNX file", ["import", "bad.onnx"], 1),
    ("run", "bad .npy", ["run", "prog.ir", "--inputs", "junk.npy"], 1),
    ("run", "missing .npy", ["run", "prog.ir", "--inputs", "nope.npy"], 1),
    ("run", "directory as .npy", ["run", "prog.ir", "--inputs", "adir"], 1),
    ("run", "wrong shape", ["run", "prog.ir", "--inputs", "wide.npy"], 1),
    ("run", "wrong input count", ["run", "prog.ir", "--inputs", "x.npy", "x.npy"], 1),
    ("run", "bad option value", ["run", "prog.ir", "--random", "--repeat", "0"], 2),
    ("run", "bad option value", ["run", "prog.ir", "--repeat", "often"], 2),
    ("run", "bad option value", ["run", "prog.ir", "--random", "--inputs", "x.npy"], 2),
    ("opt", "bad option value", ["opt", "prog.ir", "-p", "NoSuchPass"], 2),
    ("opt", "bad option value", ["opt", "prog.ir", "-p", "O2", "--jobs", "0"], 2),
    ("print", "bad option value", ["print", "prog.ir", "--shape", "x=two"], 2),
    ("import", "bad option value", ["import", "bad.onnx", "--opset", "0"], 2),
    ("import", "bad option value", ["import", "bad.onnx", "--shape", "=1"], 2),
    ("viz", "bad option value", ["viz", "prog.ir", "--max-nodes", "0"], 2),
    ("viz", "bad option value", ["viz", "prog.ir", "-p", "O2("], 2),
    ("viz", "bad option value", ["viz", "prog.ir", "-o", "out.gif"], 2),
    ("reduce", "missing file", ["reduce", "missing.ir", "--test", "true"], 1),
    ("reduce", "bad IR text", ["reduce", "bad.ir", "--test", "true"], 1),
    ("reduce", "not interesting", ["reduce", "prog.ir", "--test", "false"], 1),
    ("reduce", "bad option value", ["reduce", "prog.ir"], 2),
    ("reduce", "bad option value", ["reduce", "prog.ir", "--predicate", "no_such_mod:f"], 2),
    ("reduce", "bad option value", ["reduce", "prog.ir", "--test", "true", "--timeout", "0"],
     2),
    ("reduce", "bad option value", ["reduce", "prog.ir", "--test", "true", "-j", "0"], 2),
    ("reduce", "bad option value", ["reduce", "prog.ir", "--test", "true", "--predicate",
                                    "m:f"], 2),
    *[("tune", kind, ["tune", path], 1) for kind, path in
      [("missing file", "missing.ir"), ("directory", "adir"), ("bad IR text", "bad.ir"),
       ("bad ONNX file", "bad.onnx")]],
    ("tune", "bad option value", ["tune", "prog.ir", "--repeat", "0"], 2),
    ("tune", "bad option value", ["tune", "prog.ir", "--threads", "0"], 2),
    ("demo", "bad option value", ["demo", "--repeat", "0"], 2),
    ("demo", "bad option value", ["demo", "--pipeline", "NoSuchPass"], 2),
    ("demo", "bad option value", ["demo", "--nodes", "many"], 2),
    *[(cmd, "unknown option", [cmd, *args, "--bogus"], 2) for cmd, args in
      [("run", ["prog.ir"]), ("opt", ["prog.ir", "-p", "O2"]), ("print", ["prog.ir"]),
       ("verify", ["prog.ir"]), ("viz", ["prog.ir"]), ("import", ["bad.onnx"]), ("demo", []),
       ("reduce", ["prog.ir", "--test", "true"]), ("tune", ["prog.ir"])]],
    *[(cmd, "missing argument", [cmd], 2) for cmd in
      ("run", "opt", "print", "verify", "viz", "import", "reduce", "tune")],
]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.ir").write_text(PROGRAM)
    (tmp_path / "bad.ir").write_text(PROGRAM.replace("add %x, %x", "add %x, %nope"))
    (tmp_path / "bad.onnx").write_bytes(b"not a protobuf at all")
    (tmp_path / "adir").mkdir()
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY garbage")
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    np.save(tmp_path / "wide.npy", np.ones(4, np.float32))
    return tmp_path


def _main(argv: list[str]) -> int:
    try:
        return main(argv, out=open(os.devnull, "w"))  # noqa: SIM115  (closed at exit)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0)


def test_every_command_is_covered() -> None:
    (sub,) = [a for a in build_parser()._actions if a.dest == "command"]
    assert set(sub.choices) == {cmd for cmd, *_ in CASES}


@pytest.mark.parametrize(("command", "kind", "argv", "code"), CASES,
                         ids=[f"{c}-{k}-{n}" for n, (c, k, _, _) in enumerate(CASES)])
def test_exit_code_and_one_line(work: Path, capsys: pytest.CaptureFixture[str], command: str,
                                kind: str, argv: list[str], code: int) -> None:
    assert _main(argv) == code, capsys.readouterr().err
    err = capsys.readouterr().err
    assert re.fullmatch(rf"irkernel {command}: error: [^\n]+\n", err), (kind, err)
    assert "Traceback" not in err


def test_help_of_every_command_states_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("", "run", "opt", "print", "verify", "viz", "import", "demo",
                    "reduce", "tune"):
        assert _main([*command.split(), "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert " ".join(EXIT_STATUS.split()) in text, command


def test_readme_and_design_state_the_rule() -> None:
    for doc in ("README.md", "docs/design.md"):
        text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())
        assert "bad input exits with code 2" not in text, doc
        assert "0 success, 1 an error in the input or the run, 2 a usage error" in text, doc


@pytest.mark.parametrize(("argv", "code"), [(["print", "missing.ir"], 1),
                                            (["print", "prog.ir", "--bogus"], 2)])
def test_the_console_entry_exits_with_the_code(work: Path, argv: list[str], code: int) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "irkernel.cli", *argv], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == code
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("irkernel print: error: ")
