"""Shared helpers of the graph-pass tests: the pass registry under test and exact comparison.

Imported by name (pytest's rootdir import mode puts this directory on sys.path);
the module name is unique across the test tree on purpose.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest

import irkernel as ik
import passes
from irkernel import transform

#: The graph passes of O2, by registered (= constructor) name.
GRAPH_PASSES: tuple[str, ...] = ("FoldConstant", "DeadCodeElimination",
                                 "EliminateCommonSubexpr", "SimplifyArith")

#: Every pass under test (the four passes, the O2 pipeline and its fixed point), by a test id.
PASS_FACTORIES: dict[str, Callable[[], transform.Pass]] = {
    **{name: (lambda name=name: transform.get_pass(name)) for name in GRAPH_PASSES},
    "O2": passes.O2,
    "fixpoint": passes.fixpoint,
}

#: The ones that reach their own fixed point in one run. O2 does not: SimplifyArith can
#: create constants (``x - x`` -> zeros) after FoldConstant ran, and EliminateCommonSubexpr
#: can create ``x - x`` after SimplifyArith ran; ``fixpoint()`` is the idempotent form.
IDEMPOTENT: tuple[str, ...] = (*GRAPH_PASSES, "fixpoint")


def make_pass(name: str) -> transform.Pass:
    return PASS_FACTORIES[name]()


def _bits(a: np.ndarray) -> np.ndarray:
    """The raw element bits, so that -0.0 and +0.0 differ."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).reshape(a.shape + (a.dtype.itemsize,))


def same_value(expected: np.ndarray, got: np.ndarray) -> str | None:
    """None when equal: same dtype and shape, bitwise equal except that any NaN matches any NaN."""
    if expected.dtype != got.dtype:
        return f"dtype {got.dtype} != {expected.dtype}"
    if expected.shape != got.shape:
        return f"shape {got.shape} != {expected.shape}"
    if expected.dtype.kind == "f":
        nan_e, nan_g = np.isnan(expected), np.isnan(got)
        if not np.array_equal(nan_e, nan_g):
            return f"NaN positions differ: expected {expected!r}, got {got!r}"
        if not np.array_equal(_bits(expected[~nan_e]), _bits(got[~nan_g])):
            return f"values differ bitwise: expected {expected!r}, got {got!r}"
        return None
    if not np.array_equal(expected, got):
        return f"values differ: expected {expected!r}, got {got!r}"
    return None


def assert_same_results(expected: Sequence[np.ndarray], got: Sequence[np.ndarray],
                        what: str = "") -> None:
    assert len(expected) == len(got), f"{what}: {len(got)} outputs, expected {len(expected)}"
    for k, (e, g) in enumerate(zip(expected, got)):
        problem = same_value(np.asarray(e), np.asarray(g))
        assert problem is None, f"{what}: output {k}: {problem}"


def as_module(obj: ik.IRModule | ik.Function) -> ik.IRModule:
    return obj if isinstance(obj, ik.IRModule) else ik.IRModule({"main": obj})


def column_digest(mod: ik.IRModule) -> dict[str, str]:
    """A digest of every column, table and constant-pool buffer of every graph function."""
    out: dict[str, str] = {}
    for name, func in mod.functions.items():
        if not isinstance(func, ik.Function):
            continue
        h = hashlib.blake2b(digest_size=16)
        for col in ("kind", "a0", "a1", "dtype", "shape_id", "attr_id", "extra", "params",
                    "outputs"):
            h.update(np.ascontiguousarray(getattr(func, col)).tobytes() + b"|")
        pool = func.consts
        for arr in (pool.dtype, pool.shape_id, pool.sval, pool.offset, pool.data):
            h.update(np.ascontiguousarray(arr).tobytes() + b"|")
        h.update(repr((func.shapes.shapes, func.attr_table.records, dict(func.attrs),
                       func.param_names)).encode())
        out[name] = h.hexdigest()
    return out


def ops_of(func: ik.Function) -> list[str]:
    """Op names of the nodes, in order (for readable assertions)."""
    return [func.op(i).name for i in range(func.num_nodes)]


def golden_update_requested(option: bool, environ: Mapping[str, str]) -> bool:
    """Whether the golden tests rewrite their expected sections (``--update-goldens`` or
    ``IRKERNEL_UPDATE_GOLDENS=1``). Refused, failing the test, when ``CI`` is set: a run
    that rewrites what it compares against passes whatever the passes do."""
    asked = option or environ.get("IRKERNEL_UPDATE_GOLDENS", "") not in ("", "0")
    ci = environ.get("CI", "").strip().lower()
    if asked and ci not in ("", "0", "false", "no"):
        pytest.fail(f"golden update mode is refused under CI (CI={environ['CI']!r}): rewrite "
                    "the goldens locally with --update-goldens and commit the diff",
                    pytrace=False)
    return asked
