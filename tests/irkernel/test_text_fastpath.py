"""The parser's byte-level fast path and the printer's byte writer, against the careful path.

The careful path (tokenizer per line, names in a dict) is the reference: any text
must give the same module or the same ParseError on both paths, whatever its
names, spacing, comments and line ends.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_text_parse import _outcome, careful_path_only
from text_helpers import build_golden

import irkernel as ik
from irkernel.ir.errors import ParseError
from irkernel.testing import GraphSpec, random_function
from irkernel.text.fastpath import Lines
from irkernel.text.parser import parse

ROOT = Path(__file__).resolve().parents[2]

_NAME_STYLES = ["v{}", "_{}", "x{}_y", "0{}", "é{}", "n{}ü", "{}", "{}a"]


def _rename(text: str, style: str, shift: int = 0) -> str:
    """Every ``%k`` renamed by ``style`` (k + shift); raises nothing, names stay unique."""
    return re.sub(r"%(\d+)", lambda m: "%" + style.format(int(m.group(1)) + shift), text)


def _base() -> str:
    mixed = random_function(GraphSpec(n_nodes=120, seed=3))
    return build_golden().script() + "\n" + ik.IRModule({"g": mixed}).script()


@pytest.mark.parametrize("style", _NAME_STYLES)
def test_renamed_values_parse_to_the_same_module(style: str) -> None:
    text = _base()
    want = parse(text)
    got = parse(_rename(text, style))
    assert ik.structural_equal(got, want)


def test_shifted_decimal_names_are_not_node_ids() -> None:
    # %1 names node 0 here: the canonical fast path must not read names as ids.
    text = _base()
    assert ik.structural_equal(parse(_rename(text, "{}", shift=1)), parse(text))


@pytest.mark.parametrize("space", ["\t", "   ", " \t "])
def test_spacing_comments_and_crlf_parse_the_same(space: str) -> None:
    text = _base()
    spaced = []
    for line in text.split("\n"):
        line = line.replace(" = ", f"{space}={space}").replace(", ", f"{space},{space}")
        if line.startswith("  %"):
            line = space + line.strip() + f"{space}# note\r"
        spaced.append(line)
        if len(spaced) % 7 == 0:
            spaced.append("  # a comment line")
            spaced.append("")
    assert ik.structural_equal(parse("\n".join(spaced)), parse(text))


def _mutated(data: st.DataObject, base: str) -> str:
    lines = base.split("\n")
    for _ in range(data.draw(st.integers(1, 3))):
        row = data.draw(st.integers(0, len(lines) - 1))
        pos = data.draw(st.integers(0, len(lines[row])))
        cut = data.draw(st.integers(0, 3))
        insert = data.draw(st.one_of(
            st.text(alphabet='%@{}[]:=,"#\n\t\r\x0b -.0123456789abefnxé\\_', max_size=3),
            st.sampled_from(["%v1", "%1", "%é2", "float32[3]", "exp", "{axis = 0}", "nan",
                             "-inf", "1e39", "return %v5", "}", "const 1.5", "const true",
                             '{callee = "g\\"h"}', "\u00a0", "\u2028"])))
        lines[row] = lines[row][:pos] + insert + lines[row][pos + cut:]
    return "\n".join(lines)


_HAND_BASE = _rename(build_golden().script(), "v{}") + "\n" + _rename(
    ik.IRModule({"g": random_function(GraphSpec(n_nodes=60, seed=5))}).script(), "é{}")


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_property_mutated_hand_written_text_same_on_both_paths(data: st.DataObject) -> None:
    """Names through the hash table (not the canonical ids), and through the careful dict,
    give the same module or the same error."""
    text = _mutated(data, _HAND_BASE)
    fast = _outcome(text)
    with careful_path_only():
        assert _outcome(text) == fast


@given(st.text(alphabet="ab %\n\r\t\x0bé\u2028", max_size=40))
def test_lines_split_like_str_split(text: str) -> None:
    lines = Lines(text)
    assert [lines[i] for i in range(len(lines))] == text.split("\n")


def test_lone_surrogates_give_a_parse_error_not_a_crash() -> None:
    with pytest.raises(ParseError):
        parse("@main = graph {\n  %\ud800 = param x : float32[]\n  return %\ud800\n}\n")


def test_big_hand_named_graph_round_trips() -> None:
    mod = ik.IRModule({"main": random_function(GraphSpec(n_nodes=20_000, seed=9))})
    text = mod.script()
    assert ik.structural_equal(parse(_rename(text, "n{}")), mod)
    assert ik.structural_equal(parse(text), mod)


def test_runs_of_fast_lines_between_careful_ones() -> None:
    # tensor constants (careful) between scalar lines (fast), runs above and below the
    # size where a run goes through add_nodes
    bb = ik.GraphBuilder("main")
    y = bb.param("x", (2,), "float32")
    for i in range(200):
        y = bb.add(y, bb.const(np.array([i, 1], np.float32)))
        for _ in range(i % 40):
            y = bb.exp(y)
    mod = ik.IRModule({"main": bb.finish([y])})
    assert ik.structural_equal(parse(mod.script()), mod)


def test_text_kernels_compile_one_specialization() -> None:
    code = textwrap.dedent("""
        import json, sys
        sys.path.insert(0, "tests/irkernel")
        import irkernel as ik
        from irkernel.ir.jit import KERNELS
        from irkernel.testing import GraphSpec, random_function
        from text_helpers import build_golden
        mods = [build_golden(), ik.IRModule({"m": random_function(GraphSpec(n_nodes=500))})]
        for mod in mods:
            text = mod.script()
            ik.parse(text)
            ik.parse(text.replace("%", "%v"))
        try:
            ik.parse("@main = graph {\\n  %a = param x : float32[]\\n  return %b\\n}\\n")
        except ik.ParseError:
            pass
        names = ("irkernel.text.scan", "irkernel.text.emit")
        print(json.dumps({k.__name__: len(k.signatures) for k in KERNELS
                          if k.py_func.__module__ in names}))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    counts = json.loads(out.strip().splitlines()[-1])
    assert counts
    assert set(counts.values()) == {1}, counts
