"""Text format parser: hand-written text, fast and careful paths agreeing, the docstring, scale."""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from text_helpers import _batch_text, build_golden, round_trip

import irkernel as ik
from irkernel import ops
from irkernel.ir.errors import ParseError
from irkernel.text import parser as text_parser
from irkernel.text.parser import parse

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


class _CarefulScan(text_parser.BodyScan):
    """A body scan that takes no line and resolves no name: everything goes through the
    tokenizer, and names through the parser's own dict."""

    def _classify(self, span: np.ndarray, resolvers: object) -> np.ndarray:
        super()._classify(span, resolvers)  # type: ignore[arg-type]
        return np.zeros(len(self.cls), bool)

    def lookup(self, name: str) -> int:
        return -1


@contextlib.contextmanager
def careful_path_only() -> Iterator[None]:
    """Parse with the fast path switched off (every line through the tokenizer)."""
    saved = text_parser.BodyScan
    text_parser.BodyScan = _CarefulScan  # type: ignore[misc]
    try:
        yield
    finally:
        text_parser.BodyScan = saved  # type: ignore[misc]


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
