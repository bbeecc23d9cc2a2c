"""The enabling rule inside Sequential (disabled > required > opt_level); direct calls run."""

from __future__ import annotations

import pytest
from transform_toys import log_pass, small_module

from irkernel import transform
from irkernel.transform import PassContext


@pytest.mark.parametrize(("ctx_level", "pass_level", "required", "disabled", "runs"), [
    (2, 2, False, False, True),    # opt_level <= ctx.opt_level
    (2, 3, False, False, False),   # above the context's level
    (1, 3, True, False, True),     # required wins over opt_level
    (3, 0, False, True, False),    # disabled wins over opt_level
    (3, 0, True, True, False),     # disabled wins over required
])
def test_enabling_precedence(ctx_level: int, pass_level: int, required: bool, disabled: bool,
                             runs: bool) -> None:
    log: list[str] = []
    seq = transform.Sequential([log_pass(log, "P", opt_level=pass_level)])
    ctx = PassContext(opt_level=ctx_level, required_pass=["P"] if required else None,
                      disabled_pass=["P"] if disabled else None)
    with ctx:
        seq(small_module())
    assert log == (["P"] if runs else [])
    assert ctx.pass_enabled(seq.passes[0].info) is runs


def test_direct_call_always_runs() -> None:
    log: list[str] = []
    p = log_pass(log, "P", opt_level=4)
    with PassContext(opt_level=0, disabled_pass=["P"]):
        p(small_module())
    assert log == ["P"]


def test_sequential_order_and_levels() -> None:
    log: list[str] = []
    seq = transform.Sequential([log_pass(log, "a", 1), log_pass(log, "b", 3),
                                log_pass(log, "c", 2)])
    with PassContext(opt_level=2):
        seq(small_module())
    assert log == ["a", "c"]


def test_nested_sequential_is_subject_to_the_rule() -> None:
    log: list[str] = []
    inner = transform.Sequential([log_pass(log, "x")], opt_level=3, name="inner")
    outer = transform.Sequential([inner, log_pass(log, "y")])
    with PassContext(opt_level=2):
        outer(small_module())
    assert log == ["y"]
    with PassContext(opt_level=2, required_pass=["inner"]):
        outer(small_module())
    assert log == ["y", "x", "y"]


def test_sequential_threads_the_module_through() -> None:
    mod = small_module(2)
    drop = transform.module_pass(lambda m, c: m.without("f1"), opt_level=0, name="drop")
    check: list[list[str]] = []
    look = transform.module_pass(lambda m, c: (check.append(list(m)), m)[1], opt_level=0,
                                 name="look")
    out = transform.Sequential([drop, look])(mod)
    assert check == [["main"]]
    assert list(out) == ["main"]
