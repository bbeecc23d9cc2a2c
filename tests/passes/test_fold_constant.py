"""FoldConstant: every op and dtype folds bit-identically to the interpreter; limits; interning.

The op-by-op tests build one graph per (op, dtype) whose outputs apply the op
to every combination of special constants (0, -0.0, 1, NaN, +-inf, huge,
tiny, int min/max, ...), once as one-element constants (the Numba scalar
path) and once as broadcast tensors (the NumPy path), and require that every
output became a constant with exactly the interpreter's value.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from passes_helpers import as_module, assert_same_results, ops_of

import irkernel as ik
import passes
from irkernel import ops, transform
from irkernel.testing import functions_with_inputs

FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e30, -1e-30, 88.5, -100.0, np.nan, np.inf,
          -np.inf)
INTS = {"int32": (0, 1, -1, 2, 7, -8, 3, 2**31 - 1, -(2**31)),
        "int64": (0, 1, -1, 2, 7, -8, 3, 2**63 - 1, -(2**63), 2**40)}
BOOLS = (False, True)
FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64")
NUM_DTYPES = FLOAT_DTYPES + INT_DTYPES
ALL_DTYPES = (*NUM_DTYPES, "bool")


def _values(dtype: str) -> np.ndarray:
    if dtype in FLOAT_DTYPES:
        return np.array(FLOATS, dtype)
    if dtype == "bool":
        return np.array(BOOLS)
    return np.array(INTS[dtype], dtype)


def _fold(mod: ik.IRModule, **kw: object) -> ik.IRModule:
    out = passes.FoldConstant(**kw)(mod)  # type: ignore[arg-type]
    ik.verify(out)
    return out


def _check_all_outputs_folded(mod: ik.IRModule, *inputs: object) -> ik.IRModule:
    out = _fold(mod)
    func = out["main"]
    not_folded = [int(o) for o in func.outputs if int(func.kind[o]) != ops.OP_CONST]
    assert not not_folded, f"outputs {not_folded} were not folded: {ops_of(func)}"
    assert func.num_nodes == mod["main"].num_nodes  # rows are rewritten, never dropped
    assert_same_results(ik.interpret(mod, *inputs), ik.interpret(out, *inputs), "FoldConstant")
    return out


# ---------------------------------------------------------------------------
# every op, every dtype: scalars (Numba) and tensors (NumPy)
# ---------------------------------------------------------------------------

def _elementwise_cases() -> list[tuple[str, str]]:
    cases = []
    for op in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "negative", "relu",
               "abs"):
        cases += [(op, dt) for dt in NUM_DTYPES]
    for op in ("power", "exp", "log", "sqrt", "tanh", "sigmoid"):
        cases += [(op, dt) for dt in FLOAT_DTYPES]
    for op in ("equal", "less", "greater"):
        cases += [(op, dt) for dt in ALL_DTYPES]
    return cases


@pytest.mark.parametrize(("op", "dtype"), _elementwise_cases())
def test_scalar_elementwise_ops_fold_bit_identically(op: str, dtype: str) -> None:
    bb = ik.GraphBuilder("main")
    consts = [bb.const(v) for v in _values(dtype)]
    arity = ops.get_op(op).arity
    outs = [bb.call(op, *args) for args in itertools.product(consts, repeat=arity)]
    _check_all_outputs_folded(ik.IRModule({"main": bb.finish(outs)}))


@pytest.mark.parametrize(("op", "dtype"), _elementwise_cases())
def test_tensor_elementwise_ops_fold_bit_identically(op: str, dtype: str) -> None:
    vals = _values(dtype)
    bb = ik.GraphBuilder("main")
    col = bb.const(vals.reshape(-1, 1))
    row = bb.const(vals.reshape(1, -1))
    out = bb.call(op, col, row) if ops.get_op(op).arity == 2 else bb.call(op, col)
    _check_all_outputs_folded(ik.IRModule({"main": bb.finish([out])}))


@pytest.mark.parametrize("src", ALL_DTYPES)
@pytest.mark.parametrize("dst", ALL_DTYPES)
def test_astype_folds_bit_identically(src: str, dst: str) -> None:
    """float -> int truncates, maps NaN to 0 and saturates; float64 -> float32 rounds."""
    vals = _values(src)
    if src in FLOAT_DTYPES:
        vals = np.concatenate([vals, np.array([2.0**31, -(2.0**31) - 1, 2.0**63, 2147483647.7,
                                               -0.7, 1.0 / 3.0, 3.4e38, 1e-45], src)])
    bb = ik.GraphBuilder("main")
    outs = [bb.astype(bb.const(v), dtype=dst) for v in vals]
    outs.append(bb.astype(bb.const(vals), dtype=dst))  # the tensor path
    _check_all_outputs_folded(ik.IRModule({"main": bb.finish(outs)}))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_where_folds_for_scalars_and_tensors(dtype: str) -> None:
    vals = _values(dtype)
    bb = ik.GraphBuilder("main")
    conds = [bb.const(np.bool_(True)), bb.const(np.bool_(False))]
    pairs = list(itertools.product([bb.const(v) for v in vals[:4]], repeat=2))
    outs = [bb.where(c, x, y) for c in conds for x, y in pairs]
    mask = bb.const(np.array([[True], [False]]))
    outs.append(bb.where(mask, bb.const(vals), bb.const(vals[::-1].copy())))
    _check_all_outputs_folded(ik.IRModule({"main": bb.finish(outs)}))


def _structural_cases() -> dict[str, Callable[[ik.GraphBuilder, int, tuple[int, ...]], int]]:
    return dict([
        ("sum", lambda bb, c, s: bb.call("sum", c)),
        ("sum_axis0", lambda bb, c, s: bb.call("sum", c, axis=0)),
        ("sum_keepdims", lambda bb, c, s: bb.call("sum", c, axis=-1, keepdims=True)),
        ("sum_no_axes", lambda bb, c, s: bb.call("sum", c, axis=())),
        ("max", lambda bb, c, s: bb.call("max", c)),
        ("max_keepdims", lambda bb, c, s: bb.call("max", c, axis=0, keepdims=True)),
        ("mean", lambda bb, c, s: bb.call("mean", c)),
        ("mean_axis1", lambda bb, c, s: bb.call("mean", c, axis=1)),
        ("reshape", lambda bb, c, s: bb.call("reshape", c, shape=(-1,))),
        ("permute_dims", lambda bb, c, s: bb.call("permute_dims", c)),
        ("permute_dims_axes", lambda bb, c, s: bb.call("permute_dims", c, axes=(1, 0))),
        ("broadcast_to", lambda bb, c, s: bb.call("broadcast_to", c, shape=(2, *s))),
        ("concat", lambda bb, c, s: bb.call("concat", c, c, axis=1)),
        ("concat_one", lambda bb, c, s: bb.call("concat", c, axis=0)),
        ("matmul", lambda bb, c, s: bb.call("matmul", c, c)),
        ("matmul_vec", lambda bb, c, s: bb.call("matmul", bb.call("reshape", c, shape=(-1,)),
                                             bb.call("reshape", c, shape=(-1, 1)))),
    ])


_NEEDS_FLOAT = {"mean", "mean_axis1"}
_NEEDS_NUM = {"sum", "sum_axis0", "sum_keepdims", "sum_no_axes", "max", "max_keepdims",
              "matmul", "matmul_vec"}


_STRUCTURAL = _structural_cases()


def _supported(case: str, dtype: str) -> bool:
    if case in _NEEDS_FLOAT:
        return dtype in FLOAT_DTYPES
    return dtype != "bool" or case not in _NEEDS_NUM


@pytest.mark.parametrize(("case", "dtype"), [(c, d) for c in _STRUCTURAL for d in ALL_DTYPES
                                             if _supported(c, d)])
@pytest.mark.parametrize("shape", [(1, 1), (2, 2)], ids=["one_element", "2x2"])
def test_reductions_and_layout_ops_fold_bit_identically(case: str, dtype: str,
                                                       shape: tuple[int, int]) -> None:
    """One-element tensors take the scalar path (with NumPy's signed-zero rules), others NumPy's."""
    vals = _values(dtype)
    size = shape[0] * shape[1]
    bb = ik.GraphBuilder("main")
    outs = []
    for start in range(0, len(vals), size):
        chunk = np.resize(vals[start:start + size], size).reshape(shape)
        outs.append(_STRUCTURAL[case](bb, bb.const(chunk), shape))
    _check_all_outputs_folded(ik.IRModule({"main": bb.finish(outs)}))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["sum", "mean", "matmul"])
def test_negative_zero_through_one_element_sum_mean_matmul(op: str, dtype: str) -> None:
    """Regression: NumPy's sum/mean/matmul of a lone -0.0 is +0.0; the fold passed -0.0 through."""
    bb = ik.GraphBuilder("main")
    z = bb.const(np.array([-0.0], dtype))
    if op == "matmul":
        out = bb.matmul(z, bb.const(np.array([1.0], dtype)))
    else:
        out = bb.call(op, z)
    mod = ik.IRModule({"main": bb.finish([out])})
    folded = _check_all_outputs_folded(mod)
    assert not np.signbit(ik.interpret(folded)[0])


def test_float32_stays_float32() -> None:
    bb = ik.GraphBuilder("main")
    a, b = bb.const(np.float32(0.1)), bb.const(np.float32(0.2))
    out = _check_all_outputs_folded(ik.IRModule({"main": bb.finish([bb.add(a, b),
                                                                     bb.exp(a)])}))
    total, e = ik.interpret(out)
    assert total.dtype == np.float32 and total == np.float32(0.1) + np.float32(0.2)
    assert e.dtype == np.float32


def test_chains_of_constants_fold_to_the_end() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float64")
    v = bb.const(np.float64(1.5))
    for k in range(200):
        v = bb.call(("add", "multiply", "subtract", "tanh")[k % 4], v,
                    *([bb.const(np.float64(0.75))] if k % 4 != 3 else []))
    mod = ik.IRModule({"main": bb.finish([bb.add(x, v)])})
    out = _fold(mod)
    func = out["main"]
    add_operand = func.operands(int(func.outputs[0]))[1]
    assert func.op(add_operand).name == "const"
    assert_same_results(ik.interpret(mod, np.float64(2)), ik.interpret(out, np.float64(2)))


@settings(max_examples=150)
@given(case=functions_with_inputs(special_values=True, shapes="scalar",
                                  dtypes=st.sampled_from([("float32",), ("float64",),
                                                          ("float32", "int32", "bool"),
                                                          ("float64", "int64", "bool")]),
                                  const_fraction=st.floats(0.3, 0.6),
                                  const_subgraph_fraction=st.floats(0.2, 0.3)))
def test_constant_heavy_scalar_graphs_fold_bit_identically(case) -> None:
    """Hypothesis found the one-element sum(-0.0) bug with this strategy."""
    func, inputs = case
    out = _fold(as_module(func))
    assert_same_results(ik.interpret(func, *inputs), ik.interpret(out, *inputs))


# ---------------------------------------------------------------------------
# what is not folded
# ---------------------------------------------------------------------------

def test_params_and_their_users_are_not_folded() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float32")
    mod = ik.IRModule({"main": bb.finish([bb.add(x, bb.const(np.float32(1)))])})
    assert _fold(mod) is mod


def test_calls_are_not_folded() -> None:
    helper = ik.GraphBuilder("helper", private=True)
    a = helper.param("a", (), "int32")
    helper_f = helper.finish([helper.add(a, a)])
    bb = ik.GraphBuilder("main")
    call = bb.call_func("helper", bb.const(np.int32(2)), dtype="int32", shape=())
    mod = ik.IRModule({"main": bb.finish([call]), "helper": helper_f})
    assert _fold(mod) is mod


def test_impure_ops_are_not_folded(impure_op: str) -> None:
    bb = ik.GraphBuilder("main")
    draw = bb.call(impure_op, bb.const(np.float32(2)))
    mod = ik.IRModule({"main": bb.finish([bb.add(draw, draw)])})
    assert _fold(mod) is mod


def _ones_like_graph(n: int) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    ones = bb.call("broadcast_to", bb.const(np.float32(1)), shape=(n,))
    return ik.IRModule({"main": bb.finish([bb.add(ones, ones)])})


def test_default_max_elements_is_registered_as_1_shl_16() -> None:
    assert transform.PassContext().get_config("FoldConstant.max_elements") == 1 << 16
    at_limit, over = _ones_like_graph(1 << 16), _ones_like_graph((1 << 16) + 1)
    assert ops_of(_fold(at_limit)["main"])[-1] == "const"
    assert _fold(over) is over  # TVM's guard against folding ones(shape) into huge constants


def test_max_elements_from_the_pass_context_config() -> None:
    small, large = _ones_like_graph(4), _ones_like_graph(5)
    with transform.PassContext(config={"FoldConstant.max_elements": 4}):
        assert ops_of(_fold(small)["main"]) == ["const", "const", "const"]
        assert _fold(large) is large


def test_max_elements_constructor_option_wins_over_the_config() -> None:
    small, large = _ones_like_graph(4), _ones_like_graph(5)
    assert passes.FoldConstant(max_elements=4)(large) is large
    with transform.PassContext(config={"FoldConstant.max_elements": 2}):
        assert passes.FoldConstant(max_elements=4)(small) is not small
    assert str(transform.get_pass("FoldConstant", max_elements=4)) == \
        "FoldConstant{max_elements=4}"
    assert transform.parse_pipeline("FoldConstant{max_elements=4}")(large) is large


def test_large_operands_may_fold_into_small_results() -> None:
    """The limit is on what is materialized: sum(ones(100000)) is one element."""
    bb = ik.GraphBuilder("main")
    big = bb.const(np.ones(100_000, np.float64))
    mod = ik.IRModule({"main": bb.finish([bb.call("sum", big)])})
    out = _fold(mod)
    assert ik.interpret(out)[0] == 100_000.0


@pytest.mark.parametrize("bad", [0, -1, 1.5, "4", True])
def test_bad_max_elements_is_a_clear_error(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="max_elements"):
        passes.FoldConstant(max_elements=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, "4"])
