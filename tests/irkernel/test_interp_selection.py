"""ik.interpret of the selection op ``topk_indices`` against hand-written Python: per row,
a ``sorted`` of the positions by a key that ranks NaN above every number and breaks ties
by position (ONNX: equal values, lower index first; onnxruntime's NaN order).

Expected values are Python's own per-row code, never the op table's reference.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from interp_helpers import NUMERIC, check, run, sample

COVERED = {"topk_indices"}


def _topk_row(row: list, k: int, largest: bool, in_order: bool) -> list[int]:
    def key(i: int) -> tuple:
        v = row[i]
        nan = isinstance(v, float) and math.isnan(v)
        rank = (1, 0.0) if nan else (0, v)      # NaN above every number
        if largest:
            rank = (-rank[0], -rank[1])
        return (*rank, i)                        # ties: lower index first

    best = sorted(range(len(row)), key=key)[:k]
    return sorted(best) if in_order else best


def _expected(x: np.ndarray, k: int, axis: int, largest: bool, in_order: bool) -> np.ndarray:
    moved = np.moveaxis(x, axis, -1)
    out = np.empty((*moved.shape[:-1], k), np.int64)
    for pos in itertools.product(*map(range, moved.shape[:-1])):
        out[pos] = _topk_row(moved[pos].tolist(), k, largest, in_order)
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize(("largest", "in_order"), [(True, False), (False, False),
                                                   (True, True), (False, True)])
@pytest.mark.parametrize(("shape", "axis", "k"), [((9,), 0, 4), ((3, 8, 2), 1, 8),
                                                  ((4, 6), -1, 1), ((5, 3), 0, 0)])
def test_topk_indices_against_python(dtype, largest, in_order, shape, axis, k):
    x = sample(dtype, shape, seed=3)
    out = run("topk_indices", x, k=k, axis=axis, largest=largest, sorted=not in_order)
    check(out, _expected(x, k, axis, largest, in_order), "int64")


@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties_and_nans_keep_index_order(largest):
    x = np.array([2.0, np.nan, 5.0, 2.0, np.nan, -np.inf, 5.0, 2.0, np.inf], np.float32)
    out = run("topk_indices", x, k=9, largest=largest)
    want = [1, 4, 8, 2, 6, 0, 3, 7, 5] if largest else [5, 0, 3, 7, 2, 6, 8, 1, 4]
    assert out.tolist() == want
    ints = np.array([3, 1, 3, 1, 3], np.int32)
    assert run("topk_indices", ints, k=2, largest=largest).tolist() == ([0, 2] if largest
                                                                        else [1, 3])


def test_topk_rejects_k_outside_the_axis():
    with pytest.raises(ValueError, match="k = 4 must be in"):
        run("topk_indices", np.zeros((2, 3), np.float32), k=4)
    with pytest.raises(ValueError, match="rank >= 1"):
        run("topk_indices", np.float32(1.0), k=0)
