"""Every conv form runs a scheduled kernel and equals the interpreter (issue 31, part 3).

Grouped convs of any group count, 1-D and 3-D convs, dilations, asymmetric padding and
channel counts that are no multiple of the register tile all take the implicit GEMM of
``passes/topi/conv.py``, conv_transpose its per-phase form (``conv_transpose.py``); these tests check each form against ``ik.interpret`` through
``runtime.build`` at AVX2 (256-bit) and AVX-512 (512-bit) tiles, with the shape-generic
small-tensor kernels turned off (``runtime.generic_max_elements`` 0: otherwise the small
shapes here would run those instead of the schedule), and which template LegalizeOps
picked, so a regression to the canonical fallback fails a test. Note: LegalizeOps
memoizes a template per signature, not per vector width, so the width is part of each
drawn case's shape (an equal shape at both widths would test the first width twice).
"""

from __future__ import annotations

import pytest
from e2e_helpers import assert_close_to_interpreter, build_and_run
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
import passes
from irkernel import transform
from irkernel.testing import random_inputs
from passes.topi.conv import conv_tile, scheduled_conv

def _config(bits: int) -> dict[str, int]:
    """Build settings: the vector width to tile for, and no shape-generic small kernels."""
    return {"topi.vector_bits": bits, "runtime.generic_max_elements": 0}


def _module(xs, ws, attrs, bias: bool = False, op: str = "conv") -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, "float32"), bb.param("w", ws, "float32")
    y = bb.call(op, x, w, **attrs)
    if bias:
        o = ws[0] if op == "conv" else ws[1] * attrs.get("groups", 1)
        y = bb.relu(bb.add(y, bb.param("b", (o,) + (1,) * (len(xs) - 2), "float32")))
    return ik.IRModule({"main": bb.finish([y])})


def schedule_of(mod: ik.IRModule) -> str:
    """Which conv template LegalizeOps chose: "gemm" (implicit GEMM: its register tile
    ``acc``), "gemv" (dot products: ``lanes``), "depthwise" (plane window: ``xpad`` and
    no ``acc``) or "canonical" (the te reduction)."""
    legal = passes.LegalizeOps()(mod)
    (script,) = [f.script() for f in legal.functions.values()
                 if isinstance(f, ik.tir.PrimFunc) and f.attrs["op_name"].startswith("conv")]
    if "acci = T.alloc_buffer" in script:
        return "gemm"
    if "lanes" in script:
        return "gemv"
    return "depthwise" if "xpad" in script else "canonical"


def _check(xs, ws, attrs, bits: int, bias: bool = False, seed: int = 0,
           op: str = "conv") -> None:
    """Build at ``bits``, check the GEMM was chosen and the result equals the interpreter.
    conv_transpose takes finite inputs: its reference skips the taps that fall outside the
    input, while every kernel multiplies them as zeros (0 * inf is NaN)."""
    mod = _module(xs, ws, attrs, bias, op)
    inputs = random_inputs(mod, seed=seed, special_values=op == "conv")
    with transform.PassContext(config=_config(bits)):
        assert schedule_of(mod) == "gemm", (xs, ws, attrs)
        got = build_and_run(mod, inputs)
    assert_close_to_interpreter(mod, inputs, got, op)


@st.composite
def forms(draw):
    """A grouped, 1-D, 2-D or 3-D conv with strides, dilations and asymmetric padding."""
    bits = draw(st.sampled_from([256, 512]))
    rank = draw(st.sampled_from([1, 1, 2, 2, 3]))
    cg = draw(st.integers(1, 5))
    og = draw(st.integers(1, 19))
    g = draw(st.sampled_from([1, 2, 3, 4, 8]))
    kernel = [draw(st.integers(1, 3 if rank == 3 else 5 - rank)) for _ in range(rank)]
    dil = [draw(st.integers(1, 2)) for _ in range(rank)]
    pads = [draw(st.integers(0, 3)) for _ in range(2 * rank)]
    strides = [draw(st.integers(1, 3)) for _ in range(rank)]
    top = {1: 70, 2: 12, 3: 6}[rank]
    sizes = [draw(st.integers(max(1, dil[a] * (kernel[a] - 1) + 1 - pads[a] - pads[rank + a]),
                              top)) for a in range(rank)]
    n = bits // 256  # the width is part of the shape (see the module docstring)
    attrs = {"strides": strides, "padding": pads, "dilation": dil, "groups": g}
    return bits, (n, cg * g, *sizes), (og * g, cg, *kernel), attrs


