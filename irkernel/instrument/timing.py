"""PassTimingInstrument: every pass's time as a tree, nested passes under their parent.

Results stay on the instrument instance (the tree survives the context,
unlike TVM's thread-local profile). The instrument is mergeable
(``transform.instrument_protocol.worker_copy``): ``map_modules`` runs a fresh
one per worker task and adds each worker's tree into this one, so times and
counters cover every worker (summed: CPU time, not wall time). A pass's time is measured by the pass
runner (``transform.context.running_frame``), so other instruments' hooks
are not counted. Imports the transform layer.
"""

from __future__ import annotations

from irkernel.instrument.base import PassInstrument
from irkernel.ir.module import IRModule
from irkernel.transform.context import running_frame
from irkernel.transform.pass_info import PassInfo


class _TimingNode:
    __slots__ = ("calls", "children", "name", "stats", "total")

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0
        self.total = 0.0
        self.children: dict[str, _TimingNode] = {}
        self.stats: dict[str, float] = {}


class PassTimingInstrument(PassInstrument):
    """Times every pass as a tree: nested passes under the pass that ran them.

    Each line of :meth:`render` shows a pass (indented under its parent, calls
    of the same pass under the same parent merged): number of calls, total
    and self time (total minus its children), share of the parent's time, and
    the counters the pass reported with ``ctx.stat``. A pass's time is that of
    its transformation, measured by the pass runner, so the hooks of other
    instruments around it are not counted (those of its nested passes are part
    of its self time). Entering a context with this instrument starts a new
    tree; the tree stays on the instance after the context exits.

    Examples
    --------
    >>> timing = PassTimingInstrument()
    >>> with PassContext(instruments=[timing]):      # doctest: +SKIP
    ...     mod = get_pass("O2")(mod)
    >>> print(timing.render())                        # doctest: +SKIP
    """

    def __init__(self) -> None:
        self._root = _TimingNode("")
        self._open: list[_TimingNode] = []

    def enter_pass_ctx(self) -> None:
        self._root = _TimingNode("")
        self._open = []

    def exit_pass_ctx(self) -> None:
        self._open = []  # passes cut short by an exception stay uncounted

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        parent = self._open[-1] if self._open else self._root
        node = parent.children.get(info.name)
        if node is None:
            node = parent.children[info.name] = _TimingNode(info.name)
        self._open.append(node)

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if not self._open:
            return
        node = self._open.pop()
        node.calls += 1
        frame = running_frame()
        if frame is None:
            return
        node.total += frame.elapsed
        if frame.stats:
            for key, value in frame.stats.items():
                node.stats[key] = node.stats.get(key, 0) + value

    # -- worker processes (transform.instrument_protocol) ----------------------
    def worker_instrument(self) -> PassTimingInstrument:
        """A fresh instrument for a worker (merged back by :meth:`merge_worker_instrument`)."""
        return PassTimingInstrument()

    def merge_worker_instrument(self, worker: PassTimingInstrument) -> None:
        """Add ``worker``'s tree under the pass running here (the root when none is).

        Nodes of the same name under the same parent merge: calls, times and
        counters add up.
        """
        if not isinstance(worker, PassTimingInstrument):
            raise TypeError(f"expected a PassTimingInstrument, got {type(worker).__name__}")
        target = self._open[-1] if self._open else self._root
        pending = [(target, child) for child in reversed(worker._root.children.values())]
        while pending:  # depth-first in first-seen order, without recursion, like render
            parent, node = pending.pop()
            mine = parent.children.get(node.name)
            if mine is None:
                mine = parent.children[node.name] = _TimingNode(node.name)
            mine.calls += node.calls
            mine.total += node.total
            for key, value in node.stats.items():
                mine.stats[key] = mine.stats.get(key, 0) + value
            pending.extend((mine, child) for child in reversed(node.children.values()))

    def render(self) -> str:
        """The timing tree as text, one line per pass; ``""`` when no pass ran."""
        if not self._root.children:
            return ""
        lines = [f"{'pass':<40} {'calls':>6} {'total ms':>10} {'self ms':>10} {'%parent':>8}"]
        top_total = sum(c.total for c in self._root.children.values())
        pending = [(node, 0, top_total) for node in reversed(self._root.children.values())]
        while pending:  # depth-first, in first-seen order, without recursion
            node, depth, parent_total = pending.pop()
            own = node.total - sum(c.total for c in node.children.values())
            share = 100.0 * node.total / parent_total if parent_total > 0 else 100.0
            stats = " ".join(f"{k}={_fmt_stat(v)}" for k, v in node.stats.items())
            label = ("  " * depth + node.name)[:40]
            lines.append(f"{label:<40} {node.calls:>6} {node.total * 1e3:>10.3f} "
                         f"{own * 1e3:>10.3f} {share:>7.1f}%" + (f"  {stats}" if stats else ""))
            pending.extend((child, depth + 1, node.total)
                           for child in reversed(node.children.values()))
        return "\n".join(lines)

    def totals(self) -> dict[str, float]:
        """Total seconds per pass name, summed over the whole tree."""
        out: dict[str, float] = {}
        pending = list(self._root.children.values())
        while pending:
            node = pending.pop()
            out[node.name] = out.get(node.name, 0.0) + node.total
            pending.extend(node.children.values())
        return out


def _fmt_stat(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"
