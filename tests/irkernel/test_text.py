"""Text format: printer and parser round trip, exact spelling, and ParseError positions."""

from __future__ import annotations

import contextlib
import re
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import irkernel as ik
from irkernel import ops
from irkernel.ir.errors import ParseError
from irkernel.text import parser as text_parser
from irkernel.text.parser import parse
from irkernel.text.printer import format_values, print_module

DTYPES = ("float32", "float64", "int32", "int64", "bool")
NUMERIC = ("float32", "float64", "int32", "int64")
FLOATS = ("float32", "float64")


def round_trip(mod: ik.IRModule) -> str:
    """Print, parse, compare structurally, and check the text is a fixed point."""
    text = mod.script()
    back = parse(text)
    assert ik.structural_equal(back, mod), text
    assert back.script() == text
    return text


def module_of(*funcs: ik.Function) -> ik.IRModule:
    return ik.IRModule({str(f.attrs.get("global_symbol", f"f{i}")): f
                        for i, f in enumerate(funcs)})


# ---------------------------------------------------------------------------
# golden text: the readable spec of the format
# ---------------------------------------------------------------------------

GOLDEN = """\
@main = graph attrs {global_symbol = "main"} {
  %0 = param x : float32[4]
  %1 = const [0.0, 1.0, 2.0, 3.0] : float32[4]
  %2 = add %0, %1 : float32[4]
  %3 = sum %2 {axis = [0], keepdims = false} : float32[]
  %4 = call_func %2 {callee = "f", dtype = float32, shape = [4]} : float32[4]
  %5 = const nan:0x7fc00001 : float32[]
  %6 = less %4, %5 : bool[4]
  %7 = where %6, %4, %5 : float32[4]
  return %3, %4
}

@f = graph attrs {SkipOptimization = true, note = "a \\"quoted\\" note", tags = [1, 2.5, none]} {
  %0 = param a : float32[4]
  %1 = reshape %0 {shape = [2, -1]} : float32[2, 2]
  %2 = permute_dims %1 {axes = none} : float32[2, 2]
  %3 = const 0.1 : float32[]
  %4 = multiply %2, %3 : float32[2, 2]
  %5 = reshape %4 {shape = [4]} : float32[4]
  return %5
}
"""


def build_golden() -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    c = bb.const(np.arange(4, dtype=np.float32))
    y = bb.add(x, c)
    s = bb.sum(y, axis=0)
    z = bb.call_func("f", y, dtype="float32", shape=(4,))
    nan = bb.const(np.array([0x7FC00001], np.uint32).view(np.float32).reshape(()))
    less = bb.less(z, nan)
    bb.where(less, z, nan)
    main = bb.finish([s, z])
    fb = ik.GraphBuilder("f", private=True,
                         attrs={"SkipOptimization": True, "note": 'a "quoted" note',
                                "tags": (1, 2.5, None)})
    a = fb.param("a", (4,), "float32")
    r = fb.reshape(a, shape=(2, -1))
    t = fb.permute_dims(r)
    m = fb.multiply(t, fb.const(np.float32(0.1)))
    f = fb.finish([fb.reshape(m, shape=(4,))])
    return ik.IRModule({"main": main, "f": f})


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
        except (TypeError, ValueError):
            continue  # ill-typed draw (dtype not supported, shapes do not broadcast, ...)
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
    testing = pytest.importorskip("irkernel.testing")
    if shapes == "small":
        pytest.importorskip("irkernel.testing.small")

    # NOTE: n_params >= 1 sidesteps a generator limitation (a 1-node graph of only constants).
    @given(testing.modules(shapes=shapes, n_params=st.integers(1, 4)))
    def check(mod: ik.IRModule) -> None:
        round_trip(mod)

    check()


@pytest.mark.parametrize("seed", [0, 1])
def test_round_trip_generated_scalar_graph(seed: int) -> None:
    testing = pytest.importorskip("irkernel.testing")
    spec = testing.GraphSpec(n_nodes=20_000, seed=seed, const_fraction=0.3, n_outputs=3)
    round_trip(testing.random_module(spec, call_funcs=True))


# ---------------------------------------------------------------------------
# hand-written text
# ---------------------------------------------------------------------------

