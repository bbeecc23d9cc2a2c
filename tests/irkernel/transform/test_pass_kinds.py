"""Pass kinds and decorators: ModulePass, FunctionPass, PrimFuncPass, change tracking."""

from __future__ import annotations

from typing import Any

import pytest
from transform_toys import (
    FakePrimFunc,
    module_with_prim_func,
    negate_output,
    small_function,
    small_module,
)

import irkernel as ik
from irkernel import transform
from irkernel.transform import FunctionPass, ModulePass, PassContext, PassInfo, PrimFuncPass


def test_pass_info_fields_and_validation() -> None:
    info = PassInfo(3, "X", ["A", "B"])
    assert (info.opt_level, info.name, info.required) == (3, "X", ("A", "B"))
    assert PassInfo(0, "Y").required == ()
    assert 'name="X"' in str(info)
    with pytest.raises(TypeError, match="required"):
        PassInfo(0, "X", "A")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="opt_level"):
        PassInfo("0", "X")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name"):
        PassInfo(0, "")


def test_module_pass_function_form_and_call_with_ctx() -> None:
    seen: list[PassContext] = []

    @transform.module_pass(opt_level=2)
    def drop_extra(mod: ik.IRModule, ctx: PassContext) -> ik.IRModule:
        seen.append(ctx)
        return mod.without("f1")

    assert isinstance(drop_extra, ModulePass)
    assert drop_extra.info.name == "drop_extra"
    assert drop_extra.info.opt_level == 2
    mod = small_module(2)
    ctx = PassContext(opt_level=0)
    out = drop_extra(mod, ctx)
    assert list(out) == ["main"]
    assert list(mod) == ["main", "f1"]  # input untouched
    assert seen == [ctx]
    drop_extra(mod)
    assert seen[-1] is PassContext.current()


def test_missing_opt_level_is_a_value_error() -> None:
    for deco in (transform.module_pass, transform.function_pass, transform.prim_func_pass):
        with pytest.raises(ValueError, match="opt_level"):
            deco(lambda *a: a[0])
        with pytest.raises(ValueError, match="opt_level"):
            deco(name="x")


def test_name_argument_and_partial_need_a_name() -> None:
    import functools

    p = transform.module_pass(lambda m, c: m, opt_level=0, name="Renamed")
    assert p.info.name == "Renamed"
    with pytest.raises(TypeError, match="name="):
        transform.module_pass(functools.partial(lambda m, c: m), opt_level=0)


def test_module_pass_class_form_falls_through_to_instance() -> None:
    @transform.module_pass(opt_level=1, required=["O0"])
    class DropFunctions:
        """Drops the named functions."""

        def __init__(self, names: list[str]) -> None:
            self.names = names
            self.calls = 0

        def transform_module(self, mod: ik.IRModule, ctx: PassContext) -> ik.IRModule:
            self.calls += 1
            return mod.without(*self.names)

    assert DropFunctions.__name__ == "DropFunctions"
    assert DropFunctions.__doc__ == "Drops the named functions."
    p = DropFunctions(["f1"])
    assert isinstance(p, ModulePass)
    assert p.info.name == "DropFunctions"
    assert p.info.required == ("O0",)
    assert p.names == ["f1"]  # attribute fall-through
    out = p(small_module(3))
    assert list(out) == ["main", "f2"]
    assert p.calls == 1
    with pytest.raises(AttributeError):
        _ = p.no_such_attribute


def test_class_form_without_method_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="transform_function"):
        @transform.function_pass(opt_level=0)
        class Nothing:
            pass


def test_function_pass_class_form() -> None:
    @transform.function_pass(opt_level=0)
    class Negate:
        def __init__(self, only: str) -> None:
            self.only = only

        def transform_function(self, func: ik.Function, mod: ik.IRModule,
                               ctx: PassContext) -> ik.Function:
            if func.attrs.get("global_symbol") != self.only:
                return func
            return negate_output(func)

    p = Negate(only="main")
    assert isinstance(p, FunctionPass)
    assert p.only == "main"
    mod = small_module(2)
    out = p(mod)
    assert out["main"] is not mod["main"]
    assert out["f1"] is mod["f1"]


def test_function_pass_skips_skip_optimization_and_prim_funcs() -> None:
    visited: list[str] = []

    @transform.function_pass(opt_level=0)
    def visit(func: ik.Function, mod: ik.IRModule, ctx: PassContext) -> ik.Function:
        visited.append(str(func.attrs.get("global_symbol")))
        return negate_output(func)

    skipped = small_function("g").with_attr("SkipOptimization", True)
    mod = ik.IRModule({"main": small_function(), "g": skipped, "kernel": FakePrimFunc("a")})
    out = visit(mod)
    assert visited == ["main"]
    assert out["g"] is skipped
    assert out["kernel"] is mod["kernel"]
    assert out["main"] is not mod["main"]


