"""The predicate behind ``transform.reduce``: checked, cached and run N candidates at a time.

The reducer mostly asks one question: *of these candidates, in this order, which is
the first for which the predicate holds?* (ddmin's chunks, the per-node edit
batches, the sizes a dimension is tried at) or, for the bisection of ``cut``,
*which is the first for which it fails?* :meth:`Oracle.first` answers it with up to
``jobs`` predicate calls in flight: it starts the candidates in order, reads the
answers in order, and returns the first index with the wanted answer, killing the
calls after it that are still running. A later candidate's answer is only used
once every earlier one is known, so the answer, and with it the reduced module,
is the serial run's whatever ``jobs`` is (for a deterministic predicate); the
calls that ran past the answer are the price of the speed-up ("speculative").

Before a call, a candidate is checked with ``verify`` (the predicate only ever
sees well-formed modules) and looked up by ``structural_hash``: a candidate equal
to one already tried (a second round of edits that changed nothing, a bisection
step that lands on the prefix it took) gets the recorded answer without a call.

How a call runs (:class:`PredicateCall`): in the calling thread when ``jobs`` is 1
and there is no timeout; in a forked child process killed at the timeout when
there is one (a hang, or a crash of the process, is False); in a thread when
``jobs`` > 1 and there is no timeout (the predicate must then be thread-safe, and
a call no longer needed runs to its end, its answer ignored). A predicate object
with a ``start(mod)`` method returning a :class:`PredicateCall` runs its calls
itself: the CLI's ``--test`` starts a subprocess per candidate. Imports
``irkernel.ir``.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait

from irkernel.ir.errors import IRError
from irkernel.ir.module import IRModule
from irkernel.ir.structural import structural_hash
from irkernel.ir.verify import verify

Predicate = Callable[[IRModule], bool]

#: How long to sleep between polls of calls that offer nothing to wait on (seconds).
_POLL = 0.02


class PredicateCall:
    """One predicate call in flight. ``poll`` is the answer once there is one (else None),
    ``kill`` ends the call early, ``waitable`` (an fd or a Connection, or None) becomes
    ready when ``poll`` may have an answer."""

    waitable: object = None
    deadline: float | None = None

    def poll(self) -> bool | None:
        raise NotImplementedError

    def kill(self) -> None:
        """Stop the call; its answer is not needed any more."""


class _Answered(PredicateCall):
    """A call made on the spot, in the calling thread."""

    def __init__(self, predicate: Predicate, mod: IRModule) -> None:
        try:
            self.answer = bool(predicate(mod))
        except KeyboardInterrupt:
            raise
        except Exception:  # noqa: BLE001 - another failure is not the one looked for
            self.answer = False

    def poll(self) -> bool:
        return self.answer


class _PipedCall(PredicateCall):
    """``predicate(mod)`` in a forked child (``fork=True``) or a thread, answering through
    a pipe: an exception, a crash of the child or a timeout is False."""

    def __init__(self, predicate: Predicate, mod: IRModule, timeout: float | None,
                 fork: bool) -> None:
        ctx = multiprocessing.get_context("fork")
        self.waitable, writer = ctx.Pipe(duplex=False)
        self.deadline = None if timeout is None else time.monotonic() + timeout

        def run() -> None:
            try:
                answer = bool(predicate(mod))
            except BaseException:  # noqa: BLE001 - any failure of the predicate means False
                answer = False
            try:
                writer.send(answer)
            except OSError:  # the reducer stopped listening (a call no longer needed)
                pass
            if not fork:
                writer.close()

        if fork:
            self.worker: object = ctx.Process(target=run, daemon=True)
            self.worker.start()
            writer.close()  # before the next fork, so that a dead child reads as EOF
        else:
            self.worker = threading.Thread(target=run, daemon=True, name="reduce-predicate")
            self.worker.start()
        self.answer: bool | None = None

    def poll(self) -> bool | None:
        if self.answer is not None:
            return self.answer
        reader: Connection = self.waitable  # type: ignore[assignment]
        try:
            if reader.poll():
                self.answer = bool(reader.recv())
        except EOFError:  # the child died without answering (a crash)
            self.answer = False
        if self.answer is None and self.deadline is not None and time.monotonic() > self.deadline:
            self.answer = False
        if self.answer is not None:
            self.kill()
        return self.answer

    def kill(self) -> None:
        worker = self.worker
        if isinstance(worker, multiprocessing.process.BaseProcess):
            if worker.is_alive():
                worker.kill()
            worker.join()
        self.waitable.close()  # type: ignore[attr-defined]


class Oracle:
    """The predicate behind the reducer: verifies candidates, caches answers by structural
    hash, runs up to ``jobs`` calls at once, counts calls and logs steps."""

    def __init__(self, predicate: Predicate, *, timeout: float | None = None, jobs: int = 1,
                 progress: Callable[[str], None] | None = None) -> None:
        self.predicate = predicate
        self.timeout = timeout
        self.jobs = jobs
        self.progress = progress
        self.calls = 0  # predicate calls started
        self.unused = 0  # of which killed or ignored (ran past the answer)
        self.cached = 0  # candidates answered from the cache
        self.answers: dict[int, bool] = {}
        self.started = time.perf_counter()

    def _start(self, mod: IRModule) -> PredicateCall:
        self.calls += 1
        start = getattr(self.predicate, "start", None)
        if start is not None:
            return start(mod)
        if self.timeout is not None or self.jobs > 1:
            return _PipedCall(self.predicate, mod, self.timeout, fork=self.timeout is not None)
        return _Answered(self.predicate, mod)

    def _known(self, mod: IRModule | None) -> tuple[bool | None, int]:
        """(the answer when it needs no call, else None; the structural hash)."""
        if mod is None:
            return False, 0
        try:
            verify(mod)
        except IRError:
            return False, 0
        key = structural_hash(mod)
        answer = self.answers.get(key)
        if answer is not None:
            self.cached += 1
        return answer, key

    def __call__(self, mod: IRModule) -> bool:
        return self.first([mod]) == 0

    def first(self, candidates: Iterable[IRModule | None], want: bool = True) -> int | None:
        """The index of the first candidate (in order) whose answer is ``want``, or None.
        ``None`` and candidates that do not verify are False. Candidates are pulled from
        the iterable only as calls are started (at most ``jobs`` ahead of the answer)."""
        todo: Iterator[tuple[int, IRModule | None]] | None = enumerate(candidates)
        known: dict[int, bool] = {}
        running: dict[int, tuple[PredicateCall, int]] = {}
        called: list[int] = []  # the indices that cost a call
        pulled = nxt = 0
        found = None
        try:
            while found is None:
                while nxt in known:  # the answers, read in order
                    if known[nxt] == want:
                        found = nxt
                        break
                    nxt += 1
                if found is not None or (todo is None and nxt >= pulled):
                    break
                if todo is not None and len(running) < self.jobs:
                    item = next(todo, None)
                    if item is None:
                        todo = None
                        continue
                    pulled += 1
                    answer, key = self._known(item[1])
                    if answer is not None:
                        known[item[0]] = answer
                    else:
                        running[item[0]] = (self._start(item[1]), key)
                        called.append(item[0])
                    continue
                self._collect(running, known)
        finally:
            for call, _ in running.values():
                call.kill()
            self.unused += sum(1 for index in called if found is not None and index > found)
        return found

    def _collect(self, running: dict[int, tuple[PredicateCall, int]],
                 known: dict[int, bool]) -> None:
        """Wait until at least one running call has answered; move the answers to ``known``."""
        while True:
            done = False
            for index, (call, key) in list(running.items()):
                answer = call.poll()
                if answer is not None:
                    known[index] = self.answers[key] = answer
                    del running[index]
                    done = True
            if done:
                return
            calls = [call for call, _ in running.values()]
            waitables = [c.waitable for c in calls if c.waitable is not None]
            deadlines = [c.deadline for c in calls if c.deadline is not None]
            timeout = None if len(waitables) == len(calls) else _POLL
            if deadlines:
                left = max(0.0, min(deadlines) - time.monotonic())
                timeout = left if timeout is None else min(timeout, left)
            if waitables:
                wait(waitables, timeout)
            else:
                time.sleep(timeout or _POLL)

    def log(self, text: str) -> None:
        if self.progress is not None:
            self.progress(f"[{time.perf_counter() - self.started:7.2f}s, "
                          f"{self.calls} calls] {text}")


__all__ = ["Oracle", "Predicate", "PredicateCall"]
