"""PrimFuncs inside IRModules: verify, structural equality/hash, printing, passes, DCE, parse."""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import passes
from irkernel import tir, transform
from irkernel.tir import script as T


@T.prim_func
def double(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        b[i] = a[i] * 2.0


def _graph(callee: str | None) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    y = bb.call("call_tir", x, callee=callee, dtype="float32", shape=(4,)) if callee \
        else bb.call("add", x, x)
    return bb.finish([y])


def _module(**extra: object) -> ik.IRModule:
    return ik.IRModule({"main": _graph("kernel"), "kernel": double.with_attr(
        "global_symbol", "kernel").replace(attrs=tir.Attrs({})), **extra})


def test_verify_checks_prim_funcs_of_a_module() -> None:
    ik.verify(_module())
    a = tir.Buffer("a", (4,), "float32")
    i = tir.Var("i")
    bad = tir.PrimFunc((a,), tir.For(i, 0, 5, "serial", tir.BufferStore(a, a[i], (i,))))
    with pytest.raises(ik.IRError, match=r"^oob: for i: store a: .*reaches 4"):
        ik.verify(_module(oob=bad))
    ik.verify(_module()["kernel"])  # a lone PrimFunc, named by its global_symbol
    with pytest.raises(ik.IRError, match=r"^k: for i: store a: .*reaches 4"):
        ik.verify(bad, "k")


def test_structural_equality_and_hash_see_prim_funcs() -> None:
    assert ik.structural_equal(_module(), _module())
    assert ik.structural_hash(_module()) == ik.structural_hash(_module())
    other = _module(extra=double.with_attr("global_symbol", "extra"))
    changed = ik.IRModule({**_module().functions,
                           "kernel": _module()["kernel"].with_attr("note", 1)})
    for different in (other, changed):
        assert not ik.structural_equal(_module(), different)
        assert ik.structural_hash(_module()) != ik.structural_hash(different)
    assert not ik.structural_equal(double, _graph(None))


def test_structural_hash_distinguishes_signed_zero_constants() -> None:
    def scaled(c: float) -> tir.PrimFunc:
        a = tir.Buffer("a", (4,), "float64")
        i = tir.Var("i")
        return tir.PrimFunc((a,), tir.For(i, 0, 4, "serial",
                                          tir.BufferStore(a, a[i] * c, (i,))))

    # x * 0.0 and x * -0.0 differ (the sign of the zero result): not equal
    assert scaled(0.0) != scaled(-0.0)
    assert not ik.structural_equal(scaled(0.0), scaled(-0.0))
    assert ik.structural_hash(scaled(0.0)) != ik.structural_hash(scaled(-0.0))
    nan = scaled(float("nan"))
    assert nan == scaled(float("nan")) and hash(nan) == hash(scaled(float("nan")))
    assert nan.structural_digest() == scaled(float("nan")).structural_digest()


def test_module_script_prints_prim_funcs_and_parse_rejects_them_clearly() -> None:
    text = _module().script()
    assert "@main = graph" in text and "@T.prim_func(private=True)\ndef kernel(" in text
    with pytest.raises(ik.ParseError, match=r"PrimFuncs \(@T.prim_func\) are not part of the "
                                            r"text format") as info:
        ik.parse(text)
    assert info.value.line == text.splitlines().index("@T.prim_func(private=True)") + 1
    graph_only = ik.IRModule({"main": _graph(None)})
    assert ik.structural_equal(ik.parse(graph_only.script()), graph_only)


def test_prim_func_pass_touches_only_prim_funcs_and_respects_skip() -> None:
    seen: list[str] = []

    @transform.prim_func_pass(opt_level=0, name="Tag")
    def tag(func: tir.PrimFunc, mod: ik.IRModule, ctx: transform.PassContext) -> tir.PrimFunc:
        seen.append(type(func).__name__)
        return func.with_attr("tagged", True)

    skipped = double.with_attr("SkipOptimization", True)
    mod = _module(skipped=skipped)
    out = tag(mod)
    assert seen == ["PrimFunc"]
    assert out["kernel"].attrs["tagged"] is True
    assert out["main"] is mod["main"] and out["skipped"] is skipped
    assert transform.get_pass("Simplify")(mod)["main"] is mod["main"]


def test_dead_code_elimination_keeps_reachable_prim_funcs_unchanged() -> None:
    unused = double.replace(attrs=tir.Attrs({}))  # private and never called
    public = double.with_attr("global_symbol", "public")
    mod = _module(unused=unused, public=public)
    out = passes.DeadCodeElimination()(mod)
    assert sorted(out.functions) == ["kernel", "main", "public"]
    assert out["kernel"] is mod["kernel"] and out["public"] is public
    only = passes.DeadCodeElimination(entry_functions=["main"])(mod)
    assert sorted(only.functions) == ["kernel", "main"]


def test_interpreting_a_module_with_prim_funcs_is_unchanged_by_dce() -> None:
    mod = _module()
    x = np.arange(4, dtype=np.float32)
    before = ik.interpret(mod, x)
    after = ik.interpret(passes.DeadCodeElimination()(mod), x)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[0], 2 * x)
