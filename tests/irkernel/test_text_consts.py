"""Constant lines on the parser's fast path and in the printer's byte writer.

Constants of every dtype, scalars and small arrays, with the float spellings that
must survive exactly (NaN payloads, -0.0, infinities): printed then parsed they
give the same module, bit for bit, on the fast path and on the careful one; a
malformed constant line inside a run of fast lines is reported at its exact
line and column, as the careful path reports it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_text_parse import careful_path_only
from text_helpers import _batch_text

import irkernel as ik
from irkernel.ir.errors import ParseError
from irkernel.text.fastpath import Lines
from irkernel.text.parser import _FunctionParser, parse
from irkernel.text.scan import CONST

_SHAPES = [(), (1,), (1, 1), (0,), (2,), (4,), (2, 3)]
_BITS = {"float32": np.uint32, "float64": np.uint64}


@st.composite
def _values(draw: st.DrawFn, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape, dtype=np.int64))
    if dtype == "bool":
        return np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)),
                        bool).reshape(shape)
    if dtype.startswith("int"):
        info = np.iinfo(dtype)
        ints = st.one_of(st.integers(int(info.min), int(info.max)),
                         st.sampled_from([int(info.min), int(info.max), 0, -1]))
        return np.array(draw(st.lists(ints, min_size=size, max_size=size)),
                        dtype).reshape(shape)
    width = 32 if dtype == "float32" else 64
    # any bit pattern: NaNs with payloads (quiet and signalling), -0.0, inf, subnormals
    bits = draw(st.lists(st.one_of(
        st.integers(0, 2**width - 1),
        st.floats(width=width).map(lambda f: int(np.array(f, dtype).view(_BITS[dtype])))),
        min_size=size, max_size=size))
    return np.array(bits, _BITS[dtype]).view(dtype).reshape(shape)


@st.composite
def _const_module(draw: st.DrawFn) -> ik.IRModule:
    functions = {}
    for k in range(draw(st.integers(1, 3))):  # several functions
        bb = ik.GraphBuilder(f"f{k}")
        x = bb.param("x", (4,), "float32")
        outs = [bb.exp(x)]
        for _ in range(draw(st.integers(1, 12))):
            dtype = draw(st.sampled_from(["float32", "float64", "int32", "int64", "bool"]))
            shape = draw(st.sampled_from(_SHAPES))
            c = bb.const(draw(_values(dtype, shape)))
            outs.append(bb.sum(c, axis=None, keepdims=False) if dtype != "bool" else c)
        functions[f"f{k}"] = bb.finish(outs)
    return ik.IRModule(functions)


def _const_bits(mod: ik.IRModule) -> list[bytes]:
    """Every constant's dtype, shape and bytes, in node order."""
    out = []
    for func in mod.functions.values():
        for node in np.flatnonzero(func.kind == ik.ir.ops.OP_CONST).tolist():
            value = func.consts.value(int(func.a0[node]), func.shapes)
            out.append(value.dtype.str.encode() + repr(value.shape).encode() + value.tobytes())
    return out


@settings(max_examples=60, deadline=None)
@given(_const_module())
def test_property_constants_of_every_dtype_round_trip_bit_for_bit(mod: ik.IRModule) -> None:
    text = mod.script()
    fast = parse(text)
    with careful_path_only():
        careful = parse(text)
    assert ik.structural_equal(fast, mod)
    assert ik.structural_equal(careful, mod)
    assert _const_bits(fast) == _const_bits(mod) == _const_bits(careful)
    assert fast.script() == text


def test_printer_spells_float_specials_as_before() -> None:
    bb = ik.GraphBuilder("main")
    payload = np.array([0x7FC00001, 0xFF800001], np.uint32).view(np.float32)
    c = bb.const(np.array([np.nan, -0.0, np.inf, -np.inf, *payload, 0.1, 3.4e38], np.float32))
    d = bb.const(np.array([-(2**63), 2**63 - 1, 0], np.int64))
    text = ik.IRModule({"main": bb.finish([c, d])}).script()
    assert ("[nan, -0.0, inf, -inf, nan:0x7fc00001, nan:0xff800001, 0.1, 3.4e+38]"
            in text), text
    assert "[-9223372036854775808, 9223372036854775807, 0] : int64[3]" in text


def test_constant_lines_of_the_printer_take_the_fast_path() -> None:
    bb = ik.GraphBuilder("main")
    vals = [np.float32(np.nan), np.array([1.5, -0.0], np.float64), np.array([[7]], np.int32),
            np.array([True, False]), np.zeros(0, np.int64), np.float64(-np.inf),
            np.array([1, 0x7FC00001], np.uint32).view(np.float32)]
    mod = ik.IRModule({"main": bb.finish([bb.const(v) for v in vals])})
    body = _FunctionParser("main", {}, 1, 1)
    body.parse_body(Lines(mod.script()), 1)
    assert np.count_nonzero(body.scan.cls == CONST) == len(vals)
    assert body.scan.fast[body.scan.cls == CONST].all()
    assert _const_bits(parse(mod.script())) == _const_bits(mod)


