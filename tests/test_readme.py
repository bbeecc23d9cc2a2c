"""The README's set-up commands are the ones CI runs, and its example runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_starts_with_the_two_setup_commands() -> None:
    block = re.search(r"```bash\n(.*?)```", _readme(), re.S)
    assert block is not None and _readme().index("```bash") < 40
    demo, tests = block.group(1).strip().splitlines()
    assert demo.endswith("irkernel demo")
    assert "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines(), "CI must run the README's test command verbatim"


def test_readme_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", _readme(), re.S)
    assert len(blocks) >= 3
    result = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "return" in result.stdout and "10." in result.stdout
