"""The docs are executable: every python block of a page runs, in order, in one namespace.

A ``print(err)`` line whose comment shows the message (``# axpy: argument ...``)
also checks the message: each fragment of the comment between ``...`` must
appear in what the block printed, so the page can not drift from the errors.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = {"tir.md": 8, "lowering.md": 3, "validation.md": 5, "ops.md": 6, "viz.md": 2,
         "scale_out.md": 5}
PAGES["onnx.md"] = 2  # docs/onnx.md (the ONNX frontend); page -> at least this many blocks
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_SHOWN = re.compile(r"^\s*print\(err\)\s*#\s*(.+)$", re.M)


def _blocks(page: str) -> list[str]:
    return _BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_page_has_python_blocks(page: str) -> None:
    assert len(_blocks(page)) >= PAGES[page]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_block_runs_and_prints_what_it_says(page: str) -> None:
    namespace: dict[str, object] = {"__name__": "docs_" + page.removesuffix(".md")}
    for number, code in enumerate(_blocks(page), start=1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                exec(compile(code, f"docs/{page} block {number}", "exec", dont_inherit=True),
                     namespace)
            except Exception as exc:
                pytest.fail(f"docs/{page} block {number} raised {type(exc).__name__}: {exc}")
        printed = out.getvalue()
        for shown in _SHOWN.findall(code):
            for fragment in (f.strip() for f in shown.split("...")):
                assert fragment in printed, (
                    f"docs/{page} block {number}: {fragment!r} not in the output:\n{printed}")
