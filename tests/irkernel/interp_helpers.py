"""Shared helpers of the interpreter tests: dtype lists, run, check, sample."""

from __future__ import annotations

import numpy as np

import irkernel as ik

FLOATS = ["float32", "float64"]
INTS = ["int32", "int64"]
NUMERIC = FLOATS + INTS
ALL = [*NUMERIC, "bool"]


def run(op, *inputs, **attrs):
    """Build fn(params...) = op(params..., **attrs); verify; interpret; check the node type."""
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"p{i}", np.shape(a), np.asarray(a).dtype) for i, a in enumerate(inputs)]
    node = bb.call(op, *xs, **attrs)
    f = bb.finish([node])
    ik.verify(f)
    (out,) = ik.interpret(f, *inputs)
    dtype, shape = f.node_type(node)
    assert out.dtype == np.dtype(dtype)
    assert out.shape == shape
    return out


def check(out, expected, dtype=None, exact=True):
    expected = np.asarray(expected)
    if dtype is not None:
        expected = expected.astype(dtype) if expected.dtype != dtype else expected
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    if exact or out.dtype.kind != "f":
        np.testing.assert_array_equal(out, expected)
    else:
        rtol = 2e-6 if out.dtype == np.float32 else 1e-13
        np.testing.assert_allclose(out, expected, rtol=rtol, atol=0, equal_nan=True)


def sample(dtype, shape, seed=0, special=True):
    """Values of ``dtype`` and ``shape`` including edge values (NaN, inf, -0.0, int extremes)."""
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape, dtype=np.int64))
    dt = np.dtype(dtype)
    if dt.kind == "f":
        vals = rng.normal(0, 3, size)
        edge = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -2.5]
    elif dt.kind == "i":
        info = np.iinfo(dt)
        vals = rng.integers(-50, 50, size)
        edge = [info.max, info.min, 0, -1, 1, info.max - 1, 7]
    else:
        vals = rng.integers(0, 2, size)
        edge = [True, False]
    if special:
        k = min(size, len(edge))
        pos = rng.permutation(size)[:k]
        vals = vals.astype(object)
        vals[pos] = edge[:k]
    return np.array(vals.tolist(), dtype=dt).reshape(shape)
