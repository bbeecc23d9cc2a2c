"""The native launcher: one compiled loop that runs a table of kernel launches.

Every kernel has the packed signature ``void k(int64 *slots)``
(``runtime/lower.py``). A graph function's table (``runtime/launch_table.py``)
stores each launch argument once, as an ``int32`` index into a short array of
distinct ``int64`` *values* (arena addresses, constant addresses, shape var
values, the call's inputs and outputs), and each launch as its kernel's index
and where its arguments start. The launcher resolves a launch's arguments into a
scratch row and calls the kernel on it; for steps ``[begin, end)``::

    for s in range(begin, end):
        for j in range(starts[s], starts[s + 1]):  # the first HEAD without a loop test
            scratch[j - starts[s]] = values[args[j]]
        fns[kernel_ids[s]](scratch)

It takes one pointer, a *context* of six addresses (``kernel_ids``, ``fns``,
``starts``, ``args``, ``values``, ``scratch``; the last two belong to the
binding of one call), so a graph costs 4 bytes per argument and 8 per launch
instead of an int64 slot per argument in the table and again in every binding.
It is compiled once per process (a few milliseconds; two variants: ``starts``
as int32, or int64 past 2**31 arguments) and never depends on the graph. A
Python loop of ctypes calls costs 0.4-0.8 us per launch
(bench/bench_executor.py); this loop costs a few nanoseconds plus the kernel.
The ctypes call releases the GIL, so concurrent calls of one graph (each with
its own values, scratch and arena) run in parallel.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time

from runtime.jit import load_host_ir

SYMBOL = "irkernel_run_launches"
#: Arguments every launch copies without a loop test (the table's ``args`` are padded by
#: as many, and ``values`` is never empty): most launches take three to seven (a
#: shape-generic kernel: its buffers, then its shape vars).
HEAD = 8
#: The context's fields, in order (int64 addresses).
CONTEXT_FIELDS = ("kernel_ids", "fns", "starts", "args", "values", "scratch")


def _copy_arg(tag: str, index: str, dst: str) -> str:
    """IR: ``scratch[dst] = values[args[index]]`` (names prefixed ``tag``)."""
    return (f"  %{tag}.at = getelementptr inbounds i32, ptr %args, i64 {index}\n"
            f"  %{tag}.code32 = load i32, ptr %{tag}.at\n"
            f"  %{tag}.code = zext i32 %{tag}.code32 to i64\n"
            f"  %{tag}.v.at = getelementptr inbounds i64, ptr %values, i64 %{tag}.code\n"
            f"  %{tag}.v = load i64, ptr %{tag}.v.at\n"
            f"  %{tag}.dst = getelementptr inbounds i64, ptr %scratch, i64 {dst}\n"
            f"  store i64 %{tag}.v, ptr %{tag}.dst")


def _variant(width: int) -> str:
    """The launcher whose ``starts`` are int``width``."""
    ext = "sext i32 {} to i64" if width == 32 else "add i64 0, {}"
    idx = f"i{width}"
    fields = "\n".join(
        f"  %{name}.at = getelementptr inbounds i64, ptr %ctx, i64 {k}\n"
        f"  %{name}.int = load i64, ptr %{name}.at\n"
        f"  %{name} = inttoptr i64 %{name}.int to ptr" for k, name in enumerate(CONTEXT_FIELDS))
    head = "\n".join(_copy_arg(f"h{k}", f"%a{k}", str(k)) for k in range(HEAD))
    offsets = "\n".join(f"  %a{k} = add nsw i64 %a, {k}" for k in range(HEAD))
    return f"""
