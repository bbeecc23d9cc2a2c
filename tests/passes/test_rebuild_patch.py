"""``rebuild(..., patch=...)``: rewritten rows as a sorted list instead of copied columns.

A patch list must give exactly what the same rewrites in full copied columns
give (the older protocol), with and without dropping, and bad lists are errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
from irkernel.ir.errors import IRError
from irkernel.ir.ids import ENC_BINARY, NONE
from irkernel.ir.ops import OP_ADD, OP_MULTIPLY, op_arrays
from irkernel.ir.rebuild import rebuild
from irkernel.testing import random_function


def _patch(func: ik.Function, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Swap the operands of some binary rows and turn add into multiply (and back)."""
    binary = np.nonzero(op_arrays().encoding[func.kind] == ENC_BINARY)[0]
    rows = np.sort(rng.choice(binary, size=len(binary) // 3, replace=False)).astype(np.int32)
    kind = func.kind[rows].copy()
    kind = np.where(kind == OP_ADD, OP_MULTIPLY,
                    np.where(kind == OP_MULTIPLY, OP_ADD, kind)).astype(np.int16)
    return rows, kind, func.a1[rows].copy(), func.a0[rows].copy(), func.attr_id[rows].copy()


def _as_columns(func: ik.Function, patch: tuple[np.ndarray, ...]) -> dict[str, np.ndarray]:
    cols = {}
    for name, values in zip(("kind", "a0", "a1", "attr_id"), patch[1:], strict=True):
        cols[name] = np.array(getattr(func, name))
        cols[name][patch[0]] = values
    return cols


def _replacements(func: ik.Function, rng: np.random.Generator) -> np.ndarray:
    """Replace some non-param nodes by an earlier node of the same dtype and shape."""
    n = func.num_nodes
    rep = np.full(n, NONE, np.int32)
    is_param = np.zeros(n, bool)
    is_param[func.params] = True
    for i in range(1, n):
        if not is_param[i] and rng.random() < 0.3:
            same = np.nonzero((func.dtype[:i] == func.dtype[i])
                              & (func.shape_id[:i] == func.shape_id[i]))[0]
            if len(same):
                rep[i] = same[rng.integers(len(same))]
    return rep


@pytest.mark.parametrize("seed", range(6))
def test_patch_equals_rewritten_columns(seed: int) -> None:
    func = random_function(3000, seed=seed)
    rng = np.random.default_rng(seed)
    patch = _patch(func, rng)
    assert len(patch[0]) > 0
    expected = rebuild(func, **_as_columns(func, patch))
    assert ik.structural_equal(rebuild(func, patch=patch), expected)
    rep = _replacements(func, rng)
    expected = rebuild(func, rep=rep, **_as_columns(func, patch))
    assert ik.structural_equal(rebuild(func, rep=rep, patch=patch), expected)
    keep = np.ones(func.num_nodes, bool)
    assert ik.structural_equal(rebuild(func, keep=keep, rep=rep, patch=patch), expected)


def test_patch_does_not_modify_the_input() -> None:
    func = random_function(500, seed=1)
    before = [np.array(getattr(func, c)) for c in ("kind", "a0", "a1", "attr_id")]
    rebuild(func, patch=_patch(func, np.random.default_rng(1)))
    for col, old in zip(("kind", "a0", "a1", "attr_id"), before, strict=True):
        assert np.array_equal(getattr(func, col), old), col


def test_empty_patch_returns_the_input() -> None:
    func = random_function(100, seed=2)
    empty = (np.empty(0, np.int32), np.empty(0, np.int16), np.empty(0, np.int32),
             np.empty(0, np.int32), np.empty(0, np.int32))
    assert rebuild(func, patch=empty) is func


@pytest.mark.parametrize("rows", [[5, 3], [4, 4], [-1, 2], [3, 10**6]])
def test_patch_rows_must_be_increasing_node_ids(rows: list[int]) -> None:
    func = random_function(200, seed=3)
    r = np.array(rows, np.int32)
    patch = (r, func.kind[r % func.num_nodes].copy(), func.a0[r % func.num_nodes].copy(),
             func.a1[r % func.num_nodes].copy(), func.attr_id[r % func.num_nodes].copy())
    with pytest.raises(IRError, match="MyPass: patch rows must be strictly increasing"):
        rebuild(func, patch=patch, pass_name="MyPass")


def test_patch_dtypes_are_checked() -> None:
    func = random_function(200, seed=4)
    r = np.array([7], np.int32)
    bad = (r, func.kind[r].astype(np.int32), func.a0[r], func.a1[r], func.attr_id[r])
    with pytest.raises(TypeError, match="MyPass: patch must be"):
        rebuild(func, patch=bad, pass_name="MyPass")
