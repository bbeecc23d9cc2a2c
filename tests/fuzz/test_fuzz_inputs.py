"""Hypothesis over text, bytes, ``.npy`` headers and cached object files.

- text: valid printed modules mutated (characters and tokens deleted, inserted,
  replaced; lines swapped): ``ik.parse`` returns a module or raises ParseError,
  and a module it returns prints and verifies or raises a documented error;
- bytes: any file handed to ``irkernel verify`` ends in exit code 0 or 1;
- ``.npy``: headers with arbitrary descr, shape, order and data lengths:
  ``read_npy`` returns an array of the header's size or raises InputError;
- object files: mutated ELF objects: ``object_problem`` never raises, and the
  ones it accepts load in LLVM's JIT linker without killing the process.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import textwrap
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from fuzz_budget import budget
from hypothesis import given
from hypothesis import strategies as st

import irkernel as ik
from irkernel.cli import main
from irkernel.cli.npy import InputError, read_npy
from irkernel.testing import random_module
from runtime.objfile import expected_format, object_problem
from runtime.target import host

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED = (ik.IRError, TypeError, ValueError)
TOKENS = ["%0", "%x", "@main", "=", "graph", "param", "const", "add", "concat", "return", "{",
          "}", "[", "]", ",", ":", "float32[4]", "int64[]", "bool[2, 3]", "nan", "-inf", "1e309",
          "0x7fff", "99999999999999999999", "-1", "attrs", "global_symbol", "none", '"s"',
          "\n", " ", "\t", "\\", "\x00", "é", "float32[" + ", ".join(["1"] * 70) + "]"]


@cache
def texts() -> tuple[str, ...]:
    mods = [random_module(25, seed=s, shapes="small" if s % 2 else "scalar", call_funcs=s == 0,
                          const_fraction=0.3) for s in range(4)]
    return tuple(m.script() for m in mods)


@st.composite
def mutated_texts(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(texts()))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = min(len(text), i + draw(st.integers(0, 12)))
        how = draw(st.sampled_from(["delete", "insert", "replace", "swap"]))
        if how == "delete":
            text = text[:i] + text[j:]
        elif how == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        elif how == "replace":
            text = text[:i] + draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=6))) \
                + text[j:]
        else:
            lines = text.split("\n")
            a, b = (draw(st.integers(0, len(lines) - 1)) for _ in range(2))
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
    return text


@budget(300)
@given(mutated_texts())
def test_mutated_text_parses_or_raises_parse_error(text: str) -> None:
    try:
        mod = ik.parse(text)
    except ik.ParseError:
        return
    try:
        printed = mod.script()
        ik.verify(mod)
    except DOCUMENTED:
        return
    assert ik.structural_equal(ik.parse(printed), mod)


@budget(40)
@given(st.binary(max_size=300) | mutated_texts().map(lambda t: t.encode("utf-8", "replace")))
def test_any_bytes_to_the_cli_are_exit_0_or_1(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prog.ir"
        path.write_bytes(data)
        with open(os.devnull, "w") as sink:
            assert main(["verify", str(path)], out=sink) in (0, 1)


DESCRS = ["<f4", ">f4", "<f8", "<i4", "<i8", "|b1", "|u1", "<U3", "|O", "V8", "<c8",
          "[('a', '<f4')]", "{'names': ['a']}", "", "f4", "<f4 ", "<f3", "int", "<M8[s]"]


@st.composite
def npy_files(draw: st.DrawFn) -> bytes:
    shape = tuple(draw(st.lists(st.one_of(st.integers(0, 6), st.integers(-3, 2**64)),
                                max_size=4)))
    header = {"descr": draw(st.sampled_from(DESCRS)), "fortran_order": draw(st.booleans()),
              "shape": shape}
    text = repr(header) if draw(st.booleans()) else draw(st.text(max_size=40))
    body = text.encode("latin1", "replace")
    version = draw(st.sampled_from([(1, 0), (2, 0), (3, 0), (9, 9)]))
    pad = (-(10 + len(body) + 1)) % 64
    body = body + b" " * pad + b"\n"
    size_field = len(body).to_bytes(2 if version[0] == 1 else 4, "little")
    if draw(st.booleans()):  # a header length that lies
        size_field = draw(st.binary(min_size=len(size_field), max_size=len(size_field)))
    magic = b"\x93NUMPY" if draw(st.integers(0, 9)) else draw(st.binary(min_size=6, max_size=6))
    data = draw(st.binary(max_size=64))
    return magic + bytes(version) + size_field + body + data


@budget(300)
@given(npy_files())
def test_npy_headers_give_an_array_or_input_error(blob: bytes) -> None:
    with tempfile.NamedTemporaryFile(suffix=".npy") as fh:
        fh.write(blob)
        fh.flush()
        try:
            arr = read_npy(fh.name)
        except InputError:
            return
    assert isinstance(arr, np.ndarray)
    assert arr.nbytes <= len(blob)  # never more than the file held


@cache
def good_object() -> bytes:
    import importlib

    from irkernel.tir import script as T

    @T.prim_func
    def fuzzed(a: T.Buffer((8,), "float32"), out: T.Buffer((8,), "float32")):
        for i in T.serial(8):
            out[i] = a[i] + 1.0

    compile_module = importlib.import_module("runtime.compile")
    lower_module = importlib.import_module("runtime.lower")
    jit = importlib.import_module("runtime.jit")
    lowered = compile_module.lower_tir("fuzzed", fuzzed)
    return jit.compile_ir(lower_module.lower(lowered, "fuzzed", host(), False)).obj


@st.composite
def mutated_objects(draw: st.DrawFn) -> bytes:
    data = bytearray(good_object())
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.one_of(st.integers(0, 255), st.sampled_from([0, 1, 0x7F, 0x80, 0xFF])))
    if draw(st.integers(0, 4)) == 0:
        data = data[:draw(st.integers(0, len(data)))]
    return bytes(data)


LOADER = textwrap.dedent("""
    import os, sys
    from runtime.jit import Engine
    crashed = []
    for path in sys.argv[1:]:
        data = open(path, "rb").read()
        pid = os.fork()
        if pid == 0:
            try:
                Engine().add_objects([data])
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            crashed.append(os.path.basename(path))
    print(" ".join(crashed))
""")


@pytest.mark.skipif(expected_format(host().triple) is None, reason="objects are not ELF here")
def test_mutated_objects_are_rejected_or_load(tmp_path: Path) -> None:
    accepted: list[bytes] = []

    @budget(400)
    @given(mutated_objects())
    def check(data: bytes) -> None:
        problem = object_problem(data, "fuzzed", host().triple)  # must never raise
        assert problem is None or isinstance(problem, str)
        if problem is None and len(accepted) < 60:
            accepted.append(data)

    check()
    paths = []
    for k, data in enumerate(accepted):
        paths.append(tmp_path / f"m{k}.o")
        paths[-1].write_bytes(data)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", LOADER, *map(str, paths)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"accepted objects crashed the loader: {done.stdout}"


def test_good_object_passes() -> None:
    if expected_format(host().triple) is None:
        pytest.skip("objects are not ELF here")
    assert object_problem(good_object(), "fuzzed", host().triple) is None
    assert io.BytesIO(good_object()).read(4) == b"\x7fELF"
