"""The docs are executable: every python block of a page runs, in order, in one namespace,
and every output comment on a ``print`` line matches what that call printed
(``tests/docs_helpers.py`` says how comments are read).
"""

from __future__ import annotations

import pytest
from docs_helpers import blocks, check_page, mismatch, shown_output

PAGES = {"tir.md": 8, "lowering.md": 3, "validation.md": 5, "ops.md": 6, "viz.md": 2,
         "scale_out.md": 5}
PAGES["onnx.md"] = 3
PAGES["debugging.md"] = 7  # docs/onnx.md (the ONNX frontend); page -> at least this many blocks


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_page_has_python_blocks(page: str) -> None:
    assert len(blocks(page)) >= PAGES[page]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_block_runs_and_prints_what_it_says(page: str) -> None:
    _, problems = check_page(page, {"__name__": "docs_" + page.removesuffix(".md")})
    assert not problems, "\n".join(problems)


def test_output_comments_are_read_as_documented() -> None:
    assert shown_output("-> [0, 1, 4]") == "[0, 1, 4]"
    assert shown_output("True 14   # 9 columns + 5 pool arrays") == "True 14"
    assert mismatch("[ 1.  1. -1.]", "[ 1.   1. -1.]\n") is None
    assert mismatch("module 1 failed on ...not in the module", "module 1 failed on x: "
                    "entry functions ['main'] are not in the module") is None
    assert mismatch("b ... a", "a b") is not None  # fragments in order
    assert mismatch("True", "False") is not None


def test_a_wrong_output_comment_fails(tmp_path, monkeypatch) -> None:
    import docs_helpers

    (tmp_path / "page.md").write_text(
        "```python\nprint(1 + 1)   # 3\nprint(2)\nif False:\n    print(4)   # 4\n```\n",
        encoding="utf-8")
    monkeypatch.setattr(docs_helpers, "DOCS", tmp_path)
    printed, problems = check_page("page.md", {})
    assert printed == "2\n2\n"
    assert len(problems) == 2
    assert "'3' not in '2'" in problems[0]
    assert "never ran" in problems[1]
