"""Bisection: the ``irkernel.bisect_limit`` config and ``transform.bisect``."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from transform_toys import log_pass, negate_output, small_module

import irkernel as ik
from irkernel import instrument, transform
from irkernel.transform import PassContext

X = np.linspace(-1, 1, 4).astype(np.float32)


def tag(name: str) -> transform.FunctionPass:
    return transform.function_pass(lambda f, m, c: f.with_attr(name, True), opt_level=0,
                                   name=name)


def negate(name: str) -> transform.FunctionPass:
    return transform.function_pass(lambda f, m, c: negate_output(f), opt_level=0, name=name)


def test_bisect_limit_runs_only_the_first_n_executions(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    inner = transform.Sequential([log_pass(log, "b"), log_pass(log, "c")], name="inner")
    seq = transform.Sequential([log_pass(log, "a"), inner, log_pass(log, "d")])
    caplog.set_level(logging.INFO, logger="irkernel.transform")
    with PassContext(config={"irkernel.bisect_limit": 2}):
        seq(small_module())
    assert log == ["a", "b"]  # containers are not counted
    assert "BISECT: NOT running pass (3) c" in caplog.text
    assert "BISECT: NOT running pass (4) d" in caplog.text
    with PassContext(config={"irkernel.bisect_limit": 0}):
        seq(small_module())
    assert log == ["a", "b"]
    with PassContext():
        seq(small_module())
    assert log == ["a", "b", "a", "b", "c", "d"]


def test_bisect_skipped_pass_gets_no_hooks() -> None:
    seen: list[str] = []

    class Seen(instrument.PassInstrument):
        def run_before_pass(self, mod: object, info: transform.PassInfo) -> None:
            seen.append(info.name)

    with PassContext(config={"irkernel.bisect_limit": 1}, instruments=[Seen()]):
        transform.Sequential([log_pass([], "a"), log_pass([], "b")], name="s")(small_module())
    assert seen == ["s", "a"]


def results_unchanged(reference: list[np.ndarray]) -> object:
    def predicate(mod: ik.IRModule) -> bool:
        got = ik.interpret(mod, X)
        return all(np.array_equal(a, b) for a, b in zip(reference, got, strict=True))
    return predicate


def test_bisect_finds_the_first_bad_execution() -> None:
    mod = small_module()
    pipeline = transform.Sequential([
        tag("t1"),
        transform.Sequential([tag("t2"), negate("culprit")], name="grp"),
        negate("undo"),  # negating twice restores results: bisection still names the first
        tag("t3"),
    ])
    result = transform.bisect(pipeline, mod, results_unchanged(ik.interpret(mod, X)))
    assert result is not None
    assert (result.index, result.pass_name, result.total) == (3, "culprit", 5)
    assert "culprit" in str(result)
    assert "negative" not in result.before.script()
    assert "negative" in result.after.script()


def test_bisect_none_when_the_pipeline_keeps_the_predicate() -> None:
    mod = small_module()
    pipeline = transform.Sequential([tag("a"), tag("b")])
    assert transform.bisect(pipeline, mod, lambda m: True) is None


def test_bisect_rejects_an_input_that_already_fails() -> None:
    with pytest.raises(ValueError, match="input module already fails"):
        transform.bisect(transform.Sequential([tag("a")]), small_module(), lambda m: False)


def test_bisect_uses_the_current_context_settings() -> None:
    mod = small_module()
    pipeline = transform.Sequential([tag("a"), negate("bad"), negate("worse")])
    with PassContext(disabled_pass=["bad"]):
        result = transform.bisect(pipeline, mod, results_unchanged(ik.interpret(mod, X)))
    assert result is not None
    assert result.pass_name == "worse"
    assert result.index == 2


def test_bisect_argument_checks() -> None:
    with pytest.raises(TypeError, match="pipeline"):
        transform.bisect("O2", small_module(), lambda m: True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="mod"):
        transform.bisect(transform.Sequential(), {}, lambda m: True)  # type: ignore[arg-type]
