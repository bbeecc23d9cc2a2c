"""Parity with TVM 0.27 where users can see it, and the differences docs/pass_infra.md lists.

The first half pins the behaviours where irkernel follows TVM 0.27 (written
from TVM's observed behaviour; TVM is not a test dependency): ``should_run``
must return a bool, config values are coerced between bool and int, the
printed form of ``PassInfo``, the reverse-order rollback when an instrument
fails on enter, and the decorator's error for a non-callable. The second half
pins each deliberate difference, so the docs section cannot drift from the code.
"""

from __future__ import annotations

import functools
import io
import re
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from transform_toys import log_pass, small_module

from irkernel import instrument, transform
from irkernel.instrument import pass_instrument
from irkernel.transform import PassContext, PassInfo

DOC = Path(__file__).resolve().parents[3] / "docs" / "pass_infra.md"


def recorder(events: list[str], ident: str, fail: str = "", verdict: Any = True) -> Any:
    """An instrument logging '<ident> <hook>'; raises in hook ``fail``.

    Its ``should_run`` returns ``verdict`` as is (the point of these tests).
    """

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

        def should_run(self, mod: Any, info: Any) -> Any:
            self._log("should_run")
            return verdict

    return Recorder()


# -- 1. should_run must return a bool --------------------------------------------------


def test_should_run_returning_none_is_a_type_error_and_the_context_still_exits() -> None:
    @pass_instrument
    class ForgotReturn:
        def should_run(self, mod: Any, info: Any) -> None:
            events.append("forgot should_run")

    events: list[str] = []
    outer = PassContext.current()
    with pytest.raises(TypeError, match="cannot convert None to bool") as err, \
            PassContext(instruments=[recorder(events, "%1"), ForgotReturn()]):
        log_pass(events, "p")(small_module())
    message = str(err.value)
    assert "ForgotReturn.should_run" in message
    assert "'p'" in message
    assert events == ["%1 enter_pass_ctx", "%1 should_run", "forgot should_run",
                      "%1 exit_pass_ctx"]  # the pass did not run; the context exited
    assert PassContext.current() is outer


def test_should_run_returning_none_on_the_default_context(default_ctx: PassContext) -> None:
    events: list[str] = []
    default_ctx.override_instruments([recorder(events, "%1", verdict=None)])
    with pytest.raises(TypeError, match=r"Recorder.should_run returned None for pass 'p'"):
        log_pass(events, "p")(small_module())
    assert events == ["%1 enter_pass_ctx", "%1 should_run"]


_VERDICTS = st.one_of(st.booleans(), st.integers(-3, 3), st.none(), st.text(max_size=3),
                      st.floats(allow_nan=False, width=32), st.lists(st.booleans(), max_size=1),
                      st.sampled_from([np.True_, np.False_, np.int8(0), np.int64(5),
                                       np.array([True]), np.float32(1.0)]))


@given(verdict=_VERDICTS)
def test_should_run_verdict_converts_like_tvm(verdict: Any) -> None:
    """bool and integers convert (C truthiness); anything else is a TypeError naming it."""
    events: list[str] = []
    mod = small_module()
    converts = isinstance(verdict, (bool, int, np.bool_, np.integer))
    with PassContext(instruments=[recorder(events, "%1", verdict=verdict)]):
        if converts:
            out = log_pass(events, "p", change=True)(mod)
            assert (out is not mod) == bool(verdict)
            assert ("p" in events) == bool(verdict)
        else:
            shown = "None" if verdict is None else type(verdict).__name__
            with pytest.raises(TypeError, match=f"cannot convert {shown} to bool"):
                log_pass(events, "p")(mod)
            assert "p" not in events


def test_required_pass_never_asks_should_run_so_none_is_not_an_error() -> None:
    events: list[str] = []
    with PassContext(required_pass=["p"], instruments=[recorder(events, "%1", verdict=None)]):
        log_pass(events, "p")(small_module())
    assert events == ["%1 enter_pass_ctx", "p", "%1 exit_pass_ctx"]


# -- 2. config coercion between bool and int ------------------------------------------


@pytest.fixture
def keys() -> dict[type, str]:
    """Fresh config keys of each type (the registry is append-only, so unique names)."""
    tag = uuid.uuid4().hex
    out = {bool: f"test.parity_{tag}.flag", int: f"test.parity_{tag}.count",
           float: f"test.parity_{tag}.ratio"}
    transform.register_pass_config(out[bool], bool, False)
    transform.register_pass_config(out[int], int, 3)
    transform.register_pass_config(out[float], float, 0.5)
    return out


@pytest.mark.parametrize(("value", "expected"), [(1, True), (0, False), (2, True), (-1, True),
                                                 (np.int32(1), True), (np.True_, True),
                                                 (np.False_, False), (True, True)])
