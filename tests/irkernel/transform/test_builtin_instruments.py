"""Built-in instruments: timing and statistics, printers, PrintChanged, DumpIR, checkers."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from transform_toys import log_pass, negate_output, small_function, small_module

import irkernel as ik
from irkernel import instrument, transform
from irkernel.instrument import PassCheckError
from irkernel.transform import PassContext


def negate_pass(name: str = "Negate") -> transform.FunctionPass:
    return transform.function_pass(lambda f, m, c: negate_output(f), opt_level=0, name=name)


def tag_pass(name: str = "Tag") -> transform.FunctionPass:
    return transform.function_pass(lambda f, m, c: f.with_attr("tag", name), opt_level=0,
                                   name=name)


# -- timing and statistics ------------------------------------------------------


def test_timing_tree_nested_with_stats_and_render_after_exit() -> None:
    @transform.module_pass(opt_level=0)
    def Counting(mod: ik.IRModule, ctx: PassContext) -> ik.IRModule:
        ctx.stat("nodes_folded", 3)
        ctx.stat("nodes_folded", 4)
        return mod

    timing = instrument.PassTimingInstrument()
    inner = transform.Sequential([Counting, log_pass([], "Other")], name="inner")
    outer = transform.Sequential([inner, Counting], name="outer")
    with PassContext(instruments=[timing]) as ctx:
        outer(small_module())
        inside = timing.render()
    after = timing.render()
    assert inside == after
    lines = after.splitlines()
    assert lines[0].split() == ["pass", "calls", "total", "ms", "self", "ms", "%parent"]
    names = [line[:40].rstrip() for line in lines[1:]]
    assert names == ["outer", "  inner", "    Counting", "    Other", "  Counting"]
    rows = {name: line for name, line in zip(names, lines[1:], strict=True)}
    assert "nodes_folded=7" in rows["    Counting"]
    assert "nodes_folded=7" in rows["  Counting"]
    assert re.search(r"\s1\s", rows["outer"])
    assert ctx.statistics == {"Counting": {"nodes_folded": 14}}
    totals = timing.totals()
    assert set(totals) == {"outer", "inner", "Counting", "Other"}
    assert totals["outer"] >= totals["inner"] >= 0


def test_timing_merges_calls_and_self_time() -> None:
    timing = instrument.PassTimingInstrument()
    p = log_pass([], "Again")
    with PassContext(instruments=[timing]):
        mod = small_module()
        for _ in range(3):
            p(mod)
    (row,) = timing.render().splitlines()[1:]
    fields = row.split()
    assert fields[0] == "Again"
    assert fields[1] == "3"
    assert float(fields[2]) == pytest.approx(float(fields[3]))  # no children: self == total
    assert fields[4] == "100.0%"


def test_timing_resets_when_entered_again_and_is_empty_without_passes() -> None:
    timing = instrument.PassTimingInstrument()
    assert timing.render() == ""
    with PassContext(instruments=[timing]):
        log_pass([], "First")(small_module())
    with PassContext(instruments=[timing]):
        pass
    assert timing.render() == ""


def test_timing_survives_a_failing_pass() -> None:
    timing = instrument.PassTimingInstrument()
    boom = transform.module_pass(lambda m, c: 1 / 0, opt_level=0, name="Boom")
    with pytest.raises(ZeroDivisionError), PassContext(instruments=[timing]):
        transform.Sequential([log_pass([], "Ok"), boom], name="seq")(small_module())
    text = timing.render()
    assert "Ok" in text
    assert "Boom" in text


def test_stat_outside_a_pass_is_recorded_and_type_checked() -> None:
    ctx = PassContext()
    ctx.stat("loose", 2)
    assert ctx.statistics == {"<outside a pass>": {"loose": 2}}
    with pytest.raises(TypeError, match="loose"):
        ctx.stat("loose", "many")  # type: ignore[arg-type]


# -- printers -----------------------------------------------------------------------


def test_print_before_and_after_all_to_file() -> None:
    out = io.StringIO()
    mod = small_module()
    with PassContext(instruments=[instrument.PrintBeforeAll(file=out),
                                  instrument.PrintAfterAll(file=out)]):
        negate_pass()(mod)
    text = out.getvalue()
    before, after = text.split("After Running Pass:")
    assert before.startswith('Before Running Pass: transform.PassInfo(opt_level=0, name="Negate"')
    assert mod.script() in before
    assert "negative" not in before
    assert "negative" in after


def test_printers_default_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with PassContext(instruments=[instrument.PrintAfterAll()]):
        log_pass([], "Quiet")(small_module())
    transform.PrintIR("hello")(small_module())
    captured = capsys.readouterr().out
    assert 'After Running Pass: transform.PassInfo(opt_level=0, name="Quiet"' in captured
    assert "PrintIR(hello):\n@main" in captured


def test_print_before_after_named_passes_only() -> None:
    out = io.StringIO()
    seq = transform.Sequential([tag_pass("A"), negate_pass("B"), tag_pass("C")])
    with PassContext(instruments=[instrument.PrintBefore(["B"], file=out),
                                  instrument.PrintAfter(["B", "C"], file=out)]):
        seq(small_module())
    headers = [line for line in out.getvalue().splitlines() if line.startswith("Print IR")]
    assert headers == ["Print IR before: B", "Print IR after: B", "Print IR after: C"]


def test_pass_printing_instrument_and_name_checks() -> None:
    out = io.StringIO()
    pi = instrument.PassPrintingInstrument(["A"], ["A"], file=out)
    with PassContext(instruments=[pi]):
        tag_pass("A")(small_module())
    assert out.getvalue().count("Print IR") == 2
    with pytest.raises(TypeError, match="names"):
        instrument.PrintBefore("A")  # type: ignore[arg-type]


def test_print_ir_pass_returns_input_and_is_registered() -> None:
    out = io.StringIO()
    mod = small_module()
    assert transform.PrintIR("x", file=out)(mod) is mod
    assert out.getvalue().startswith("PrintIR(x):\n")
    assert transform.get_pass("PrintIR").info.opt_level == 0


# -- PrintChanged ---------------------------------------------------------------------


def test_print_changed_prints_unified_diff_of_changed_functions_only() -> None:
    out = io.StringIO()
    mod = small_module(2)
    only_main = transform.function_pass(
        lambda f, m, c: negate_output(f) if f is m["main"] else f, opt_level=0, name="NegMain")
    seq = transform.Sequential([log_pass([], "Nothing"), only_main])
    with PassContext(instruments=[instrument.PrintChanged(file=out)]):
        seq(mod)
    text = out.getvalue()
    assert text.count("*** IR Dump After") == 1  # not Nothing, not the Sequential
    assert "*** IR Dump After NegMain (changed) ***" in text
    assert "--- main (before NegMain)" in text
    assert "+++ main (after NegMain)" in text
    assert re.search(r"^\+  %\d+ = negative", text, re.M)
    assert "f1" not in text


def test_print_changed_filters_by_pass_and_function_names() -> None:
    mod = small_module(2)
    seq = transform.Sequential([negate_pass("First"), negate_pass("Second")])
    out = io.StringIO()
    with PassContext(instruments=[instrument.PrintChanged(pass_names=["Second"], file=out)]):
        seq(mod)
    assert "After First" not in out.getvalue()
    assert "After Second" in out.getvalue()
    out = io.StringIO()
    with PassContext(instruments=[instrument.PrintChanged(function_names=["f1"], file=out)]):
        seq(mod)
    text = out.getvalue()
    assert "--- f1" in text
    assert "--- main" not in text


def test_print_changed_reports_added_and_removed_functions() -> None:
    out = io.StringIO()
    add = transform.module_pass(lambda m, c: m.with_function("g", small_function("g")),
                                opt_level=0, name="AddG")
    drop = transform.module_pass(lambda m, c: m.without("g"), opt_level=0, name="DropG")
    with PassContext(instruments=[instrument.PrintChanged(file=out)]):
        transform.Sequential([add, drop])(small_module())
    text = out.getvalue()
    assert "--- g (before AddG)" in text
    assert "+@g = graph" in text
    assert "-@g = graph" in text


# -- DumpIR ---------------------------------------------------------------------------


def test_dump_ir_writes_numbered_files_after_every_pass(tmp_path: Path) -> None:
    dump = instrument.DumpIR(tmp_path / "dump")
    seq = transform.Sequential([tag_pass("A"), negate_pass("B")], name="seq")
    with PassContext(instruments=[dump]):
        out = seq(small_module())
    files = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert files == ["000_A.ir", "001_B.ir", "002_seq.ir"]
    text = (tmp_path / "dump" / "001_B.ir").read_text()
    assert text == out.script()
    assert ik.structural_equal(ik.parse(text), out)


def test_dump_ir_refresh_removes_only_dump_files(tmp_path: Path) -> None:
    (tmp_path / "007_Old.ir").write_text("old")
    (tmp_path / "notes.txt").write_text("keep")
    instrument.DumpIR(tmp_path, refresh=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# -- VerifyEach -------------------------------------------------------------------------


def break_topological_order(func: ik.Function) -> ik.Function:
    a0 = func.a0.copy()
    a0[1] = 3  # node 1 now uses a later node
    return dataclasses.replace(func, a0=a0)


def test_verify_each_names_the_pass_that_broke_the_ir() -> None:
    breaker = transform.function_pass(lambda f, m, c: break_topological_order(f), opt_level=0,
                                      name="Breaker")
    seq = transform.Sequential([tag_pass("Fine"), breaker, tag_pass("After")])
    with pytest.raises(ik.IRError, match="pass 'Breaker' produced invalid IR") as err, \
            PassContext(instruments=[instrument.VerifyEach()]):
        seq(small_module())
    assert isinstance(err.value.__cause__, ik.IRError)


def test_verify_each_reports_an_invalid_input() -> None:
    bad = ik.IRModule({"main": break_topological_order(small_function())})
    with pytest.raises(ik.IRError, match="input of pass 'Fine' is already invalid"), \
            PassContext(instruments=[instrument.VerifyEach()]):
        tag_pass("Fine")(bad)


def test_verify_each_passes_valid_pipelines() -> None:
    with PassContext(instruments=[instrument.VerifyEach()]):
        out = transform.Sequential([tag_pass("A"), negate_pass("B")])(small_module())
    ik.verify(out)


# -- CheckSemantics ------------------------------------------------------------------------


def test_check_semantics_names_the_first_pass_that_changed_results() -> None:
    seq = transform.Sequential([tag_pass("Harmless"), negate_pass("Culprit"), negate_pass("Later")])
    with pytest.raises(PassCheckError, match="pass 'Culprit' changed result 0 of 'main'") as err, \
            PassContext(instruments=[instrument.CheckSemantics()]):
        seq(small_module())
    assert err.value.pass_name == "Culprit"


def test_check_semantics_is_nan_aware_and_accepts_rebuilt_equal_functions() -> None:
    rebuild = transform.function_pass(lambda f, m, c: small_function(), opt_level=0,
                                      name="Rebuild")
    x = np.array([np.nan, 0.0, np.inf, -np.inf], np.float32)
    with PassContext(instruments=[instrument.CheckSemantics(inputs=[x])]):
        out = rebuild(small_module())
    assert np.isnan(ik.interpret(out, x)[0][0])


def rebuild_with(dtype: str, shape: tuple[int, ...]) -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    y = bb.add(bb.exp(x), bb.const(np.arange(4, dtype=np.float32)))
    if dtype != "float32":
        y = bb.call("astype", y, dtype=dtype)
    if shape != (4,):
        y = bb.call("reshape", y, shape=shape)
    return bb.finish([y])


@pytest.mark.parametrize(("dtype", "shape", "message"), [
    ("float64", (4,), "float32\\[4\\] became float64\\[4\\]"),
    ("float32", (2, 2), "float32\\[4\\] became float32\\[2, 2\\]"),
])
def test_check_semantics_requires_same_dtype_and_shape(dtype: str, shape: tuple[int, ...],
                                                       message: str) -> None:
    change = transform.function_pass(lambda f, m, c: rebuild_with(dtype, shape), opt_level=0,
                                     name="Retype")
    with pytest.raises(PassCheckError, match=message), \
            PassContext(instruments=[instrument.CheckSemantics()]):
        change(small_module())


def test_check_semantics_tolerance() -> None:
    x = np.zeros(4, np.float32)
    mod = small_module()
    (before,) = ik.interpret(mod, x)  # exp(0) + [0, 1, 2, 3]: negating moves it by 2..8
    np.testing.assert_array_equal(before, [1, 2, 3, 4])
    with PassContext(instruments=[instrument.CheckSemantics(inputs=[x], atol=8.0)]):
        out = negate_pass()(mod)  # the largest change, 8, is within atol
    np.testing.assert_array_equal(ik.interpret(out, x)[0], -before)
    with pytest.raises(PassCheckError, match="pass 'Negate' changed result 0 of 'main'"), \
            PassContext(instruments=[instrument.CheckSemantics(inputs=[x], atol=7.9)]):
        negate_pass()(mod)


def test_check_semantics_missing_entry() -> None:
    mod = ik.IRModule({"other": small_function("other")})
    with pytest.raises(ValueError, match="no entry function 'main'"), \
            PassContext(instruments=[instrument.CheckSemantics()]):
        tag_pass()(mod)


# -- CheckImmutable --------------------------------------------------------------------------


def test_check_immutable_names_the_pass_that_mutated_its_input() -> None:
    def mutate(func: ik.Function, mod: ik.IRModule, ctx: PassContext) -> ik.Function:
        func.attr_id.setflags(write=True)
        func.attr_id[0] += 0 if func.attr_id.size == 0 else 1
        return func.with_attr("mutated", True)

    sneaky = transform.function_pass(mutate, opt_level=0, name="Sneaky")
    seq = transform.Sequential([tag_pass("Honest"), sneaky])
    with pytest.raises(PassCheckError, match="pass 'Sneaky' mutated its input module: "
                                             "function 'main': attr_id changed"), \
            PassContext(instruments=[instrument.CheckImmutable()]):
        seq(small_module())


def test_check_immutable_accepts_functional_passes() -> None:
    mod = small_module(3)
    columns = {name: (f.kind.copy(), f.a0.copy(), f.consts.data.copy())
               for name, f in mod.functions.items()}
    checker = instrument.CheckImmutable()
    with PassContext(instruments=[checker]):
        tagged = tag_pass("A")(mod)
        out = transform.Sequential([negate_pass("B")])(tagged)
        assert checker._stack == []  # every run_before_pass met its run_after_pass
    assert [f.attrs["tag"] for f in tagged.functions.values()] == ["A", "A", "A"]
    assert all("tag" not in f.attrs for f in mod.functions.values())  # input untouched
    for name, f in mod.functions.items():
        for old, new in zip(columns[name], (f.kind, f.a0, f.consts.data), strict=True):
            np.testing.assert_array_equal(old, new)
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(ik.interpret(out, x)[0], -ik.interpret(mod, x)[0])


def test_check_immutable_catches_module_level_replacement() -> None:
    def swap(mod: ik.IRModule, ctx: PassContext) -> ik.IRModule:
        funcs: Any = mod._functions
        object.__setattr__(mod, "_functions", {**funcs, "main": small_function()})
        return mod

    cheat = transform.module_pass(swap, opt_level=0, name="Cheat")
    with pytest.raises(PassCheckError, match=r"'Cheat'.*function 'main' was replaced"), \
            PassContext(instruments=[instrument.CheckImmutable()]):
        cheat(small_module())
