"""docs/pass_infra.md: its Python blocks run, in order, in one fresh interpreter."""

from __future__ import annotations

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


def test_doc_python_blocks_run() -> None:
    code = "\n\n".join(python_blocks())
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-4000:]
    out = result.stdout
    assert 'transform.PassInfo(opt_level=1, name="CountExp", required=(), traceable=False)' in out
    assert "CountExp,fixpoint(DropPrivate{keep=[helper]},CountExp)" in out
    assert "pass 'BuggyRewrite' changed result 0 of 'main'" in out
    assert "pass execution 3 of 4 (BuggyRewrite)" in out
    assert "exp_nodes=" in out  # the timing table shows the statistic