@pytest.mark.parametrize("n_before", [3, 100])
@pytest.mark.parametrize(("bad", "marker", "fragment"), [
    ("  %{me} = const [1.0, 2.0, 3.0] : float32[4]", "1.0", "constant has 3 values"),
    ("  %{me} = const [1.0, 2.0, 3.0, 4e39] : float32[4]", "4e39", "overflows float32"),
    ("  %{me} = const [1, 2, 3, 2147483648] : int32[4]", "2147483648", "out of range"),
    ("  %{me} = const [1, 2, 3.5, 4] : int64[4]", "3.5", "bad int64 literal"),
    ("  %{me} = const [true, 1, false, true] : bool[4]", "1,", "bad bool literal"),
    ("  %{me} = const [nan:0x7f800000, 1.0] : float32[2]", "nan:0x7f800000", "NaN bit pattern"),
    ("  %{me} = const [nan:0x7ff8000000000001, 1.0] : float32[2]", "nan:0x", "NaN bit pattern"),
    ("  %{me} = const 1.0 : float32[4]", "1.0", "constant has 1 value"),
    ("  %{me} = const [1.0, 2.0,] : float64[2]", "]", "expected a constant value"),
    ("  %{me} = const [1.0 2.0] : float64[2]", "2.0", "expected ','"),
    ("  %{me} = const [1.0, true] : float64[2]", "true", "bad float64 literal"),
])
def test_malformed_constant_lines_in_fast_runs_have_exact_positions(
        n_before: int, bad: str, marker: str, fragment: str) -> None:
    text, line = _batch_text(n_before, bad, 40)
    with pytest.raises(ParseError) as info:
        parse(text)
    with careful_path_only(), pytest.raises(ParseError) as careful:
        parse(text)
    assert fragment in info.value.message
    column = text.split("\n")[line - 1].index(marker, text.split("\n")[line - 1].index("const")) + 1
    assert (info.value.line, info.value.column) == (line, column)
    assert (careful.value.line, careful.value.column, careful.value.message) == (
        info.value.line, info.value.column, info.value.message)


def test_add_tensor_consts_interns_like_const() -> None:
    bb = ik.GraphBuilder("main")
    s4, s11, s0 = bb.intern_shape((4,)), bb.intern_shape((1, 1)), bb.intern_shape((0,))
    ids = bb.add_tensor_consts(np.array([1, 2, 3, 4, 5, 1, 2, 3, 4], np.float32), "float32",
                               np.array([s4, s11, s4, s0], np.int32))
    assert ids[0] == ids[2] and len(set(ids.tolist())) == 3
    with pytest.raises(ValueError, match="the shapes hold 8 elements, flat has 3"):
        bb.add_tensor_consts(np.zeros(3, np.float32), "float32", np.array([s4, s4], np.int32))
    with pytest.raises(ValueError, match="unknown shape id"):
        bb.add_tensor_consts(np.zeros(4, np.float32), "float32", np.array([99], np.int32))
    nodes = bb.add_nodes(np.full(4, ik.ir.ops.OP_CONST, np.int16), ids)
    func = bb.finish(nodes.tolist())
    assert func.consts.value(int(func.a0[1]), func.shapes).tolist() == [[5.0]]
    assert func.consts.value(int(func.a0[2]), func.shapes).tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_float_constants_round_trip_bit_for_bit(dtype: str) -> None:
    """Every float16/bfloat16 bit pattern (NaN payloads included) prints and parses back."""
    from irkernel.ir import narrow

    code = ik.ids.dtype_code(dtype)
    bits = np.arange(2**16, dtype=np.uint16)
    values = bits.view(np.float16) if dtype == "float16" else bits
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2**16,), dtype)
    mod = ik.IRModule({"main": bb.finish([bb.add(x, bb.const(values, dtype))])})
    back = ik.parse(mod.script())
    got = back["main"].const_value(1)
    assert got.dtype == narrow.to_storage(values, code).dtype
    assert np.array_equal(got.view(np.uint16), bits)


@pytest.mark.parametrize(("dtype", "text"), [("float16", "65520.0"), ("bfloat16", "3.4e38"),
                                             ("int8", "128"), ("uint8", "-1"),
                                             ("uint16", "65536")])
def test_narrow_literals_out_of_range_are_errors(dtype: str, text: str) -> None:
    src = f"@main = graph {{\n  %0 = const {text} : {dtype}[]\n  return %0\n}}\n"
    with pytest.raises(ik.ParseError):
        ik.parse(src)