def test_hand_written_names_comments_and_blank_lines() -> None:
    text = (
        "# a module written by hand\r\n"
        "\n"
        "@main = graph {   # no attrs: private\n"
        "  %x = param x : float32[]\n"
        "\n"
        "  %two=const 2 : float32[]   # int literal for a float constant\n"
        "  %y = multiply %x,%two : float32[]\r\n"
        "  %ok = greater %y, %x : bool[]\n"
        "  return %y, %ok\n"
        "}  # end\n")
    func = parse(text)["main"]
    bb = ik.GraphBuilder("main", private=True)
    x = bb.param("x", (), "float32")
    y = bb.multiply(x, bb.const(np.float32(2)))
    assert ik.structural_equal(func, bb.finish([y, bb.greater(y, x)]))


def test_parse_accepts_default_attrs_omitted_and_normalizes_them() -> None:
    text = ("@main = graph {\n  %0 = param x : float32[2, 3]\n"
            "  %1 = sum %0 {axis = 1} : float32[2]\n  %2 = permute_dims %0 : float32[3, 2]\n"
            "  return %1, %2\n}\n")
    mod = parse(text)
    assert "%1 = sum %0 {axis = [1], keepdims = false} : float32[2]" in mod.script()
    assert "%2 = permute_dims %0 {axes = none} : float32[3, 2]" in mod.script()


def test_ik_parse_is_the_parser() -> None:
    mod = build_golden()
    assert ik.structural_equal(ik.parse(mod.script()), mod)


# ---------------------------------------------------------------------------
# printer errors
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", [object(), {"a": 1}, [[1]], b"bytes", 1j])
def test_printer_rejects_unprintable_attr_naming_it(value: object) -> None:
    bb = ik.GraphBuilder("main")
    f = bb.finish([bb.param("x", (), "float32")]).with_attr("weird", value)
    with pytest.raises(TypeError, match="'weird'"):
        f.script()


def test_printer_rejects_value_without_script_naming_function() -> None:
    with pytest.raises(TypeError, match="'opaque'"):
        ik.IRModule({"opaque": 42}).script()


def test_printer_uses_script_of_other_values() -> None:
    class Fake:
        def script(self, name: str) -> str:
            return f"@{name} = prim_func {{}}"

    assert ik.IRModule({"k": Fake()}).script() == "@k = prim_func {}\n"


# ---------------------------------------------------------------------------
# parse errors: line, column and what is named
# ---------------------------------------------------------------------------

H = "@main = graph {\n  %0 = param x : float32[4]\n"
R = "  return %1\n}\n"

