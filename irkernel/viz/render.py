"""Rendering through graphviz's ``dot`` program, and the self-contained HTML pages.

``dot`` comes from the operating system (Debian/Ubuntu: ``apt-get install
graphviz``; the ``graphviz`` package on PyPI only wraps the same program), so
:func:`render` looks it up on PATH and, when it is missing, raises
:class:`GraphvizNotFound` with a one-line message saying how to install it;
DOT text (:func:`~irkernel.viz.dot.to_dot`) needs nothing. HTML pages embed
the SVG inline with inline CSS: no script, no stylesheet or font to fetch.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule
from irkernel.viz.dot import (
    DEFAULT_MAX_NODES,
    HIGHLIGHT_FILL,
    PARAM_FILL,
    PATTERN_COLORS,
    Drawing,
    draw,
    hash_set,
)

FORMATS = ("dot", "gv", "svg", "png", "html")
INSTALL_HINT = ("install graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew "
                "install graphviz; conda: conda install graphviz), or write .dot")
RENDER_TIMEOUT_S = 300


class GraphvizError(OSError):
    """Graphviz's ``dot`` program failed or took too long (the message says which)."""


class GraphvizNotFound(GraphvizError):
    """Graphviz's ``dot`` program is not on PATH (the message says how to install it)."""


def render(dot_text: str, fmt: str = "svg") -> bytes:
    """``dot_text`` rendered by graphviz's ``dot`` as ``svg`` or ``png``.

    Raises
    ------
    GraphvizNotFound
        ``dot`` is not on PATH.
    ValueError
        Another format.
    GraphvizError
        ``dot`` failed (its first line of error output) or took over 5 minutes.
    """
    if fmt not in ("svg", "png"):
        raise ValueError(f"render: format must be 'svg' or 'png', got {fmt!r}")
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizNotFound(f"graphviz's 'dot' program is not on PATH: {INSTALL_HINT}")
    try:
        done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"),
                              capture_output=True, timeout=RENDER_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise GraphvizError(f"graphviz dot took over {RENDER_TIMEOUT_S} s (draw fewer nodes: "
                            "max_nodes)") from None
    if done.returncode:
        first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[0]
        raise GraphvizError(f"graphviz dot failed (exit {done.returncode}): {first}")
    return done.stdout


def _svg_fragment(dot_text: str) -> str:
    """The ``<svg>`` element of a rendering, without the XML prolog and doctype."""
    svg = render(dot_text, "svg").decode("utf-8")
    return svg[svg.index("<svg"):]


_CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 1em; color: #212121; }
h1 { font-size: 1.3em; margin: 0 0 0.3em 0; }
p { margin: 0.2em 0; }
.sides { display: flex; gap: 1em; align-items: flex-start; }
.side { flex: 1 1 0; min-width: 0; border: 1px solid #ccc; padding: 0.5em; overflow: auto; }
.side h2 { font-size: 1.05em; margin: 0 0 0.4em 0; }
.side svg { max-width: 100%; height: auto; }
.key { display: inline-block; padding: 0.1em 0.5em; margin-right: 0.3em; border: 1px solid #999;
       border-radius: 3px; font-size: 0.85em; }
"""


def _legend() -> str:
    keys = [("changed", HIGHLIGHT_FILL), ("parameter", PARAM_FILL)]
    keys += [(f"{ops.PATTERN_NAMES[p]} (fusion pattern)", color)
             for p, color in PATTERN_COLORS.items()]
    return "".join(f'<span class="key" style="background:{c}">{html.escape(k)}</span>'
                   for k, c in keys)


def _page(title: str, lines: Sequence[str], sides: Sequence[tuple[str, str]]) -> str:
    body = "".join(f'<div class="side"><h2>{html.escape(h)}</h2>{svg}</div>' for h, svg in sides)
    text = "".join(f"<p>{html.escape(line)}</p>" for line in lines)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n<body>"
            f"<h1>{html.escape(title)}</h1>{text}<p>{_legend()}</p>"
            f'<div class="sides">{body}</div></body></html>\n')


def _caption(d: Drawing, label: str) -> str:
    mode = {"full": "", "collapsed": ", fusion groups collapsed",
            "summary": ", summarized"}[d.mode]
    return f"{label}: @{d.function}, {d.num_nodes:,} nodes, {d.highlighted:,} changed{mode}"


def diff_html(before: Function | IRModule, after: Function | IRModule,
              function: str | None = None, *, what: str = "after",
              max_nodes: int = DEFAULT_MAX_NODES, fold_consts: int = 4) -> str:
    """One self-contained HTML page: ``before`` and ``after`` side by side as inline SVG,
    the changed nodes highlighted on each side.

    A node is *changed* when no node of the other version has its structural hash
    (same op, type, attributes, constant and operands, recursively): on the left,
    what the pipeline removed or rewrote; on the right, what it made. Members of
    fusion groups are compared through the call's arguments, so grouping alone
    changes only the calls. ``what`` names the transformation (a pipeline) in the
    title. Needs graphviz's ``dot`` (:class:`GraphvizNotFound` otherwise).
    """
    left = draw(before, function, max_nodes=max_nodes, fold_consts=fold_consts,
                baseline=hash_set(after, function), title=f"before {what}")
    right = draw(after, left.function if isinstance(after, IRModule) else None,
                 max_nodes=max_nodes, fold_consts=fold_consts,
                 baseline=hash_set(before, function), title=f"after {what}")
    title = f"irkernel viz: @{left.function} before and after {what}"
    lines = [f"{left.num_nodes:,} nodes before, {right.num_nodes:,} after; highlighted: "
             "nodes with no structurally equal node on the other side."]
    return _page(title, lines, [(_caption(left, "before"), _svg_fragment(left.dot)),
                                (_caption(right, "after"), _svg_fragment(right.dot))])


def write(func_or_mod: Function | IRModule, path: str | Path, function: str | None = None, *,
          max_nodes: int = DEFAULT_MAX_NODES, fold_consts: int = 4,
          node_titles: Mapping[int, str] | None = None,
          edge_titles: Mapping[tuple[int, int], str] | None = None) -> Drawing:
    """Draw a graph function into ``path``; the format is the suffix: ``.dot``/``.gv``
    (DOT text), ``.svg``, ``.png`` (graphviz) or ``.html`` (a page with the SVG).
    ``node_titles`` / ``edge_titles``: hover texts, as :func:`irkernel.viz.draw`."""
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"output {str(path)!r}: the suffix must be one of "
                         f"{', '.join('.' + f for f in FORMATS)}")
    d = draw(func_or_mod, function, max_nodes=max_nodes, fold_consts=fold_consts,
             node_titles=node_titles, edge_titles=edge_titles)
    if fmt in ("dot", "gv"):
        Path(path).write_text(d.dot, encoding="utf-8")
    elif fmt == "html":
        page = _page(f"irkernel viz: @{d.function}", [],
                     [(_caption(d, "graph"), _svg_fragment(d.dot))])
        Path(path).write_text(page, encoding="utf-8")
    else:
        Path(path).write_bytes(render(d.dot, fmt))
    return d


__all__ = ["FORMATS", "GraphvizError", "GraphvizNotFound", "diff_html", "render", "write"]
