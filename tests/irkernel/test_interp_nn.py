"""ik.interpret of the NN ops against direct Python loops on small inputs, and the type
rules' errors. (The references are also checked against onnxruntime in
``test_nn_onnxruntime.py``.)
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from interp_helpers import check, run

import irkernel as ik

COVERED = {"conv", "conv_transpose", "max_pool", "avg_pool", "lrn"}


def close(out, expected):
    """Within rounding: channel sums cancel, so the tolerance scales with the largest value."""
    expected = np.asarray(expected).astype(out.dtype)
    assert out.shape == expected.shape
    tol = 1e-5 if out.dtype == np.float32 else 1e-12
    scale = float(np.max(np.abs(expected), initial=1.0))
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * scale)


def _out_size(size, k, s, pb, pe, d):
    return (size + pb + pe - d * (k - 1) - 1) // s + 1


def _loop_conv(x, w, strides, pads, dil, groups):
    n, _, *sizes = x.shape
    o, cg, *kernel = w.shape
    r = len(sizes)
    outs = [_out_size(sizes[a], kernel[a], strides[a], pads[a], pads[r + a], dil[a])
            for a in range(r)]
    og = o // groups
    y = np.zeros((n, o, *outs))
    for b, oc in itertools.product(range(n), range(o)):
        grp = oc // og
        for pos in itertools.product(*map(range, outs)):
            acc = 0.0
            for ci in range(cg):
                for kp in itertools.product(*map(range, kernel)):
                    src = [pos[a] * strides[a] + kp[a] * dil[a] - pads[a] for a in range(r)]
                    if all(0 <= s < sizes[a] for a, s in enumerate(src)):
                        acc += float(x[(b, grp * cg + ci, *src)]) * float(w[(oc, ci, *kp)])
            y[(b, oc, *pos)] = acc
    return y


@pytest.mark.parametrize(("xs", "ws", "strides", "pads", "dil", "groups"), [
    ((2, 3, 7), (4, 3, 3), [1], [1, 1], [1], 1),
    ((1, 4, 6, 5), (4, 2, 3, 2), [2, 1], [1, 0, 2, 1], [1, 2], 2),
    ((1, 3, 5, 5), (6, 1, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1], 3),      # depthwise x2
    ((1, 2, 4, 3, 3), (2, 2, 2, 1, 2), [1, 2, 1], [0] * 6, [1, 1, 1], 1),  # 3-d
])
def test_conv_equals_direct_loops(xs, ws, strides, pads, dil, groups):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    out = run("conv", x, w, strides=strides, padding=pads, dilation=dil, groups=groups)
    close(out, _loop_conv(x, w, strides, pads, dil, groups))


def test_conv_defaults_are_unit_strides_no_padding():
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 5)
    w = np.array([[[1.0, -1.0]]], np.float32)
    check(run("conv", x, w), [[[-1.0, -1.0, -1.0, -1.0]]], "float32")


def test_conv_transpose_is_the_scatter_of_conv():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 3, 2))
    w = rng.standard_normal((2, 3, 2, 3))   # [C, O/groups, *K]
    strides, pads, dil, extra = [2, 1], [1, 0, 0, 1], [1, 2], [1, 0]
    out = run("conv_transpose", x, w, strides=strides, padding=pads, dilation=dil,
              output_padding=extra)
    full = [(3 - 1) * 2 + 1 * (2 - 1) + 1 + 1, (2 - 1) * 1 + 2 * (3 - 1) + 1]
    y = np.zeros((1, 3, *full))
    for c, o, i, j, ki, kj in itertools.product(range(2), range(3), range(3), range(2),
                                                range(2), range(3)):
        y[0, o, i * 2 + ki * 1, j * 1 + kj * 2] += x[0, c, i, j] * w[c, o, ki, kj]
    expected = y[:, :, 1:full[0], 0:full[1] - 1]
    close(out, expected)


def _loop_pool(x, kernel, strides, pads, dil, ceil, kind, cip=False):
    n, c, *sizes = x.shape
    r = len(sizes)
    outs = []
    for a in range(r):
        num = sizes[a] + pads[a] + pads[r + a] - dil[a] * (kernel[a] - 1) - 1
        m = (-(-num // strides[a]) if ceil else num // strides[a]) + 1
        if ceil and (m - 1) * strides[a] >= sizes[a] + pads[a]:
            m -= 1
        outs.append(m)
    y = np.zeros((n, c, *outs), x.dtype)
    for b, ch in itertools.product(range(n), range(c)):
        for pos in itertools.product(*map(range, outs)):
            taps = list(itertools.product(*[
                [pos[a] * strides[a] + k * dil[a] - pads[a] for k in range(kernel[a])]
                for a in range(r)]))
            inside = [t for t in taps if all(0 <= v < sizes[a] for a, v in enumerate(t))]
            vals = [float(x[(b, ch, *t)]) for t in inside]
            if kind == "max":
                y[(b, ch, *pos)] = (math.nan if any(v != v for v in vals)
                                    else max(vals, default=-math.inf))
            else:
                padded = [t for t in taps if all(-pads[a] <= v < sizes[a] + pads[r + a]
                                                 for a, v in enumerate(t))]
                y[(b, ch, *pos)] = sum(vals) / max(1, len(padded if cip else inside))
    return y


@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize(("shape", "kernel", "strides", "pads", "dil"), [
    ((1, 2, 7), [3], [2], [1, 1], [1]),
    ((2, 1, 5, 6), [2, 3], [2, 2], [1, 0, 0, 2], [1, 1]),
    ((1, 1, 6, 5), [2, 2], [3, 1], [1, 1, 1, 1], [2, 1]),
])
def test_pools_equal_direct_loops(shape, kernel, strides, pads, dil, ceil):
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    x.flat[3] = np.nan
    attrs = {"kernel": kernel, "strides": strides, "padding": pads, "dilation": dil,
             "ceil_mode": ceil}
    check(run("max_pool", x, **attrs),
          _loop_pool(x, kernel, strides, pads, dil, ceil, "max"), "float32")
    x = np.nan_to_num(x)
    for cip in (False, True):
        close(run("avg_pool", x, count_include_pad=cip, **attrs),
              _loop_pool(x, kernel, strides, pads, dil, ceil, "avg", cip))


def test_max_pool_padding_never_wins():
    x = -np.ones((1, 1, 3), np.float32)
    check(run("max_pool", x, kernel=[3], padding=[2, 2]), -np.ones((1, 1, 5)), "float32")


def test_lrn_equals_the_onnx_formula():
    x = np.random.default_rng(3).standard_normal((2, 5, 2)).astype(np.float64)
    size, alpha, beta, bias = 4, 0.3, 0.6, 1.5
    out = run("lrn", x, size=size, alpha=alpha, beta=beta, bias=bias)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    expected = np.empty_like(x)
    for c in range(5):
        sq = sum(x[:, j] ** 2 for j in range(max(0, c - lo), min(4, c + hi) + 1))
        expected[:, c] = x[:, c] / (bias + alpha / size * sq) ** beta
    check(out, expected, "float64", exact=False)


def test_lrn_float_attributes_default_and_print():
    bb = ik.GraphBuilder("main")
    node = bb.lrn(bb.param("x", (1, 3, 2), "float32"), size=3)
    func = bb.finish([node])
    assert func.node_attrs(node) == {"size": 3, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}
    assert "lrn %0 {alpha = 0.0001, beta = 0.75, bias = 1.0, size = 3}" in func.script()


def _bad(op, shapes, match, **attrs):
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"p{k}", s, d) for k, (s, d) in enumerate(shapes)]
    with pytest.raises(ValueError, match=match):
        bb.call(op, *xs, **attrs)


def test_rules_reject_bad_operands_naming_them():
    f = "float32"
    _bad("conv", [((1, 2, 5), "int32"), ((1, 2, 3), "int32")], "dtype int32 not supported")
    _bad("conv", [((2, 5), f), ((1, 2, 3), f)], r"input \(2, 5\) must be \[N, C, \*spatial\]")
    _bad("conv", [((1, 2, 5), f), ((1, 2), f)], r"weight \(1, 2\) must be \[O, C/groups, \*K\]")
    _bad("conv", [((1, 4, 5), f), ((3, 2, 3), f)], "groups 2 must be >= 1 and divide the "
         "input channels 4 and the output channels 3", groups=2)
    _bad("conv", [((1, 4, 5), f), ((2, 4, 3), f)], "has 4 input channels per group; input "
         r"\(1, 4, 5\) with groups 2 needs 2", groups=2)
    _bad("conv", [((1, 2, 5), f), ((1, 2, 3), f)], r"strides \(1, 1\) must hold 1 values",
         strides=[1, 1])
    _bad("conv", [((1, 2, 5), f), ((1, 2, 3), f)], r"padding \(-1, 0\) must be >= 0",
         padding=[-1, 0])
    _bad("conv", [((1, 2, 2), f), ((1, 2, 3), f)], "window of extent 3 .* larger than "
         "spatial axis 0 of size 2")
    _bad("conv_transpose", [((1, 2, 3), f), ((3, 1, 2), f)], r"must be \[C, O/groups, \*K\]")
    _bad("conv_transpose", [((1, 2, 1), f), ((2, 1, 1), f)], "is empty", padding=[1, 0])
    _bad("max_pool", [((1, 2, 5), f)], r"kernel \(2, 2\) must hold 1 values", kernel=[2, 2])
    _bad("avg_pool", [((1, 2, 5), f)], r"kernel \(0,\) must be >= 1", kernel=[0])
    _bad("lrn", [((3,), f)], r"input \(3,\) must be \[N, C, ...\]", size=2)
    _bad("lrn", [((1, 3), f)], "size 0 must be >= 1", size=0)


def test_nn_patterns():
    ops = ik.ops
    for name in COVERED:
        assert ops.get_op(name).pattern == ops.OUT_EWISE_FUSABLE
