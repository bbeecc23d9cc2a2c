"""The build's pipelines are registered text a context can replace, and the kernel key
digests what lowering runs (the LowerTIR text and the source of what it imports)."""

from __future__ import annotations

import ast

import numpy as np
import pytest

import irkernel as ik
import passes
import runtime
from irkernel import tir, transform
from irkernel.tir import script as T
from runtime import code_digest
from runtime.build import code_version, graph_pipeline
from runtime.compile import LoweringSettings, kernel_key, lower_tir
from runtime.target import host

BIG = 1 << 16  # innermost iterations: above PARALLEL_MIN_WORK


@T.prim_func
def scale(a: T.Buffer((256, 256), "float32"), b: T.Buffer((256, 256), "float32")):
    for i in T.serial(256):
        for j in T.serial(256):
            b[i, j] = a[i, j] * 2.0


def _graph_kernel() -> tir.PrimFunc:
    """``scale`` as graph lowering marks its kernels (``op_name``)."""
    return scale.with_attr("op_name", "scale")


def _key(func: tir.PrimFunc, ctx: transform.PassContext) -> str:
    settings = LoweringSettings.of(ctx)
    return kernel_key(func, settings, host(), code_version(settings.pipeline), "full")


def _has_parallel(func: tir.PrimFunc) -> bool:
    return any(isinstance(n, tir.For) and n.kind == "parallel"
               for n in tir.functor.post_order(func.body))


def test_pipelines_are_registered_text_that_prints_back() -> None:
    assert transform.pipeline_text_of("LowerTIR") == passes.LOWER_TIR
    assert transform.pipeline_text_of("GraphLowering") == passes.GRAPH_LOWERING
    for text in (passes.LOWER_TIR, passes.GRAPH_LOWERING):
        assert str(transform.parse_pipeline(text)) == text
    lowering = transform.get_pass("LowerTIR")
    assert lowering.info.name == "LowerTIR"
    assert repr(lowering) == f"<Sequential LowerTIR: {passes.LOWER_TIR}>"
    assert "ParallelizeNests" in passes.LOWER_TIR.split(",")


def test_graph_pipeline_fills_in_legalize_options_unless_the_text_gives_them() -> None:
    with transform.PassContext(config={"runtime.generic_max_elements": 7}):
        assert "LegalizeOps{generic_max_elements=7}" in repr(graph_pipeline())
    text = "LegalizeOps{generic_max_elements=3},FuseOps"
    with transform.PassContext(config={"pipeline.GraphLowering": text,
                                       "runtime.generic_max_elements": 7}):
        assert repr(graph_pipeline()) == f"<Sequential GraphLowering: {text}>"


def test_parallelize_nests_is_a_pass_of_the_lowering_pipeline() -> None:
    assert _has_parallel(lower_tir("scale", _graph_kernel()))
    assert not _has_parallel(lower_tir("scale", scale))  # a user's loops stay as written
    without = passes.LOWER_TIR.replace("ParallelizeNests,", "")
    with transform.PassContext(config={"pipeline.LowerTIR": without}):
        assert not _has_parallel(lower_tir("scale", _graph_kernel()))
    with transform.PassContext(disabled_pass=["ParallelizeNests"]):
        assert not _has_parallel(lower_tir("scale", _graph_kernel()))


def test_a_replaced_lowering_pipeline_changes_the_key_and_still_builds() -> None:
    func = _graph_kernel()
    default = _key(func, transform.PassContext())
    without = passes.LOWER_TIR.replace("ParallelizeNests,", "")
    ctx = transform.PassContext(config={"pipeline.LowerTIR": without})
    assert _key(func, ctx) != default
    with ctx:
        ex = runtime.build(ik.IRModule({"scale": func}), cache=False)
        assert "parallel" not in ex.get_source("tir")
    a = np.arange(BIG, dtype=np.float32).reshape(256, 256)
    out = np.empty_like(a)
    ex["scale"](a, out)
    np.testing.assert_array_equal(out, a * 2)


def test_a_bad_pipeline_text_names_its_config_key() -> None:
    with transform.PassContext(config={"pipeline.LowerTIR": "Simplify,NoSuchPass"}), \
            pytest.raises(transform.PipelineParseError, match="pipeline.LowerTIR.*NoSuchPass"):
        lower_tir("scale", scale)


def test_the_digest_follows_the_imports_of_lowering() -> None:
    modules = code_digest.import_closure(
        code_digest.LOWERING_ROOTS + code_digest.pass_modules(passes.LOWER_TIR))
    names = {str(p.relative_to(code_digest.ROOT)) for p in modules}
    assert {"runtime/lower.py", "runtime/codegen_expr.py", "passes/tir/parallelize.py",
            "passes/tir/vectorize_loop.py", "irkernel/tir/stmt.py"} <= names
    assert "passes/fuse_ops.py" not in names  # graph passes do not shape a kernel's code
    assert "runtime/executor.py" not in names


@pytest.mark.parametrize("helper", ["passes/tir/parallelize.py", "runtime/codegen_expr.py"])
def test_changing_one_lowering_helper_changes_the_kernel_key(monkeypatch, helper) -> None:
    func = _graph_kernel()
    before = _key(func, transform.PassContext())
    read = code_digest._read
    changed = code_digest.ROOT / helper

    def edited(path):
        source = read(path)
        return source + b"\n# edited\n" if path == changed else source

    code_digest.code_version.cache_clear()
    monkeypatch.setattr(code_digest, "_read", edited)
    try:
        assert _key(func, transform.PassContext()) != before
    finally:
        monkeypatch.undo()
        code_digest.code_version.cache_clear()
    assert _key(func, transform.PassContext()) == before


def test_the_import_scan_finds_every_import_statement() -> None:
    """The line scan parses only import statements; it must miss none a full parse finds."""
    for package in code_digest.PACKAGES:
        for path in sorted((code_digest.ROOT / package).rglob("*.py")):
            source = path.read_bytes()
            full = {ast.unparse(n) for n in ast.walk(ast.parse(source))
                    if isinstance(n, ast.Import | ast.ImportFrom)}
            scanned = {ast.unparse(n) for n in code_digest._statements(path, source)}
            assert full <= scanned, (path, sorted(full - scanned))
