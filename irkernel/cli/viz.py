"""``irkernel viz FILE [-p PIPELINE] [--diff | --explain] [--function NAME] [--max-nodes N] [-o OUT]``.

``--explain`` reports why FuseOps fused or kept apart each producer-consumer edge
(``runtime.explain``): as text, or drawn after LegalizeOps with each edge's reason
and each node's group as hover titles.

Draws a graph function of an ``.ir`` file, after an optional pipeline, with
:mod:`irkernel.viz`: ``-o`` picks the format by suffix (``.dot``/``.gv``,
``.svg``, ``.png``, ``.html``); without ``-o`` the DOT text goes to stdout.
``--diff`` writes one HTML page with the function before and after the
pipeline side by side, changed nodes highlighted. Graphs above
``--max-nodes`` are drawn with fusion groups collapsed or summarized (a note
on stderr says so). Errors (no graphviz, bad suffix, unknown function) are
one line on stderr, exit code 1, through ``irkernel.cli.main``; options it can not use
(``--max-nodes 0``, an output suffix it can not write, an unknown pass in ``-p``) exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from irkernel.cli.errors import CLIError, UsageError
from irkernel.cli.opt import parse_pipeline_option
from irkernel.ir.module import IRModule
from irkernel.viz import DEFAULT_MAX_NODES, Drawing, diff_html, draw, write
from irkernel.viz.render import FORMATS


def add_arguments(viz: argparse.ArgumentParser) -> None:
    viz.add_argument("file")
    viz.add_argument("-p", "--passes", metavar="PIPELINE",
                     help="run this textual pipeline first (e.g. O2, or "
                          '"LegalizeOps,FuseOps" to see the fusion groups)')
    viz.add_argument("--diff", action="store_true",
                     help="an HTML page with the function before and after -p, side by side")
    viz.add_argument("--function", metavar="NAME",
                     help="the graph function to draw (default main)")
    viz.add_argument("--max-nodes", type=int, default=DEFAULT_MAX_NODES, metavar="N",
                     help="above this many nodes, collapse fusion groups or summarize "
                          f"(default {DEFAULT_MAX_NODES:,})")
    viz.add_argument("-O", "--opt-level", type=int, default=2,
                     help="opt_level of the pass context for -p (default 2)")
    viz.add_argument("--explain", action="store_true",
                     help="why FuseOps fused or kept apart each edge (runtime.explain): the "
                          "report as text (stdout, or -o OUT.txt), or the graph after "
                          "LegalizeOps with the reasons on hover (-o .svg/.html/.dot)")
    viz.add_argument("-o", "--output", metavar="OUT",
                     help="OUT.dot, .gv, .svg, .png (graphviz) or .html; default: DOT to stdout")


def _note(d: Drawing, max_nodes: int) -> None:
    if d.mode == "collapsed":
        print(f"irkernel viz: @{d.function}: more than {max_nodes:,} nodes with its fusion "
              "groups expanded: each group drawn as one node", file=sys.stderr)
    elif d.mode == "summary":
        print(f"irkernel viz: @{d.function} has {d.num_nodes:,} nodes (more than "
              f"--max-nodes {max_nodes:,}): drawing a summary (op histogram, first nodes, "
              "output cone)", file=sys.stderr)


def _run_explain(args: argparse.Namespace, out: TextIO, mod: IRModule) -> int:
    import runtime
    from irkernel import transform
    from runtime.explain import hover_titles

    with transform.PassContext(opt_level=args.opt_level):
        report = runtime.explain(mod)
    name = args.function or "main"
    if args.output is None or args.output.endswith(".txt"):
        text = report.render()
        if args.output is None:
            out.write(text)
        else:
            Path(args.output).write_text(text, encoding="utf-8")
        return 0
    if name not in report.functions:
        raise CLIError(f"--function {name}: no graph function of that name that FuseOps "
                       f"considers (have: {', '.join(report.functions) or 'none'})")
    nodes, edges = hover_titles(report.functions[name])
    d = write(report.module, args.output, name, max_nodes=args.max_nodes, node_titles=nodes,
              edge_titles=edges)
    _note(d, args.max_nodes)
    return 0


def run_viz(args: argparse.Namespace, out: TextIO,
            read_module: Callable[[str], IRModule]) -> int:
    if args.explain:
        if args.passes or args.diff:
            raise UsageError("--explain lowers the file as runtime.build does: no -p or --diff")
        if args.output is not None and not args.output.endswith(".txt") and \
                Path(args.output).suffix.lower().lstrip(".") not in FORMATS:
            raise UsageError(f"-o {args.output!r}: --explain writes .txt, or a picture "
                             f"({', '.join('.' + f for f in FORMATS)})")
        return _run_explain(args, out, read_module(args.file))
    if args.max_nodes < 1:
        raise UsageError(f"--max-nodes must be >= 1, got {args.max_nodes}")
    suffix = Path(args.output).suffix.lower().lstrip(".") if args.output else "dot"
    if suffix not in FORMATS:
        raise UsageError(f"-o {args.output!r}: the suffix must be one of "
                         f"{', '.join('.' + f for f in FORMATS)}")
    if args.diff and not args.passes:
        raise UsageError("--diff compares the function before and after -p PIPELINE: give -p")
    if args.diff and suffix != "html":
        raise UsageError(f"--diff writes an HTML page: use -o OUT.html, not {args.output!r}")
    pipeline = parse_pipeline_option(args.passes) if args.passes else None
    mod = read_module(args.file)
    after = mod
    if pipeline is not None:
        from irkernel import transform

        with transform.PassContext(opt_level=args.opt_level):
            after = pipeline(mod)
    if args.diff:
        page = diff_html(mod, after, args.function, what=args.passes, max_nodes=args.max_nodes)
        Path(args.output).write_text(page, encoding="utf-8")
        return 0
    if args.output is None:
        d = draw(after, args.function, max_nodes=args.max_nodes)
        out.write(d.dot)
    else:
        d = write(after, args.output, args.function, max_nodes=args.max_nodes)
    _note(d, args.max_nodes)
    return 0
