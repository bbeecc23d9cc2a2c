"""Builds for a named x86-64 level: tiled for it, compiled for it, equal to the interpreter.

On an AVX-512 machine the AVX2 build must contain no 512-bit registers (it is what an
AVX2 machine would run), the SSE4.2 build no FMA (TIR ``fma`` is a multiply and an add
there), and every level's build must compute what the interpreter does.
"""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.target import host_target

LEVELS = [lv for lv in ("sse4.2", "avx2", "avx512")
          if ("sse4.2", "avx2", "avx512").index(lv)
          <= ("sse4.2", "avx2", "avx512").index(host_target().isa)]


def _module() -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (37, 70), "float32")
    w = bb.param("w", (70, 53), "float32")
    y = bb.call("relu", bb.call("add", bb.matmul(x, w), bb.param("b", (53,), "float32")))
    return ik.IRModule({"main": bb.finish([bb.call("exp", bb.call("negative", y))])})


@pytest.mark.parametrize("level", LEVELS)
def test_a_level_build_equals_the_interpreter_and_uses_only_its_registers(level: str) -> None:
    mod = _module()
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((37, 70), (70, 53), (53,))]
    want = ik.interpret(mod, *args)[0]
    with transform.PassContext(config={"target": level, "runtime.generic_max_elements": 0}):
        ex = runtime.build(mod)
    np.testing.assert_allclose(ex["main"](*args)[0], want, rtol=1e-4, atol=1e-4)
    asm = ex.get_source("asm")
    if level != "avx512":
        assert "zmm" not in asm
    if level == "avx2":
        assert "ymm" in asm and "vfmadd" in asm
    if level == "sse4.2":  # no FMA: the templates' fma is a multiply and an add, never
        # libm's fmaf (a call per element: the SSE4.2 convs ran 100x slower than AVX2's)
        assert "ymm" not in asm and "vfmadd" not in asm and "fmaf" not in asm
        assert "mulps" in asm and "addps" in asm


def test_a_level_above_the_host_is_refused() -> None:
    if host_target().isa == "avx512":
        pytest.skip("every x86-64 level runs on this CPU")
    with pytest.raises(ValueError, match="does not have"), \
            transform.PassContext(config={"target": "avx512"}):
        runtime.build(_module())
