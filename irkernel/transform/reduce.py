"""``transform.reduce(mod, predicate)``: delta debugging of a graph module (like llvm-reduce).

The reducer looks for the smallest module for which ``predicate(module)`` stays
true ("interesting": a crash, a miscompile, a wrong error), trying the edits of
``reduce_edits`` in rounds until a round changes nothing. Every candidate is
checked with ``verify`` before the predicate sees it, so the predicate only
ever gets well-formed modules, and the result verifies.

Why a schedule and not ddmin over single nodes: a predicate call on a 1e5-node
graph costs about a second (the interpreter), so the reducer must shrink a
large graph in few calls. Per graph function, in order:

1. **cone**: drop what the outputs do not read;
2. **cut**: bisect over a prefix length ``k`` (the nodes below ``k``, returning
   the values they hand on): a miscompile at node p is visible in every prefix
   past p, so about log2(n) calls bring the graph down to where it starts;
3. **outputs**: ddmin over the outputs (drop chunks of them);
4. **params**: ddmin over node ranges, each range replaced by parameters at once
   (what the rest reads from it becomes an input; everything above it dies);
5. **bypass**: ddmin over nodes replaced by their first, then second, operand of
   the same type (unary and elementwise ops go);
6. **consts**: nodes, then constants, replaced by zeros, then by ones;
7. **shapes**: every dimension of a size tried at 1, then halved, where the
   type rules still accept the graph.

Then the module drops the functions and PrimFuncs nothing public calls. ddmin
here is the classic chunk-halving loop: chunks of the candidate list are tried
from the first on; a chunk whose edit keeps the predicate true is taken (the
list is recomputed on the smaller graph), and when no chunk of a size helps, the
size halves. Each call is whole-array work on the columns; per-node Python
happens only on graphs ddmin has already made small.

The predicate: a callable ``IRModule -> bool``. An exception counts as False
(the reducer looks for *that* behaviour, not another one). With ``timeout``
each call runs in a forked child process that is killed when it runs longer
(a hang, or a crash of the process, is False too). The CLI's ``--test CMD``
is such a predicate (``irkernel.cli.reduce_cmd``).

Every step is put to the oracle (``reduce_oracle``) as one question over a list
of candidates made lazily, in order: "the first that stays interesting" (ddmin's
chunks from the current position on, the sizes tried for a dimension), or, for
the bisection, "the first that does not" among the prefixes serial bisection
would try after each yes (``mid`` of ``lo`` and the last one). With ``jobs`` > 1
the oracle runs several of a list at once and reads the answers in order, so
the result is the serial one. Answers are cached by structural hash. Imports
``irkernel.ir``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from irkernel.ir import ops
from irkernel.ir.distinct import sorted_distinct
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule
from irkernel.ir.verify import verify
from irkernel.transform import reduce_edits as edits
from irkernel.transform.reduce_oracle import Oracle, Predicate, PredicateCall

Edit = Callable[[Function, np.ndarray], "Function | None"]


class ReduceError(ValueError):
    """The predicate is false on the input module (nothing to reduce towards)."""


class _Target:
    """One graph function of the module being reduced (its current state)."""

    def __init__(self, mod: IRModule, name: str, oracle: Oracle) -> None:
        self.mod, self.name, self.oracle = mod, name, oracle

    @property
    def func(self) -> Function:
        return self.mod.functions[self.name]

    def candidate(self, cand: Function | None) -> IRModule | None:
        """The module with ``cand`` in place of the function; None when it is no change."""
        if cand is None or cand is self.func:
            return None
        return self.mod.with_functions({self.name: cand})

    def first(self, cands: Iterator[Function | None]) -> int | None:
        """Take the first of ``cands`` (made lazily, in order) that keeps the predicate
        true and return its index; the oracle may try the next ones concurrently."""
        made: list[IRModule | None] = []

        def modules() -> Iterator[IRModule | None]:
            for cand in cands:
                made.append(self.candidate(cand))
                yield made[-1]

        hit = self.oracle.first(modules())
        if hit is not None:
            self.mod = made[hit]  # type: ignore[assignment]
        return hit

    def attempt(self, cand: Function | None) -> bool:
        """Take ``cand`` when it is a change and keeps the predicate true."""
        return self.first(iter([cand])) is not None


def _chunks(n: int, chunk: int, pos: int) -> Iterator[tuple[int, int]]:
    """(size, start) of the chunks ddmin tries on a list of ``n`` when nothing is taken:
    from ``pos`` on at this size, then every chunk at each halved size down to 1."""
    while True:
        yield from ((chunk, start) for start in range(pos, n, chunk))
        if chunk == 1:
            return
        chunk, pos = max(1, min(chunk, n) // 2), 0


def ddmin(target: _Target, items: Callable[[Function], np.ndarray], edit: Edit) -> bool:
    """Chunk-halving ddmin: ``edit(func, chunk)`` for chunks of ``items(func)``, keeping
    each edit that leaves the predicate true. Returns whether anything was taken.
    Until an edit is taken, the graph does not change, so the chunks left at this size
    and at all smaller ones are one ``first`` question (tried concurrently); after a
    hit, ddmin goes on at its size and place on the smaller graph."""
    changed = False
    current = items(target.func)
    chunk, pos = max(1, len(current) // 2), 0
    while True:
        func, tried = target.func, []

        def edits_from(current: np.ndarray = current, chunk: int = chunk,
                       pos: int = pos) -> Iterator[Function | None]:
            for size, start in _chunks(len(current), chunk, pos):
                tried.append((size, start))
                yield edit(func, current[start:start + size])

        hit = target.first(edits_from())
        if hit is None:
            return changed
        changed, (chunk, pos) = True, tried[hit]
        current = items(target.func)  # ids moved: recomputed on the smaller graph


def _cut_bisect(target: _Target) -> bool:
    """The shortest prefix whose handed-on values keep the predicate true (bisection).
    The probes serial bisection would make after a True answer form a chain (each the
    middle of ``lo`` and the last): one ``first(want=False)`` question, run concurrently."""
    oracle = target.oracle
    lo, hi = 1, target.func.num_nodes  # invariant: prefix hi is interesting
    best = None
    while hi - lo > 1:
        mids: list[int] = []
        made: list[IRModule | None] = []

        def chain(lo: int = lo, hi: int = hi) -> Iterator[IRModule | None]:
            while hi - lo > 1:
                hi = (lo + hi) // 2
                mids.append(hi)
                made.append(target.candidate(edits.cut(target.func, hi)))
                yield made[-1]

        miss = oracle.first(chain(), want=False)
        taken = len(mids) if miss is None else miss  # the probes before the miss held
        if taken:
            hi, best = mids[taken - 1], made[taken - 1]
        if miss is not None:
            lo = mids[miss]
    if best is None:
        return False
    target.mod = best
    return True


def _ops(func: Function) -> np.ndarray:
    return np.nonzero((func.kind != ops.OP_PARAM) & (func.kind != ops.OP_CONST))[0]


def _consts(func: Function) -> np.ndarray:
    return np.nonzero(func.kind == ops.OP_CONST)[0]


def _positions(func: Function) -> np.ndarray:
    return np.arange(len(func.outputs))


def _shrink(target: _Target) -> bool:
    """Each dimension size above 1 tried at 1, then at its half."""
    changed = False
    sizes = sorted({d for s in target.func.shapes.shapes for d in s if d > 1}, reverse=True)
    for size in sizes:  # per distinct dimension size (few)
        news = [new for new in (1, size // 2) if new < size]
        if target.first(edits.shrink_dim(target.func, size, new) for new in news) is not None:
            changed = True
    return changed


def _reduce_function(target: _Target) -> None:
    oracle = target.oracle

    def step(name: str, changed: bool) -> None:
        if changed:
            oracle.log(f"@{target.name} {name}: {target.func.num_nodes} nodes")

    step("cone", target.attempt(edits.prune(target.func)))
    step("cut", _cut_bisect(target))
    while True:
        before = (target.func.num_nodes, len(_ops(target.func)))
        step("outputs", ddmin(target, _positions, lambda f, c: edits.keep_outputs(
            f, np.delete(f.outputs, c))))
        step("params", ddmin(target, _ops, edits.to_params))
        for slot in (0, 1, 2):
            step(f"bypass {slot}", ddmin(
                target, _ops, lambda f, c, s=slot: edits.bypass(f, c, s)))
        for fill in (0, 1):
            step(f"consts {fill}", ddmin(
                target, _ops, lambda f, c, v=fill: edits.to_consts(f, c, v)))
        step("const values 0", ddmin(target, _consts, lambda f, c: edits.to_consts(f, c, 0)))
        step("shapes", _shrink(target))
        # A round that made the graph no smaller ends it (edits such as zeros -> ones
        # may change a graph without shrinking it, and must not loop).
        if (target.func.num_nodes, len(_ops(target.func))) >= before:
            return


def _called(mod: IRModule) -> set[str]:
    """Names the module's public functions reach through call_func / call_tir callees
    (per distinct attribute record, not per node)."""
    public = [name for name, f in mod.functions.items()
              if isinstance(f, Function) and "global_symbol" in f.attrs]
    seen, todo = set(public), list(public)
    while todo:
        func = mod.functions[todo.pop()]
        if not isinstance(func, Function):
            continue
        calls = (func.kind == ops.OP_CALL_FUNC) | (func.kind == ops.OP_CALL_TIR)
        for aid in sorted_distinct(func.attr_id[calls]).tolist():
            callee = func.attr_table.as_dict(aid).get("callee")
            if isinstance(callee, str) and callee in mod.functions and callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


def _drop_functions(mod: IRModule, oracle: Oracle) -> IRModule:
    """Without the functions nothing public calls (all at once, else one at a time)."""
    unused = [name for name in mod.functions if name not in _called(mod)]
    if not unused:
        return mod
    keep = {k: v for k, v in mod.functions.items() if k not in unused}
    if keep and oracle(IRModule(keep)):
        return IRModule(keep)
    for name in unused:
        cand = IRModule({k: v for k, v in mod.functions.items() if k != name})
        if len(cand) and oracle(cand):
            mod = cand
    return mod


def reduce(mod: IRModule, predicate: Predicate, *, timeout: float | None = None,
           jobs: int = 1, progress: Callable[[str], None] | None = None) -> IRModule:
    """The smallest module found for which ``predicate`` stays true (delta debugging).

    Parameters
    ----------
    mod : IRModule
        The interesting input; it must verify and ``predicate(mod)`` must be true.
    predicate : callable IRModule -> bool
        True when a candidate still shows the behaviour. Raising counts as False.
    timeout : float, optional
        Seconds per call; each call then runs in a forked child process, so a hang
        or a crash of the process counts as False too.
    jobs : int, default 1
        Predicate calls in flight at once: where the reducer tries candidates in order
        and takes the first that keeps the predicate true, the next ``jobs - 1`` are
        tried concurrently (forked children with ``timeout``, else threads: the
        predicate must then be thread-safe). The result is the same for every
        ``jobs`` when the predicate is deterministic.
    progress : callable str -> None, optional
        Called with one line per reduction step (time, calls started, graph size).

    Returns
    -------
    IRModule
        Verified, with ``predicate`` true on it.

    Raises
    ------
    ReduceError
        When ``predicate`` is false on ``mod`` itself.
    TypeError
        When ``mod`` is not an IRModule or ``predicate`` is not callable.
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"reduce: expected an IRModule, got {type(mod).__name__}")
    if not callable(predicate):
        raise TypeError(f"reduce: predicate must be callable, got {type(predicate).__name__}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"reduce: timeout must be > 0 seconds, got {timeout!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"reduce: jobs must be an int >= 1, got {jobs!r}")
    oracle = Oracle(predicate, timeout=timeout, jobs=jobs, progress=progress)
    verify(mod)
    graph_names = [name for name, f in mod.functions.items() if isinstance(f, Function)]
    graph_names.sort(key=lambda name: name != "main")  # the entry first
    # The input's check and the entry's cone are one question (the serial order), so
    # that with jobs > 1 they run at once; the cone step finds its answer cached.
    cone = None
    if graph_names:
        entry = _Target(mod, graph_names[0], oracle)
        cone = entry.candidate(edits.prune(entry.func))
    if oracle.first([mod, cone], want=False) == 0:
        raise ReduceError("reduce: the predicate is false on the input module "
                          "(it must show the behaviour to reduce)")
    for name in graph_names:
        if name not in mod.functions:
            continue
        target = _Target(mod, name, oracle)
        _reduce_function(target)
        mod = _drop_functions(target.mod, oracle)
    nodes = sum(f.num_nodes for f in mod.functions.values() if isinstance(f, Function))
    oracle.log(f"done: {nodes} graph nodes ({oracle.unused} calls unused, "
               f"{oracle.cached} candidates answered from the cache)")
    return mod


__all__ = ["Predicate", "PredicateCall", "ReduceError", "ddmin", "reduce"]
