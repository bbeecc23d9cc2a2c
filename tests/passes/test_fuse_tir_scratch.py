"""Scratch buffers through FuseTIR: one name is one buffer.

Regression: the few-rows matmul (passes/topi/matmul_rows.py) allocated its scratch row
under one name in both branches of its last, narrower task; fused with an epilogue, both
were sized by one of them and the kernel wrote past the narrower (wrong outputs for 2-4
rows, a segfault). FuseTIR now refuses such a callee, naming the buffer.
"""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.tir import script as T
from passes._fuse_memo import callee_info


@pytest.mark.parametrize("rows", [1, 2, 3, 4])
def test_few_rows_matmul_with_a_bias_epilogue(rows: int) -> None:
    rng = np.random.default_rng(rows)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (rows, 512), "float32")
    w = bb.const(rng.standard_normal((512, 1000)).astype(np.float32))
    b = bb.const(rng.standard_normal((1000,)).astype(np.float32))
    mod = ik.IRModule({"main": bb.finish(bb.relu(bb.add(bb.matmul(x, w), b)))})
    xv = rng.standard_normal((rows, 512)).astype(np.float32)
    # the weight unpacked: the streamed-rows schedule and its scratch rows (packed at build
    # time, the constant weight would take the packed tile instead)
    with transform.PassContext(config={"runtime.generic_max_elements": 0},
                               disabled_pass=["PackConstantWeights"]):
        ex = runtime.build(mod, cache=False)
    assert [r.schedule for r in ex.profile(xv, repeat=1).rows] == ["matmul_rows"]
    np.testing.assert_allclose(ex["main"](xv)[0], ik.interpret(mod, xv)[0], rtol=1e-5,
                               atol=1e-4)


def test_two_scratch_buffers_of_one_name_are_refused() -> None:
    @T.prim_func(private=True)
    def kernel(x: T.Buffer((8,), "float32"), out: T.Buffer((8,), "float32")):
        a = T.alloc_buffer((8,), "float32", name="s")
        for i in T.serial(8):
            a[i] = x[i]
        b = T.alloc_buffer((4,), "float32", name="s")
        for i in T.serial(4):
            b[i] = a[i]
        for i in T.serial(8):
            out[i] = a[i]

    with pytest.raises(ValueError, match="two different buffers named 's'"):
        callee_info(kernel)


def test_dot_product_matmul_with_a_narrower_last_step() -> None:
    """The dot-product schedule (a transposed B, one row) once named the scratch of its
    last, narrower column step like the others (hypothesis found 1x33 @ (127x33)^T)."""
    rng = np.random.default_rng(7)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, 33), "float32")
    w = bb.param("w", (127, 33), "float32")
    b = bb.const(rng.standard_normal((127,)).astype(np.float32))
    mod = ik.IRModule({"main": bb.finish(bb.add(bb.matmul(x, bb.permute_dims(w, axes=[1, 0])),
                                                b))})
    args = [rng.standard_normal((1, 33)).astype(np.float32),
            rng.standard_normal((127, 33)).astype(np.float32)]
    with transform.PassContext(config={"runtime.generic_max_elements": 0}):
        ex = runtime.build(mod, cache=False)
    np.testing.assert_allclose(ex["main"](*args)[0], ik.interpret(mod, *args)[0], rtol=1e-5,
                               atol=1e-4)