@settings(max_examples=40, deadline=None)
@given(case=forms(), bias=st.booleans(), seed=st.integers(0, 99))
def test_every_form_equals_the_interpreter(case, bias, seed) -> None:
    bits, xs, ws, attrs = case
    with transform.PassContext(config=_config(bits)):
        if schedule_of(_module(xs, ws, attrs, bias)) != "gemm":  # below MIN_WORK, or depthwise
            return
    _check(xs, ws, attrs, bits, bias, seed)


#: (input, weight, attrs): the forms of the issue, each small but above MIN_WORK.
FORMS = {
    "grouped g2": ((1, 8, 10, 10), (8, 4, 3, 3), {"groups": 2, "padding": [1, 1, 1, 1]}),
    "grouped g3 odd": ((1, 9, 9, 11), (15, 3, 3, 3), {"groups": 3, "padding": [1, 0, 2, 1]}),
    "grouped g4 strided": ((2, 16, 11, 9), (16, 4, 3, 3),
                           {"groups": 4, "strides": [2, 2], "padding": [1, 1, 1, 1]}),
    "grouped g8": ((1, 32, 7, 7), (32, 4, 3, 3), {"groups": 8, "padding": [1, 1, 1, 1]}),
    "grouped C/2": ((1, 12, 8, 8), (12, 2, 3, 3), {"groups": 6, "padding": [1, 1, 1, 1]}),
    "channel multiplier": ((1, 6, 12, 12), (12, 1, 3, 3), {"groups": 6}),
    "conv1d": ((1, 16, 100), (16, 16, 3), {"padding": [1, 1]}),
    "conv1d strided dilated": ((2, 6, 77), (10, 3, 5),
                               {"groups": 2, "strides": [2], "dilation": [3],
                                "padding": [4, 1]}),
    "conv1d long kernel": ((1, 4, 90), (8, 4, 11), {"padding": [5, 5]}),
    "conv1d direct": ((1, 8, 64), (8, 8, 1), {}),
    "conv3d": ((1, 3, 6, 7, 8), (5, 3, 3, 3, 3), {"padding": [1, 1, 1, 1, 1, 1]}),
    "conv3d strided grouped": ((1, 4, 7, 6, 9), (6, 2, 2, 3, 1),
                               {"groups": 2, "strides": [2, 1, 3], "padding": [0, 1, 1, 1, 0, 2]}),
    "dilated 3x3 d2": ((1, 8, 14, 14), (8, 8, 3, 3), {"dilation": [2, 2], "padding": [2, 2, 2, 2]}),
    "asymmetric pad": ((1, 8, 13, 12), (8, 8, 3, 3), {"padding": [0, 1, 2, 3]}),
    "odd channels 3->17": ((1, 3, 16, 16), (17, 3, 3, 3), {"padding": [1, 1, 1, 1]}),
    "17 channels, split tasks": ((1, 3, 5, 5), (17, 3, 3, 3), {"padding": [1, 1, 1, 1]}),
    "100 channels": ((1, 5, 9, 9), (100, 5, 3, 3), {"padding": [1, 1, 1, 1]}),
}


