"""Bad input files to the ``irkernel`` command: one line naming the file, exit 1; usage exit 2.

Issue 14's reproducers: ``--inputs empty.npy`` was an EOFError traceback, and a
144-byte ``.npy`` whose header claims (100000, 100000) a 37 GiB MemoryError.
Inputs are rejected before the program is built, so these run in-process.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest

from irkernel.cli import main
from irkernel.cli.errors import CLIError
from irkernel.cli.npy import InputError, read_npy

PROGRAM = """\
@main = graph attrs {global_symbol = "main"} {
  %x = param x : float32[2, 3]
  %y = param y : float32[3]
  %z = add %x, %y : float32[2, 3]
  return %z
}
"""


def _header(shape: tuple[int, ...], descr: str = "<f4", version: tuple[int, int] = (1, 0)
            ) -> bytes:
    buf = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    if version == (1, 0):
        np.lib.format.write_array_header_1_0(buf, header)
    else:
        np.lib.format.write_array_header_2_0(buf, header)
    return buf.getvalue()


def _good(tmp_path: Path) -> bytes:
    np.save(tmp_path / "y.npy", np.arange(3, dtype=np.float32))
    return (tmp_path / "y.npy").read_bytes()


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.ir").write_text(PROGRAM)
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    good = _good(tmp_path)
    files = {
        "empty.npy": b"",
        "huge.npy": _header((100000, 100000)) + bytes(16),  # 144 bytes, claims 37 GiB
        "truncated.npy": good[:-3],
        "longer.npy": good + b"\0\0\0\0",
        "magic.npy": b"\x93NUMPX" + good[6:],
        "header.npy": good[:10] + b"{'descr': '<f4', 'shape': (3,)" + good[40:],
        "f64.npy": _header((3,), "<f8") + bytes(24),
        "shape.npy": _header((4,)) + bytes(16),
        "objects.npy": _header((3,), "|O") + bytes(24),
        "v3.npy": b"\x93NUMPY\x03\x00" + good[8:],
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "folder.npy").mkdir()
    os.mkfifo(tmp_path / "fifo.npy")
    return tmp_path


@pytest.mark.parametrize(("name", "problem"), [
    ("empty.npy", "is empty, not a .npy file"),
    ("huge.npy", "is truncated: its header describes float32[100000, 100000] "
                 "(40000000000 bytes of data), the file holds 16"),
    ("truncated.npy", "is truncated: its header describes float32[3] (12 bytes of data), "
                      "the file holds 9"),
    ("longer.npy", "is longer than its header says"),
    ("magic.npy", "is not a .npy file (bad magic string)"),
    ("header.npy", "has a malformed .npy header"),
    ("f64.npy", "holds float64[3], but the parameter is float32[3] (wrong dtype)"),
    ("shape.npy", "holds float32[4], but the parameter is float32[3] (wrong shape)"),
    ("objects.npy", "holds Python objects"),
    ("v3.npy", ".npy format version 3.0 is not supported"),
    ("folder.npy", "is a directory, not a .npy file"),
    ("fifo.npy", "is not a regular file, not a .npy file"),
    ("missing.npy", "no such file"),
])
def test_bad_npy_inputs_are_one_line_and_exit_1(work: Path, name: str, problem: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "prog.ir", "--inputs", "x.npy", name], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 1
    assert err == (f"irkernel run: error: cannot read input {name!r} (parameter 1, 'y'): "
                   f"{problem}" + err[err.index(problem) + len(problem):])
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_unreadable_input(work: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    real_open = os.open

    def deny(path: object, *args: object, **kwargs: object) -> int:
        if str(path).endswith("secret.npy"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    (work / "secret.npy").write_bytes(_good(work))
    monkeypatch.setattr(os, "open", deny)  # root reads anything: deny it here instead
    assert main(["run", "prog.ir", "--inputs", "x.npy", "secret.npy"], out=io.StringIO()) == 1
    assert "cannot read input 'secret.npy' (parameter 1, 'y'): permission denied" in \
        capsys.readouterr().err


def test_read_npy_accepts_every_layout_numpy_writes(tmp_path: Path) -> None:
    want = np.arange(6, dtype=np.float32).reshape(2, 3)
    cases = {"c.npy": want, "f.npy": np.asfortranarray(want), "be.npy": want.astype(">f4")}
    for name, arr in cases.items():
        np.save(tmp_path / name, arr)
        got = read_npy(str(tmp_path / name), (np.dtype(np.float32), (2, 3)))
        assert got.dtype == np.float32, name
        assert got.flags.c_contiguous, name
        np.testing.assert_array_equal(got, want)
    (tmp_path / "v2.npy").write_bytes(_header((2, 3), version=(2, 0)) + want.tobytes())
    np.testing.assert_array_equal(read_npy(str(tmp_path / "v2.npy")), want)
    with pytest.raises(InputError, match="wrong dtype"):
        read_npy(str(tmp_path / "c.npy"), (np.dtype(np.int32), (2, 3)))


@pytest.mark.parametrize(("argv", "message"), [
    (["print", "missing.ir"], "missing.ir: no such file"),
    (["print", "folder.npy"], "folder.npy: is a directory"),
    (["verify", "fifo.npy"], "fifo.npy: is not a regular file"),
    (["print", "binary.ir"], "binary.ir: not UTF-8 text (byte 0 is 0xff)"),
    (["verify", "broken.ir"], "broken.ir:2:27: expected ',' or ']' in type"),
    (["verify", "nosym.ir"], "nosym.ir: main: global_symbol is None"),
    (["opt", "nosym.ir", "-p", "O2"], "nosym.ir: FoldConstant: main: global_symbol is None"),
    (["opt", "private.ir", "-p", "O2"], "private.ir: DeadCodeElimination: function 'main' is "
                                        "private"),
    (["run", "prog.ir", "--inputs", "x.npy"], "prog.ir: main takes 2 inputs (x, y), got 1"),
])
def test_bad_ir_files_are_one_line_and_exit_1(work: Path, argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (work / "binary.ir").write_bytes(b"\xff\xfe@main")
    (work / "broken.ir").write_text("@main = graph {\n  %x = param x : float32[4\n")
    (work / "nosym.ir").write_text(PROGRAM.replace('"main"', "none"))
    (work / "private.ir").write_text(PROGRAM.replace(' attrs {global_symbol = "main"}', ""))
    assert main(argv, out=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"irkernel {argv[0]}: error: {message}"), err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_usage_errors_exit_2_and_debug_shows_the_traceback(
        work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["nosuchcommand"], ["run"], ["opt", "prog.ir"]):
        try:  # argparse exits; a command's own usage check returns the code
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        assert code == 2, argv
    capsys.readouterr()
    with pytest.raises(CLIError, match="is empty"):  # --debug: the exception itself
        main(["--debug", "run", "prog.ir", "--inputs", "x.npy", "empty.npy"])
    with pytest.raises(CLIError, match="is empty"):
        main(["run", "prog.ir", "--inputs", "x.npy", "empty.npy", "--debug"])
