"""Run the python blocks of a docs page and check the output their comments show.

A comment on a ``print(...)`` line is the output that call prints
(``print(len(xs))   # 3``), optionally after ``->``; a second ``#`` starts an
explanation that is not output (``# True 14   # 9 columns + 5 pool arrays``).
Each fragment of the shown output between ``...`` must appear in what that one
call printed, in order, with runs of white space compared as one space. A
print line with a comment that never ran is an error too (the doc claims an
output nobody saw). A comment that only describes a print goes on its own line.

Used in-process by ``tests/test_docs.py`` and in a fresh interpreter by
``tests/irkernel/transform/test_pass_infra_doc.py`` (``python -m docs_helpers PAGE``).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import sys
import tokenize
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1] / "docs"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_HOOK = "__docs_print__"


def blocks(page: str) -> list[str]:
    """The ```python blocks of ``docs/<page>``, in order."""
    return _BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))


def _trailing_comments(code: str) -> dict[int, str]:
    """Line number -> the comment that follows code on that line (leading ``#`` removed)."""
    comments: dict[int, str] = {}
    code_lines: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENDMARKER}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT:
            if tok.start[0] in code_lines:
                comments[tok.start[0]] = tok.string[1:].strip()
        elif tok.type not in skip:
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    return comments


def shown_output(comment: str) -> str:
    """The output part of a print line's comment: before a second ``#``, after ``->``."""
    shown = comment.split("#", 1)[0].strip()
    return shown.removeprefix("->").strip()


class _PrintHook(ast.NodeTransformer):
    """Turns ``print(...)`` statements whose line has a comment into
    ``__docs_print__(line, ...)`` so that each call's output is captured on its own."""

    def __init__(self, comments: dict[int, str]) -> None:
        self.comments = comments
        self.lines: list[int] = []

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        call = node.value
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "print" and node.end_lineno in self.comments):
            self.lines.append(node.end_lineno)
            call.func = ast.copy_location(ast.Name(_HOOK, ast.Load()), call.func)
            call.args.insert(0, ast.Constant(node.end_lineno))
        return node


def _squash(text: str) -> str:
    return " ".join(text.split())


def mismatch(shown: str, printed: str) -> str | None:
    """Why ``printed`` does not show ``shown`` (fragments between ``...`` in order), or None."""
    text, at = _squash(printed), 0
    for fragment in (_squash(f) for f in shown.split("...")):
        found = text.find(fragment, at)
        if found < 0:
            rest = text[at:]
            return f"{fragment!r} not in {rest if len(rest) < 400 else rest[:400] + ' ...'!r}"
        at = found + len(fragment)
    return None


def check_page(page: str, namespace: dict[str, Any]) -> tuple[str, list[str]]:
    """Run every block of ``page`` in ``namespace``, in order; return what the blocks
    printed and one message per output comment the output does not match.

    An exception in a block propagates (with the block named in the traceback)."""
    printed = io.StringIO()
    problems: list[str] = []
    for number, code in enumerate(blocks(page), start=1):
        where = f"docs/{page} block {number}"
        comments = _trailing_comments(code)
        hook = _PrintHook(comments)
        tree = ast.fix_missing_locations(hook.visit(ast.parse(code)))
        calls: dict[int, list[str]] = {}

        def docs_print(line: int, *args: Any, **kwargs: Any) -> None:
            one = io.StringIO()
            print(*args, **{**kwargs, "file": one})
            calls.setdefault(line, []).append(one.getvalue())
            print(one.getvalue(), end="")

        namespace[_HOOK] = docs_print
        with contextlib.redirect_stdout(printed):
            exec(compile(tree, where, "exec", dont_inherit=True), namespace)
        for line in hook.lines:
            shown = shown_output(comments[line])
            if line not in calls:
                problems.append(f"{where} line {line}: the print showing {shown!r} never ran")
                continue
            why = mismatch(shown, "".join(calls[line]))
            if why:
                problems.append(f"{where} line {line}: {why}")
    return printed.getvalue(), problems


if __name__ == "__main__":
    # A fresh interpreter runs the page as a script would (named __main__), in a namespace
    # of its own so that the page's names do not shadow this module's.
    out, found = check_page(sys.argv[1], {"__name__": "__main__"})
    print(json.dumps({"printed": out, "problems": found}))