def test_bad_max_elements_config_is_a_clear_error(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="max_elements"):
        transform.PassContext(config={"FoldConstant.max_elements": bad})


# ---------------------------------------------------------------------------
# interning of the constants produced
# ---------------------------------------------------------------------------

def _const_ids(func: ik.Function) -> list[int]:
    return [int(func.a0[o]) for o in func.outputs]


def test_equal_folded_scalars_share_one_pool_entry() -> None:
    bb = ik.GraphBuilder("main")
    c = [bb.const(np.int64(v)) for v in (1, 2, 3, 4)]
    outs = [bb.add(c[1], c[2]), bb.add(c[0], c[3]), bb.multiply(c[0], bb.const(np.int64(5)))]
    mod = ik.IRModule({"main": bb.finish(outs)})
    func = _fold(mod)["main"]
    ids = _const_ids(func)
    assert len(set(ids)) == 1
    assert len(func.consts) == len(mod["main"].consts)  # 5 was in the pool already


def test_new_scalar_values_get_one_entry_each() -> None:
    bb = ik.GraphBuilder("main")
    two = bb.const(np.float32(2))
    outs = [bb.add(two, two), bb.multiply(two, two), bb.exp(two), bb.exp(two)]
    mod = ik.IRModule({"main": bb.finish(outs)})
    func = _fold(mod)["main"]
    ids = _const_ids(func)
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]
    assert len(func.consts) == len(mod["main"].consts) + 2


