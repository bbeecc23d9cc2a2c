"""Small models built as graphs, compiled with runtime.build, equal NumPy and the interpreter.

Each model runs in float32 and float64, fused (the default pipeline) and
unfused (``disabled_pass=["FuseOps"]``); the two compiled results must be
close to NumPy and to each other. Sizes are chosen to hit both matmul paths
(the scheduled register-tiled kernel for N a multiple of the vector lanes,
the canonical loop nest otherwise).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from e2e_helpers import assert_close_to_interpreter

import irkernel as ik
import runtime
from irkernel import transform

DTYPES = ("float32", "float64")
RTOL = {"float32": 2e-4, "float64": 1e-10}


def _softmax(bb: ik.GraphBuilder, x: int, axis: int) -> int:
    m = bb.call("max", x, axis=axis, keepdims=True)
    e = bb.exp(bb.subtract(x, m))
    return bb.divide(e, bb.call("sum", e, axis=axis, keepdims=True))


def _np_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def mlp(dtype: str, rng: np.random.Generator) -> tuple[ik.IRModule, list[np.ndarray], list]:
    """matmul + bias + relu, three layers; the weights are graph constants."""
    sizes = (24, 64, 32, 10)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (8, sizes[0]), dtype)
    h, ref = x, None
    weights = []
    for k in range(3):
        w = (rng.standard_normal((sizes[k], sizes[k + 1])) / np.sqrt(sizes[k])).astype(dtype)
        b = rng.standard_normal(sizes[k + 1]).astype(dtype)
        weights.append((w, b))
        h = bb.relu(bb.add(bb.call("matmul", h, bb.const(w)), bb.const(b)))
    mod = ik.IRModule({"main": bb.finish([h])})
    xin = rng.standard_normal((8, sizes[0])).astype(dtype)
    ref = xin
    for w, b in weights:
        ref = np.maximum(ref @ w + b, 0)
    return mod, [xin], [ref]


def softmax(dtype: str, rng: np.random.Generator) -> tuple[ik.IRModule, list[np.ndarray], list]:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (6, 33), dtype)
    mod = ik.IRModule({"main": bb.finish([_softmax(bb, x, -1), _softmax(bb, x, 0)])})
    xin = (rng.standard_normal((6, 33)) * 5).astype(dtype)
    return mod, [xin], [_np_softmax(xin, -1), _np_softmax(xin, 0)]


def layer_norm(dtype: str, rng: np.random.Generator) -> tuple[ik.IRModule, list[np.ndarray],
                                                              list]:
    """(x - mean) * rsqrt(var + eps) * gamma + beta over the last axis."""
    shape = (4, 5, 48)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", shape, dtype)
    gamma = bb.param("gamma", shape[-1:], dtype)
    beta = bb.param("beta", shape[-1:], dtype)
    eps = bb.const(np.array(1e-5, dtype))
    one = bb.const(np.array(1.0, dtype))
    mu = bb.call("mean", x, axis=-1, keepdims=True)
    d = bb.subtract(x, mu)
    var = bb.call("mean", bb.multiply(d, d), axis=-1, keepdims=True)
    rstd = bb.divide(one, bb.sqrt(bb.add(var, eps)))
    y = bb.add(bb.multiply(bb.multiply(d, rstd), gamma), beta)
    mod = ik.IRModule({"main": bb.finish([y])})
    args = [(rng.standard_normal(shape) * 3 + 1).astype(dtype),
            rng.standard_normal(shape[-1:]).astype(dtype),
            rng.standard_normal(shape[-1:]).astype(dtype)]
    xin, g, b = args
    m = xin.mean(-1, keepdims=True)
    v = ((xin - m) ** 2).mean(-1, keepdims=True)
    return mod, args, [(xin - m) / np.sqrt(v + dtype_eps(dtype)) * g + b]


def dtype_eps(dtype: str) -> np.floating:
    return np.array(1e-5, dtype)[()]


def attention(dtype: str, rng: np.random.Generator) -> tuple[ik.IRModule, list[np.ndarray],
                                                             list]:
    """softmax(q @ k^T / sqrt(d)) @ v per head, k^T by permute_dims; plus a 2-D variant."""
    heads, seq, dim = 2, 8, 16
    bb = ik.GraphBuilder("main")
    q = bb.param("q", (heads, seq, dim), dtype)
    k = bb.param("k", (heads, seq, dim), dtype)
    v = bb.param("v", (heads, seq, dim), dtype)
    scale = bb.const(np.array(1 / np.sqrt(dim), dtype))
    kt = bb.call("permute_dims", k, axes=(0, 2, 1))
    p = _softmax(bb, bb.multiply(bb.call("matmul", q, kt), scale), -1)
    out = bb.call("matmul", p, v)
    q2 = bb.call("reshape", q, shape=(heads * seq, dim))        # all heads as one 2-D block
    k2 = bb.call("reshape", k, shape=(heads * seq, dim))
    p2 = _softmax(bb, bb.call("matmul", q2, bb.call("permute_dims", k2)), 1)
    out2 = bb.call("matmul", p2, bb.call("reshape", v, shape=(heads * seq, dim)))
    mod = ik.IRModule({"main": bb.finish([out, out2])})
    args = [rng.standard_normal((heads, seq, dim)).astype(dtype) for _ in range(3)]
    qi, ki, vi = args
    ref = _np_softmax(qi @ ki.transpose(0, 2, 1) / np.sqrt(dim), -1) @ vi
    q2i, k2i, v2i = (a.reshape(heads * seq, dim) for a in args)
    ref2 = _np_softmax(q2i @ k2i.T, 1) @ v2i
    return mod, args, [ref, ref2]


MODELS: dict[str, Callable[..., tuple[ik.IRModule, list[np.ndarray], list]]] = {
    "mlp": mlp, "softmax": softmax, "layer_norm": layer_norm, "attention": attention}


#: These models have small tensors, which runtime.build would run on shape-generic kernels
#: (never fused); the test is about fusion, so it asks for specialized kernels.
SPECIALIZE = {"runtime.generic_max_elements": 0}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_model_equals_numpy_fused_and_unfused(model: str, dtype: str) -> None:
    mod, args, want = MODELS[model](dtype, np.random.default_rng(0))
    results = {}
    for label, disabled in (("fused", []), ("unfused", ["FuseOps"])):
        with transform.PassContext(disabled_pass=disabled, config=SPECIALIZE):
            ex = runtime.build(mod)
        got = ex["main"](*args)
        results[label] = got
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.dtype == np.dtype(dtype)
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w.astype(dtype), rtol=RTOL[dtype],
                                       atol=RTOL[dtype], err_msg=f"{model} {label} output {k}")
        assert_close_to_interpreter(mod, args, got, f"{model} {dtype} {label}")
        calls = ex.lowered_module["main"].kind == ik.ops.OP_CALL_TIR
        results[label + "_kernels"] = int(calls.sum())
    assert results["fused_kernels"] < results["unfused_kernels"], results
    for f, u in zip(results["fused"], results["unfused"], strict=True):
        np.testing.assert_allclose(f, u, rtol=RTOL[dtype], atol=RTOL[dtype])


@pytest.mark.parametrize("model", ["mlp", "attention"])
def test_results_do_not_depend_on_the_thread_count(model: str) -> None:
    """Parallel loops split output panels, never a reduction: any thread count gives the
    same bits."""
    from runtime import threadpool

    mod, args, _ = MODELS[model]("float32", np.random.default_rng(1))
    main = runtime.build(mod)["main"]
    before = threadpool.get_num_threads()
    try:
        runs = []
        for n in (1, 2, 3):
            threadpool.set_num_threads(n)
            runs.append(main(*args))
    finally:
        threadpool.set_num_threads(before)
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            np.testing.assert_array_equal(a, b)