def test_unchanged_function_pass_returns_the_same_module() -> None:
    mod = small_module(5)
    same = transform.function_pass(lambda f, m, c: f, opt_level=0, name="Same")
    assert same(mod) is mod
    seq = transform.Sequential([same, same])
    assert seq(mod) is mod


def test_changed_function_pass_rebuilds_only_changed_entries() -> None:
    mod = small_module(3)

    def only_f1(func: ik.Function, m: ik.IRModule, c: PassContext) -> ik.Function:
        return negate_output(func) if func is m["f1"] else func

    out = transform.function_pass(only_f1, opt_level=0, name="OnlyF1")(mod)
    assert out is not mod
    assert out["main"] is mod["main"]
    assert out["f2"] is mod["f2"]
    assert out["f1"] is not mod["f1"]
    assert list(out) == list(mod)


def test_function_pass_returning_non_function_names_the_pass() -> None:
    bad = transform.function_pass(lambda f, m, c: None, opt_level=0, name="ReturnsNone")
    with pytest.raises(TypeError, match=r"ReturnsNone.*NoneType.*'main'"):
        bad(small_module())
    to_prim = transform.function_pass(lambda f, m, c: FakePrimFunc("x"), opt_level=0,
                                      name="ToPrim")
    with pytest.raises(TypeError, match=r"ToPrim.*must return a Function"):
        to_prim(small_module())


def test_module_pass_returning_non_module_names_the_pass() -> None:
    bad = transform.module_pass(lambda m, c: dict(m), opt_level=0, name="ReturnsDict")
    with pytest.raises(TypeError, match=r"ReturnsDict.*dict"):
        bad(small_module())


def test_calling_with_a_non_module_is_a_type_error() -> None:
    p = transform.module_pass(lambda m, c: m, opt_level=0, name="P")
    with pytest.raises(TypeError, match="P: expected an IRModule"):
        p(small_function())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ctx must be a PassContext"):
        p(small_module(), object())  # type: ignore[arg-type]


def test_prim_func_pass_touches_only_marked_values() -> None:
    seen: list[str] = []

    @transform.prim_func_pass(opt_level=0)
    def rewrite(pf: FakePrimFunc, mod: ik.IRModule, ctx: PassContext) -> FakePrimFunc:
        seen.append(pf.body)
        return FakePrimFunc(pf.body + "!")

    assert isinstance(rewrite, PrimFuncPass)
    mod = module_with_prim_func()
    out = rewrite(mod)
    assert seen == ["a"]  # not the graph Function, not the SkipOptimization one
    assert out["kernel"].body == "a!"
    assert out["main"] is mod["main"]
    assert out["skipped"] is mod["skipped"]
    assert transform.is_prim_func(mod["kernel"])
    assert not transform.is_prim_func(mod["main"])


def test_prim_func_pass_unchanged_and_wrong_return() -> None:
    mod = module_with_prim_func()
    same = transform.prim_func_pass(lambda pf, m, c: pf, opt_level=0, name="SamePF")
    assert same(mod) is mod
    bad = transform.prim_func_pass(lambda pf, m, c: small_function(), opt_level=0, name="BadPF")
    with pytest.raises(TypeError, match=r"BadPF.*must return a PrimFunc"):
        bad(mod)


def test_prim_func_pass_class_form() -> None:
    @transform.prim_func_pass(opt_level=0, name="Suffix")
    class AddSuffix:
        def __init__(self, suffix: str = "?") -> None:
            self.suffix = suffix

        def transform_function(self, pf: Any, mod: Any, ctx: Any) -> Any:
            return FakePrimFunc(pf.body + self.suffix)

    p = AddSuffix("#")
    assert isinstance(p, PrimFuncPass)
    assert p.info.name == "Suffix"
    assert p.suffix == "#"
    assert p(module_with_prim_func())["kernel"].body == "a#"


def test_sequential_argument_checks() -> None:
    with pytest.raises(TypeError, match=r"passes\[1\]"):
        transform.Sequential([transform.PrintIR(), "FoldConstant"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list or tuple"):
        transform.Sequential(transform.PrintIR())  # type: ignore[arg-type]
    seq = transform.Sequential()
    assert seq.info.opt_level == 0
    assert seq.info.name == "sequential"
    assert seq.passes == ()
    mod = small_module()
    assert seq(mod) is mod
