"""The on-disk object cache: hits in a new process, corrupt entries, concurrent writers.

Subprocess tests run a small script that counts calls of the lowering and of
the LLVM compiler (by wrapping ``runtime.compile.lower_batch`` / ``compile_ir``), so
"the second process did not compile" is observed, not inferred from timing.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import runtime
from irkernel.tir import script as T
from runtime.cache import MAGIC, DiskCache, decode, encode

ROOT = Path(__file__).resolve().parents[2]
compile_module = importlib.import_module("runtime.compile")

SCRIPT = textwrap.dedent("""
    import importlib, json, sys, time
    import numpy as np
    import runtime
    b = importlib.import_module("runtime.compile")
    from irkernel.tir import script as T

    counts = {"lower": 0, "compile": 0}
    def counting(name, fn):
        def wrapped(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        return wrapped
    b.lower_batch = counting("lower", b.lower_batch)
    b.compile_ir = counting("compile", b.compile_ir)

    def make(k):
        @T.prim_func(name=f"scale{k}")
        def f(a: T.Buffer((64,), "float32"), out: T.Buffer((64,), "float32")):
            for i in T.vectorized(64):
                out[i] = a[i] * float(k) + 1.0
        return f

    ok = True
    start = time.perf_counter()
    for k in range(int(sys.argv[1])):
        ex = runtime.build(make(k))
        a = np.arange(64, dtype=np.float32)
        out = np.empty(64, np.float32)
        ex[f"scale{k}"](a, out)
        ok = ok and bool(np.array_equal(out, a * np.float32(k) + 1))
    elapsed = time.perf_counter() - start
    print(json.dumps({**counts, "ok": ok, "seconds": elapsed}))
""")


def _run(cache_dir: Path, kernels: int = 1) -> subprocess.Popen[str]:
    env = {**os.environ, "IRKERNEL_CACHE_DIR": str(cache_dir),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(kernels)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.rglob("*") if p.is_file())


def test_second_process_hits_the_cache(tmp_path: Path) -> None:
    first = _result(_run(tmp_path))
    assert first == {**first, "lower": 1, "compile": 1, "ok": True}
    assert {p.parent.parent.name for p in _entries(tmp_path)} == {"obj", "index"}
    second = _result(_run(tmp_path))
    assert second == {**second, "lower": 0, "compile": 0, "ok": True}


def test_concurrent_writers_are_safe(tmp_path: Path) -> None:
    procs = [_run(tmp_path, kernels=6) for _ in range(2)]
    results = [_result(p) for p in procs]
    assert all(r["ok"] for r in results)
    entries = _entries(tmp_path)
    assert len(entries) == 12  # one obj and one index entry per kernel; no temp files left
    assert all(decode(p.read_bytes()) is not None for p in entries)
    third = _result(_run(tmp_path, kernels=6))
    assert third == {**third, "lower": 0, "compile": 0, "ok": True}


@T.prim_func
def inc(a: T.Buffer((8,), "int32")):
    for i in T.serial(8):
        a[i] = a[i] + 1


@pytest.mark.parametrize("kind", ["obj", "index"])
@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_entries_are_detected_and_rebuilt(tmp_path: Path, kind: str, damage: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    cache = DiskCache(tmp_path)
    compiles: list[str] = []
    real = compile_module.compile_ir
    monkeypatch.setattr(compile_module, "compile_ir",
                        lambda text, *tier: compiles.append(text) or real(text, *tier))
    runtime.build(inc, cache=cache)
    assert len(compiles) == 1
    (entry,) = [
        p for p in (tmp_path / kind).rglob("*") if p.is_file()]
    data = entry.read_bytes()
    entry.write_bytes({"truncate": data[: len(data) // 2],
                       "flip": data[:-1] + bytes([data[-1] ^ 0xFF]),
                       "garbage": b"not a cache file"}[damage])
    a = np.zeros(8, np.int32)
    runtime.build(inc, cache=cache)["inc"](a)  # detected, rebuilt, correct
    np.testing.assert_array_equal(a, 1)
    assert len(compiles) == (2 if kind == "obj" else 1)  # a bad index entry re-lowers only
    assert decode(entry.read_bytes()) is not None  # rewritten intact
    runtime.build(inc, cache=cache)
    assert len(compiles) == (2 if kind == "obj" else 1)


def test_entry_format_and_unwritable_directory(tmp_path: Path) -> None:
    payload = b"\x00object code\xff"
    data = encode(payload)
    assert data.startswith(MAGIC) and decode(data) == payload
    assert decode(data + b"x") is None and decode(data[:10]) is None
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    cache = DiskCache(blocked)
    cache.put("obj", "abc123", payload)  # only logs
    assert cache.get("obj", "abc123") is None
    with pytest.raises(ValueError, match="bad entry"):
        cache.path("obj", "../escape")


def test_cache_directory_from_the_environment(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IRKERNEL_CACHE_DIR", str(tmp_path / "here"))
    assert runtime.default_directory() == tmp_path / "here"
    assert DiskCache().directory == tmp_path / "here"
    monkeypatch.delenv("IRKERNEL_CACHE_DIR")
    assert runtime.default_directory() == Path.home() / ".cache" / "irkernel"
