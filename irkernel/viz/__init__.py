"""Graph pictures: ``to_dot`` (DOT text from the columns), ``render`` (graphviz), ``diff_html``.

``dot`` writes one DOT node per IR node (fusion groups as clusters, small
constants folded into labels, large graphs summarized); ``hashes`` gives each
node a structural hash so two versions can be compared; ``render`` runs
graphviz's ``dot`` program and builds the self-contained before/after HTML
page. The layer sits beside ``transform``: it may import ``irkernel.ir`` and
``irkernel.text`` (the printer's spelling of types and values); running a
pipeline before drawing is the caller's (the CLI's) business.
"""

from __future__ import annotations

from irkernel.viz.dot import DEFAULT_MAX_NODES, Drawing, draw, hash_set, to_dot
from irkernel.viz.hashes import node_hashes
from irkernel.viz.render import GraphvizError, GraphvizNotFound, diff_html, render, write

__all__ = ["DEFAULT_MAX_NODES", "Drawing", "GraphvizError", "GraphvizNotFound", "diff_html",
           "draw", "hash_set", "node_hashes", "render", "to_dot", "write"]
