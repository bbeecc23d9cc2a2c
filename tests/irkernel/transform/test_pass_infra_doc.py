"""docs/pass_infra.md: its Python blocks run, in order, in one fresh interpreter, and print
what their output comments show."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "pass_infra.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_doc_has_the_tutorial_sections() -> None:
    text = DOC.read_text(encoding="utf-8")
    for heading in ("### Function form", "### Class form", "## Composing passes",
                    "## Instrumenting passes", "## Bisecting a broken pipeline"):
        assert heading in text
    assert len(python_blocks()) >= 15


def test_doc_python_blocks_run_and_print_what_they_say() -> None:
    """In a fresh interpreter (the page registers passes); output comments are checked as
    in tests/test_docs.py (tests/docs_helpers.py)."""
    result = subprocess.run([sys.executable, "-m", "docs_helpers", "pass_infra.md"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                [str(ROOT), str(ROOT / "tests")])})
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert not report["problems"], "\n".join(report["problems"])
    out = report["printed"]
    assert 'transform.PassInfo(opt_level=1, name="CountExp", required=(), traceable=False)' in out
    assert "CountExp,fixpoint(DropPrivate{keep=[helper]},CountExp)" in out
    assert "pass 'BuggyRewrite' changed result 0 of 'main'" in out
    assert "pass execution 3 of 4 (BuggyRewrite)" in out
    assert "exp_nodes=" in out  # the timing table shows the statistic