@st.composite
def transposed(draw):
    """A conv_transpose: 1-3 spatial axes, groups, strides, dilations, paddings, output
    padding (the output must not be cropped away)."""
    bits = draw(st.sampled_from([256, 512]))
    rank = draw(st.sampled_from([1, 2, 2, 3]))
    g = draw(st.sampled_from([1, 2, 3]))
    cg, og = draw(st.integers(2, 6)), draw(st.integers(2, 12))
    kernel = [draw(st.integers(1, 4 if rank < 3 else 2)) for _ in range(rank)]
    strides = [draw(st.integers(1, 3)) for _ in range(rank)]
    dil = [draw(st.integers(1, 2)) for _ in range(rank)]
    pads = [draw(st.integers(0, 2)) for _ in range(2 * rank)]
    extra = [draw(st.integers(0, s - 1)) for s in strides]
    sizes = [draw(st.integers(1, {1: 40, 2: 9, 3: 5}[rank])) for _ in range(rank)]
    attrs = {"strides": strides, "padding": pads, "dilation": dil, "groups": g,
             "output_padding": extra}
    return bits, (bits // 256, cg * g, *sizes), (cg * g, og, *kernel), attrs


@settings(max_examples=30, deadline=None)
@given(case=transposed(), bias=st.booleans(), seed=st.integers(0, 99))
def test_conv_transpose_equals_the_interpreter(case, bias, seed) -> None:
    bits, xs, ws, attrs = case
    try:
        mod = _module(xs, ws, attrs, bias, "conv_transpose")
    except ValueError:  # the paddings crop the whole output: not a case
        return
    with transform.PassContext(config=_config(bits)):
        if schedule_of(mod) != "gemm":  # below MIN_WORK
            return
    _check(xs, ws, attrs, bits, bias, seed, "conv_transpose")


#: conv_transpose forms: (input, weight [C, O/g, *K], attrs).
TRANSPOSED = {
    "2x2 s2": ((1, 16, 7, 7), (16, 8, 2, 2), {"strides": [2, 2]}),
    "3x3 s2 pad output_padding": ((1, 8, 6, 5), (8, 6, 3, 3),
                                  {"strides": [2, 2], "padding": [1, 1, 1, 1],
                                   "output_padding": [1, 1]}),
    "grouped 4x4 s2": ((1, 12, 5, 6), (12, 3, 4, 4),
                       {"groups": 4, "strides": [2, 2], "padding": [1, 1, 1, 1]}),
    "1-D k5 s3 d2": ((1, 6, 30), (6, 5, 5), {"strides": [3], "dilation": [2],
                                             "padding": [2, 3]}),
    "3-D 2x2x2 s2": ((1, 4, 3, 4, 5), (4, 6, 2, 2, 2), {"strides": [2, 2, 2]}),
    "stride 1 (a padded conv)": ((1, 5, 8, 8), (5, 17, 3, 3), {"padding": [1, 1, 1, 1]}),
}


@pytest.mark.parametrize("bits", [256, 512])
@pytest.mark.parametrize(("op", "name"), [*(("conv", n) for n in sorted(FORMS)),
                                          *(("conv_transpose", n) for n in sorted(TRANSPOSED))])
def test_each_form_is_scheduled_and_exact(op, name, bits) -> None:
    xs, ws, attrs = (FORMS if op == "conv" else TRANSPOSED)[name]
    xs = (xs[0] * {256: 2, 512: 3}[bits], *xs[1:])  # the width is part of the signature
    _check(xs, ws, attrs, bits, bias=True, seed=len(name), op=op)


def test_which_template_each_form_gets() -> None:
    """Depthwise convs keep the plane window, one-pixel 1x1 convs the dot products, tiny
    convs the canonical reduction; every other form the implicit GEMM."""
    for xs, ws, attrs in FORMS.values():
        assert schedule_of(_module(xs, ws, attrs)) == "gemm", (xs, ws, attrs)
    assert schedule_of(_module((1, 8, 9, 9), (8, 1, 3, 3), {"groups": 8})) == "depthwise"
    assert schedule_of(_module((1, 64, 1, 1), (32, 64, 1, 1), {})) == "gemv"
    assert schedule_of(_module((1, 2, 4, 4), (2, 2, 1, 1), {})) == "canonical"
    for xs, ws, attrs in TRANSPOSED.values():
        assert schedule_of(_module(xs, ws, attrs, op="conv_transpose")) == "gemm", (xs, ws)
    float64 = ik.GraphBuilder("main")
    x, w = float64.param("x", (1, 8, 9, 9), "float64"), float64.param("w", (8, 4, 3, 3), "float64")
    mod64 = ik.IRModule({"main": float64.finish([float64.conv(x, w, groups=2)])})
    assert schedule_of(mod64) == "gemm"


@pytest.mark.parametrize("bits", [256, 512])
def test_float64_grouped_conv(bits) -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (bits // 256, 6, 9, 8), "float64")
    w = bb.param("w", (9, 2, 3, 3), "float64")
    mod = ik.IRModule({"main": bb.finish([bb.conv(x, w, groups=3, padding=[1, 1, 1, 1])])})
    inputs = random_inputs(mod, seed=4)
    with transform.PassContext(config=_config(bits)):
        assert schedule_of(mod) == "gemm"
        got = build_and_run(mod, inputs)
    assert_close_to_interpreter(mod, inputs, got, "conv")


def test_tiles_fit_the_register_file() -> None:
    """Twelve accumulators with 16 registers, sixteen with 32; a group narrower than the
    tile takes its own width (no tail block), a wider one the fewest blocks' even share."""
    assert conv_tile(64, "float32", 256) == (6, 16)
    assert conv_tile(64, "float32", 512) == (8, 32)
    assert conv_tile(3, "float32", 512) == (3, 32)
    assert conv_tile(17, "float32", 512) == (6, 32)  # 6 + 6 + 5, not 8 + 8 + 1
    assert conv_tile(100, "float32", 256) == (6, 16)
    assert conv_tile(64, "float64", 256) == (6, 8)
    func = scheduled_conv((1, 16, 8, 8), (16, 4, 3, 3), 4, (1, 1), (1, 1), (1, 1), (1, 1),
                          (8, 8), bits=512)
    assert "T.alloc_buffer((4, 32)" in func.script()
