"""SimplifyArith: each rule of its module docstring, one by one, and the cases it must refuse.

Every test checks both the rewritten structure (after SimplifyArith and a
DeadCodeElimination to drop the operands it left behind) and, through the
interpreter, that values are unchanged for NaN, +-inf, -0.0 and int min/max
inputs: an identity that changes a NaN or a signed zero is not an identity.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from passes_helpers import assert_same_results, ops_of

import irkernel as ik
import passes
from irkernel import transform

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")
NUMS = FLOATS + INTS
ALL = (*NUMS, "bool")


def _special(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype in FLOATS:
        vals = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.0, 3e38], dtype)
    elif dtype == "bool":
        vals = np.array([True, False])
    else:
        info = np.iinfo(dtype)
        vals = np.array([info.min, info.max, 0, -1, 1, 7, -50], dtype)
    return np.resize(vals, shape).astype(dtype)


def _simplify(build: Callable[[ik.GraphBuilder], list[int]],
              params: list[tuple[str, tuple[int, ...], str]]) -> tuple[ik.IRModule, ik.Function]:
    """(input module, simplified + DCE'd main); checks values on special inputs."""
    bb = ik.GraphBuilder("main")
    ids = [bb.param(name, shape, dtype) for name, shape, dtype in params]
    mod = ik.IRModule({"main": bb.finish(build(bb, *ids))})
    out = passes.SimplifyArith()(mod)
    ik.verify(out)
    inputs = [_special(dtype, shape) for _, shape, dtype in params]
    assert_same_results(ik.interpret(mod, *inputs), ik.interpret(out, *inputs), "SimplifyArith")
    if out is not mod:
        assert passes.SimplifyArith()(out) is out  # idempotent
    return mod, passes.DeadCodeElimination()(out)["main"]


def _unchanged(build, params) -> None:
    bb = ik.GraphBuilder("main")
    ids = [bb.param(name, shape, dtype) for name, shape, dtype in params]
    mod = ik.IRModule({"main": bb.finish(build(bb, *ids))})
    assert passes.SimplifyArith()(mod) is mod


def _c(bb: ik.GraphBuilder, value: float, dtype: str, shape: tuple[int, ...] = ()) -> int:
    return bb.const(np.full(shape, value, dtype))


def _output_is_param(func: ik.Function, k: int = 0) -> bool:
    return func.op(int(func.outputs[k])).name == "param"


# ---------------------------------------------------------------------------
# x + c0, c0 + x
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("const_first", [False, True])
def test_int_add_zero_is_x(dtype: str, const_first: bool) -> None:
    def build(bb, x):
        z = _c(bb, 0, dtype)
        return [bb.add(z, x) if const_first else bb.add(x, z)]
    _, func = _simplify(build, [("x", (4,), dtype)])
    assert ops_of(func) == ["param"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("const_first", [False, True])
def test_float_add_negative_zero_is_x(dtype: str, const_first: bool) -> None:
    """x + (-0.0) == x for every x, including -0.0 and NaN."""
    def build(bb, x):
        z = _c(bb, -0.0, dtype)
        return [bb.add(z, x) if const_first else bb.add(x, z)]
    _, func = _simplify(build, [("x", (8,), dtype)])
    assert ops_of(func) == ["param"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("const_first", [False, True])
def test_float_add_positive_zero_is_kept(dtype: str, const_first: bool) -> None:
    """x + 0.0 maps -0.0 to +0.0, so it is not an identity for floats."""
    def build(bb, x):
        z = _c(bb, 0.0, dtype)
        return [bb.add(z, x) if const_first else bb.add(x, z)]
    _unchanged(build, [("x", (8,), dtype)])


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_add_mixed_signed_zero_tensor_is_kept(dtype: str) -> None:
    def build(bb, x):
        return [bb.add(x, bb.const(np.array([-0.0, 0.0, -0.0, -0.0], dtype)))]
    _unchanged(build, [("x", (4,), dtype)])


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_add_all_negative_zero_tensor_is_x(dtype: str) -> None:
    def build(bb, x):
        return [bb.add(x, bb.const(np.full(4, -0.0, dtype)))]
    _, func = _simplify(build, [("x", (4,), dtype)])
    assert ops_of(func) == ["param"]


# ---------------------------------------------------------------------------
# x - c0, x - x
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMS)
def test_subtract_positive_zero_is_x(dtype: str) -> None:
    """x - 0 == x for ints, and for floats with +0.0 (-0.0 - 0.0 == -0.0)."""
    _, func = _simplify(lambda bb, x: [bb.subtract(x, _c(bb, 0, dtype))], [("x", (8,), dtype)])
    assert ops_of(func) == ["param"]


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_subtract_negative_zero_is_kept(dtype: str) -> None:
    """x - (-0.0) == x + 0.0 maps -0.0 to +0.0."""
    _unchanged(lambda bb, x: [bb.subtract(x, _c(bb, -0.0, dtype))], [("x", (8,), dtype)])


@pytest.mark.parametrize("dtype", NUMS)
def test_zero_minus_x_is_kept(dtype: str) -> None:
    _unchanged(lambda bb, x: [bb.subtract(_c(bb, 0, dtype), x)], [("x", (8,), dtype)])


@pytest.mark.parametrize("dtype", INTS)
def test_int_x_minus_x_is_zeros(dtype: str) -> None:
    _, func = _simplify(lambda bb, x: [bb.subtract(x, x)], [("x", (2, 3), dtype)])
    assert ops_of(func) == ["param", "const"]
    out = int(func.outputs[0])
    assert func.node_type(out) == (dtype, (2, 3))
    assert not func.const_value(out).any()


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_x_minus_x_is_kept(dtype: str) -> None:
    """NaN - NaN and inf - inf are NaN, not 0."""
    _unchanged(lambda bb, x: [bb.subtract(x, x)], [("x", (8,), dtype)])


def test_int_x_minus_x_respects_max_elements() -> None:
    """The zeros tensor is a new constant: no larger than FoldConstant.max_elements."""
    def build(bb, x):
        return [bb.subtract(x, x)]
    bb = ik.GraphBuilder("main")
    mod = ik.IRModule({"main": bb.finish(build(bb, bb.param("x", (5,), "int32")))})
    with transform.PassContext(config={"FoldConstant.max_elements": 4}):
        assert passes.SimplifyArith()(mod) is mod
    with transform.PassContext(config={"FoldConstant.max_elements": 5}):
        assert passes.SimplifyArith()(mod) is not mod


def test_zeros_constants_are_interned() -> None:
    """One zeros entry per (dtype, shape), shared with an equal constant already in the pool."""
    def build(bb, x, y, z):
        n = bb.negative(x)
        return [bb.subtract(x, x), bb.subtract(y, y), bb.subtract(n, n), bb.subtract(z, z),
                _c(bb, 0, "int32", (3,))]
    mod, func = _simplify(build, [("x", (3,), "int64"), ("y", (3,), "int64"),
                                  ("z", (3,), "int32")])
    const_ids = [int(func.a0[o]) for o in func.outputs]
    assert const_ids[0] == const_ids[1] == const_ids[2] != const_ids[3] == const_ids[4]
    assert len(func.consts) == len(mod["main"].consts) + 1


# ---------------------------------------------------------------------------
# x * c1, x / c1, x * c0
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMS)
@pytest.mark.parametrize("const_first", [False, True])
def test_multiply_by_one_is_x(dtype: str, const_first: bool) -> None:
    def build(bb, x):
        one = _c(bb, 1, dtype)
        return [bb.multiply(one, x) if const_first else bb.multiply(x, one)]
    _, func = _simplify(build, [("x", (8,), dtype)])
    assert ops_of(func) == ["param"]


@pytest.mark.parametrize("dtype", NUMS)
def test_divide_by_one_is_x(dtype: str) -> None:
    _, func = _simplify(lambda bb, x: [bb.divide(x, _c(bb, 1, dtype))], [("x", (8,), dtype)])
    assert ops_of(func) == ["param"]


@pytest.mark.parametrize("dtype", NUMS)
def test_one_divided_by_x_is_kept(dtype: str) -> None:
    _unchanged(lambda bb, x: [bb.divide(_c(bb, 1, dtype), x)], [("x", (8,), dtype)])


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("const_first", [False, True])
def test_int_multiply_by_zero_is_zero(dtype: str, const_first: bool) -> None:
    def build(bb, x):
        z = _c(bb, 0, dtype, (8,))
        return [bb.multiply(z, x) if const_first else bb.multiply(x, z)]
    _, func = _simplify(build, [("x", (8,), dtype)])
    assert ops_of(func) == ["param", "const"]


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_multiply_by_zero_is_kept(dtype: str) -> None:
    """NaN * 0 and inf * 0 are NaN, and -1 * 0 is -0.0."""
    _unchanged(lambda bb, x: [bb.multiply(x, _c(bb, 0.0, dtype))], [("x", (8,), dtype)])


def test_constants_that_are_not_all_ones_are_kept() -> None:
    def build(bb, x):
        return [bb.multiply(x, bb.const(np.array([1.0, 1.0, 2.0], np.float32))),
                bb.divide(x, bb.const(np.array([1.0, -1.0, 1.0], np.float32)))]
    _unchanged(build, [("x", (3,), "float32")])


# ---------------------------------------------------------------------------
# keeping the shape: broadcast_to instead of a replacement
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMS)
def test_identity_with_a_broadcasting_constant_becomes_broadcast_to(dtype: str) -> None:
    def build(bb, x):
        return [bb.multiply(x, _c(bb, 1, dtype, (2, 3)))]
    _, func = _simplify(build, [("x", (3,), dtype)])
    assert ops_of(func) == ["param", "broadcast_to"]
    out = int(func.outputs[0])
    assert func.node_type(out) == (dtype, (2, 3))
    assert func.node_attrs(out) == {"shape": (2, 3)}