def test_interning_keeps_signed_zeros_dtypes_and_shapes_apart() -> None:
    bb = ik.GraphBuilder("main")
    z = bb.const(np.float64(0.0))
    one32, one64 = bb.const(np.int32(1)), bb.const(np.int64(1))
    outs = [bb.negative(z), bb.add(z, z), bb.multiply(one32, one32), bb.multiply(one64, one64),
            bb.call("reshape", bb.add(z, z), shape=(1, 1))]
    func = _fold(ik.IRModule({"main": bb.finish(outs)}))["main"]
    ids = _const_ids(func)
    assert len(set(ids)) == len(ids)
    assert np.signbit(func.const_value(int(func.outputs[0])))


def test_equal_nans_share_an_entry() -> None:
    bb = ik.GraphBuilder("main")
    inf = bb.const(np.float64(np.inf))
    outs = [bb.subtract(inf, inf), bb.subtract(inf, inf), bb.multiply(inf, bb.const(0.0))]
    func = _fold(ik.IRModule({"main": bb.finish(outs)}))["main"]
    assert np.isnan(ik.interpret(func)).all()
    ids = _const_ids(func)
    assert ids[0] == ids[1]


def test_equal_folded_tensors_share_one_pool_entry() -> None:
    bb = ik.GraphBuilder("main")
    a = bb.const(np.arange(6, dtype=np.int32).reshape(2, 3))
    b = bb.const(np.ones((2, 3), np.int32))
    outs = [bb.add(a, b), bb.add(b, a), bb.add(a, a)]
    mod = ik.IRModule({"main": bb.finish(outs)})
    func = _fold(mod)["main"]
    ids = _const_ids(func)
    assert ids[0] == ids[1] != ids[2]
    assert len(func.consts) == len(mod["main"].consts) + 2


def test_nodes_folded_is_reported() -> None:
    bb = ik.GraphBuilder("main")
    c = bb.const(np.int32(3))
    mod = ik.IRModule({"main": bb.finish([bb.add(bb.add(c, c), c)])})
    with transform.PassContext() as ctx:
        passes.FoldConstant()(mod)
    assert ctx.statistics["FoldConstant"]["nodes_folded"] == 2
