"""Movement ops and arg reductions compiled (runtime.build, fusion included) equal the
interpreter bit for bit, on random shapes, attributes and out-of-range indices.

Each graph puts an elementwise producer before the op and an elementwise consumer after
it, so FuseOps/FuseTIR inline the producer into the op's loads and the consumer into its
stores (or, for the opaque scatter_nd, keep it apart).
"""

from __future__ import annotations

import numpy as np
from e2e_helpers import assert_close_to_interpreter, build_and_run
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
from irkernel.testing import random_inputs

DTYPES = ("float32", "float64", "int32", "int64")
shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


def _around(bb: ik.GraphBuilder, x: int, dtype: str, make) -> int:
    """``make(x + 1) * 2``: a producer and a consumer the fusion passes can inline."""
    one = bb.const(np.array(1, dtype))
    two = bb.const(np.array(2, dtype))
    return bb.multiply(make(bb.add(x, one)), two)


def _run(bb: ik.GraphBuilder, outs: list[int], seed: int) -> None:
    mod = ik.IRModule({"main": bb.finish(outs)})
    inputs = random_inputs(mod, seed=seed, special_values=True)
    got = build_and_run(mod, inputs)
    assert_close_to_interpreter(mod, inputs, got, "movement")


@settings(max_examples=25, deadline=None)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), data=st.data())
def test_strided_slice_and_pad(shape, dtype, data) -> None:
    rank = len(shape)
    triples = [data.draw(st.tuples(st.integers(-7, 7), st.integers(-7, 7),
                                   st.sampled_from([1, 2, -1, -3]))) for _ in shape]
    widths = tuple(data.draw(st.lists(st.integers(0, 6), min_size=2 * rank,
                                      max_size=2 * rank)))
    mode = data.draw(st.sampled_from(["constant", "reflect", "edge"]))
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, dtype)
    v = bb.param("v", (), dtype)
    begin, end, strides = (tuple(t) for t in zip(*triples, strict=True))
    sliced = _around(bb, x, dtype, lambda y: bb.strided_slice(
        y, begin=begin, end=end, strides=strides))
    padded = _around(bb, x, dtype, lambda y: bb.pad(y, v, pad_width=widths, mode=mode))
    _run(bb, [sliced, padded], data.draw(st.integers(0, 99)))


@settings(max_examples=25, deadline=None)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), data=st.data())
def test_take(shape, dtype, data) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    idtype = data.draw(st.sampled_from(["int32", "int64"]))
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, dtype)
    i = bb.param("i", ishape, idtype)  # random ints: mostly far out of range (clamped)
    d = shape[axis]
    near = bb.const(np.array(data.draw(st.lists(st.integers(-d - 2, d + 2), min_size=3,
                                                max_size=3)), idtype))
    outs = [_around(bb, x, dtype, lambda y: bb.take(y, i, axis=axis)),
            _around(bb, x, dtype, lambda y: bb.take(y, near, axis=axis))]
    _run(bb, outs, data.draw(st.integers(0, 99)))


@settings(max_examples=20, deadline=None)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), data=st.data())
def test_scatter_nd(shape, dtype, data) -> None:
    k = data.draw(st.integers(0, len(shape)))
    batch = tuple(data.draw(st.lists(st.integers(1, 4), max_size=2)))
    n = int(np.prod(batch)) * k
    idx = np.array(data.draw(st.lists(st.integers(-6, 6), min_size=n, max_size=n)),
                   np.int64).reshape((*batch, k))
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, dtype)
    u = bb.param("u", batch + shape[k:], dtype)
    out = _around(bb, x, dtype, lambda y: bb.scatter_nd(y, bb.const(idx), bb.add(u, u)))
    _run(bb, [out], data.draw(st.integers(0, 99)))


@settings(max_examples=20, deadline=None)
@given(shape=shapes, dtype=st.sampled_from(DTYPES), data=st.data())
def test_arg_reductions_with_a_fused_producer(shape, dtype, data) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, dtype)
    y = bb.add(x, bb.const(np.array(1, dtype)))
    outs = []
    for op in ("argmax", "argmin"):
        for last in (False, True):
            r = bb.call(op, y, axis=axis, keepdims=data.draw(st.booleans()),
                        select_last_index=last)
            outs.append(bb.add(r, bb.const(np.int64(1))))
    _run(bb, outs, data.draw(st.integers(0, 99)))
