"""Random graphs through the whole pipeline (runtime.build) equal the interpreter.

Shapes stay small and examples few: every distinct kernel costs ~25 ms to
compile (the on-disk cache is per test session), so the budget is spent on
graph variety, not on size.
"""

from __future__ import annotations

import numpy as np
from e2e_helpers import INEXACT_OPS, assert_close_to_interpreter, build_and_run, compare
from hypothesis import given, settings
from hypothesis import strategies as st

from irkernel.testing import DEFAULT_OPS, functions_with_inputs

EXACT_OPS = tuple(op for op in DEFAULT_OPS if op not in INEXACT_OPS)


@settings(max_examples=40, deadline=None)
@given(case=functions_with_inputs(module=True, special_values=True, shapes="small",
                                  n_nodes=st.integers(1, 25), max_dim=st.integers(1, 3)),
       opt_level=st.sampled_from([None, 0, 1, 3]))
def test_random_modules_all_ops_all_dtypes(case, opt_level) -> None:
    mod, inputs = case
    got = build_and_run(mod, inputs, opt_level=opt_level)
    assert_close_to_interpreter(mod, inputs, got, f"random module, opt_level {opt_level}")


def test_cached_kernels_give_the_same_results(tmp_path) -> None:
    """A second build of the same module loads every kernel from the on-disk cache (a
    fresh DiskCache, as another process would) and computes the same bits."""
    from irkernel.testing import GraphSpec, random_inputs, random_module
    from runtime.cache import DiskCache

    spec = GraphSpec(n_nodes=60, seed=9, shapes="small", max_dim=4, n_params=3)
    mod = random_module(spec, call_funcs=True)
    inputs = random_inputs(mod, seed=9, special_values=True)
    cold = build_and_run(mod, inputs, cache=DiskCache(tmp_path))
    stored = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert stored
    warm = build_and_run(mod, inputs, cache=DiskCache(tmp_path))
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == stored  # all hits
    uncached = build_and_run(mod, inputs, cache=False)
    for k, (c, w, u) in enumerate(zip(cold, warm, uncached, strict=True)):
        compare(c, w, 0.0, f"warm cache, output {k}")
        compare(c, u, 0.0, f"no cache, output {k}")
    assert_close_to_interpreter(mod, inputs, warm, "from the cache")


@settings(max_examples=25, deadline=None)
@given(case=functions_with_inputs(special_values=True, shapes="small", ops=EXACT_OPS,
                                  n_nodes=st.integers(1, 30), max_dim=st.integers(1, 4)))
def test_random_exact_graphs_are_bit_identical(case) -> None:
    func, inputs = case
    assert_close_to_interpreter(func, inputs, build_and_run(func, inputs), "exact graph")


@settings(max_examples=20, deadline=None)
@given(case=functions_with_inputs(special_values=st.booleans(), shapes="small",
                                  dtypes=st.sampled_from([("float32",), ("float64",)]),
                                  n_nodes=st.integers(1, 20), max_dim=st.integers(1, 4),
                                  ops=("exp", "tanh", "sigmoid", "sum", "mean", "matmul",
                                       "multiply", "add", "maximum", "reshape",
                                       "permute_dims", "broadcast_to", "concat", "max")))
def test_random_float_graphs_are_close(case) -> None:
    func, inputs = case
    assert_close_to_interpreter(func, inputs, build_and_run(func, inputs), "float graph")


@settings(max_examples=15, deadline=None)
@given(case=functions_with_inputs(special_values=True, shapes="scalar",
                                  n_nodes=st.integers(1, 60)))
def test_random_scalar_graphs(case) -> None:
    func, inputs = case
    assert_close_to_interpreter(func, inputs, build_and_run(func, inputs), "scalar graph")


def test_nan_and_inf_inputs_propagate_like_the_interpreter() -> None:
    import irkernel as ik

    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 4), "float32")
    y = bb.param("y", (4,), "float32")
    outs = [bb.maximum(x, y), bb.minimum(y, x), bb.relu(x), bb.divide(x, y),
            bb.call("astype", x, dtype="int32"), bb.call("astype", x, dtype="bool"),
            bb.less(x, y), bb.equal(x, x), bb.sqrt(x), bb.abs(bb.negative(x))]
    mod = ik.IRModule({"main": bb.finish(outs)})
    special = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)
    xs = np.stack([special, special[::-1]])
    ys = np.array([0.0, -0.0, np.nan, 1.0], np.float32)
    assert_close_to_interpreter(mod, [xs, ys], build_and_run(mod, [xs, ys]), "specials")


def test_float_math_reference_hands_numba_owned_arrays(monkeypatch) -> None:
    """Regression: the op reference of exp/log/power/... handed ``np.broadcast_arrays``
    views (of constant-pool buffers) to its Numba kernel, whose argument typing then warned
    (FutureWarning: "will not create a writeable array from broadcast_array") during
    FoldConstant in runtime.build of large random graphs. It now passes fresh copies."""
    import irkernel as ik
    import irkernel.ir.ops.scalar as scalar_ops

    real = scalar_ops.float_math_kernel
    pool = np.arange(12.0).reshape(4, 3)
    shared: list[bool] = []

    def spy(op, a, b, is_f32):
        shared.append(np.shares_memory(a, pool) or np.shares_memory(b, pool))
        return real(op, a, b, is_f32)

    monkeypatch.setattr(scalar_ops, "float_math_kernel", spy)
    cases = [[pool[1], np.array(2.0)], [pool[:, :1], pool[0]], [pool[2]]]
    for xs in cases:
        ik.ops.get_op("power" if len(xs) == 2 else "exp").reference(xs, {})
    assert shared == [False, False, False]