PARSE_ERRORS = [
    # (text, line, column, fragment of the message)
    (H + "  %1 = foo %0 : float32[4]\n" + R, 3, 8, "unknown op 'foo'"),
    (H + "  %1 = exp %y : float32[4]\n" + R, 3, 12, "unknown value %y"),
    (H + "  %0 = exp %0 : float32[4]\n" + R, 3, 3, "redefinition of %0"),
    (H + "  %1 = exp %0 : float16[4]\n" + R, 3, 17, "unknown dtype 'float16'"),
    (H + "  %1 = exp %0 : float32(4)\n" + R, 3, 24, "expected '['"),
    (H + "  %1 = exp %0 : float32[4, -1]\n" + R, 3, 28, "bad dimension '-1'"),
    (H + "  %1 = exp %0 : float32[4\n" + R, 3, 26, "expected ',' or ']'"),
    (H + "  %1 = exp %0\n" + R, 3, 14, "expected ':' before the type"),
    (H + "  %1 = sum %0 {axes = [0]} : float32[]\n" + R, 3, 8, "unknown attribute 'axes'"),
    (H + "  %1 = sum %0 {keepdims = 1} : float32[]\n" + R, 3, 8, "'keepdims' must be a bool"),
    (H + "  %1 = sum %0 {axis = [0] : float32[]\n" + R, 3, 27, "expected ',' or '}'"),
    (H + "  %1 = sum %0 {axis = 0, axis = 0} : float32[]\n" + R, 3, 26,
     "duplicate attribute 'axis'"),
    (H + "  %1 = sum %0 {axis = [[0]]} : float32[]\n" + R, 3, 24, "nested lists"),
    (H + "  %1 = astype %0 {dtype = float16} : float32[4]\n" + R, 3, 8,
     "'dtype' must be a dtype name"),
    (H + "  %1 = exp %0 : float32[3]\n" + R, 3, 17,
     "declared type float32[3] of %1 differs from the inferred type float32[4]"),
    (H + "  %1 = exp %0 : int32[4]\n  %2 = foo\n" + R, 3, 17, "declared type int32[4]"),
    (H + "  %1 = param y : int32[4]\n  %2 = add %0, %1 : float32[4]\n" + R, 4, 8,
     "operand dtypes differ"),
    (H + "  %1 = reshape %0 {shape = [3]} : float32[3]\n" + R, 3, 8, "cannot reshape"),
    (H + "  %1 = exp %0, %0 : float32[4]\n" + R, 3, 8, "exp takes 1 operands, got 2"),
    (H + "  %1 = exp %0\n", 3, 14, "expected ':'"),
    (H + "  %1 = exp %0 : float32[4]\n  return %1\n", 1, 15, "never closed"),
    (H + "  %1 = exp %0 : float32[4]\n}\n", 4, 1, "no return statement"),
    (H + "  return %0\n  %1 = exp %0 : float32[4]\n}\n", 4, 3, "statement after return"),
    (H + "  return\n}\n", 3, 9, "return needs at least one value"),
    (H + "  return %9\n}\n", 3, 10, "unknown value %9"),
    (H + "  return %0\n} }\n", 4, 3, "unexpected '}'"),
    (H + "  %1 = exp %0 $ : float32[4]\n" + R, 3, 15, "invalid token '$'"),
    (H + "  %1 = exp 12abc : float32[4]\n" + R, 3, 12, "invalid token '12abc'"),
    (H + "  %1 = exp % : float32[4]\n" + R, 3, 12, "expected a name after '%'"),
    (H + "  %1 = param : float32[4]\n" + R, 3, 14, "expected a parameter name"),
    (H + "  %1 = param x : float32[4]\n" + R, 3, 14, "duplicate parameter name 'x'"),
    (H + "  %1 = const : float32[4]\n" + R, 3, 14, "expected a constant value"),
    (H + "  %1 = const 1.5 : int32[]\n" + R, 3, 14, "bad int32 literal '1.5'"),
    (H + "  %1 = const 3000000000 : int32[]\n" + R, 3, 14, "out of range for int32"),
    (H + "  %1 = const [1.0, 2.0] : float32[3]\n" + R, 3, 15, "has 2 values"),
    (H + "  %1 = const 1.0 : float32[3]\n" + R, 3, 14, "has 1 value"),
    (H + "  %1 = const nan:0x3f800000 : float32[]\n" + R, 3, 14, "not a float32 NaN"),
    (H + "  %1 = const [1.0, 1e39] : float32[2]\n" + R, 3, 20, "1e39 overflows float32"),
    (H + "  %1 = const 1e309 : float64[]\n" + R, 3, 14, "1e309 overflows float64"),
    (H + "  %1 = const 1 : bool[]\n" + R, 3, 14, "bad bool literal '1'"),
    (H + "  %1 = const true : float32[]\n" + R, 3, 14, "bad float32 literal 'true'"),
    (H + '  %1 = call_func %0 {callee = "f\\q", dtype = float32, shape = [4]} : float32[4]\n'
     + R, 3, 31, "bad string literal"),
    (H + '  %1 = call_func %0 {callee = "f, dtype = float32} : float32[4]\n' + R, 3, 31,
     "unterminated string"),
    ("@main = graph {\n  %0 = param x : float32[]\n  return %0\n}\n"
     "@main = graph {\n  %0 = param x : float32[]\n  return %0\n}\n", 5, 1,
     "redefinition of function @main"),
    ("main = graph {\n}\n", 1, 1, "expected a function"),
    ("@main = prim_func {\n}\n", 1, 9, "expected 'graph'"),
    ("@main = graph attrs {a = foo} {\n}\n", 1, 26, "bad attribute value 'foo'"),
    ("@main = graph attrs {a = 1} \n}\n", 1, 29, "expected '{' to open the function body"),
    ("@main graph {\n}\n", 1, 7, "expected '='"),
    ("@ = graph {\n}\n", 1, 1, "expected a function name after '@'"),
    ('@"" = graph {\n}\n', 1, 1, "must not be empty"),
    ("\n\n  }\n", 3, 3, "expected a function"),
    ("module attrs {a = 1}\nmodule attrs {a = 1}\n", 2, 1, "'module attrs' must come once"),
    ("@main = graph {\n  %0 = param x : float32[99999999999999999999]\n", 2, 26,
     "too large"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), PARSE_ERRORS)
