"""symmetric_int8: the int8 weights and scales behind a dequantized constant."""

from __future__ import annotations

import numpy as np
import pytest

from passes.qdq_weights import symmetric_int8


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("per_channel", [True, False])
def test_recovers_weights_and_scales(axis, per_channel) -> None:
    rng = np.random.default_rng(3)
    q = rng.integers(-127, 128, (12, 9, 3)).astype(np.int64)
    q[:, 0, 0] = 127  # each channel reaches 127, as a symmetric quantizer makes it
    q = np.moveaxis(q, 0, axis)
    scale = rng.uniform(1e-4, 1e-1, 12).astype(np.float32)
    if not per_channel:
        scale[:] = scale[0]
    shaped = scale.reshape((-1,) + (1,) * (q.ndim - 1)) if axis == 0 else scale.reshape(1, -1, 1)
    wf = (q.astype(np.float32) * shaped).astype(np.float32)
    found = symmetric_int8(wf, axis)
    assert found is not None
    got_q, got_s = found
    again = (got_q.astype(np.float32) * (got_s.reshape(shaped.shape))).astype(np.float32)
    np.testing.assert_array_equal(again, wf)  # reproduces every element exactly
    np.testing.assert_array_equal(got_q, q)


def test_zero_channels_and_refusals() -> None:
    wf = np.zeros((4, 6), np.float32)
    q, s = symmetric_int8(wf, 0)
    assert not q.any() and (s == 1).all()
    rng = np.random.default_rng(4)
    assert symmetric_int8(rng.standard_normal((4, 6)).astype(np.float32), 0) is None
    assert symmetric_int8(np.ones((4, 6), np.float64), 0) is None  # not float32
    assert symmetric_int8(np.full((2, 3), np.inf, np.float32), 0) is None
