"""Golden text tests: ``golden/<PassName>/<case>.ir``, the readable spec of each pass.

File format (the sections are exact lines)::

    # pipeline: FoldConstant            <- first line: a textual pipeline
    # any further comment lines describe the case
    # input
    @main = graph attrs {...} { ... }   <- the text format, written by hand
    # expected
    @main = graph attrs {...} { ... }   <- mod.script() of the result

The runner parses the input, runs the pipeline (``transform.parse_pipeline``),
verifies the result, compares ``mod.script()`` with the expected section and
checks that every function computes the same values as before on random
inputs with NaN/inf/-0.0. ``pytest tests/passes --update-goldens`` rewrites
the expected sections instead of comparing.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from passes_helpers import GRAPH_PASSES, assert_same_results, golden_update_requested

import irkernel as ik
from irkernel import transform
from irkernel.testing import random_inputs

GOLDEN_DIR = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN_DIR.glob("*/*.ir"))
PIPELINE_PREFIX = "# pipeline:"
INPUT, EXPECTED = "# input", "# expected"


def _split(path: Path) -> tuple[str, str, str, str]:
    """(header including the pipeline line, pipeline text, input text, expected text)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if not lines or not lines[0].startswith(PIPELINE_PREFIX):
        raise AssertionError(f"{path}: the first line must be '{PIPELINE_PREFIX} <pipeline>'")
    try:
        at_input = lines.index(INPUT)
        at_expected = lines.index(EXPECTED)
    except ValueError:
        raise AssertionError(f"{path}: needs a '{INPUT}' and an '{EXPECTED}' line") from None
    if not 0 < at_input < at_expected:
        raise AssertionError(f"{path}: '{INPUT}' must come before '{EXPECTED}'")
    header = "\n".join(lines[:at_input])
    pipeline = lines[0][len(PIPELINE_PREFIX):].strip()
    source = "\n".join(lines[at_input + 1:at_expected])
    expected = "\n".join(lines[at_expected + 1:])
    return header, pipeline, source, expected


def _normalize(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_golden(path: Path, update_goldens: bool) -> None:
    header, pipeline_text, source, expected = _split(path)
    mod = ik.parse(source)
    ik.verify(mod)
    out = transform.parse_pipeline(pipeline_text)(mod)
    ik.verify(out)
    actual = out.script()
    for name, func in mod.functions.items():
        if name in out.functions and isinstance(func, ik.Function):
            inputs = random_inputs(func, seed=11, special_values=True)
            assert_same_results(ik.interpret(mod, *inputs, entry=name),
                                ik.interpret(out, *inputs, entry=name), f"{path.name}: {name}")
    if update_goldens:
        path.write_text(f"{header}\n{INPUT}\n{source.strip()}\n\n{EXPECTED}\n{actual.strip()}\n",
                        encoding="utf-8")
        return
    if _normalize(actual) != _normalize(expected):
        diff = "\n".join(difflib.unified_diff(_normalize(expected).splitlines(),
                                              _normalize(actual).splitlines(),
                                              "expected", "actual", lineterm=""))
        pytest.fail(f"{path.relative_to(GOLDEN_DIR)} ({pipeline_text}) differs; run pytest "
                    f"tests/passes --update-goldens to accept:\n{diff}")
    assert ik.structural_equal(ik.parse(expected), out)  # the expected text is exact


def test_every_graph_pass_has_golden_cases() -> None:
    for name in GRAPH_PASSES:
        cases = list((GOLDEN_DIR / name).glob("*.ir"))
        assert len(cases) >= 3, f"golden/{name} has {len(cases)} cases (want >= 3)"


def test_golden_directories_name_their_pipelines() -> None:
    for path in CASES:
        _, pipeline_text, _, _ = _split(path)
        top = [p.info.name for p in transform.parse_pipeline(pipeline_text).passes]
        assert path.parent.name in top or path.parent.name == "pipelines", path


@pytest.mark.parametrize(("option", "environ", "update"), [
    (False, {}, False), (True, {}, True), (False, {"IRKERNEL_UPDATE_GOLDENS": "1"}, True),
    (False, {"IRKERNEL_UPDATE_GOLDENS": "0"}, False), (False, {"CI": "true"}, False),
    (True, {"CI": "false"}, True), (True, {"CI": ""}, True)])
def test_golden_update_mode(option: bool, environ: dict[str, str], update: bool) -> None:
    assert golden_update_requested(option, environ) is update


@pytest.mark.parametrize(("option", "environ"), [
    (True, {"CI": "true"}), (False, {"CI": "1", "IRKERNEL_UPDATE_GOLDENS": "1"})])
def test_golden_update_mode_is_refused_under_ci(option: bool, environ: dict[str, str]) -> None:
    with pytest.raises(pytest.fail.Exception, match="refused under CI"):
        golden_update_requested(option, environ)
