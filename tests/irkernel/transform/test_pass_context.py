"""PassContext: thread-local stack, stable per-thread default, nesting, config registry."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from transform_toys import small_module

from irkernel import instrument, transform
from irkernel.transform import PassContext


def test_defaults() -> None:
    ctx = PassContext()
    assert ctx.opt_level == 2
    assert ctx.required_pass == ()
    assert ctx.disabled_pass == ()
    assert ctx.instruments == ()
    assert dict(ctx.config) == {}


def test_current_is_stable_default_outside_with() -> None:
    assert PassContext.current() is PassContext.current()


def test_with_nesting_restores_on_exit() -> None:
    base = PassContext.current()
    a, b = PassContext(opt_level=1), PassContext(opt_level=3)
    with a as got_a:
        assert got_a is a
        assert PassContext.current() is a
        with b:
            assert PassContext.current() is b
        assert PassContext.current() is a
    assert PassContext.current() is base


def test_nesting_restores_when_body_raises() -> None:
    base = PassContext.current()
    a, b = PassContext(), PassContext()
    with pytest.raises(KeyError), a, b:
        raise KeyError("body")
    assert PassContext.current() is base


def test_exit_out_of_order_is_an_error() -> None:
    a, b = PassContext(), PassContext()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="out of order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)


def test_new_thread_sees_its_own_default() -> None:
    main_default = PassContext.current()
    seen: dict[str, Any] = {}
    timing = instrument.PassTimingInstrument()

    def worker() -> None:
        seen["default"] = PassContext.current()
        seen["stable"] = PassContext.current() is seen["default"]
        seen["instruments"] = PassContext.current().instruments
        with PassContext(opt_level=0) as inner:
            seen["inner"] = PassContext.current() is inner

    with PassContext(opt_level=3):  # the main thread's stack is not the worker's
        main_default.override_instruments([timing])
        try:
            thread = threading.Thread(target=worker)
            thread.start()
            thread.join()
        finally:
            main_default.override_instruments(None)
    assert seen["default"] is not main_default
    assert seen["stable"]
    assert seen["inner"]
    assert seen["default"].opt_level == 2
    assert seen["instruments"] == ()


def test_threads_run_passes_under_their_own_contexts() -> None:
    levels: dict[int, list[int]] = {}
    barrier = threading.Barrier(2)

    @transform.module_pass(opt_level=0)
    def record(mod: Any, ctx: PassContext) -> Any:
        levels.setdefault(threading.get_ident(), []).append(PassContext.current().opt_level)
        return mod

    def worker(level: int) -> None:
        with PassContext(opt_level=level):
            barrier.wait()
            for _ in range(20):
                record(small_module())

    threads = [threading.Thread(target=worker, args=(lv,)) for lv in (1, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(tuple(sorted(set(v))) for v in levels.values()) == [(1,), (3,)]


def test_override_instruments_on_default_lasts(default_ctx: PassContext) -> None:
    timing = instrument.PassTimingInstrument()
    default_ctx.override_instruments([timing])
    assert PassContext.current().instruments == (timing,)
    transform.PrintIR(file=_Sink())(small_module())
    assert "PrintIR" in timing.render()


def test_argument_errors_name_the_argument() -> None:
    with pytest.raises(TypeError, match="opt_level"):
        PassContext(opt_level="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="opt_level"):
        PassContext(opt_level=-1)
    with pytest.raises(TypeError, match="required_pass"):
        PassContext(required_pass="FoldConstant")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="disabled_pass"):
        PassContext(disabled_pass=[1])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="instruments"):
        PassContext(instruments=instrument.PassTimingInstrument())  # type: ignore[arg-type]


# -- config -----------------------------------------------------------------


def test_builtin_configs_are_listed() -> None:
    configs = PassContext.list_configs()
    assert configs["irkernel.bisect_limit"]["type"] == "int"
    assert configs["irkernel.bisect_limit"]["default"] == -1
    assert configs["irkernel.fixpoint_max_iterations"]["default"] >= 1


def test_unknown_config_key_names_it_and_lists_valid_keys() -> None:
    with pytest.raises(ValueError, match=r"no.such.key") as err:
        PassContext(config={"no.such.key": 1})
    assert "irkernel.bisect_limit" in str(err.value)


def test_wrong_typed_config_names_the_key() -> None:
    with pytest.raises(TypeError, match=r"irkernel.bisect_limit.*int.*str"):
        PassContext(config={"irkernel.bisect_limit": "3"})
    with pytest.raises(TypeError, match=r"irkernel.bisect_limit.*int.*float"):
        PassContext(config={"irkernel.bisect_limit": 2.5})
    with pytest.raises(ValueError, match=r"irkernel.fixpoint_max_iterations.*>= 1"):
        PassContext(config={"irkernel.fixpoint_max_iterations": 0})


def test_register_pass_config_round_trip() -> None:
    key = f"test.option_{uuid.uuid4().hex}"
    transform.register_pass_config(key, float, 0.5, description="a test option")
    assert PassContext().get_config(key) == 0.5
    ctx = PassContext(config={key: 2})  # an int is a valid float
    assert ctx.get_config(key) == 2.0
    assert isinstance(ctx.get_config(key), float)
    assert ctx.config[key] == 2.0
    assert PassContext.list_configs()[key] == {"type": "float", "default": 0.5,
                                               "description": "a test option"}
    with pytest.raises(ValueError, match="already registered"):
        transform.register_pass_config(key, float, 1.0)
    with pytest.raises(TypeError, match="expects bool"):
        transform.register_pass_config(f"{key}.b", bool, "no")
    with pytest.raises(ValueError, match="unknown pass config key"):
        ctx.get_config(f"{key}.missing")


class _Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)
