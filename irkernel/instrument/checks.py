"""Checking instruments: VerifyEach, CheckSemantics, CheckImmutable (and PassCheckError).

All of them lean on change tracking: a pass that changed nothing returned
its input object, so unchanged passes cost nothing (no verify, no
interpretation). Imports the IR, testing (random inputs) and transform layers;
never ``passes``/``runtime``.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import dataclasses
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.instrument.base import PassInstrument
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.interp import interpret
from irkernel.ir.module import IRModule
from irkernel.ir.verify import verify
from irkernel.testing import random_inputs
from irkernel.transform.pass_info import PassInfo


class PassCheckError(RuntimeError):
    """A checking instrument found a pass that broke a rule; ``pass_name`` names it."""

    def __init__(self, message: str, pass_name: str) -> None:
        super().__init__(message)
        self.pass_name = pass_name

# ---------------------------------------------------------------------------
# VerifyEach
# ---------------------------------------------------------------------------


class VerifyEach(PassInstrument):
    """Run ``ik.verify`` on every module a pass produces; name the pass that broke the IR.

    Raises ``IRError`` (chained to the verifier's error) in ``run_after_pass``
    of the first pass whose output does not verify; an input that is already
    invalid is reported before the first pass runs. Unchanged outputs are not
    verified again.
    """

    def __init__(self) -> None:
        self._good: IRModule | None = None

    def enter_pass_ctx(self) -> None:
        self._good = None

    def exit_pass_ctx(self) -> None:
        self._good = None

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if mod is self._good:
            return
        try:
            verify(mod)
        except IRError as exc:
            raise IRError(f"the input of pass {info.name!r} is already invalid: {exc}") from exc
        self._good = mod

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if mod is self._good:
            return
        try:
            verify(mod)
        except IRError as exc:
            raise IRError(f"pass {info.name!r} produced invalid IR: {exc}") from exc
        self._good = mod


# ---------------------------------------------------------------------------
# CheckSemantics
# ---------------------------------------------------------------------------


def _same_values(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    """Equal dtype and shape, and equal values where NaN equals NaN."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind not in "fc":
        return bool(np.array_equal(a, b))
    if rtol == 0 and atol == 0:
        return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    return bool(np.all(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)))


def _describe(a: np.ndarray, b: np.ndarray) -> str:
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype}{list(a.shape)} became {b.dtype}{list(b.shape)}"
    a1, b1 = np.atleast_1d(a), np.atleast_1d(b)
    bad = a1 != b1
    if a1.dtype.kind in "fc":
        bad &= ~(np.isnan(a1) & np.isnan(b1))
    if not bad.any():
        return "values differ beyond the tolerance"
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(np.count_nonzero(bad))} element(s) differ; first at index {list(first)}: "
            f"{a1[first]!s} became {b1[first]!s}")


class CheckSemantics(PassInstrument):
    """Interpret the module before and after every pass; name the first pass that changed results.

    The reference interpreter (``ik.interpret``) runs the entry function on
    fixed inputs. Results must keep their count, dtype and shape, and equal
    values (NaN equals NaN; exact unless ``rtol``/``atol`` are given).
    Unchanged outputs are not interpreted again. Raises :class:`PassCheckError`.

    Parameters
    ----------
    inputs : sequence of array, optional
        Inputs of the entry function; generated from its signature with
        ``seed`` when omitted.
    entry : str
        The function to run (default ``"main"``).
    seed : int
        Seed for generated inputs.
    rtol, atol : float
        Tolerances (default 0: bit-exact apart from NaN payloads).
    """

    def __init__(self, inputs: Sequence[Any] | None = None, entry: str = "main", seed: int = 0,
                 rtol: float = 0.0, atol: float = 0.0) -> None:
        self.inputs = None if inputs is None else list(inputs)
        self.entry = entry
        self.seed = seed
        self.rtol = rtol
        self.atol = atol
        self._ref_mod: IRModule | None = None
        self._ref: list[np.ndarray] = []

    def enter_pass_ctx(self) -> None:
        self._ref_mod = None
        self._ref = []

    def exit_pass_ctx(self) -> None:
        self._ref_mod = None
        self._ref = []

    def _interpret(self, mod: IRModule) -> list[np.ndarray]:
        if self.entry not in mod:
            raise ValueError(f"CheckSemantics: the module has no entry function {self.entry!r}")
        if self.inputs is None:
            func = mod[self.entry]
            if not isinstance(func, Function):
                raise TypeError(f"CheckSemantics: entry {self.entry!r} is not a graph Function")
            self.inputs = list(random_inputs(func, self.seed))
        return [np.asarray(r) for r in interpret(mod, *self.inputs, entry=self.entry)]

    @staticmethod
    def _has_graphs(mod: IRModule) -> bool:
        """Modules of PrimFuncs only have no graph entry to interpret: ``runtime.build``
        lowers each kernel in a module of its own, and those passes are not checked."""
        return any(isinstance(f, Function) for f in mod.functions.values())

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if mod is not self._ref_mod and self._has_graphs(mod):
            self._ref = self._interpret(mod)
            self._ref_mod = mod

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if mod is self._ref_mod or not self._has_graphs(mod):
            return
        try:
            got = self._interpret(mod)
        except (IRError, TypeError, ValueError) as exc:
            raise PassCheckError(f"pass {info.name!r}: the interpreter fails on its output: "
                                 f"{exc}", info.name) from exc
        if len(got) != len(self._ref):
            raise PassCheckError(f"pass {info.name!r} changed the number of results of "
                                 f"{self.entry!r} from {len(self._ref)} to {len(got)}", info.name)
        for pos, (want, have) in enumerate(zip(self._ref, got, strict=True)):
            if not _same_values(want, have, self.rtol, self.atol):
                raise PassCheckError(f"pass {info.name!r} changed result {pos} of "
                                     f"{self.entry!r}: {_describe(want, have)}", info.name)
        self._ref_mod = mod


