"""Instrument hook order and exception rules, as in TVM's relay/test_pass_instrument.py."""

from __future__ import annotations

from typing import Any

import pytest
from transform_toys import log_pass, small_module

from irkernel import instrument, transform
from irkernel.instrument import PassInstrument, pass_instrument
from irkernel.transform import PassContext


def recorder(events: list[str], ident: str, fail: str = "", veto: bool = False) -> Any:
    """An instrument recording every hook as '<ident> <hook>'; raises in hook ``fail``."""

    @pass_instrument
    class Recorder:
        def _log(self, hook: str) -> None:
            events.append(f"{ident} {hook}")
            if hook == fail:
                raise RuntimeError(f"dummy error in {ident} {hook}")

        def enter_pass_ctx(self) -> None:
            self._log("enter_pass_ctx")

        def exit_pass_ctx(self) -> None:
            self._log("exit_pass_ctx")

        def should_run(self, mod: Any, info: Any) -> bool:
            self._log("should_run")
            return not veto

        def run_before_pass(self, mod: Any, info: Any) -> None:
            self._log(f"run_before_pass {info.name}")

        def run_after_pass(self, mod: Any, info: Any) -> None:
            self._log(f"run_after_pass {info.name}")

    return Recorder()


def test_call_sequence_of_two_passes() -> None:
    events: list[str] = []
    p1, p2 = log_pass(events, "transform1"), log_pass(events, "transform2")
    with PassContext(instruments=[recorder(events, "%1"), recorder(events, "%2")]):
        mod = p1(small_module())
        p2(mod)
    assert events == [
        "%1 enter_pass_ctx", "%2 enter_pass_ctx",
        "%1 should_run", "%2 should_run",
        "%1 run_before_pass transform1", "%2 run_before_pass transform1",
        "transform1",
        "%1 run_after_pass transform1", "%2 run_after_pass transform1",
        "%1 should_run", "%2 should_run",
        "%1 run_before_pass transform2", "%2 run_before_pass transform2",
        "transform2",
        "%1 run_after_pass transform2", "%2 run_after_pass transform2",
        "%1 exit_pass_ctx", "%2 exit_pass_ctx",
    ]


def test_sequential_is_instrumented_around_its_passes() -> None:
    events: list[str] = []
    seq = transform.Sequential([log_pass(events, "a"), log_pass(events, "b")], name="seq")
    with PassContext(instruments=[recorder(events, "%1")]):
        seq(small_module())
    assert events == [
        "%1 enter_pass_ctx",
        "%1 should_run", "%1 run_before_pass seq",
        "%1 should_run", "%1 run_before_pass a", "a", "%1 run_after_pass a",
        "%1 should_run", "%1 run_before_pass b", "b", "%1 run_after_pass b",
        "%1 run_after_pass seq",
        "%1 exit_pass_ctx",
    ]


def test_enter_failure_exits_entered_clears_and_does_not_push() -> None:
    events: list[str] = []
    outer = PassContext.current()
    ctx = PassContext(instruments=[recorder(events, "%1"), recorder(events, "%2", "enter_pass_ctx"),
                                   recorder(events, "%3")])
    with pytest.raises(RuntimeError, match="dummy error in %2 enter_pass_ctx"), ctx:
        events.append("body")
    assert events == ["%1 enter_pass_ctx", "%2 enter_pass_ctx", "%1 exit_pass_ctx"]
    assert PassContext.current() is outer
    assert not ctx.instruments


def test_enter_failure_on_default_context_clears_it(default_ctx: PassContext) -> None:
    events: list[str] = []
    with pytest.raises(RuntimeError, match="dummy"):
        default_ctx.override_instruments([recorder(events, "%1", "enter_pass_ctx")])
    assert not default_ctx.instruments
    assert PassContext.current() is default_ctx


def test_exit_failure_stops_exiting_clears_and_pops() -> None:
    events: list[str] = []
    outer = PassContext.current()
    ctx = PassContext(instruments=[recorder(events, "%1"), recorder(events, "%2", "exit_pass_ctx"),
                                   recorder(events, "%3")])
    with pytest.raises(RuntimeError, match="dummy error in %2 exit_pass_ctx"), ctx:
        pass
    assert events == ["%1 enter_pass_ctx", "%2 enter_pass_ctx", "%3 enter_pass_ctx",
                      "%1 exit_pass_ctx", "%2 exit_pass_ctx"]
    assert PassContext.current() is outer
    assert not ctx.instruments


def test_exit_failure_on_override_clears_default(default_ctx: PassContext) -> None:
    events: list[str] = []
    default_ctx.override_instruments([recorder(events, "%1", "exit_pass_ctx")])
    with pytest.raises(RuntimeError, match="dummy"):
        default_ctx.override_instruments([recorder(events, "%2")])
    assert not default_ctx.instruments
    assert events == ["%1 enter_pass_ctx", "%1 exit_pass_ctx"]


def test_override_exits_old_then_enters_new(default_ctx: PassContext) -> None:
    events: list[str] = []
    default_ctx.override_instruments([recorder(events, "%1")])
    default_ctx.override_instruments([recorder(events, "%2")])
    log_pass(events, "p")(small_module())
    default_ctx.override_instruments(None)
    assert events == ["%1 enter_pass_ctx", "%1 exit_pass_ctx", "%2 enter_pass_ctx",
                      "%2 should_run", "%2 run_before_pass p", "p", "%2 run_after_pass p",
                      "%2 exit_pass_ctx"]


