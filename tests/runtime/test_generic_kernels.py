"""Shape-generic kernels: one kernel per (op, dtypes) serves every shape and every call site.

Checked three ways: the kernels against NumPy for each family (map, reduce, matmul)
over random shapes, layouts and broadcasts; whole random graphs built with generic
kernels against the reference interpreter; and generic against specialized builds,
bit for bit where the ops are exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import passes
import runtime
from irkernel import ops, transform
from irkernel.ir.ids import dtype_code
from irkernel.testing import functions_with_inputs
from passes.topi.generic import RANK, collapse, generic_call

GENERIC = {"runtime.generic_max_elements": 10**9}
SPECIALIZED = {"runtime.generic_max_elements": 0}


def _run_generic(op: str, attrs: dict, arrays: list[np.ndarray]) -> np.ndarray:
    """One op through its generic kernel, compiled and called directly."""
    opdef = ops.get_op(op)
    full = dict(opdef.normalize_attrs(attrs))
    types = [(dtype_code(a.dtype), a.shape) for a in arrays]
    result = opdef.infer(types, full)
    call = generic_call(op, full, types, result)
    assert call is not None, (op, [a.shape for a in arrays])
    kernel = next(iter(runtime.build(call.prim).values()))
    out = np.empty(result[1], np.dtype(ik.DTYPE_NAMES[result[0]]))
    kernel(*[np.ascontiguousarray(a).reshape(-1) for a in arrays], call.meta, out.reshape(-1))
    return out


shapes = st.lists(st.integers(1, 4), min_size=0, max_size=5).map(tuple)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, drop=st.integers(0, 5), ones=st.lists(st.booleans(), max_size=5),
       seed=st.integers(0, 2**16))
def test_map_kernels_broadcast_as_numpy(shape, drop, ones, seed) -> None:
    rng = np.random.default_rng(seed)
    other = tuple(1 if (k < len(ones) and ones[k]) else d for k, d in enumerate(shape))
    other = other[min(drop, len(other)):]
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(other).astype(np.float32)
    np.testing.assert_array_equal(_run_generic("subtract", {}, [a, b]), a - b)
    np.testing.assert_array_equal(_run_generic("maximum", {}, [b, a]), np.maximum(b, a))
    np.testing.assert_array_equal(_run_generic("where", {}, [a > 0, a, b]), np.where(a > 0, a, b))


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=RANK).map(tuple),
       data=st.data())
def test_layout_kernels_are_strided_copies(shape, data) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(-9, 9, shape).astype(np.int64)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    np.testing.assert_array_equal(_run_generic("permute_dims", {"axes": perm}, [x]),
                                  x.transpose(perm))
    np.testing.assert_array_equal(_run_generic("reshape", {"shape": (x.size,)}, [x]),
                                  x.reshape(-1))
    target = (2, *shape)
    np.testing.assert_array_equal(_run_generic("broadcast_to", {"shape": target}, [x]),
                                  np.broadcast_to(x, target))


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=5).map(tuple),
       data=st.data(), keep=st.booleans())
def test_reduce_kernels_over_any_axes(shape, data, keep) -> None:
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    x = np.random.default_rng(1).integers(-50, 50, shape).astype(np.int32)
    np.testing.assert_array_equal(_run_generic("sum", {"axis": axes, "keepdims": keep}, [x]),
                                  x.sum(axes, keepdims=keep, dtype=np.int32))
    np.testing.assert_array_equal(_run_generic("max", {"axis": axes, "keepdims": keep}, [x]),
                                  x.max(axes, keepdims=keep))
    f = x.astype(np.float64)
    np.testing.assert_allclose(_run_generic("mean", {"axis": axes, "keepdims": keep}, [f]),
                               f.mean(axes, keepdims=keep), rtol=1e-12)


@pytest.mark.parametrize(("sa", "sb"), [((3, 5), (5, 2)), ((4,), (4, 3)), ((3, 5), (5,)),
                                        ((2, 1, 3, 5), (4, 5, 2)), ((7,), (7,)),
                                        ((2, 3, 4), (4, 1))])
def test_matmul_kernel_follows_numpy_promotion_and_batching(sa, sb) -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(-5, 5, sa).astype(np.int64)
    b = rng.integers(-5, 5, sb).astype(np.int64)
    np.testing.assert_array_equal(_run_generic("matmul", {}, [a, b]), np.matmul(a, b))


def test_collapse_merges_contiguous_dims_and_pads() -> None:
    extents, views = collapse([2, 3, 4], [[12, 4, 1], [12, 4, 1]])
    assert extents == [1, 1, 1, 24] and views == [[0, 0, 0, 1], [0, 0, 0, 1]]
    extents, views = collapse([2, 3, 4], [[12, 4, 1], [0, 4, 1]])  # broadcast on axis 0
    assert extents == [1, 1, 2, 12] and views[1] == [0, 0, 0, 1]
    assert collapse([2, 2, 2, 2, 2], [[16, 8, 4, 2, 1], [1, 2, 4, 8, 16]]) is None
    assert len(collapse([], [[]])[0]) == RANK


@settings(max_examples=25, deadline=None)
@given(case=functions_with_inputs(module=True, special_values=True, shapes="small"))
def test_graphs_on_generic_kernels_match_the_interpreter(case) -> None:
    mod, inputs = case
    with transform.PassContext(config=GENERIC):
        ex = runtime.build(mod)
    want = ik.interpret(mod, *inputs)
    got = ex["main"](*inputs)
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype and w.shape == g.shape
        if w.dtype.kind == "f":
            tol = 1e-4 if w.dtype == np.float32 else 1e-10
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


EXACT = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "negative", "abs",
         "relu", "where", "equal", "less", "greater", "reshape", "permute_dims",
         "broadcast_to", "astype", "concat", "max")


@settings(max_examples=20, deadline=None)
@given(case=functions_with_inputs(module=True, special_values=True, shapes="small",
                                  ops=st.just(EXACT)))
def test_generic_and_specialized_builds_agree_bit_for_bit(case) -> None:
    mod, inputs = case
    results = []
    for config in (GENERIC, SPECIALIZED):
        with transform.PassContext(config=config):
            results.append(runtime.build(mod)["main"](*inputs))
    for g, s in zip(*results, strict=True):
        np.testing.assert_array_equal(g, s)


def test_one_kernel_serves_every_call_site() -> None:
    """Adds of six shapes, broadcast both ways, with intermediates the memory plan reuses,
    all run on one generic kernel."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4, 5), "float32")
    y = bb.param("y", (5,), "float32")
    z = bb.param("z", (3, 1, 1), "float32")
    t = bb.add(x, y)                  # (4, 5) + (5,)
    t = bb.add(bb.negative(t), x)     # (4, 5)
    u = bb.add(z, t)                  # (3, 4, 5)
    v = bb.add(y, bb.negative(y))     # (5,)
    w = bb.add(u, v)                  # (3, 4, 5) + (5,)
    mod = ik.IRModule({"main": bb.finish([w, bb.add(w, z)])})
    with transform.PassContext(config=GENERIC):
        ex = runtime.build(mod)
    kernels = {f.attrs.get("generic_name") for f in ex.lowered_module.functions.values()
               if transform.is_prim_func(f)}
    assert kernels == {"generic_add_float32_float32", "generic_negative_float32"}
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((4, 5), (5,), (3, 1, 1))]
    for got, want in zip(ex["main"](*args), ik.interpret(mod, *args), strict=True):
        np.testing.assert_array_equal(got, want)


def test_legalize_ops_option_and_meta_constants() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), "float32")
    mod = ik.IRModule({"main": bb.finish([bb.exp(bb.add(x, x))])})
    out = passes.LegalizeOps(generic_max_elements=6)(mod)
    ik.verify(out)
    main = out["main"]
    assert int(main.kind[0]) == ops.OP_CONST and main.node_type(0)[0] == "int64"
    assert sorted(n for n in out.functions if n != "main") == [
        "generic_add_float32_float32", "generic_exp_float32"]
    small = passes.LegalizeOps(generic_max_elements=5)(mod)  # a (2, 3) tensor is too big
    assert not any(n.startswith("generic") for n in small.functions)
    with pytest.raises(ValueError, match="generic_max_elements"):
        passes.LegalizeOps(generic_max_elements=-1)
    x_in = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    np.testing.assert_array_equal(ik.interpret(out, x_in)[0], ik.interpret(mod, x_in)[0])