def test_parse_error_position_and_message(text: str, line: int, column: int,
                                          fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text)
    err = info.value
    assert fragment in err.message
    assert (err.line, err.column) == (line, column), err.message
    assert str(err).startswith(f"{line}:{column}: ")


@pytest.mark.parametrize("flip", [True, False])
def test_fast_and_careful_paths_report_the_same_error(flip: bool) -> None:
    # The second occurrence of a type text takes the regex path; both must agree.
    head = H + "  %1 = exp %0 : float32[4]\n"
    bad = ("  %2 = exp %0 {keepdims = true} : float32[4]\n" if flip
           else "  %2 = exp %9 : float32[4]\n")
    with pytest.raises(ParseError) as info:
        parse(head + bad + "  return %2\n}\n")
    assert (info.value.line, info.value.column) == ((4, 8) if flip else (4, 12))


def _batch_text(n_before: int, bad: str, n_after: int, tail: str = "") -> tuple[str, int]:
    """A body whose fast-path lines surround ``bad``; returns (text, line of bad)."""
    head = ["@main = graph {", "  %0 = param x : float32[4]", "  %1 = param k : int32[4]",
            "  %2 = param p : float32[3]", "  %3 = exp %0 : float32[4]",
            "  %4 = add %3, %0 : float32[4]"]
    body = [f"  %{i} = {'exp' if i % 2 else 'add'} %{i - 1}{'' if i % 2 else ', %0'}"
            " : float32[4]" for i in range(5, 5 + n_before)]
    last = 4 + n_before
    after = [f"  %{i} = exp %{i - 1} : float32[4]" for i in range(last + 2, last + 2 + n_after)]
    end = after[-1].split()[0] if after else f"%{last}"
    lines = [*head, *body, bad.format(prev=last, me=last + 1), *after, tail,
             f"  return {end}", "}", ""]
    return "\n".join(line for line in lines if line), len(head) + len(body) + 1


def _column(text: str, line: int, marker: str) -> int:
    """1-based column of ``marker``'s last occurrence on ``line``."""
    return text.split("\n")[line - 1].rindex(marker) + 1


@pytest.mark.parametrize("n_before", [3, 100])  # flushed per node, and through add_nodes
@pytest.mark.parametrize(("bad", "marker", "fragment"), [
    ("  %{me} = add %{prev}, %1 : float32[4]", "add", "operand dtypes differ"),
    ("  %{me} = exp %{prev} : float32[3]", "float32[3]", "declared type float32[3] of %"),
    ("  %{me} = exp %{prev} : int32[4]", "int32[4]", "declared type int32[4]"),
])
@pytest.mark.parametrize("n_after", [0, 50])
def test_errors_inside_fast_path_batches_have_exact_positions(
        n_before: int, bad: str, marker: str, fragment: str, n_after: int) -> None:
    text, line = _batch_text(n_before, bad, n_after)
    with pytest.raises(ParseError) as info:
        parse(text)
    assert fragment in info.value.message
    assert (info.value.line, info.value.column) == (line, _column(text, line, marker))


