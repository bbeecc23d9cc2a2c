"""The pass registry, the named pipelines O0..O3, and textual pipelines."""

from __future__ import annotations

import re
from typing import Any

import pytest
from transform_toys import identity_factory, log_pass, small_module

import irkernel as ik
from irkernel import transform
from irkernel.transform import (
    FixedPoint,
    PassContext,
    PipelineParseError,
    Sequential,
    parse_pipeline,
)


@pytest.mark.parametrize("name", transform.list_passes())
def test_every_registered_pass_round_trips(name: str) -> None:
    made = transform.get_pass(name)
    assert isinstance(made, transform.Pass)
    assert made.info.name == name
    assert str(made) == name


def test_unknown_pass_names_it_and_lists_known() -> None:
    with pytest.raises(ValueError, match=r"unknown pass 'NoSuchPass'.*O2"):
        transform.get_pass("NoSuchPass")


@pytest.mark.usefixtures("scoped_registry")
def test_register_rules() -> None:
    transform.register_pass("ToyA", identity_factory("ToyA"))
    with pytest.raises(ValueError, match="already registered"):
        transform.register_pass("ToyA", identity_factory("ToyA"))
    with pytest.raises(ValueError, match="reserved"):
        transform.register_pass("fixpoint", identity_factory("fixpoint"))
    with pytest.raises(ValueError, match="not a valid pass name"):
        transform.register_pass("1bad", identity_factory("1bad"))
    with pytest.raises(TypeError, match="callable"):
        transform.register_pass("ToyB", 3)  # type: ignore[arg-type]
    transform.register_pass("NotAPass", lambda: 42)
    with pytest.raises(TypeError, match="'NotAPass' returned int"):
        transform.get_pass("NotAPass")


@pytest.mark.usefixtures("scoped_registry")
def test_registry_is_scoped_by_the_fixture() -> None:
    transform.register_pass("ToyScoped", identity_factory("ToyScoped"))
    assert "ToyScoped" in transform.list_passes()


def test_scoped_registrations_do_not_leak() -> None:
    assert "ToyScoped" not in transform.list_passes()


def test_named_pipelines_are_sequentials_of_registered_passes() -> None:
    for level in ("O0", "O1", "O2", "O3"):
        pipeline = transform.get_pass(level)
        assert isinstance(pipeline, Sequential)
        assert pipeline.info.name == level
    o2 = transform.get_pass("O2")
    names = [p.info.name for p in o2.passes]
    wanted = [n for n in transform.PIPELINES["O2"] if n in transform.list_passes()]
    assert names == wanted
    o3 = transform.get_pass("O3")
    assert len(o3.passes) == 1
    assert isinstance(o3.passes[0], FixedPoint)
    assert transform.get_pass("O0").passes == ()


@pytest.mark.usefixtures("scoped_registry")
def test_named_pipeline_picks_up_passes_registered_later() -> None:
    from irkernel.transform import registry as _pass_registry

    missing = [n for n in transform.PIPELINES["O1"] if n not in _pass_registry._REGISTRY]
    for name in missing:
        transform.register_pass(name, identity_factory(name))
    names = [p.info.name for p in transform.get_pass("O1").passes]
    assert names == list(transform.PIPELINES["O1"])


def test_named_pipeline_runs() -> None:
    mod = small_module()
    out = transform.get_pass("O3")(mod)
    assert isinstance(out, ik.IRModule)


# -- textual pipelines --------------------------------------------------------


@pytest.fixture
def toys(scoped_registry: None) -> None:
    for name in ("FoldToy", "CseToy", "DceToy"):
        transform.register_pass(name, identity_factory(name))


@pytest.mark.usefixtures("toys")
@pytest.mark.parametrize("text", [
    "",
    "FoldToy",
    "FoldToy,DceToy",
    "FoldToy,fixpoint(CseToy,DceToy)",
    "FoldToy{max_elements=1024},fixpoint(CseToy,DceToy)",
    "FoldToy{a=1,b=-2.5,c=true,d=false,e=none,f=word,g=\"two words\",h=[1,[x,\"y z\"]]}",
    "fixpoint{max_iterations=3}(FoldToy,group(CseToy,DceToy))",
    "O2,FoldToy,O3",
    "fixpoint()",
])
def test_pipeline_text_round_trips(text: str) -> None:
    pipeline = parse_pipeline(text)
    assert isinstance(pipeline, Sequential)
    assert str(pipeline) == text
    assert str(parse_pipeline(str(pipeline))) == text


@pytest.mark.usefixtures("toys")
def test_options_are_factory_keywords_and_whitespace_is_ignored() -> None:
    pipeline = parse_pipeline(" FoldToy { max_elements = 1024 , name = 'x' } , DceToy ")
    fold = pipeline.passes[0]
    assert fold.options == {"max_elements": 1024, "name": "x"}  # type: ignore[attr-defined]
    assert str(pipeline) == "FoldToy{max_elements=1024,name=x},DceToy"