def test_int_zero_product_broadcasts_the_smaller_zero_constant() -> None:
    def build(bb, x):
        return [bb.multiply(x, _c(bb, 0, "int32"))]
    _, func = _simplify(build, [("x", (2, 2), "int32")])
    assert ops_of(func) == ["param", "const", "broadcast_to"]
    assert func.node_type(int(func.outputs[0])) == ("int32", (2, 2))


def test_broadcasting_identities_chain_and_keep_the_outer_shape() -> None:
    def build(bb, x):
        v = bb.add(x, _c(bb, -0.0, "float64", (3, 1)))   # (4,) -> (3, 4)
        return [bb.multiply(_c(bb, 1.0, "float64", (2, 1, 1)), v)]  # -> (2, 3, 4)
    _, func = _simplify(build, [("x", (4,), "float64")])
    assert func.node_type(int(func.outputs[0])) == ("float64", (2, 3, 4))
    assert "add" not in ops_of(func) and "multiply" not in ops_of(func)


# ---------------------------------------------------------------------------
# unary and layout identities
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMS)
def test_double_negative_is_x(dtype: str) -> None:
    """Holds for int min too (both negations wrap)."""
    _, func = _simplify(lambda bb, x: [bb.negative(bb.negative(x))], [("x", (8,), dtype)])
    assert ops_of(func) == ["param"]


