"""The TIR integer dot product ``dot4_u8s8``: every lowering (VNNI, the split
vpmaddubsw/vpmaddwd of AVX-512BW, AVX2 and SSSE3, portable int32) gives the
interpreter's bits, extremes included (255 x -128 pairs, the wrapping final add)."""

from __future__ import annotations

import numpy as np
import pytest

import runtime
from irkernel import transform
from irkernel.target import host_target
from irkernel.tir import script as T
from irkernel.tir.interp import run
from runtime.int_dot import dot_paths

_ORDER = ("sse4.2", "avx2", "avx512")
LEVELS = [lv for lv in _ORDER if _ORDER.index(lv) <= _ORDER.index(host_target().isa)]


def _kernel(lanes: int):
    @T.prim_func
    def dot(a: T.Buffer((4,), "uint8"), b: T.Buffer((4 * lanes,), "int8"),
            c: T.Buffer((lanes,), "int32"), out: T.Buffer((lanes,), "int32")):
        out[T.ramp(0, 1, lanes)] = T.dot4_u8s8(c[T.ramp(0, 1, lanes)], a[T.ramp(0, 1, 4)],
                                              b[T.ramp(0, 1, 4 * lanes)])
    return dot


def _operands(lanes: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, 4).astype(np.uint8)
    b = rng.integers(-128, 128, 4 * lanes).astype(np.int8)
    c = rng.integers(-2**31, 2**31, lanes).astype(np.int32)
    if seed == 0:  # the saturating case of a plain vpmaddubsw, and the int32 wrap
        a[:] = 255
        b[:8] = -128
        c[0] = 2**31 - 1
    return a, b, c


def _expected(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    total = c.astype(np.int64) + (b.reshape(-1, 4).astype(np.int64) * a.astype(np.int64)).sum(1)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)


@pytest.mark.parametrize("lanes", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("level", ["host", *LEVELS])
def test_every_lowering_gives_the_interpreters_bits(level: str, lanes: int) -> None:
    with transform.PassContext(config={"target": level}):
        ex = runtime.build(_kernel(lanes))
    for seed in range(3):
        a, b, c = _operands(lanes, seed)
        want = _expected(a, b, c)
        interp = np.zeros(lanes, np.int32)
        run(_kernel(lanes), a, b, c, interp)
        np.testing.assert_array_equal(interp, want)
        out = np.zeros(lanes, np.int32)
        ex["dot"](a, b, c, out)
        np.testing.assert_array_equal(out, want)


def test_the_lowering_uses_the_native_instructions() -> None:
    asm = {}
    for level in ("host", *LEVELS):
        with transform.PassContext(config={"target": level}):
            asm[level] = runtime.build(_kernel(16)).get_source("asm")
    if "avx2" in asm:
        assert "vpmaddubsw" in asm["avx2"] and "vpmaddwd" in asm["avx2"]
        assert "zmm" not in asm["avx2"] and "vpdpbusd" not in asm["avx2"]
    if host_target().vnni:
        assert "vpdpbusd" in asm["host"]


def test_paths_follow_the_features() -> None:
    none = dot_paths("generic", lambda f: False)
    assert none == {}
    assert dot_paths("x86-64-v3", lambda f: False) == {8: "pmadd", 4: "pmadd"}
    assert dot_paths("x86-64-v4", lambda f: False)[16] == "pmadd"
    vnni = dot_paths("znver4", lambda f: f in ("avx512vnni", "avx512vl", "avx512bw"))
    assert vnni == {16: "vnni", 8: "vnni", 4: "vnni"}
    assert dot_paths("x", lambda f: f in ("avxvnni", "avx2"))[8] == "avxvnni"


def test_operand_types_are_checked() -> None:
    acc = T.broadcast(T.int32(0), 8)
    with pytest.raises(TypeError, match="int8x32"):
        T.dot4_u8s8(acc, T.broadcast(T.cast("uint8", T.int32(1)), 4),
                    T.broadcast(T.cast("int8", T.int32(1)), 16))
    with pytest.raises(TypeError, match="uint8x4"):
        T.dot4_u8s8(acc, T.broadcast(T.cast("int8", T.int32(1)), 4),
                    T.broadcast(T.cast("int8", T.int32(1)), 32))
