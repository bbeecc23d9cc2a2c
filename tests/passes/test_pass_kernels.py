"""The graph passes' Numba kernels compile one specialization each (STYLE 9.4).

A second signature means an int64 id array, a writeable column or a scalar
of another width slipped in: it costs a second compilation (and a second
cache entry) for nothing. The check runs in a fresh interpreter so that no
other test's calls count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    import irkernel as ik
    import passes
    from irkernel import transform
    from irkernel.ir.jit import KERNELS
    from irkernel.testing import random_module

    pipelines = [transform.get_pass(n) for n in ("FoldConstant", "SimplifyArith",
                                                 "EliminateCommonSubexpr",
                                                 "DeadCodeElimination")]
    pipelines += [passes.O2(), passes.fixpoint(), passes.FoldConstant(max_elements=2)]
    for seed in range(6):
        mod = random_module(400, seed=seed, call_funcs=seed % 3 == 0,
                            shapes="small" if seed % 2 else "scalar",
                            const_fraction=0.4, const_subgraph_fraction=0.3)
        for p in pipelines:
            p(mod)
    with transform.PassContext(config={"FoldConstant.max_elements": 4}):
        passes.O2()(random_module(300, seed=9, shapes="small"))
    print(json.dumps({f"{k.py_func.__module__}.{k.__name__}": [str(s) for s in k.signatures]
                      for k in KERNELS}))
""")

CHECKED_MODULES = ("passes.", "irkernel.ir.rebuild", "irkernel.ir.ops.scalar")


@pytest.mark.slow
def test_each_pass_kernel_compiles_one_specialization() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    sigs = json.loads(done.stdout.strip().splitlines()[-1])
    checked = {name: s for name, s in sigs.items() if name.startswith(CHECKED_MODULES)}
    assert any(name.startswith("passes.") for name in checked), "no pass kernels found"
    used = {name for name, s in checked.items() if s}
    assert {"passes.dead_code.mark_live_kernel", "irkernel.ir.rebuild.rebuild_kernel",
            "passes.fold_constant.fold_sweep_kernel", "passes.cse.hash_cons_kernel",
            "passes.simplify_arith.simplify_kernel"} <= used
    many = {name: s for name, s in checked.items() if len(s) > 1}
    assert not many, f"kernels with more than one specialization: {many}"
