"""Text printer: golden text, round trip of every op, attributes, constants, random graphs."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from text_helpers import GOLDEN, build_golden, round_trip

import irkernel as ik
from irkernel import ops, testing
from irkernel.text.parser import parse
from irkernel.text.printer import format_values, print_module

DTYPES = ("float32", "float64", "int32", "int64", "bool")
NUMERIC = ("float32", "float64", "int32", "int64")
FLOATS = ("float32", "float64")


def module_of(*funcs: ik.Function) -> ik.IRModule:
    return ik.IRModule({str(f.attrs.get("global_symbol", f"f{i}")): f
                        for i, f in enumerate(funcs)})


# ---------------------------------------------------------------------------
# golden text: the readable spec of the format
# ---------------------------------------------------------------------------
def test_golden_module_prints_exactly() -> None:
    mod = build_golden()
    text = mod.script()
    assert text == GOLDEN
    assert ik.structural_equal(parse(text), mod)


def test_str_and_script_agree() -> None:
    mod = build_golden()
    assert str(mod) == mod.script() == print_module(mod)
    assert str(mod["main"]) == mod["main"].script()
    assert mod["f"].script("f") in mod.script()


def test_function_script_uses_global_symbol_or_given_name() -> None:
    mod = build_golden()
    assert mod["main"].script().startswith("@main = graph")
    assert mod["f"].script("helper").startswith("@helper = graph")


# ---------------------------------------------------------------------------
# round trip over the op table
# ---------------------------------------------------------------------------

def _binary(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), dtype)
    y = bb.param("y", (3,), dtype)  # broadcasting
    s = bb.param("s", (), dtype)
    return bb.finish([bb.call(op, x, y), bb.call(op, s, x)])


def _unary(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), dtype)
    return bb.finish([bb.call(op, x), bb.call(op, bb.param("s", (), dtype))])


def _reduce(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3, 4), dtype)
    outs = [bb.call(op, x), bb.call(op, x, axis=1), bb.call(op, x, axis=(0, -1), keepdims=True),
            bb.call(op, x, axis=None, keepdims=True), bb.call(op, x, axis=[2, 0])]
    return bb.finish(outs)


def _matmul(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    a = bb.param("a", (5, 2, 3), dtype)
    b = bb.param("b", (3, 4), dtype)
    v = bb.param("v", (3,), dtype)
    return bb.finish([bb.matmul(a, b), bb.matmul(a, v), bb.matmul(v, b)])


def _reshape(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3, 4), dtype)
    return bb.finish([bb.reshape(x, shape=(6, -1)), bb.reshape(x, shape=(24,)),
                      bb.reshape(bb.param("z", (0, 3), dtype), shape=(3, 0))])


def _permute_dims(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3, 4), dtype)
    return bb.finish([bb.permute_dims(x), bb.permute_dims(x, axes=(1, 0, 2)),
                      bb.permute_dims(x, axes=[-1, 0, 1])])


def _broadcast_to(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3, 1), dtype)
    return bb.finish([bb.broadcast_to(x, shape=(2, 3, 5))])


def _astype(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), dtype)
    return bb.finish([bb.astype(x, dtype=target) for target in DTYPES])


def _concat(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), dtype)
    y = bb.param("y", (2, 1), dtype)
    return bb.finish([bb.concat(x, y, x, axis=1), bb.concat(x), bb.concat(x, x, axis=-2)])


def _where(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    c = bb.param("c", (2, 1), "bool")
    x = bb.param("x", (3,), dtype)
    return bb.finish([bb.where(c, x, bb.param("y", (), dtype))])


def _arg_reduce(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3, 4), dtype)
    return bb.finish([bb.call(op, x), bb.call(op, x, axis=-1, keepdims=True),
                      bb.call(op, x, axis=1, select_last_index=True)])


def _movement(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4, 3), dtype)
    i = bb.param("i", (2, 1), "int64")
    if op == "strided_slice":
        out = bb.strided_slice(x, begin=(-1, 0), end=(-9, 9), strides=(-2, 2))
    elif op == "take":
        out = bb.take(x, i, axis=-1)
    elif op == "pad":
        out = bb.pad(x, bb.param("v", (), dtype), pad_width=(1, 2, 0, 3), mode="reflect")
    else:
        u = bb.param("u", (2, 3), dtype)
        if dtype == "bool":
            return bb.finish([bb.scatter_nd(x, i, u)])
        return bb.finish([bb.scatter_nd(x, i, u), bb.scatter_nd(x, i, u, reduction="max")])
    return bb.finish([out])


def _scan(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4, 3), dtype)
    return bb.finish([bb.call(op, x), bb.call(op, x, axis=-1, exclusive=True),
                      bb.call(op, x, axis=0, reverse=True, exclusive=True)])


def _topk(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4, 3), dtype)
    return bb.finish([bb.call(op, x, k=2), bb.call(op, x, k=3, axis=0, largest=False,
                                                    sorted=False)])


def _recurrence(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    gates, hidden = (4, 3) if op == "lstm_recurrence" else (3, 3)
    xp = bb.param("xp", (5, 2, gates * hidden), dtype)
    rt = bb.param("rt", (hidden, gates * hidden), dtype)
    h0 = bb.param("h0", (2, hidden), dtype)
    extra = ([h0, bb.param("c0", (2, hidden), dtype), bb.param("p", (3, hidden), dtype)]
             if op == "lstm_recurrence" else [bb.param("rbh", (hidden,), dtype), h0])
    acts = "hard_sigmoid,elu" + (",tanh" if op == "lstm_recurrence" else "")
    n = len(acts.split(","))
    return bb.finish([bb.call(op, xp, rt, *extra),
                      bb.call(op, xp, rt, *extra, activations=acts, reverse=True,
                              activation_alpha=[0.25, -0.0, 1e-30][:n],
                              activation_beta=[0.5, float("inf"), 2][:n], clip=0.1)])


def _nn(op: str, dtype: str) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 4, 6, 5), dtype)
    if op == "conv":
        outs = [bb.conv(x, bb.param("w", (2, 2, 3, 2), dtype), strides=(2, 1),
                        padding=(1, 0, 1, 1), dilation=(1, 2), groups=2),
                bb.conv(x, bb.param("v", (3, 4, 1, 1), dtype))]
    elif op == "conv_transpose":
        outs = [bb.conv_transpose(x, bb.param("w", (4, 1, 2, 2), dtype), strides=(2, 2),
                                  output_padding=(1, 0), groups=2)]
    elif op == "max_pool":
        outs = [bb.max_pool(x, kernel=(3, 2), strides=(2, 2), padding=(1, 1, 1, 1),
                            ceil_mode=True)]
    elif op == "avg_pool":
        outs = [bb.avg_pool(x, kernel=(2, 2), padding=(1, 0, 0, 1), count_include_pad=True)]
    else:
        outs = [bb.lrn(x, size=3), bb.lrn(x, size=2, alpha=0.1, beta=-0.0, bias=float("inf")),
                bb.lrn(x, size=5, alpha=float("nan"), beta=1e-300, bias=-2)]
    return bb.finish(outs)


def _compare(op: str, dtype: str) -> ik.Function:
    return _binary(op, dtype)


OP_CASES = {
    **{op: (_binary, NUMERIC) for op in
       ("add", "subtract", "multiply", "divide", "maximum", "minimum")},
    "power": (_binary, FLOATS),
    **{op: (_unary, NUMERIC) for op in ("negative", "relu", "abs")},
    **{op: (_unary, FLOATS) for op in ("exp", "log", "sqrt", "tanh", "sigmoid")},
    **{op: (_compare, DTYPES) for op in ("equal", "less", "greater")},
    "matmul": (_matmul, NUMERIC),
    "sum": (_reduce, NUMERIC),
    "max": (_reduce, NUMERIC),
    "mean": (_reduce, FLOATS),
    "reshape": (_reshape, DTYPES),
    "permute_dims": (_permute_dims, DTYPES),
    "broadcast_to": (_broadcast_to, DTYPES),
    "astype": (_astype, DTYPES),
    "concat": (_concat, DTYPES),
    "where": (_where, DTYPES),
    **{op: (_unary, FLOATS) for op in ("erf", "floor", "ceil", "round")},
    "logical_not": (_unary, ["bool"]),
    **{op: (_binary, ["bool"]) for op in ("logical_and", "logical_or", "logical_xor")},
    **{op: (_binary, NUMERIC) for op in ("floor_mod", "fmod")},
    "min": (_reduce, NUMERIC),
    "prod": (_reduce, NUMERIC),
    "argmax": (_arg_reduce, NUMERIC),
    "argmin": (_arg_reduce, NUMERIC),
    **{op: (_movement, DTYPES) for op in ("strided_slice", "take", "pad", "scatter_nd")},
    **{op: (_nn, FLOATS) for op in ("conv", "conv_transpose", "max_pool", "avg_pool", "lrn")},
    **{op: (_unary, FLOATS) for op in ops.TRIG_OPS},
    **{op: (_scan, NUMERIC) for op in ("cumsum", "cumprod")},
    "topk_indices": (_topk, NUMERIC),
    **{op: (_recurrence, FLOATS) for op in ("lstm_recurrence", "gru_recurrence")},
}


def test_op_cases_cover_the_op_table() -> None:
    covered = set(OP_CASES) | {"param", "const", "call_func"}
    assert covered == {op.name for op in ops.BUILTIN_OPS} - {"call_tir"}


@pytest.mark.parametrize(("op", "dtype"),
                         [(op, dt) for op, (_, dts) in OP_CASES.items() for dt in dts])
def test_round_trip_op(op: str, dtype: str) -> None:
    build, _ = OP_CASES[op]
    func = build(op, dtype)
    text = round_trip(module_of(func))
    assert f" = {op} %" in text
    ik.verify(parse(text))


def test_round_trip_call_func_between_functions() -> None:
    fb = ik.GraphBuilder("double", private=True)
    a = fb.param("a", (3,), "float64")
    double = fb.finish([fb.add(a, a)])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float64")
    y = bb.call_func("double", x, dtype="float64", shape=(3,))
    z = bb.call_func("double", y, dtype="float64", shape=(3,))
    none = bb.call_func("double2", dtype="int32", shape=())  # zero operands
    mod = ik.IRModule({"main": bb.finish([z, none]), "double": double})
    text = round_trip(mod)
    assert '%3 = call_func {callee = "double2", dtype = int32, shape = []} : int32[]' in text
    back = parse(text)
    assert list(back.functions) == ["main", "double"]
    assert dict(back["double"].attrs) == {}


def test_round_trip_function_attrs() -> None:
    bb = ik.GraphBuilder("main", attrs={
        "SkipOptimization": True, "count": -7, "ratio": 0.1, "big": 1e300, "inf": float("inf"),
        "neg": -0.0, "none": None, "text": "tab\t\"quote\" \\ é \u2028 end",
        "ints": (1, 2, 3), "mixed": ("a", 1, 2.5, True, None), "empty": (),
        "odd key": "needs quotes"})
    x = bb.param("x", (), "int64")
    mod = ik.IRModule({"main": bb.finish([x])})
    text = round_trip(mod)
    assert "SkipOptimization = true" in text
    assert '"odd key" = "needs quotes"' in text
    assert parse(text)["main"].attrs["SkipOptimization"] is True


def test_skip_optimization_via_with_attr() -> None:
    bb = ik.GraphBuilder("main")
    f = bb.finish([bb.param("x", (2,), "float32")]).with_attr("SkipOptimization", True)
    text = round_trip(ik.IRModule({"main": f}))
    assert text.startswith('@main = graph attrs {SkipOptimization = true, '
                           'global_symbol = "main"} {')


def test_private_function_prints_no_attrs() -> None:
    bb = ik.GraphBuilder("helper", private=True)
    f = bb.finish([bb.param("x", (2,), "float32")])
    text = round_trip(ik.IRModule({"helper": f}))
    assert text.startswith("@helper = graph {\n")


def test_round_trip_module_attrs_and_quoted_names() -> None:
    bb = ik.GraphBuilder("main")
    f = bb.finish([bb.param("x", (), "float32")])
    mod = ik.IRModule({"main": f, "with space": f, "ns.sub_1": f}, attrs={"version": 3})
    text = round_trip(mod)
    assert text.startswith("module attrs {version = 3}\n")
    assert '@"with space" = graph' in text
    assert "@ns.sub_1 = graph" in text


def test_round_trip_empty_module() -> None:
    assert round_trip(ik.IRModule({})) == ""


def test_params_interleaved_with_nodes_keep_order() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "float32")
    e = bb.exp(x)
    y = bb.param("y", (2,), "float32")
    f = bb.finish([bb.add(e, y)])
    text = round_trip(ik.IRModule({"main": f}))
    assert "%2 = param y" in text


# ---------------------------------------------------------------------------
# constants
# ---------------------------------------------------------------------------

def _const_module(*values: np.ndarray) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    nodes = [bb.const(v) for v in values]
    return ik.IRModule({"main": bb.finish(nodes)})


def _bits(value: int, dtype: str) -> np.ndarray:
    uint = np.uint32 if dtype == "float32" else np.uint64
    return np.array([value], uint).view(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_specials_round_trip_bitwise(dtype: str) -> None:
    info = np.finfo(dtype)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 0.1, 1 / 3, info.max, -info.max,
                         info.tiny, info.smallest_subnormal, 1e-45, 3.4028235e38, 16777217.0],
                        dtype=dtype)
    odd_nan = 0x7FC00001 if dtype == "float32" else 0x7FF8000000000001
    neg_nan = 0xFFC00000 if dtype == "float32" else 0xFFF8000000000000
    snan = 0x7F800001 if dtype == "float32" else 0x7FF0000000000001
    tensor = np.concatenate([specials, _bits(odd_nan, dtype), _bits(neg_nan, dtype),
                             _bits(snan, dtype)])
    scalars = [np.array(v, dtype) for v in tensor[:-1]]  # scalars of an sNaN get quieted
    mod = _const_module(tensor, *scalars, tensor.reshape(1, -1)[:, :1])
    text = round_trip(mod)
    back = parse(text)["main"]
    np.testing.assert_array_equal(back.const_value(0).view(np.uint8), tensor.view(np.uint8))
    assert f"nan:0x{odd_nan:0{tensor.itemsize * 2}x}" in text
    assert f"nan:0x{neg_nan:0{tensor.itemsize * 2}x}" in text
    assert "-0.0" in text
    assert "-inf" in text


def test_float32_spelling_is_shortest() -> None:
    values = np.array([0.1, 1e-45, 3.4028235e38, 1.0, -2.5, 16777216.0], np.float32)
    assert format_values(values, 0) == ["0.1", "1e-45", "3.4028235e+38", "1.0", "-2.5",
                                        "1.6777216e+07"]
    assert format_values(np.array([0.1]), 1) == ["0.1"]


def test_scalar_const_of_any_one_element_shape_prints_one_literal() -> None:
    mod = _const_module(np.full((1, 1), 2.5, np.float32), np.array([7], np.int64),
                        np.zeros((0, 3), np.float64), np.array(True))
    text = round_trip(mod)
    assert "%0 = const 2.5 : float32[1, 1]" in text
    assert "%1 = const 7 : int64[1]" in text
    assert "%2 = const [] : float64[0, 3]" in text
    assert "%3 = const true : bool[]" in text


def test_int_and_bool_extremes_round_trip() -> None:
    i64 = np.iinfo(np.int64)
    i32 = np.iinfo(np.int32)
    mod = _const_module(np.array([i64.min, i64.max, 0, -1], np.int64), np.int64(i64.min),
                        np.int64(i64.max), np.array([i32.min, i32.max], np.int32),
                        np.int32(i32.min), np.array([True, False, True]))
    text = round_trip(mod)
    assert "-9223372036854775808" in text
    assert "2147483647" in text
    assert "[true, false, true]" in text


@given(hnp.arrays(st.sampled_from([np.float32, np.float64]), hnp.array_shapes(min_dims=0,
                                                                              max_dims=2,
                                                                              max_side=3)))
def test_property_float_constants_round_trip(values: np.ndarray) -> None:
    text = round_trip(_const_module(values))
    back = parse(text)["main"].const_value(0)
    if values.size != 1:  # one-element constants keep float64 bits (NaNs get quieted)
        assert back.tobytes() == values.tobytes()


@given(st.sampled_from(["int32", "int64", "bool"]).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))))
def test_property_int_constants_round_trip(values: np.ndarray) -> None:
    text = round_trip(_const_module(values))
    np.testing.assert_array_equal(parse(text)["main"].const_value(0), values)


# ---------------------------------------------------------------------------
# random graphs (hypothesis)
# ---------------------------------------------------------------------------

_UNARY = ("negative", "relu", "abs", "exp", "log", "sqrt", "tanh", "sigmoid")
_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal",
           "less", "greater")
_SHAPES = ((), (3,), (1, 3), (2, 3), (2, 1))


@st.composite
def random_functions(draw: st.DrawFn) -> ik.Function:
    """A small random graph built through GraphBuilder; ill-typed draws are skipped."""
    bb = ik.GraphBuilder(draw(st.sampled_from(["main", "f"])), private=draw(st.booleans()))
    nodes = [bb.param(f"p{i}", draw(st.sampled_from(_SHAPES)), draw(st.sampled_from(DTYPES)))
             for i in range(draw(st.integers(1, 3)))]
    for _ in range(draw(st.integers(0, 12))):
        pick = draw(st.integers(0, len(nodes) - 1))
        choice = draw(st.sampled_from(["const", "unary", "binary", "reduce", "astype", "where",
                                       "concat", "reshape", "permute"]))
        try:
            nodes.append(_random_node(draw, bb, nodes, nodes[pick], choice))
        except ValueError as exc:  # ill-typed draw (dtype not supported, shapes do not
            # broadcast, ...): the builder names the op and its operands, nothing else passes
            assert re.match(r"\w+: .* \(operands %\d+: ", str(exc)), exc
    outs = draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=3))
    return bb.finish(outs)


def _random_node(draw: st.DrawFn, bb: ik.GraphBuilder, nodes: list[int], x: int,
                 choice: str) -> int:
    other = nodes[draw(st.integers(0, len(nodes) - 1))]
    if choice == "const":
        dtype = draw(st.sampled_from(DTYPES))
        return bb.const(draw(hnp.arrays(dtype, st.sampled_from(_SHAPES))))
    if choice == "unary":
        return bb.call(draw(st.sampled_from(_UNARY)), x)
    if choice == "binary":
        return bb.call(draw(st.sampled_from(_BINARY)), x, other)
    if choice == "reduce":
        axis = draw(st.sampled_from([None, 0, -1, (0, 1)]))
        return bb.call(draw(st.sampled_from(["sum", "max", "mean"])), x, axis=axis,
                       keepdims=draw(st.booleans()))
    if choice == "astype":
        return bb.astype(x, dtype=draw(st.sampled_from(DTYPES)))
    if choice == "where":
        return bb.where(other, x, x)
    if choice == "concat":
        return bb.concat(x, other, axis=draw(st.sampled_from([0, -1])))
    if choice == "reshape":
        return bb.reshape(x, shape=(-1,))
    return bb.permute_dims(x)


@given(random_functions(), random_functions())
def test_property_random_graphs_round_trip(f: ik.Function, g: ik.Function) -> None:
    round_trip(ik.IRModule({"main": f, "other": g}))


@pytest.mark.parametrize("shapes", ["scalar", "small"])
def test_property_round_trip_over_testing_strategy(shapes: str) -> None:
    # NOTE: n_params >= 1 sidesteps a generator limitation (a 1-node graph of only constants).
    @given(testing.modules(shapes=shapes, n_params=st.integers(1, 4)))
    def check(mod: ik.IRModule) -> None:
        round_trip(mod)

    check()


@pytest.mark.parametrize("seed", [0, 1])
def test_round_trip_generated_scalar_graph(seed: int) -> None:
    spec = testing.GraphSpec(n_nodes=20_000, seed=seed, const_fraction=0.3, n_outputs=3)
    round_trip(testing.random_module(spec, call_funcs=True))
