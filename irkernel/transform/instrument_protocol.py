"""What the pass context needs to know about instruments, without importing them.

The instrument classes (``irkernel.instrument``) sit a layer above the pass
context that calls them. The context only needs two facts, declared here by
markers the base class sets: whether an object is a pass instrument (the
class attribute ``_irkernel_pass_instrument``), and whether a hook is the base
class's no-op (the function attribute ``_irkernel_noop_hook``, set by
:func:`noop_hook`), so that it builds call lists holding only the hooks an
instrument overrides. The same marker idiom tells PrimFuncs apart
(``irkernel.ir.module.is_prim_func``). It also owns the one rule for what a
``should_run`` hook may return (:func:`should_run_verdict`), and the
protocol by which an instrument's results come back from worker processes
(:func:`worker_copy`, :func:`merge_from_worker`). Imports nothing from irkernel.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

#: The five hooks, in the order a context calls them over its life.
HOOK_NAMES = ("enter_pass_ctx", "exit_pass_ctx", "should_run", "run_before_pass",
              "run_after_pass")

_F = TypeVar("_F", bound=Callable[..., Any])


def noop_hook(fn: _F) -> _F:
    """Mark a base-class hook as a no-op that the context never needs to call."""
    fn._irkernel_noop_hook = True  # type: ignore[attr-defined]
    return fn


def is_instrument(obj: object) -> bool:
    """Whether ``obj`` is a pass instrument (an ``irkernel.instrument.PassInstrument``)."""
    return bool(getattr(type(obj), "_irkernel_pass_instrument", False))


def overridden_hook(inst: object, hook: str) -> Callable[..., Any] | None:
    """The bound hook of ``inst``, or None when it is the base class's no-op."""
    bound = getattr(inst, hook)
    if getattr(getattr(bound, "__func__", None), "_irkernel_noop_hook", False):
        return None
    return bound


def should_run_verdict(hook: Callable[..., Any], verdict: object, pass_name: str) -> bool:
    """``verdict`` (what ``hook``, a ``should_run``, returned) as a bool, converted as TVM does.

    A bool or an integer (NumPy's included) converts with C truthiness; anything
    else, ``None`` above all (an instrument that forgot its ``return``), is a
    TypeError naming the instrument and the pass, as TVM 0.27 raises "cannot
    convert None to bool". Taking ``None`` as a veto would silently turn off the
    user's pipeline; taking it as "run" would hide the bug the other way.

    Raises
    ------
    TypeError
        When ``verdict`` is neither a bool nor an integer.
    """
    if isinstance(verdict, (bool, numbers.Integral, np.bool_)):
        return bool(verdict)
    owner = getattr(hook, "__self__", None)
    where = f"{type(owner).__name__}.should_run" if owner is not None else repr(hook)
    shown = "None" if verdict is None else type(verdict).__name__
    raise TypeError(f"{where} returned {verdict!r} for pass {pass_name!r}: cannot convert "
                    f"{shown} to bool (return True to run the pass, False to skip it)")


def worker_copy(inst: object) -> object | None:
    """The instrument a worker runs for ``inst``, when ``inst`` can merge results back.

    An instrument that defines ``worker_instrument()`` (a fresh, picklable
    instrument of its kind) and ``merge_worker_instrument(worker_inst)`` (add
    a worker's results to its own) is *mergeable*: ``map_modules`` runs the
    fresh copy on each worker and merges it back in module order, so results
    such as pass timings cover every worker. Returns None for any other
    instrument (a pickled copy of it runs on the worker and its results stay
    there).
    """
    make = getattr(inst, "worker_instrument", None)
    if make is None or getattr(inst, "merge_worker_instrument", None) is None:
        return None
    return make()


def merge_from_worker(inst: object, worker_inst: object) -> None:
    """Merge a worker's copy (made by :func:`worker_copy`) back into ``inst``."""
    inst.merge_worker_instrument(worker_inst)  # type: ignore[attr-defined]
