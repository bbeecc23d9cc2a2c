"""First-call latency of the graph passes in a fresh process (``bench_passes.py`` runs it).

Usage::

    NUMBA_CACHE_DIR=DIR python bench/jit_latency.py     # prints one JSON object

Builds a 1000-node random graph (which compiles or loads the builder's and the
generator's kernels, not timed), then times the first call of each graph pass
and of O2 on it, then of the lowering passes LegalizeOps, FuseOps and FuseTIR.
The work on 1000 nodes takes well under a millisecond, so
the times are the passes' kernel compilation (an empty ``NUMBA_CACHE_DIR``)
or their loading from Numba's on-disk cache (a second process with the same
directory). Also reports the time of ``import passes``.
"""

from __future__ import annotations

import json
import time

PASSES = ("FoldConstant", "SimplifyArith", "EliminateCommonSubexpr", "DeadCodeElimination")
#: Not all Numba (FuseTIR is Python over the distinct groups' TIR), timed for completeness.
LOWERING_PASSES = ("LegalizeOps", "FuseOps", "FuseTIR")


def measure() -> dict[str, float]:
    import irkernel as ik
    from irkernel import transform
    from irkernel.testing import random_function

    func = random_function(1000, seed=0)
    mod = ik.IRModule({"main": func})
    start = time.perf_counter()
    import passes  # noqa: F401  (registers the passes)

    out: dict[str, float] = {"import_passes": time.perf_counter() - start}
    total = 0.0
    for name in PASSES:
        the_pass = transform.get_pass(name)
        start = time.perf_counter()
        the_pass(mod)
        out[name] = time.perf_counter() - start
        total += out[name]
    out["all_passes"] = total
    start = time.perf_counter()
    transform.get_pass("O2")(mod)
    out["O2_after"] = time.perf_counter() - start
    lowered = mod  # the lowering passes of runtime.build, each on the previous one's output
    for name in LOWERING_PASSES:
        start = time.perf_counter()
        lowered = transform.get_pass(name)(lowered)
        out[name] = time.perf_counter() - start
    return out


if __name__ == "__main__":
    print(json.dumps(measure()))
