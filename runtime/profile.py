"""Per-kernel profile of a graph function: ``Executable.profile`` and ``irkernel run --profile``.

How it times: an unprofiled call runs each segment of the launch table with one
native call (``runtime/launcher.py``), so there is nothing to time per kernel. A
profiled call (``GraphExecutor.profiled_call``) hands the executor a
:class:`LaunchTimer`, which runs the *same* table one launch at a time
(``run_steps(..., s, s + 1)``) with ``time.perf_counter_ns`` around each: the
same kernels on the same slots in the same order, so the same results, and
``call_func`` callees are timed the same way. The unprofiled path makes no
timer call (the executor tests ``timer is None`` once per segment). A launch
then costs one ctypes call (about a microsecond) more than in the native loop:
the gap between the run's wall time and the sum of its kernels' times.

What a row says (:class:`KernelRow`, one per kernel, ``Profile.rows`` sorted by
time): launches per run, the median over the runs of the kernel's time per run,
the total over all runs, its share of all kernels' time, FLOPs and bytes
estimated from its TIR (``runtime/kernel_cost.py``) and the rates they give,
the graph ops it covers (its ``op_name``, which FuseTIR makes from the fused
group: ``fused_conv_add_relu``) and the template that scheduled it (its
``schedule`` attr, set by ``passes/topi``; ``canonical`` for the te form of a
template, ``user`` for a PrimFunc of the input module).

Alternatives considered: timestamps taken by the native launcher (rdtsc into an
array, no ctypes call per launch: closer to the real run, but a second native
loop to keep in step with the first, and cycle counts to convert); a sampling
profiler (``perf``: no graph op or schedule per sample). Imports irkernel and
``runtime.launcher`` / ``runtime.kernel_cost`` only (the executor is duck-typed).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.ids import NUMPY_DTYPES
from irkernel.ir.module import IRModule
from irkernel.tir.function import PrimFunc
from runtime.kernel_cost import MAX_META_ELEMENTS, LaunchCost, launch_cost
from runtime.launcher import run_steps

#: Prefix FuseTIR gives the ``op_name`` of a fused kernel, and the tail of a cut name.
_FUSED, _CUT = "fused_", "etc"


class LaunchTimer:
    """Runs launches one at a time and records ``(executor, step, start_ns, end_ns)``."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records: list[tuple[Any, int, int, int]] = []

    def launch(self, graph: Any, context: int, begin: int, end: int, wide: bool) -> None:
        """Launches ``[begin, end)`` of ``graph``'s table (the arguments of ``run_steps``)."""
        clock = time.perf_counter_ns
        record = self.records.append
        for step in range(begin, end):
            start = clock()
            run_steps(context, step, step + 1, wide)
            record((graph, step, start, clock()))


@dataclass(frozen=True)
class KernelRow:
    """One kernel of a profile (times in seconds; FLOPs and bytes per run).

    Attributes
    ----------
    kernel : str
        The PrimFunc's name in the built module.
    calls : int
        Launches per run.
    time : float
        Median over the runs of the kernel's time per run (all its launches).
    total : float
        Its time summed over all runs.
    share : float
        ``time`` over the sum of every kernel's ``time`` (0 to 1).
    flops : int or None
        Estimated float operations per run; None when the TIR does not say.
    bytes : int
        Bytes of the buffers its launches read and write, per run.
    ops : tuple of str
        The graph ops it covers (several for a fused kernel).
    schedule : str
        The template that made it: ``matmul``, ``conv_implicit_gemm``, ``conv_dot``,
        ``depthwise``, ``max_pool_rows``, ``conv_transpose_gemm``, ``generic``,
        ``canonical`` (the te form) or ``user``.
    """

    kernel: str
    calls: int
    time: float
    total: float
    share: float
    flops: int | None
    bytes: int
    ops: tuple[str, ...]
    schedule: str

    @property
    def gflops(self) -> float | None:
        """GFLOP/s (None without a FLOP estimate or a time)."""
        return self.flops / self.time / 1e9 if self.flops is not None and self.time else None

    @property
    def gbps(self) -> float | None:
        """GB/s of the buffers read and written."""
        return self.bytes / self.time / 1e9 if self.time else None