def test_bool_config_accepts_integers(keys: dict[type, str], value: Any, expected: bool) -> None:
    got = PassContext(config={keys[bool]: value}).get_config(keys[bool])
    assert got is expected  # a real bool, not the int that came in


@pytest.mark.parametrize(("value", "expected"), [(True, 1), (False, 0), (np.True_, 1),
                                                 (np.int16(7), 7)])
def test_int_config_accepts_bools(keys: dict[type, str], value: Any, expected: int) -> None:
    got = PassContext(config={keys[int]: value}).get_config(keys[int])
    assert got == expected
    assert type(got) is int


def test_float_config_accepts_bools_and_ints(keys: dict[type, str]) -> None:
    for value, expected in ((True, 1.0), (2, 2.0), (np.float32(0.25), 0.25)):
        got = PassContext(config={keys[float]: value}).get_config(keys[float])
        assert got == expected
        assert type(got) is float


def test_builtin_int_config_takes_true_as_one() -> None:
    ctx = PassContext(config={"irkernel.bisect_limit": True})
    assert ctx.get_config("irkernel.bisect_limit") == 1
    assert type(ctx.get_config("irkernel.bisect_limit")) is int


@pytest.mark.parametrize(("kind", "value"), [(bool, "1"), (bool, 1.0), (bool, None),
                                             (int, 1.5), (int, "3"), (int, None),
                                             (float, "0.5")])
def test_config_still_rejects_other_types(keys: dict[type, str], kind: type, value: Any) -> None:
    with pytest.raises(TypeError, match=rf"{re.escape(keys[kind])}.*expects {kind.__name__}"):
        PassContext(config={keys[kind]: value})


def test_register_pass_config_coerces_the_default() -> None:
    key = f"test.parity_{uuid.uuid4().hex}"
    transform.register_pass_config(key, bool, 0)
    assert PassContext().get_config(key) is False
    assert PassContext.list_configs()[key]["default"] is False


# -- 3. str(PassInfo) is TVM 0.27's ----------------------------------------------------


@pytest.mark.parametrize(("required", "shown"), [(["R1", "R2"], '("R1", "R2")'),
                                                 (["R1"], '("R1",)'), (None, "()")])
def test_pass_info_prints_like_tvm_0_27(required: Any, shown: str) -> None:
    info = PassInfo(2, "Str", required)
    expected = f'transform.PassInfo(opt_level=2, name="Str", required={shown}, traceable=False)'
    assert str(info) == expected
    assert repr(info) == expected  # TVM's str and repr of an object are the same text


def test_print_all_headers_use_the_pass_info() -> None:
    out = io.StringIO()
    with PassContext(instruments=[instrument.PrintBeforeAll(file=out),
                                  instrument.PrintAfterAll(file=out)]):
        log_pass([], "Str")(small_module())
    info = 'transform.PassInfo(opt_level=0, name="Str", required=(), traceable=False)'
    lines = out.getvalue().splitlines()
    assert f"Before Running Pass: {info}" in lines
    assert f"After Running Pass: {info}" in lines


# -- 4. instruments that fail on enter: the entered ones exit in reverse order ---------


def test_enter_failure_exits_the_entered_instruments_in_reverse_order() -> None:
    events: list[str] = []
    outer = PassContext.current()
    ctx = PassContext(instruments=[recorder(events, "A"), recorder(events, "B"),
                                   recorder(events, "C", "enter_pass_ctx"), recorder(events, "D")])
    with pytest.raises(RuntimeError, match="dummy error in C enter_pass_ctx"), ctx:
        events.append("body")
    assert events == ["A enter_pass_ctx", "B enter_pass_ctx", "C enter_pass_ctx",
                      "B exit_pass_ctx", "A exit_pass_ctx"]
    assert not ctx.instruments
    assert PassContext.current() is outer


def test_override_enter_failure_exits_in_reverse_order(default_ctx: PassContext) -> None:
    events: list[str] = []
    with pytest.raises(RuntimeError, match="dummy error in C enter_pass_ctx"):
        default_ctx.override_instruments([recorder(events, "A"), recorder(events, "B"),
                                          recorder(events, "C", "enter_pass_ctx")])
    assert events == ["A enter_pass_ctx", "B enter_pass_ctx", "C enter_pass_ctx",
                      "B exit_pass_ctx", "A exit_pass_ctx"]
    assert not default_ctx.instruments


def test_normal_exit_keeps_list_order() -> None:
    events: list[str] = []
    with PassContext(instruments=[recorder(events, "A"), recorder(events, "B")]):
        pass
    assert events == ["A enter_pass_ctx", "B enter_pass_ctx", "A exit_pass_ctx", "B exit_pass_ctx"]


# -- 5. decorating something that is not a function or a class -------------------------

_DECORATORS = [transform.module_pass, transform.function_pass, transform.prim_func_pass]


