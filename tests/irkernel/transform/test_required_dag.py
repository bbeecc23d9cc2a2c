"""``required`` passes: transitive, topological, de-duplicated, cycle/unknown errors, no re-runs."""

from __future__ import annotations

from typing import Any

import pytest
from transform_toys import log_pass, small_module

from irkernel import instrument, transform
from irkernel.transform import PassContext

pytestmark = pytest.mark.usefixtures("scoped_registry")


def register_log(log: list[str], name: str, required: list[str] | None = None,
                 change: bool = False) -> None:
    transform.register_pass(name, lambda: log_pass(log, name, required=required, change=change))


def test_required_runs_first_transitively_in_topological_order_once() -> None:
    log: list[str] = []
    # D needs B and C; B and C both need A: A once, before B and C.
    register_log(log, "A")
    register_log(log, "B", ["A"])
    register_log(log, "C", ["A", "B"])
    register_log(log, "D", ["B", "C"])
    transform.get_pass("D")(small_module())
    assert log == ["A", "B", "C", "D"]


def test_required_passes_go_through_the_instruments() -> None:
    log: list[str] = []
    register_log(log, "A")
    names: list[str] = []

    @instrument.pass_instrument
    class Names:
        def run_before_pass(self, mod: Any, info: Any) -> None:
            names.append(info.name)

    with PassContext(instruments=[Names()]):
        log_pass(log, "P", required=["A"])(small_module())
    assert names == ["A", "P"]


def test_required_runs_even_when_disabled_or_above_level_as_in_tvm() -> None:
    log: list[str] = []
    transform.register_pass("High", lambda: log_pass(log, "High", opt_level=4))
    seq = transform.Sequential([log_pass(log, "P", required=["High"])])
    with PassContext(opt_level=1, disabled_pass=["High"]):
        seq(small_module())
    assert log == ["High", "P"]


def test_cycle_is_an_error_naming_it() -> None:
    log: list[str] = []
    register_log(log, "X", ["Y"])
    register_log(log, "Y", ["Z"])
    register_log(log, "Z", ["X"])
    with pytest.raises(ValueError, match="cycle in required passes: X -> Y -> Z -> X"):
        transform.get_pass("X")(small_module())
    assert log == []
    with pytest.raises(ValueError, match="Self -> Self"):
        log_pass(log, "Self", required=["Self"])(small_module())


def test_unknown_required_name_is_an_error_naming_it_and_the_requirer() -> None:
    log: list[str] = []
    register_log(log, "NeedsGhost", ["Ghost"])
    with pytest.raises(ValueError, match="'NeedsGhost' requires 'Ghost'"):
        log_pass(log, "Top", required=["NeedsGhost"])(small_module())
    assert log == []


def test_required_pass_not_rerun_while_the_module_is_unchanged() -> None:
    log: list[str] = []
    register_log(log, "Analysis")
    user = log_pass(log, "User", required=["Analysis"])
    mod = small_module()
    with PassContext():
        out = transform.Sequential([user, user, user])(mod)
    assert out is mod
    assert log == ["Analysis", "User", "User", "User"]


def test_required_pass_reruns_after_a_change() -> None:
    log: list[str] = []
    register_log(log, "Analysis")
    user = log_pass(log, "User", required=["Analysis"])
    changer = log_pass(log, "Changer", change=True)
    with PassContext():
        transform.Sequential([user, changer, user, user])(small_module())
    assert log == ["Analysis", "User", "Changer", "Analysis", "User", "User"]


def test_a_required_pass_that_changes_the_module_is_satisfied_by_its_output() -> None:
    log: list[str] = []
    register_log(log, "Normalize", change=True)
    user = log_pass(log, "User", required=["Normalize"])
    with PassContext():
        transform.Sequential([user, user])(small_module())
    assert log == ["Normalize", "User", "User"]


def test_bookkeeping_is_per_context() -> None:
    log: list[str] = []
    register_log(log, "Analysis")
    user = log_pass(log, "User", required=["Analysis"])
    mod = small_module()
    with PassContext():
        user(mod)
    with PassContext():
        user(mod)
    assert log == ["Analysis", "User", "Analysis", "User"]


def test_explicitly_run_pass_satisfies_a_later_requirement() -> None:
    log: list[str] = []
    register_log(log, "Analysis")
    with PassContext():
        mod = transform.get_pass("Analysis")(small_module())
        log_pass(log, "User", required=["Analysis"])(mod)
    assert log == ["Analysis", "User"]


def test_pass_with_options_does_not_satisfy_the_plain_name() -> None:
    log: list[str] = []
    transform.register_pass("Opt", lambda level=0: log_pass(log, f"Opt{level}"))
    with PassContext():
        mod = transform.get_pass("Opt", level=1)(small_module())
        log_pass(log, "User", required=["Opt"])(mod)
    assert log == ["Opt1", "Opt0", "User"]


def test_sequential_required() -> None:
    log: list[str] = []
    register_log(log, "Pre")
    seq = transform.Sequential([log_pass(log, "a")], required=["Pre"])
    assert seq.info.required == ("Pre",)
    seq(small_module())
    assert log == ["Pre", "a"]