@pytest.mark.usefixtures("toys")
def test_parsed_structure() -> None:
    pipeline = parse_pipeline("FoldToy,fixpoint(CseToy,DceToy)")
    assert [type(p) for p in pipeline.passes][1] is FixedPoint
    inner = pipeline.passes[1]
    assert isinstance(inner, FixedPoint)
    assert [p.info.name for p in inner.passes] == ["CseToy", "DceToy"]


def test_python_built_pipeline_prints() -> None:
    a = transform.get_pass("PrintIR", header="h")
    seq = Sequential([a, FixedPoint([transform.get_pass("O0")], max_iterations=2),
                      Sequential([a], name="grp")])
    assert str(seq) == "PrintIR{header=h},fixpoint{max_iterations=2}(O0),grp(PrintIR{header=h})"
    assert str(parse_pipeline(str(seq))) == str(seq)


@pytest.mark.usefixtures("toys")
@pytest.mark.parametrize(("text", "message", "position"), [
    ("FoldToy,,DceToy", "expected a pass name", 8),
    ("FoldToy,Nope", "unknown pass 'Nope'", 8),
    ("FoldToy(DceToy)", "does not take a nested pipeline", 0),
    ("fixpoint", "needs a parenthesized pipeline", 0),
    ("fixpoint(FoldToy", "expected ')'", 16),
    ("FoldToy{a=1", "expected ','", 11),
    ("FoldToy{a=1,a=2}", "given twice", 12),
    ("FoldToy{a=\"x}", "unterminated string", 10),
    ("FoldToy)", "unexpected ')'", 7),
    ("fixpoint{depth=2}(FoldToy)", "no option 'depth'", 8),
    ("fixpoint{max_iterations=0}(FoldToy)", "max_iterations", 8),
    ("grp{a=1}(FoldToy)", "takes no options", 3),
])
def test_bad_pipeline_text_is_an_error_with_position(text: str, message: str,
                                                     position: int) -> None:
    with pytest.raises(PipelineParseError, match=re.escape(message)) as err:
        parse_pipeline(text)
    assert isinstance(err.value, ValueError)
    assert err.value.position == position
    assert "^" in str(err.value)


@pytest.mark.usefixtures("scoped_registry")
def test_factory_rejecting_options_is_a_parse_error() -> None:
    transform.register_pass("Strict", lambda: log_pass([], "Strict"))
    with pytest.raises(PipelineParseError, match="bad options for Strict") as err:
        parse_pipeline("Strict{x=1}")
    assert err.value.position == 6


@pytest.mark.usefixtures("scoped_registry")
def test_fixpoint_repeats_until_unchanged() -> None:
    counter = {"n": 0}

    def shrink(mod: ik.IRModule, ctx: PassContext) -> ik.IRModule:
        counter["n"] += 1
        names = list(mod)
        return mod.without(names[-1]) if len(names) > 1 else mod

    transform.register_pass("Shrink", lambda: transform.module_pass(shrink, opt_level=0,
                                                                   name="Shrink"))
    with PassContext() as ctx:
        out = parse_pipeline("fixpoint(Shrink)")(small_module(4))
    assert list(out) == ["main"]
    assert counter["n"] == 4  # 3 shrinking rounds + 1 that changes nothing
    assert ctx.statistics["fixpoint"]["iterations"] == 4


@pytest.mark.usefixtures("scoped_registry")
def test_fixpoint_is_bounded_by_the_config_key(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    transform.register_pass("Churn", lambda: log_pass(calls, "Churn", change=True))
    with PassContext(config={"irkernel.fixpoint_max_iterations": 3}):
        parse_pipeline("fixpoint(Churn)")(small_module())
    assert len(calls) == 3
    assert "no fixed point after 3 iterations" in caplog.text
    calls.clear()
    parse_pipeline("fixpoint{max_iterations=2}(Churn)")(small_module())
    assert len(calls) == 2


def test_parse_pipeline_type_error() -> None:
    with pytest.raises(TypeError, match="str"):
        parse_pipeline(["FoldConstant"])  # type: ignore[arg-type]


def _unused(*args: Any) -> None:
    del args


def test_builtin_passes_are_found_on_first_lookup_after_import_irkernel() -> None:
    """``get_pass("O2")`` right after ``import irkernel``: the registry loads the built-in
    passes through their entry point, and importing irkernel alone never imports them."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import json, sys\n"
        "import irkernel\n"
        "from irkernel import transform\n"
        "before = 'passes' in sys.modules\n"
        "o2 = transform.get_pass('O2')\n"
        "print(json.dumps([before, [p.info.name for p in o2.passes]]))\n")
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(root)}, check=True)
    before, names = json.loads(out.stdout)
    assert before is False
    assert names == list(transform.PIPELINES["O2"])


def test_named_pipeline_with_an_unregistered_member_names_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from irkernel.transform import pipelines

    monkeypatch.setitem(pipelines.PIPELINES, "O1", ("FoldConstant", "NoSuchPass"))
    with pytest.raises(ValueError, match="pipeline O1 needs pass 'NoSuchPass'"):
        transform.get_pass("O1")