@pytest.mark.parametrize("n_before", [3, 100])
def test_earlier_type_mismatch_wins_over_later_error_in_batch(n_before: int) -> None:
    text, line = _batch_text(n_before, "  %{me} = exp %{prev} : float32[3]", 40,
                             tail="  %zz = add %40, %1 : float32[4]")
    with pytest.raises(ParseError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (line, _column(text, line, "float32[3]"))


@pytest.mark.parametrize("n_before", [3, 100])
def test_valid_batches_parse_like_the_careful_path(n_before: int) -> None:
    text, _ = _batch_text(n_before, "  %{me} = negative %{prev} : float32[4]", 60,
                          tail="  %t = const [1.0, 2.0, 3.0, 4.0] : float32[4]")
    mod = parse(text)
    assert parse(mod.script()).script() == mod.script()
    ik.verify(mod)


def test_interleaved_tensor_constants_and_scalars() -> None:
    bb = ik.GraphBuilder("main")
    y = bb.param("x", (2,), "float32")
    for i in range(300):
        c = bb.const(np.array([i, -i], np.float32)) if i % 3 else bb.const(np.float32(i / 7))
        y = bb.add(y, c)
        if i % 5 == 0:
            y = bb.multiply(y, bb.const(np.float32(0.5)))
    round_trip(ik.IRModule({"main": bb.finish([y])}))


@contextlib.contextmanager
def careful_path_only() -> Iterator[None]:
    """Parse with the regex fast paths switched off (every line through the tokenizer)."""
    saved = text_parser._FAST_NODE, text_parser._FAST_CONST
    never = re.compile(r"(?!)")
    text_parser._FAST_NODE = text_parser._FAST_CONST = never
    try:
        yield
    finally:
        text_parser._FAST_NODE, text_parser._FAST_CONST = saved


def _outcome(text: str) -> tuple[object, ...]:
    try:
        return ("ok", parse(text).script())
    except ParseError as err:
        return ("error", err.line, err.column, err.message)


_FUZZ_BASE = build_golden().script() + _batch_text(
    40, "  %{me} = negative %{prev} : float32[4]", 40,
    tail="  %t = const [1.0, 2.0, 3.0, 4.0] : float32[4]")[0].replace("@main", "@g")


@given(st.data())
def test_property_mutated_text_parses_the_same_on_both_paths(data: st.DataObject) -> None:
    """Any text gives a module or a ParseError, and the fast path changes neither."""
    lines = _FUZZ_BASE.split("\n")
    for _ in range(data.draw(st.integers(1, 3))):
        row = data.draw(st.integers(0, len(lines) - 1))
        pos = data.draw(st.integers(0, len(lines[row])))
        cut = data.draw(st.integers(0, 3))
        insert = data.draw(st.one_of(
            st.text(alphabet='%@{}[]:=,"#\n -.0123456789abefnx\\', max_size=3),
            st.sampled_from(["%1", "int32", "float32[3]", "exp", "{axis = 0}", "1e39",
                             "nan:0x7fc00001", ", %1", "const 1.5", "return %5", "}"])))
        lines[row] = lines[row][:pos] + insert + lines[row][pos + cut:]
    text = "\n".join(lines)
    fast = _outcome(text)
    if fast[0] == "error":
        assert fast[1] >= 1
        assert fast[2] >= 1
    with careful_path_only():
        assert _outcome(text) == fast


def test_docstring_example_parses() -> None:
    doc = text_parser.__doc__ or ""
    example = doc[doc.index("::\n") + 3: doc.index("The format is line oriented")]
    mod = parse(textwrap.dedent(example))
    assert list(mod.functions) == ["main", "f"]
    ik.verify(mod)


def test_parse_rejects_non_str() -> None:
    with pytest.raises(TypeError, match="str"):
        parse(b"@main = graph {}")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# scale
# ---------------------------------------------------------------------------

def chain(n: int) -> ik.IRModule:
    """x -> add x -> exp -> add x -> exp ... (n op nodes), built with the bulk API."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    kind = np.where(np.arange(n) % 2 == 0, ops.OP_ADD, ops.OP_EXP).astype(np.int16)
    a0 = np.arange(x, x + n, dtype=np.int32)
    a1 = np.where(kind == ops.OP_ADD, x, -1).astype(np.int32)
    nodes = bb.add_nodes(kind, a0, a1)
    return ik.IRModule({"main": bb.finish([int(nodes[-1])])})


@pytest.mark.slow
def test_million_node_chain_prints_and_parses() -> None:
    mod = chain(10**6)
    text = mod.script()
    assert text.count("\n") == 10**6 + 4
    back = parse(text)
    assert ik.structural_equal(back, mod)