@pytest.mark.parametrize("dtype", NUMS)
def test_triple_negative_is_one_negative(dtype: str) -> None:
    _, func = _simplify(lambda bb, x: [bb.negative(bb.negative(bb.negative(x)))],
                        [("x", (8,), dtype)])
    assert ops_of(func) == ["param", "negative"]


@pytest.mark.parametrize("dtype", ALL)
def test_astype_to_the_same_dtype_is_x(dtype: str) -> None:
    _, func = _simplify(lambda bb, x: [bb.astype(x, dtype=dtype)], [("x", (8,), dtype)])
    assert ops_of(func) == ["param"]


def test_astype_to_another_dtype_is_kept() -> None:
    _unchanged(lambda bb, x: [bb.astype(bb.astype(x, dtype="int32"), dtype="float32")],
               [("x", (8,), "float32")])


@pytest.mark.parametrize("dtype", ALL)
def test_reshape_of_reshape_is_one_reshape(dtype: str) -> None:
    def build(bb, x):
        return [bb.call("reshape", bb.call("reshape", x, shape=(6,)), shape=(3, -1))]
    _, func = _simplify(build, [("x", (2, 3), dtype)])
    assert ops_of(func) == ["param", "reshape"]
    assert func.node_type(int(func.outputs[0])) == (dtype, (3, 2))


