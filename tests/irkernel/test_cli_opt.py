"""``irkernel opt DIR_OR_FILES... -p PIPELINE --jobs N``: many files, directories, errors.

(``--scheduler`` is tested with the Dask cluster in
tests/irkernel/transform/test_map_modules_dask.py.)
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import irkernel as ik
from irkernel import testing
from irkernel.cli import main


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """src/a.ir, src/sub/b.ir, src/sub/c.ir: random modules with helpers."""
    root = tmp_path / "src"
    (root / "sub").mkdir(parents=True)
    for seed, rel in enumerate(["a.ir", "sub/b.ir", "sub/c.ir"]):
        mod = testing.random_module(300, seed=seed, call_funcs=True)
        (root / rel).write_text(mod.script())
    return root


def _optimized(path: Path, pipeline: str = "O2") -> ik.IRModule:
    return ik.transform.parse_pipeline(pipeline)(ik.parse(path.read_text()))


def test_directory_on_two_processes_matches_one_file_at_a_time(tree, tmp_path, capsys):
    out_dir = tmp_path / "out"
    code, _ = run_cli("opt", str(tree), "-p", "O2", "--jobs", "2", "-o", str(out_dir),
                      "--time-passes")
    assert code == 0
    written = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*.ir"))
    assert written == ["a.ir", "sub/b.ir", "sub/c.ir"]
    for rel in written:
        assert ik.structural_equal(ik.parse((out_dir / rel).read_text()),
                                   _optimized(tree / rel))
    timing = capsys.readouterr().err
    fold = next(line for line in timing.splitlines() if line.strip().startswith("FoldConstant"))
    assert fold.split()[1] == "3"  # one call per file, merged from the workers


def test_several_files_serially(tree, tmp_path):
    out_dir = tmp_path / "out"
    files = [str(tree / "a.ir"), str(tree / "sub" / "b.ir")]
    code, _ = run_cli("opt", *files, "-p", "FoldConstant,DeadCodeElimination", "-o",
                      str(out_dir))
    assert code == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["a.ir", "b.ir"]
    assert ik.structural_equal(ik.parse((out_dir / "b.ir").read_text()),
                               _optimized(tree / "sub" / "b.ir",
                                          "FoldConstant,DeadCodeElimination"))


def test_failing_files_are_named_and_the_others_written(tree, tmp_path, capsys):
    (tree / "broken.ir").write_text("@main = graph {\n  %x = nope\n}\n")
    nomain = ik.IRModule({"other": testing.random_function(30, seed=1).with_attr("global_symbol", "other")})
    (tree / "nomain.ir").write_text(nomain.script())
    out_dir = tmp_path / "out"
    code, _ = run_cli("opt", str(tree), "-p",
                      "FoldConstant,DeadCodeElimination{entry_functions=[main]}",
                      "-o", str(out_dir))
    assert code == 1
    err = capsys.readouterr().err
    assert f"irkernel opt: error: {tree / 'broken.ir'}:" in err
    assert f"irkernel opt: error: {tree / 'nomain.ir'}: ValueError:" in err
    assert "Traceback" not in err
    assert (out_dir / "a.ir").exists()
    assert not (out_dir / "nomain.ir").exists()


@pytest.mark.parametrize(("extra", "message"), [
    ((), "several inputs need -o DIR"),
    (("-o", "x", "--jobs", "2", "--print-changed"), "--print-changed prints from this process"),
])
def test_usage_errors(tree, capsys, extra, message):
    code, _ = run_cli("opt", str(tree), "-p", "O2", *extra)
    assert code == 2
    assert message in capsys.readouterr().err


def test_missing_input_and_name_collision(tree, tmp_path, capsys):
    code, _ = run_cli("opt", str(tmp_path / "nope.ir"), "-p", "O2")
    assert code == 1  # an error in the input, not in the command line
    assert "no such file or directory" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.ir").write_text((tree / "a.ir").read_text())
    code, _ = run_cli("opt", str(tree / "a.ir"), str(other / "a.ir"), "-p", "O2", "-o",
                      str(tmp_path / "out"))
    assert code == 2
    assert "would both be written to a.ir" in capsys.readouterr().err


def test_bad_jobs_is_an_argparse_error(tree, capsys):
    with pytest.raises(SystemExit):
        run_cli("opt", str(tree / "a.ir"), "-p", "O2", "--jobs", "0")
    assert "must be >= 1" in capsys.readouterr().err
