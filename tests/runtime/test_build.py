"""runtime.build: big unrolled bodies, sources, IR attributes, fast math, module handling."""

from __future__ import annotations

import re

import numpy as np
import pytest

import irkernel as ik
import runtime
from runtime.lower import lower
from runtime.target import host
from irkernel import tir, transform
from irkernel.tir import script as T


@T.prim_func
def saxpy(x: T.Buffer((64,), "float32", align=64), y: T.Buffer((64,), "float32", align=64),
          a: T.float32):
    for i in T.vectorized(64):
        y[i] = a * x[i] + y[i]


def test_a_thousand_unrolled_statements_compile_and_run() -> None:
    @T.prim_func
    def big(a: T.Buffer((1000,), "int64"), b: T.Buffer((1000,), "int64")):
        for i in T.unroll(1000):
            b[999 - i] = a[i] * (i % 7) + i

    lowered = runtime.build(big, cache=False)
    assert "for i" not in lowered.get_source("tir")  # really unrolled: 1000 stores
    assert lowered.get_source("tir").count("b[") == 1000
    a = np.arange(1000, dtype=np.int64) * 3
    b = np.empty(1000, np.int64)
    lowered["big"](a, b)
    i = np.arange(1000)
    np.testing.assert_array_equal(b[::-1], a * (i % 7) + i)


def test_sources() -> None:
    ex = runtime.build(saxpy)
    llvm_ir = ex.get_source("llvm")
    assert re.search(r"define void @saxpy_[0-9a-f]+_[0-9a-f]+\(", llvm_ir)  # name_key_batch
    assert ex.get_source("ll") == llvm_ir
    assert "saxpy" in ex.get_source("asm") and ex.get_source("s") == ex.get_source("asm")
    tir_text = ex.get_source("tir")
    assert tir_text.startswith("@T.prim_func")
    assert "T.ramp(0, 1, 64)" in tir_text


def test_buffer_arguments_are_noalias_and_aligned() -> None:
    """The exported entry takes the packed slots; the body it calls (and LLVM inlines)
    declares its buffers noalias and aligned."""
    text = lower(saxpy, "saxpy", host())
    text = text.replace('"', "")  # llvmlite quotes every name
    entry = next(line for line in text.splitlines()
                 if line.startswith("define") and "@saxpy(" in line)
    assert entry.count(",") == 0 and "ptr" in entry, entry
    define = next(line for line in text.splitlines()
                  if line.startswith("define") and "@saxpy__body(" in line)
    params = define[define.index("(") + 1:define.rindex(")")].split(",")
    assert len(params) == 3
    for buf in params[:2]:
        assert "noalias" in buf and "align 64" in buf, define
    assert "float" in params[2] and "noalias" not in params[2]


def test_fast_math_is_off_by_default_and_a_config_key() -> None:
    @T.prim_func
    def dot(a: T.Buffer((256,), "float32"), b: T.Buffer((256,), "float32"),
            out: T.Buffer((1,), "float32")):
        out[0] = 0.0
        for i in T.serial(256):
            out[0] = out[0] + a[i] * b[i]

    strict = runtime.build(dot).get_source("llvm")
    assert not re.search(r"\b(fadd|fmul)\s+(fast|reassoc|contract)", strict)
    with transform.PassContext(config={"tir.fast_math": True}):
        fast_ex = runtime.build(dot)
    assert re.search(r"\bf(add|mul)\s+fast\b", fast_ex.get_source("llvm"))
    a = np.random.default_rng(0).random(256, dtype=np.float32)
    b = np.random.default_rng(1).random(256, dtype=np.float32)
    exact, fast = np.zeros(1, np.float32), np.zeros(1, np.float32)
    runtime.build(dot)["dot"](a, b, exact)
    fast_ex["dot"](a, b, fast)
    expected = np.float32(0)
    for x, y in zip(a, b, strict=True):  # the strict kernel keeps the sequential order
        expected = np.float32(expected + x * y)
    assert exact[0] == expected
    np.testing.assert_allclose(fast, exact, rtol=1e-5)
    with pytest.raises((TypeError, ValueError), match=r"tir.fast_math"):
        transform.PassContext(config={"tir.fast_math": "yes"})


def test_module_handling() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    graph = bb.finish([bb.call("add", x, x)])
    assert "saxpy" in runtime.build(ik.IRModule({"main": graph, "saxpy": saxpy}))
    clash = saxpy.with_attr("global_symbol", "saxpy")
    with pytest.raises(ValueError, match="'saxpy' and 'other' both compile to the symbol"):
        runtime.build(ik.IRModule({"saxpy": saxpy, "other": clash}))
    with pytest.raises(TypeError, match="expected an IRModule or PrimFunc, got Function"):
        runtime.build(graph)  # type: ignore[arg-type]
    a = tir.Buffer("a", (4,), "float32")
    i = tir.Var("i")
    bad = tir.PrimFunc((a,), tir.For(i, 0, 5, "serial", tir.BufferStore(a, a[i], (i,))))
    with pytest.raises(ik.IRError, match=r"^bad: for i: .*static bounds"):
        runtime.build(ik.IRModule({"bad": bad}))


def test_kernels_outlive_their_executable_and_private_names() -> None:
    kernel = runtime.build(saxpy)["saxpy"]  # the executable is dropped here
    x = runtime.empty(64, np.float32, align=64)
    y = runtime.empty(64, np.float32, align=64)
    x[:], y[:] = 1.0, 2.0
    kernel(x, y, 3.0)
    np.testing.assert_array_equal(y, 5.0)
    private = saxpy.replace(attrs=tir.Attrs({}))
    assert list(runtime.build(ik.IRModule({"mine": private}))) == ["mine"]