define void @{SYMBOL}_i{width}(ptr %ctx, i64 %begin, i64 %end) nounwind {{
entry:
{fields}
  %any = icmp slt i64 %begin, %end
  br i1 %any, label %launch, label %exit
launch:
  %s = phi i64 [ %begin, %entry ], [ %next, %call ]
  %kid.at = getelementptr inbounds i32, ptr %kernel_ids, i64 %s
  %kid32 = load i32, ptr %kid.at
  %kid = zext i32 %kid32 to i64
  %fn.at = getelementptr inbounds i64, ptr %fns, i64 %kid
  %fn.int = load i64, ptr %fn.at
  %fn = inttoptr i64 %fn.int to ptr
  %a.at = getelementptr inbounds {idx}, ptr %starts, i64 %s
  %a.raw = load {idx}, ptr %a.at
  %a = {ext.format("%a.raw")}
  %s1 = add nuw nsw i64 %s, 1
  %b.at = getelementptr inbounds {idx}, ptr %starts, i64 %s1
  %b.raw = load {idx}, ptr %b.at
  %b = {ext.format("%b.raw")}
{offsets}
{head}
  %rest = add nsw i64 %a, {HEAD}
  %some = icmp slt i64 %rest, %b
  br i1 %some, label %arg, label %call
arg:
  %j = phi i64 [ %rest, %launch ], [ %j1, %arg ]
  %o = sub nsw i64 %j, %a
{_copy_arg("x", "%j", "%o")}
  %j1 = add nuw nsw i64 %j, 1
  %more.args = icmp slt i64 %j1, %b
  br i1 %more.args, label %arg, label %call
call:
  call void %fn(ptr %scratch)
  %next = add nuw nsw i64 %s, 1
  %more = icmp slt i64 %next, %end
  br i1 %more, label %launch, label %exit
exit:
  ret void
}}
"""


_IR = _variant(32) + _variant(64)

_LAUNCHER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
#: The ctypes type of a kernel's packed entry: ``void (int64 *slots)``.
KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_LOCK = threading.Lock()
#: Launches of the first slice of a long table, and the time a slice may take before the
#: next is made smaller: a SIGINT waits for at most one slice (and its longest kernel).
FIRST_SLICE = 16
SLICE_SECONDS = 0.05


class _Launcher:
    __slots__ = ("addresses", "engine", "narrow", "wide")

    def __init__(self) -> None:
        self.engine = load_host_ir(_IR)
        self.addresses = (self.engine.address(f"{SYMBOL}_i32"),
                          self.engine.address(f"{SYMBOL}_i64"))
        self.narrow, self.wide = (_LAUNCHER_TYPE(a) for a in self.addresses)


@functools.cache
def _launcher() -> _Launcher:
    with _LOCK:
        return _Launcher()


def launcher_address(wide: bool = False) -> int:
    """The launcher's native entry ``void (int64 *context, int64 begin, int64 end)``, for
    native callers (``runtime/call_guard.py``); compiled once, never freed."""
    return _launcher().addresses[int(wide)]


def run_steps(context: int, begin: int, end: int, wide: bool = False) -> None:
    """Run launches ``[begin, end)`` of a table, given the data address of its context
    (``CONTEXT_FIELDS``: int64 addresses of C-contiguous arrays, kept alive by the caller
    for the duration of the call); ``wide``: the table's ``starts`` are int64. Addresses,
    not arrays, because ``ndarray.ctypes`` costs a microsecond or more per call and a
    small model's whole run is a few hundred."""
    if end - begin <= FIRST_SLICE:
        if begin < end:
            launcher = _launcher()
            (launcher.wide if wide else launcher.narrow)(context, begin, end)
        return
    launcher = _launcher()
    call = launcher.wide if wide else launcher.narrow
    # Long tables run in slices so that Ctrl-C (handled between ctypes calls) stops a run
    # within a fraction of a second: slices double while they take under SLICE_SECONDS.
    size = FIRST_SLICE
    while begin < end:
        stop = min(begin + size, end)
        start = time.perf_counter()
        call(context, begin, stop)
        begin = stop
        if time.perf_counter() - start < SLICE_SECONDS:
            size *= 2
        elif size > 1:
            size //= 2


__all__ = ["CONTEXT_FIELDS", "FIRST_SLICE", "KERNEL_TYPE", "SYMBOL", "launcher_address",
           "run_steps"]