def test_pass_exception_propagates_and_context_still_exits() -> None:
    events: list[str] = []

    @transform.module_pass(opt_level=2)
    def broken(mod: Any, ctx: Any) -> Any:
        events.append("transform pass")
        raise RuntimeError("Just a dummy error")

    with pytest.raises(RuntimeError, match="Just a dummy error"), \
            PassContext(instruments=[recorder(events, "%1")]):
        broken(small_module())
    assert events == ["%1 enter_pass_ctx", "%1 should_run", "%1 run_before_pass broken",
                      "transform pass", "%1 exit_pass_ctx"]


def test_should_run_exception() -> None:
    events: list[str] = []
    with pytest.raises(RuntimeError, match="dummy"), \
            PassContext(instruments=[recorder(events, "%1", "should_run"), recorder(events, "%2")]):
        log_pass(events, "p")(small_module())
    assert events == ["%1 enter_pass_ctx", "%2 enter_pass_ctx", "%1 should_run",
                      "%1 exit_pass_ctx", "%2 exit_pass_ctx"]


def test_run_before_exception() -> None:
    events: list[str] = []
    with pytest.raises(RuntimeError, match="dummy"), \
            PassContext(instruments=[recorder(events, "%1", "run_before_pass p"),
                                     recorder(events, "%2")]):
        log_pass(events, "p")(small_module())
    assert events == ["%1 enter_pass_ctx", "%2 enter_pass_ctx", "%1 should_run", "%2 should_run",
                      "%1 run_before_pass p", "%1 exit_pass_ctx", "%2 exit_pass_ctx"]


def test_run_after_exception() -> None:
    events: list[str] = []
    with pytest.raises(RuntimeError, match="dummy"), \
            PassContext(instruments=[recorder(events, "%1", "run_after_pass p"),
                                     recorder(events, "%2")]):
        log_pass(events, "p")(small_module())
    assert events == ["%1 enter_pass_ctx", "%2 enter_pass_ctx", "%1 should_run", "%2 should_run",
                      "%1 run_before_pass p", "%2 run_before_pass p", "p",
                      "%1 run_after_pass p", "%1 exit_pass_ctx", "%2 exit_pass_ctx"]


def test_vetoed_pass_gets_no_before_after_and_returns_input() -> None:
    events: list[str] = []
    mod = small_module()
    with PassContext(instruments=[recorder(events, "%1", veto=True), recorder(events, "%2")]):
        out = log_pass(events, "p", change=True)(mod)
    assert out is mod
    assert events == ["%1 enter_pass_ctx", "%2 enter_pass_ctx", "%1 should_run", "%2 should_run",
                      "%1 exit_pass_ctx", "%2 exit_pass_ctx"]


def test_should_run_not_consulted_for_required_pass() -> None:
    events: list[str] = []
    with PassContext(required_pass=["p"], instruments=[recorder(events, "%1", veto=True)]):
        log_pass(events, "p")(small_module())
        log_pass(events, "q")(small_module())
    assert events == ["%1 enter_pass_ctx",
                      "%1 run_before_pass p", "p", "%1 run_after_pass p",
                      "%1 should_run",
                      "%1 exit_pass_ctx"]


def test_run_after_pass_gets_the_output_module() -> None:
    seen: list[tuple[str, Any]] = []

    class Seen(PassInstrument):
        def run_before_pass(self, mod: Any, info: Any) -> None:
            seen.append(("before", mod))

        def run_after_pass(self, mod: Any, info: Any) -> None:
            seen.append(("after", mod))

    mod = small_module()
    with PassContext(instruments=[Seen()]):
        out = log_pass([], "p", change=True)(mod)
    assert out is not mod
    assert seen == [("before", mod), ("after", out)]


def test_subclass_and_decorator_forms_are_instruments() -> None:
    class Sub(PassInstrument):
        def __init__(self) -> None:
            self.names: list[str] = []

        def run_before_pass(self, mod: Any, info: Any) -> None:
            self.names.append(info.name)

    @pass_instrument
    class Deco:
        """Docstring kept."""

        def __init__(self) -> None:
            self.names: list[str] = []

        def run_after_pass(self, mod: Any, info: Any) -> None:
            self.names.append(info.name)

    sub, deco = Sub(), Deco()
    assert isinstance(deco, PassInstrument)
    assert Deco.__name__ == "Deco"
    assert Deco.__doc__ == "Docstring kept."
    with PassContext(instruments=[sub, deco]):
        log_pass([], "p")(small_module())
    assert sub.names == ["p"]
    assert deco.names == ["p"]


@pytest.mark.no_immutable_check
def test_only_overriding_instruments_are_called_per_hook() -> None:
    class OnlyBefore(PassInstrument):
        def run_before_pass(self, mod: Any, info: Any) -> None:
            pass

    ctx = PassContext(instruments=[OnlyBefore(), instrument.PassTimingInstrument()])
    assert len(ctx._before_hooks) == 2
    assert len(ctx._should_run_hooks) == 0
    assert len(ctx._exit_hooks) == 1


def test_non_instrument_is_a_type_error_naming_the_position() -> None:
    with pytest.raises(TypeError, match=r"instruments\[1\]"):
        PassContext(instruments=[instrument.PassTimingInstrument(), object()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="pass_instrument"):
        pass_instrument(lambda: None)  # type: ignore[arg-type]
