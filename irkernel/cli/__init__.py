"""The ``irkernel`` command line: ``main`` (demo, opt, run, viz, print, verify), the demo and
its ``workloads`` (the compiled comparisons with NumPy that bench/bench_e2e.py shares).

The top layer: it may import every other layer, ``passes`` and ``runtime``
included (lazily, inside the subcommands, so ``irkernel --help`` stays
instant). Nothing imports it but the console script.
"""

from __future__ import annotations

from irkernel.cli.main import main

__all__ = ["main"]
