"""Peak memory of one graph pass, measured in a fresh process (``bench_passes.py`` runs it).

Usage::

    python bench/peak_memory.py PASS N_NODES     # prints one JSON object

PASS is a registered pass or pipeline name (``O2``). The graph is
``irkernel.testing.random_function(N_NODES, seed=0)``; the pass runs once on a
small graph first, so JIT compilation and cache loading are not counted. Two
measures of the memory the call adds on top of its input (its output, which
is kept alive, included):

- ``tracemalloc_peak``: the tracemalloc peak during the call. NumPy reports
  its buffers to tracemalloc and Numba's NRT allocates through
  ``PyMem_RawMalloc``, which tracemalloc traces, so kernel allocations count.
- ``rss_peak``: VmHWM after the call minus VmRSS before it, with the
  high-water mark reset through ``/proc/self/clear_refs`` (Linux) after
  returning free memory to the OS with ``malloc_trim``. It counts only
  touched pages, so it can be lower than the tracemalloc figure.

``ratio`` is ``tracemalloc_peak / func.nbytes`` (the graph's own columns and
constant pool); the budget is 3.
"""

from __future__ import annotations

import ctypes
import gc
import json
import sys
import time
import tracemalloc


def _status_kb(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def _trim() -> None:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def measure(pass_name: str, n_nodes: int) -> dict[str, object]:
    import irkernel as ik
    import passes  # noqa: F401  (registers the passes)
    from irkernel import transform
    from irkernel.testing import random_function

    transform.get_pass(pass_name)(ik.IRModule({"main": random_function(2000, seed=1)}))
    func = random_function(n_nodes, seed=0)
    mod = ik.IRModule({"main": func})
    the_pass = transform.get_pass(pass_name)
    _trim()
    hwm_reset = _reset_hwm()
    rss_before = _status_kb("VmRSS")
    tracemalloc.start()
    start = time.perf_counter()
    out = the_pass(mod)
    elapsed = time.perf_counter() - start
    traced_now, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_peak = (_status_kb("VmHWM") - rss_before) * 1024 if hwm_reset else -1
    result = {
        "pass": pass_name, "n_nodes": n_nodes, "nodes_after": out["main"].num_nodes,
        "graph_nbytes": func.nbytes, "tracemalloc_peak": traced_peak,
        "tracemalloc_retained": traced_now, "rss_peak": rss_peak, "seconds": elapsed,
        "ratio": traced_peak / func.nbytes,
        "rss_ratio": rss_peak / func.nbytes if rss_peak >= 0 else None,
    }
    del out
    return result


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python bench/peak_memory.py PASS N_NODES")
    print(json.dumps(measure(sys.argv[1], int(float(sys.argv[2])))))