# ---------------------------------------------------------------------------
# CheckImmutable
# ---------------------------------------------------------------------------

_POOL_COLUMNS = ("dtype", "shape_id", "sval", "offset", "data")


def _crc(arr: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(arr).data)


def _column_names(func: Function) -> list[str]:
    """The Function fields holding NumPy columns (read from the dataclass, so new columns count)."""
    return [f.name for f in dataclasses.fields(func)
            if isinstance(getattr(func, f.name), np.ndarray)]


def _fingerprint(mod: IRModule) -> dict[str, Any]:
    """A digest per module entry: column and pool checksums for graph Functions."""
    prints: dict[str, Any] = {"<module attrs>": tuple((k, id(v)) for k, v in mod.attrs.items())}
    for name, value in mod.functions.items():
        if isinstance(value, Function):
            cols: dict[str, Any] = {col: _crc(getattr(value, col)) for col in _column_names(value)}
            cols.update({f"consts.{col}": _crc(getattr(value.consts, col))
                         for col in _POOL_COLUMNS})
            # Constants held by reference are read-only views: their identity and flag
            # are checked, not their bytes (a checksum of 575 MB per pass would dominate).
            cols["consts.external"] = tuple(
                (cid, id(arr), arr.flags.writeable) for cid, arr in value.consts.external.items())
            cols["attrs"] = tuple((k, id(v)) for k, v in value.attrs.items())
            prints[name] = (id(value), cols)
        else:
            prints[name] = (id(value), {})
    return prints


def _first_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    for name in dict.fromkeys([*old, *new]):
        if name not in new:
            return f"function {name!r} was removed"
        if name not in old:
            return f"function {name!r} was added"
        if name == "<module attrs>":
            if old[name] != new[name]:
                return "the module attributes changed"
            continue
        (old_id, old_cols), (new_id, new_cols) = old[name], new[name]
        if old_id != new_id:
            return f"function {name!r} was replaced"
        for col, crc in old_cols.items():
            if new_cols.get(col) != crc:
                return f"function {name!r}: {col} changed"
    return None


class CheckImmutable(PassInstrument):
    """Check that no pass mutates its input module (TVM's ``testing.immutable_module``).

    ``run_before_pass`` keeps the input module and a checksum of every column
    and constant-pool buffer of its graph Functions; ``run_after_pass``
    re-checks that same input and raises :class:`PassCheckError` naming the
    pass and what changed. Costs one pass over the bytes of the module per
    pass: meant for tests (``tests/conftest.py`` can turn it on for all).
    """

    def __init__(self) -> None:
        self._stack: list[tuple[IRModule, dict[str, Any]]] = []

    def enter_pass_ctx(self) -> None:
        self._stack = []

    def exit_pass_ctx(self) -> None:
        self._stack = []

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self._stack and self._stack[-1][0] is mod:
            # A container's input: the outer entry already holds its checksums.
            self._stack.append(self._stack[-1])
        else:
            self._stack.append((mod, _fingerprint(mod)))

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if not self._stack:
            return
        before, prints = self._stack.pop()
        problem = _first_difference(prints, _fingerprint(before))
        if problem is not None:
            raise PassCheckError(f"pass {info.name!r} mutated its input module: {problem}",
                                 info.name)
