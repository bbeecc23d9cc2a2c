"""The native launcher: one compiled loop that runs a table of kernel launches.

Every kernel has the packed signature ``void k(int64 *slots)``
(``runtime/lower.py``), so a whole graph function is three arrays: ``fns``
(kernel entry addresses), ``starts`` (where each launch's slots begin) and
``slots`` (every launch's arguments, back to back). The launcher walks steps
``[begin, end)`` of such a table::

    for s in range(begin, end):
        fns[s](slots + starts[s])

It is compiled once per process (a few milliseconds) and never depends on the
graph, so nothing of a graph is compiled twice. A Python loop of ctypes calls
costs 0.4-0.8 us per launch (bench/bench_executor.py); this loop costs a few
nanoseconds plus the kernel. The ctypes call releases the GIL, so concurrent
calls of one graph (each with its own slots and arena) run in parallel.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time

from runtime.jit import load_host_ir

SYMBOL = "irkernel_run_steps"

_IR = f"""
define void @{SYMBOL}(ptr %fns, ptr %starts, ptr %slots, i64 %begin, i64 %end) nounwind {{
entry:
  %any = icmp slt i64 %begin, %end
  br i1 %any, label %loop, label %exit
loop:
  %s = phi i64 [ %begin, %entry ], [ %next, %loop ]
  %fn.at = getelementptr inbounds i64, ptr %fns, i64 %s
  %fn.int = load i64, ptr %fn.at
  %fn = inttoptr i64 %fn.int to ptr
  %start.at = getelementptr inbounds i64, ptr %starts, i64 %s
  %start = load i64, ptr %start.at
  %args = getelementptr inbounds i64, ptr %slots, i64 %start
  call void %fn(ptr %args)
  %next = add nuw nsw i64 %s, 1
  %more = icmp slt i64 %next, %end
  br i1 %more, label %loop, label %exit
exit:
  ret void
}}
"""

_LAUNCHER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_int64, ctypes.c_int64)
#: The ctypes type of a kernel's packed entry: ``void (int64 *slots)``.
KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_LOCK = threading.Lock()
#: Launches of the first slice of a long table, and the time a slice may take before the
#: next is made smaller: a SIGINT waits for at most one slice (and its longest kernel).
FIRST_SLICE = 16
SLICE_SECONDS = 0.05


class _Launcher:
    __slots__ = ("call", "engine")

    def __init__(self) -> None:
        self.engine = load_host_ir(_IR)
        self.call = _LAUNCHER_TYPE(self.engine.address(SYMBOL))


@functools.cache
def _launcher() -> _Launcher:
    with _LOCK:
        return _Launcher()


def run_steps(fns: int, starts: int, slots: int, begin: int, end: int) -> None:
    """Run launches ``[begin, end)`` of a table, given the data addresses of its int64
    arrays (C-contiguous, kept alive by the caller for the duration of the call):
    addresses, not arrays, because ``ndarray.ctypes`` costs a microsecond or more per
    call and a small model's whole run is a few hundred."""
    if end - begin <= FIRST_SLICE:
        if begin < end:
            _launcher().call(fns, starts, slots, begin, end)
        return
    # Long tables run in slices so that Ctrl-C (handled between ctypes calls) stops a run
    # within a fraction of a second: slices double while they take under SLICE_SECONDS.
    call, size = _launcher().call, FIRST_SLICE
    while begin < end:
        stop = min(begin + size, end)
        start = time.perf_counter()
        call(fns, starts, slots, begin, stop)
        begin = stop
        if time.perf_counter() - start < SLICE_SECONDS:
            size *= 2
        elif size > 1:
            size //= 2


__all__ = ["KERNEL_TYPE", "SYMBOL", "run_steps"]