@pytest.mark.parametrize("decorator", _DECORATORS, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", [None, "Named"])
@pytest.mark.parametrize("bad", [42, "FoldConstant", 1.5])
def test_non_callable_says_a_function_or_class_is_expected(decorator: Any, name: str | None,
                                                           bad: Any) -> None:
    expected = (rf"{decorator.__name__}: expected a function or a class to make a pass from, "
                rf"got {type(bad).__name__}")
    with pytest.raises(TypeError, match=expected):
        decorator(bad, opt_level=1, name=name)
    with pytest.raises(TypeError, match=expected):
        decorator(opt_level=1, name=name)(bad)


def test_callable_without_a_name_still_asks_for_name() -> None:
    def body(mod: Any, ctx: Any) -> Any:
        return mod

    nameless = functools.partial(body)
    with pytest.raises(TypeError, match="name= is required for partial objects"):
        transform.module_pass(nameless, opt_level=1)
    assert transform.module_pass(nameless, opt_level=1, name="Named").info.name == "Named"


# -- the documented differences ----------------------------------------------------------


def differences_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"^## Where irkernel differs from TVM\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, "docs/pass_infra.md lacks the 'Where irkernel differs from TVM' section"
    return " ".join(match.group(1).split())  # one line, so a phrase may wrap in the source


@pytest.mark.parametrize("topic", [
    "direct call", "transitively", "not re-run", "AttributeError", "InternalError",
    "out of order", "returning None", "unknown required", "own exception class",
    "negative `opt_level`", "override_instruments(None)", "timing profile", "traceable",
    "tuning_api_database", "not a function or a class", "PrintIR(header)", "LOG(INFO)",
])
def test_differences_section_lists_each_difference(topic: str) -> None:
    assert topic in differences_section()


def test_difference_required_runs_on_a_direct_call(scoped_registry: None) -> None:
    events: list[str] = []
    transform.register_pass("Req", lambda: log_pass(events, "Req"))
    user = transform.module_pass(lambda mod, ctx: events.append("user") or mod, opt_level=0,
                                 name="User", required=["Req"])
    user(small_module())  # no enclosing Sequential: TVM would not run Req
    assert events == ["Req", "user"]


def test_difference_errors_are_python_builtins() -> None:
    with pytest.raises(ValueError, match="unknown pass config key"):
        PassContext(config={"no.such.key": 1})
    with pytest.raises(TypeError, match="expects int"):
        PassContext(config={"irkernel.bisect_limit": "3"})
    returns_none = transform.module_pass(lambda mod, ctx: None, opt_level=0, name="Nothing")
    with pytest.raises(TypeError, match="returned NoneType, expected an IRModule"):
        returns_none(small_module())
    first, second = PassContext(), PassContext()
    first.__enter__()
    second.__enter__()
    with pytest.raises(RuntimeError, match="out of order"):
        first.__exit__(None, None, None)
    second.__exit__(None, None, None)
    first.__exit__(None, None, None)


def test_difference_user_exceptions_pass_through_unchanged() -> None:
    class MyError(Exception):
        pass

    def boom(mod: Any, ctx: Any) -> Any:
        raise MyError("mine")

    with pytest.raises(MyError, match="mine"):
        transform.module_pass(boom, opt_level=0, name="Boom")(small_module())


def test_difference_unknown_required_name_is_a_value_error(scoped_registry: None) -> None:
    user = transform.module_pass(lambda mod, ctx: mod, opt_level=0, name="User",
                                 required=["NoSuchPass"])
    with pytest.raises(ValueError, match="'User' requires 'NoSuchPass'"):
        user(small_module())


def test_difference_negative_opt_level_and_override_none(default_ctx: PassContext) -> None:
    with pytest.raises(ValueError, match="opt_level must be >= 0"):
        PassContext(opt_level=-1)
    default_ctx.override_instruments([instrument.PassTimingInstrument()])
    default_ctx.override_instruments(None)
    assert default_ctx.instruments == ()


def test_difference_no_traceable_or_tuning_arguments() -> None:
    with pytest.raises(TypeError, match="traceable"):
        transform.module_pass(lambda mod, ctx: mod, opt_level=0, name="T", traceable=False)
    with pytest.raises(TypeError, match="trace"):
        PassContext(trace=None)  # type: ignore[call-arg]


def test_difference_print_ir_writes_to_its_file() -> None:
    out = io.StringIO()
    mod = small_module()
    assert transform.PrintIR("here", file=out)(mod) is mod
    assert out.getvalue().startswith("PrintIR(here):\n")


def test_difference_timing_profile_kept_after_exit() -> None:
    timing = instrument.PassTimingInstrument()
    with PassContext(instruments=[timing]):
        log_pass([], "Timed")(small_module())
    assert "Timed" in timing.render()
