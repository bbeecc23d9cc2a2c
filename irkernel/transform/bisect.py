"""``bisect(pipeline, mod, predicate)``: find the pass execution that breaks a predicate.

Uses the ``irkernel.bisect_limit`` config (LLVM's ``-opt-bisect-limit``): a
context with limit N runs only the first N leaf-pass executions. A counting
run learns the number and names of the executions; a binary search over N
then finds the smallest N whose result fails the predicate. This assumes the
pipeline is deterministic (the first N executions are the same in every run
with a limit >= N) and the predicate monotone over N.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import sys
from collections.abc import Callable
from dataclasses import dataclass

from irkernel.ir.module import IRModule
from irkernel.transform.context import PassContext
from irkernel.transform.pass_base import Pass


@dataclass(frozen=True, eq=False)
class BisectResult:
    """The first pass execution after which the predicate fails.

    Attributes
    ----------
    index : int
        1-based number of the culprit execution (``irkernel.bisect_limit=index``
        reproduces the failure, ``index - 1`` does not).
    pass_name : str
        Name of the pass of that execution.
    total : int
        Number of leaf-pass executions of the whole pipeline.
    before, after : IRModule
        The pipeline's result with limits ``index - 1`` and ``index``.
    """

    index: int
    pass_name: str
    total: int
    before: IRModule
    after: IRModule

    def __str__(self) -> str:
        return (f"pass execution {self.index} of {self.total} ({self.pass_name}) is the first "
                f"after which the predicate fails")


def _run(pipeline: Pass, mod: IRModule, base: PassContext,
         limit: int) -> tuple[IRModule, PassContext]:
    ctx = base.derive(config={**base.config, "irkernel.bisect_limit": limit})
    with ctx:
        out = pipeline(mod, ctx)
    return out, ctx


def bisect(pipeline: Pass, mod: IRModule,
           predicate: Callable[[IRModule], bool]) -> BisectResult | None:
    """Find the first pass execution of ``pipeline`` after which ``predicate`` fails.

    The runs use the current context's opt level, required/disabled passes and
    config, and no instruments.

    Parameters
    ----------
    pipeline : Pass
        Usually a Sequential.
    mod : IRModule
        The input, which must satisfy ``predicate``.
    predicate : callable
        ``predicate(mod) -> bool``; True means "still good". Exceptions propagate.

    Returns
    -------
    BisectResult or None
        None when the whole pipeline's result satisfies ``predicate``.

    Raises
    ------
    ValueError
        When ``mod`` itself fails ``predicate``.

    Examples
    --------
    >>> result = bisect(get_pass("O2"), mod, lambda m: interpret(m, x)[0][0] == 1.0)
    ... # doctest: +SKIP
    """
    if not isinstance(pipeline, Pass):
        raise TypeError(f"bisect: pipeline must be a Pass, got {type(pipeline).__name__}")
    if not isinstance(mod, IRModule):
        raise TypeError(f"bisect: mod must be an IRModule, got {type(mod).__name__}")
    if not callable(predicate):
        raise TypeError("bisect: predicate must be callable")
    base = PassContext.current()
    if not predicate(mod):
        raise ValueError("bisect: the input module already fails the predicate")
    full, counting = _run(pipeline, mod, base, sys.maxsize)
    if predicate(full):
        return None
    names = list(counting._bisect_log)  # pyright: ignore[reportPrivateUsage]
    if not names:
        raise ValueError("bisect: the predicate gave different answers for the same module "
                         "(the pipeline ran no pass)")
    results: dict[int, IRModule] = {0: mod, len(names): full}
    good, bad = 0, len(names)
    while bad - good > 1:
        mid = (good + bad) // 2
        out, _ = _run(pipeline, mod, base, mid)
        results[mid] = out
        if predicate(out):
            good = mid
        else:
            bad = mid
    return BisectResult(index=bad, pass_name=names[bad - 1], total=len(names),
                        before=results[good], after=results[bad])