def test_reshape_chain_back_to_the_input_shape_is_x() -> None:
    def build(bb, x):
        v = x
        for shape in ((6,), (3, 2), (1, 6), (2, 3)):
            v = bb.call("reshape", v, shape=shape)
        return [v]
    _, func = _simplify(build, [("x", (2, 3), "int64")])
    assert ops_of(func) == ["param"]


@pytest.mark.parametrize("op", ["reshape", "broadcast_to"])
def test_reshape_or_broadcast_to_the_same_shape_is_x(op: str) -> None:
    _, func = _simplify(lambda bb, x: [bb.call(op, x, shape=(2, 3))],
                        [("x", (2, 3), "float32")])
    assert ops_of(func) == ["param"]


def test_real_broadcasts_are_kept() -> None:
    _unchanged(lambda bb, x: [bb.call("broadcast_to", x, shape=(2, 3))], [("x", (3,), "int32")])


@pytest.mark.parametrize("axes", [(0, 1, 2), (-3, -2, -1)])
def test_identity_permutation_is_x(axes: tuple[int, ...]) -> None:
    _, func = _simplify(lambda bb, x: [bb.call("permute_dims", x, axes=axes)],
                        [("x", (2, 3, 4), "float64")])
    assert ops_of(func) == ["param"]


@pytest.mark.parametrize("shape", [(), (5,)])
def test_reversing_rank_0_or_1_is_x(shape: tuple[int, ...]) -> None:
    _, func = _simplify(lambda bb, x: [bb.call("permute_dims", x)], [("x", shape, "bool")])
    assert ops_of(func) == ["param"]


@pytest.mark.parametrize(("first", "second"), [
    ((1, 2, 0), (2, 0, 1)), (None, None), (None, (2, 1, 0)), ((0, 2, 1), (0, 2, 1)),
    ((-1, 0, 1), (1, 2, 0))])
def test_permutations_that_cancel_are_x(first, second) -> None:
    def build(bb, x):
        return [bb.call("permute_dims", bb.call("permute_dims", x, axes=first), axes=second)]
    _, func = _simplify(build, [("x", (2, 3, 4), "int32")])
    assert ops_of(func) == ["param"]


def test_permutations_that_do_not_cancel_are_kept() -> None:
    def build(bb, x):
        return [bb.call("permute_dims", bb.call("permute_dims", x, axes=(1, 2, 0)),
                        axes=(1, 2, 0))]
    _unchanged(build, [("x", (2, 3, 4), "int32")])


# ---------------------------------------------------------------------------
# one sweep
# ---------------------------------------------------------------------------

def test_chains_collapse_in_one_run() -> None:
    def build(bb, x):
        v = x
        for k in range(10):
            v = (bb.multiply(v, _c(bb, 1, "int64")) if k % 3 == 0 else
                 bb.add(_c(bb, 0, "int64"), v) if k % 3 == 1 else bb.negative(bb.negative(v)))
        return [bb.exp(bb.astype(v, dtype="float64"))]
    _, func = _simplify(build, [("x", (2,), "int64")])
    assert ops_of(func) == ["param", "astype", "exp"]


def test_uses_of_a_simplified_node_see_its_replacement() -> None:
    def build(bb, x):
        y = bb.multiply(x, _c(bb, 1, "int32"))
        return [bb.subtract(y, x)]  # x * 1 - x: becomes x - x, then zeros in the same run
    _, func = _simplify(build, [("x", (3,), "int32")])
    assert ops_of(func) == ["param", "const"]


def test_rewrites_are_reported() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int32")
    mod = ik.IRModule({"main": bb.finish([bb.negative(bb.negative(bb.add(x, _c(bb, 0,
                                                                               "int32"))))])})
    with transform.PassContext() as ctx:
        passes.SimplifyArith()(mod)
    assert ctx.statistics["SimplifyArith"]["rewrites"] == 2
