"""Text format errors: printer TypeErrors, and ParseError line, column and message."""

from __future__ import annotations

import pytest
from text_helpers import _batch_text

import irkernel as ik
from irkernel.ir.errors import ParseError
from irkernel.text.parser import parse

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
    (H + "  %1 = exp %0 : float8[4]\n" + R, 3, 17, "unknown dtype 'float8'"),
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
    (H + "  %1 = astype %0 {dtype = float8} : float32[4]\n" + R, 3, 8,
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


def test_parse_rejects_non_str() -> None:
    with pytest.raises(TypeError, match="str"):
        parse(b"@main = graph {}")  # type: ignore[arg-type]
