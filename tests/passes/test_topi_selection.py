"""The ``topk_indices`` template (passes/topi/selection.py) compiled and run on its own,
against the op's reference: ties, NaN and infinities, every direction and order, and an
output buffer that starts as garbage (the template reads slots it has filled only)."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from irkernel import ops
from irkernel.ir.ids import dtype_code
from passes.topi.selection import topk_indices

RNG = np.random.default_rng(11)


def _values(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    x = RNG.integers(-2, 3, shape).astype(dtype)   # few distinct values: many ties
    if dtype.startswith("float"):
        x[x == 2] = np.nan
        x[x == -2] = -np.inf
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize(("shape", "axis", "k"), [((11,), 0, 4), ((3, 9, 2), 1, 9),
                                                  ((4, 6), 0, 1), ((2, 3, 7), -1, 3)])
@pytest.mark.parametrize(("largest", "in_order"), [(True, False), (False, False),
                                                   (True, True), (False, True)])
def test_compiled_template_matches_the_reference(dtype, shape, axis, k, largest, in_order):
    op = ops.get_op("topk_indices")
    attrs = dict(op.normalize_attrs({"k": k, "axis": axis, "largest": largest,
                                     "sorted": not in_order}))
    types = [(dtype_code(dtype), shape)]
    result = op.infer(types, attrs)
    func = topk_indices(types, attrs, result)
    kernel = runtime.build(func.with_attr("global_symbol", "topk"))["topk"]
    x = _values(dtype, shape)
    out = np.full(result[1], 1 << 40, np.int64)    # indices far out of range
    kernel(x, out)
    np.testing.assert_array_equal(out, op.reference([x], attrs))