@dataclass(frozen=True)
class LaunchEvent:
    """One timed launch: which run, graph function, node and kernel, and when (ns)."""

    run: int
    function: str
    node: int
    kernel: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Profile:
    """The profile of ``repeat`` runs of one graph function (see the module docstring).

    Attributes
    ----------
    function : str
    run_times : tuple of float
        Wall time of each profiled run, in seconds.
    rows : tuple of KernelRow
        One per kernel, slowest first.
    events : tuple of LaunchEvent
        Every launch of every run, in order.
    outputs : list of numpy.ndarray
        The outputs of the last run.
    """

    function: str
    run_times: tuple[float, ...]
    rows: tuple[KernelRow, ...]
    events: tuple[LaunchEvent, ...] = field(repr=False)
    run_spans: tuple[tuple[int, int], ...] = field(repr=False)
    outputs: list[np.ndarray] = field(repr=False, compare=False)

    @property
    def repeat(self) -> int:
        return len(self.run_times)

    @property
    def run_time(self) -> float:
        """Median wall time of a profiled run, in seconds."""
        return statistics.median(self.run_times)

    @property
    def kernel_time(self) -> float:
        """The kernels' time per run (the sum of the rows' medians), in seconds."""
        return sum(r.time for r in self.rows)

    def render(self) -> str:
        """A text table, one line per kernel, slowest first, then the totals."""
        run = self.run_time
        cover = f", {self.kernel_time / run:.1%} of the run" if run else ""
        lines = [f"profile of {self.function}: {self.repeat} run(s), {run * 1e3:.3f} ms per "
                 f"run (median); kernels {self.kernel_time * 1e3:.3f} ms{cover}",
                 f"{'ms/run':>10} {'share':>6} {'calls':>5} {'GFLOP/s':>8} {'GB/s':>7}  "
                 f"{'schedule':<24} kernel (ops)"]
        for r in self.rows:
            rate = "-" if r.gflops is None else f"{r.gflops:.2f}"
            bw = "-" if r.gbps is None else f"{r.gbps:.2f}"
            ops_text = f" ({', '.join(r.ops)})" if r.ops and r.ops != (r.kernel,) else ""
            lines.append(f"{r.time * 1e3:10.3f} {r.share:6.1%} {r.calls:5d} {rate:>8} "
                         f"{bw:>7}  {r.schedule:<24} {r.kernel}{ops_text}")
        flops = [r.flops for r in self.rows]
        known = sum(f for f in flops if f is not None)
        lines.append(f"{self.kernel_time * 1e3:10.3f} {1.0 if self.rows else 0.0:6.1%} "
                     f"{sum(r.calls for r in self.rows):5d} "
                     f"{known / self.kernel_time / 1e9 if self.kernel_time else 0.0:8.2f} "
                     f"{'':>7}  {'':<19} total ({known / 1e9:.3f} GFLOP per run"
                     f"{', some kernels unknown' if None in flops else ''})")
        return "\n".join(lines)

    def chrome_trace(self) -> list[dict[str, Any]]:
        """The events as Chrome's trace format (a list of complete "X" events, as
        onnxruntime writes them): one ``model_run`` event per run (cat ``Session``) and
        one event per launch (cat ``Node``); times in microseconds from the first run."""
        zero = self.run_spans[0][0] if self.run_spans else 0
        pid = os.getpid()
        rows = {r.kernel: r for r in self.rows}
        trace: list[dict[str, Any]] = []
        for run, (start, end) in enumerate(self.run_spans):
            trace.append({"cat": "Session", "pid": pid, "tid": 0, "ph": "X",
                          "name": "model_run", "ts": (start - zero) / 1e3,
                          "dur": (end - start) / 1e3,
                          "args": {"function": self.function, "run": run}})
        for e in self.events:
            row = rows[e.kernel]
            trace.append({"cat": "Node", "pid": pid, "tid": 0, "ph": "X", "name": e.kernel,
                          "ts": (e.start_ns - zero) / 1e3, "dur": (e.end_ns - e.start_ns) / 1e3,
                          "args": {"function": e.function, "node": e.node, "run": e.run,
                                   "ops": list(row.ops), "schedule": row.schedule}})
        return trace

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`chrome_trace` as JSON to ``path`` (chrome://tracing, Perfetto)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.chrome_trace(), f)


def profile_graph(graph: Any, module: IRModule | None, inputs: Sequence[Any],
                  repeat: int = 10) -> Profile:
    """Run ``graph`` (a GraphExecutor) ``repeat`` times with every launch timed.

    ``module`` is the built module (``Executable.lowered_module``): its PrimFuncs
    give each kernel's ops, schedule and cost. No warm-up run is made: the caller
    decides (the first run may page in the arena and the outputs).

    Raises
    ------
    ValueError
        When ``repeat`` is not an int >= 1.
    TypeError, ValueError
        For bad inputs, as a call of the executor.
    """
    if isinstance(repeat, bool) or not isinstance(repeat, (int, np.integer)) or repeat < 1:
        raise ValueError(f"profile: repeat must be an int >= 1, got {repeat!r}")
    timer = LaunchTimer()
    spans: list[tuple[int, int]] = []
    firsts: list[int] = []
    outputs: list[np.ndarray] = []
    for _ in range(int(repeat)):
        firsts.append(len(timer.records))
        start = time.perf_counter_ns()
        outputs = graph.profiled_call(timer, *inputs)
        spans.append((start, time.perf_counter_ns()))
    firsts.append(len(timer.records))
    functions = module.functions if module is not None else {}
    events = _events(timer.records, firsts)
    rows = _rows(events, timer.records[firsts[0]:firsts[1]], functions, int(repeat))
    return Profile(graph.name, tuple((b - a) / 1e9 for a, b in spans), rows, events,
                   tuple(spans), outputs)


def _events(records: list[tuple[Any, int, int, int]], firsts: list[int]
            ) -> tuple[LaunchEvent, ...]:
    out = []
    for run in range(len(firsts) - 1):
        for graph, step, start, end in records[firsts[run]:firsts[run + 1]]:
            table = graph.launch_table
            out.append(LaunchEvent(run, graph.name, int(table.nodes[step]),
                                   table.kernel_names[int(table.kernel_ids[step])], start, end))
    return tuple(out)


def _rows(events: tuple[LaunchEvent, ...], first_run: list[tuple[Any, int, int, int]],
          functions: Mapping[str, Any], repeat: int) -> tuple[KernelRow, ...]:
    """Aggregate the launches per kernel; costs from the launches of one run."""
    per_run: dict[str, np.ndarray] = {}
    launches: dict[str, int] = {}
    for e in events:
        times = per_run.setdefault(e.kernel, np.zeros(repeat, np.int64))
        times[e.run] += e.end_ns - e.start_ns
        launches[e.kernel] = launches.get(e.kernel, 0) + 1
    flops: dict[str, int | None] = {}
    nbytes: dict[str, int] = {}
    memo: dict[Any, LaunchCost | None] = {}
    for graph, step, _, _ in first_run:
        table = graph.launch_table
        name = table.kernel_names[int(table.kernel_ids[step])]
        cost = _launch_cost(graph.func, int(table.nodes[step]), name, functions, memo)
        known = flops.get(name, 0)
        flops[name] = None if cost is None or cost.flops is None or known is None \
            else known + cost.flops
        nbytes[name] = nbytes.get(name, 0) + (0 if cost is None else cost.bytes)
    medians = {k: statistics.median(v.tolist()) / 1e9 for k, v in per_run.items()}
    whole = sum(medians.values())
    rows = [KernelRow(kernel=k, calls=launches[k] // repeat, time=medians[k],
                      total=int(per_run[k].sum()) / 1e9,
                      share=medians[k] / whole if whole else 0.0,
                      flops=flops.get(k), bytes=nbytes.get(k, 0),
                      ops=ops_of(functions.get(k)), schedule=schedule_of(functions.get(k)))
            for k in per_run]
    rows.sort(key=lambda r: (-r.time, r.kernel))
    return tuple(rows)


def _launch_cost(func: Any, node: int, name: str, functions: Mapping[str, Any],
                 memo: dict[Any, LaunchCost | None]) -> LaunchCost | None:
    """The cost of the launch at ``node`` (memoized by kernel, types and small consts)."""
    prim = functions.get(name)
    if not isinstance(prim, PrimFunc):
        return None
    operands = (*func.operands(node), node)
    types = tuple((NUMPY_DTYPES[int(func.dtype[j])], tuple(func.shapes[int(func.shape_id[j])]))
                  for j in operands)
    consts = {}
    for pos, j in enumerate(operands[:-1]):
        if (int(func.kind[j]) == ops.OP_CONST and types[pos][0].kind in "iu"
                and int(func.shapes.size[int(func.shape_id[j])]) <= MAX_META_ELEMENTS):
            consts[pos] = np.asarray(func.const_value(j))
    key = (name, types, tuple((p, v.tobytes()) for p, v in consts.items()))
    if key not in memo:
        memo[key] = launch_cost(prim, types, consts)
    return memo[key]


def ops_of(prim: Any) -> tuple[str, ...]:
    """The graph ops a kernel covers, from its ``op_name`` (``fused_conv_add_relu``:
    conv, add, relu; op names are matched longest first, so ``max_pool`` stays one;
    ``...`` where FuseTIR cut a long name)."""
    name = prim.attrs.get("op_name") if isinstance(prim, PrimFunc) else None
    if not isinstance(name, str):
        return ()
    if not name.startswith(_FUSED):
        return (name,)
    known = sorted((op.name for op in ops.all_ops()), key=len, reverse=True)
    rest, out = name[len(_FUSED):], []
    while rest:
        if rest == _CUT:
            out.append("...")
            break
        found = next((n for n in known if rest == n or rest.startswith(n + "_")), None)
        if found is None:  # not an op of the table (a user op's sanitized name)
            out.append(rest)
            break
        out.append(found)
        rest = rest[len(found) + 1:]
    return tuple(out)


def schedule_of(prim: Any) -> str:
    """The ``schedule`` attr of a kernel, with its register ``tile`` attr when it has one
    (``conv_implicit_gemm[8x32]``: tuned tiles show); ``canonical`` for a template's te
    form, ``user`` for a PrimFunc that no template made."""
    if not isinstance(prim, PrimFunc):
        return "user"
    schedule, tile = prim.attrs.get("schedule"), prim.attrs.get("tile")
    if isinstance(schedule, str):
        return f"{schedule}[{tile}]" if isinstance(tile, str) else schedule
    return "canonical" if "op_name" in prim.attrs else "user"


__all__ = ["KernelRow", "LaunchEvent", "LaunchTimer", "Profile", "ops_of", "profile_graph",
           "schedule_of"]