def test_casts_at_the_edges_are_bit_identical() -> None:
    """Every dtype to every dtype on values at the edges: NaN/inf, ties, int limits, float
    overflow and underflow (float -> int saturates, NaN -> 0; int -> float rounds to even)."""
    import irkernel as ik
    from irkernel.ir.ids import DTYPE_NAMES

    f64 = np.array([np.nan, np.inf, -np.inf, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2**31 - 0.5,
                    2**31, -2**31 - 1, 9.3e18, -9.3e18, 2**63, 1e300, 3.4e38, 3.5e38,
                    1.0000000596046448, 2**-149, 2**-150])
    with np.errstate(over="ignore"):
        f32 = f64.astype(np.float32)
    values = {"float64": f64, "float32": f32,
              "int64": np.array([0, 1, -1, 2**31, -2**31 - 1, 2**63 - 1, -2**63, 2**53 + 1,
                                 2**24 + 1, 3] + [7] * 11, np.int64),
              "int32": np.array([0, 1, -1, 2**31 - 1, -2**31, 2**24 + 1, 3] + [5] * 14,
                                np.int32),
              "bool": np.array([True, False] * 10 + [True])}
    with np.errstate(over="ignore"):
        values["float16"] = np.concatenate([f64[:12], [65504.0, 65520.0, 65519.0, 2**-24,
                                                       2**-25, 3 * 2**-26, 1e-8, 0.1, 7.0]]
                                           ).astype(np.float16)
    halves = (0x7FC0, 0xFFC1, 0x7F80, 0xFF80, 0x8000, 0x0001, 0x7F7F, 0xFF7F, 0x3F80,
              0x3FC0, 0xC040, 0x4F00, 0xCF00, 0x5F00, 0xDF00, 0x4B80, 0x3F01, 0x0080, 0x4040,
              0x4B00, 0x4F80)  # NaNs, infs, -0, subnormal, max, ints near 2**31/2**63 ...
    values["bfloat16"] = np.array(halves, np.uint16)
    for name in ("int8", "uint8", "int16", "uint16"):
        info = np.iinfo(name)
        values[name] = np.array([0, 1, info.max, info.min, info.max - 1, info.min + 1, 3,
                                 100 % (info.max + 1)] * 2 + [2, 5, 7, 9, 11], name)
    for src in DTYPE_NAMES:
        bb = ik.GraphBuilder("main")
        x = bb.param("x", (21,), src)
        mod = ik.IRModule({"main": bb.finish([bb.call("astype", x, dtype=d)
                                              for d in DTYPE_NAMES])})
        xs = [values[src]]
        assert_close_to_interpreter(mod, xs, build_and_run(mod, xs), f"astype from {src}")


def test_integer_edges_wrap_like_the_interpreter() -> None:
    import irkernel as ik

    for dtype in ("int32", "int64", "int8", "uint8", "int16", "uint16"):
        info = np.iinfo(dtype)
        bb = ik.GraphBuilder("main")
        x = bb.param("x", (8,), dtype)
        y = bb.param("y", (8,), dtype)
        outs = [bb.divide(x, y), bb.multiply(x, y), bb.add(x, y), bb.subtract(x, y),
                bb.negative(x), bb.abs(x), bb.relu(x), bb.call("sum", x),
                bb.call("max", bb.multiply(x, y), axis=0),
                bb.call("matmul", x, y), bb.less(x, y), bb.equal(x, y)]
        mod = ik.IRModule({"main": bb.finish(outs)})
        m1 = info.max if info.min == 0 else -1  # unsigned: the largest value instead of -1
        xs = [np.array([info.min, info.min, info.max, -7 % (info.max + 1) if info.min == 0
                        else -7, 7, 9, 0, 5], dtype),
              np.array([m1, 0, m1, 2, 3, 2, 0, info.max], dtype)]
        assert_close_to_interpreter(mod, xs, build_and_run(mod, xs), dtype)


NEW_DTYPES = ("float16", "bfloat16", "int8", "uint8", "int16", "uint16")


@settings(max_examples=30, deadline=None)
@given(case=functions_with_inputs(module=True, special_values=True, shapes="small",
                                  n_nodes=st.integers(1, 25), max_dim=st.integers(1, 3),
                                  dtypes=st.lists(st.sampled_from(NEW_DTYPES), min_size=1,
                                                  max_size=3, unique=True).map(
                                      lambda ds: (*ds, "bool"))),
       opt_level=st.sampled_from([None, 0, 3]))
def test_random_modules_of_the_narrow_dtypes(case, opt_level) -> None:
    """float16/bfloat16 (float32 compute, rounded once per op) and the small ints (wrapping)
    through the whole pipeline equal the interpreter."""
    mod, inputs = case
    got = build_and_run(mod, inputs, opt_level=opt_level)
    assert_close_to_interpreter(mod, inputs, got, f"narrow dtypes, opt_level {opt_level}")
