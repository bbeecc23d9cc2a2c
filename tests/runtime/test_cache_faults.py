"""Faults the on-disk cache survives (issue 14, reproducers 3 and 4, and the threat model).

- an ``obj`` entry with a valid header and sha256 whose payload is not an object
  file: every later build died with SIGSEGV inside llvmlite;
- a FIFO in place of an entry: ``runtime.build`` blocked forever;
- a process that dies while loading an entry: the next one quarantines it;
- symlinks and devices, index entries that name no key, a directory owned by
  someone else, the 0700 mode of a new directory.

"The same two builds finish with exit 0": each case runs two builds, each in a
fresh process (a crash or a hang there can not take the test run down).
"""

from __future__ import annotations

import importlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import runtime
from irkernel.tir import script as T
from runtime.cache import DiskCache, decode, encode
from runtime.objfile import expected_format, object_problem
from runtime.target import host

ROOT = Path(__file__).resolve().parents[2]
compile_module = importlib.import_module("runtime.compile")

BUILD = textwrap.dedent("""
    import sys
    import numpy as np
    import runtime
    from irkernel.tir import script as T

    @T.prim_func
    def twice(a: T.Buffer((8,), "float32"), out: T.Buffer((8,), "float32")):
        for i in T.serial(8):
            out[i] = a[i] * 2.0

    if len(sys.argv) > 1 and sys.argv[1] == "crash-while-loading":
        import os, pathlib, signal
        import runtime.jit as jit
        add = jit.Engine.add_objects
        def crash(self, objects):  # only while a cache entry is being loaded
            if list(pathlib.Path(os.environ["IRKERNEL_CACHE_DIR"]).rglob("*.loading-*")):
                os.kill(os.getpid(), signal.SIGSEGV)
            add(self, objects)
        jit.Engine.add_objects = crash
    out = np.empty(8, np.float32)
    runtime.build(twice)["twice"](np.arange(8, dtype=np.float32), out)
    assert (out == 2 * np.arange(8)).all()
    print("ok")
""")


def _build(cache_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IRKERNEL_CACHE_DIR": str(cache_dir),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", BUILD, *args], cwd=ROOT, env=env, timeout=240,
                          capture_output=True, text=True, check=False)


def _obj_entry(cache_dir: Path) -> Path:
    (entry,) = [p for p in (cache_dir / "obj").rglob("*")
                if p.is_file() and ".loading-" not in p.name]
    return entry


def _symbol(cache_dir: Path) -> str:
    """The kernel's symbol, from its index entry (``<key> <batch key> <symbol> <sha256>``)."""
    (index,) = [p for p in (cache_dir / "index").rglob("*") if p.is_file()]
    payload = decode(index.read_bytes())
    assert payload is not None
    return payload.decode().split()[2]


@pytest.fixture
def warm(tmp_path: Path) -> Path:
    """A cache directory holding the entries of one build."""
    first = _build(tmp_path)
    assert first.returncode == 0, first.stderr
    return tmp_path


def test_reproducer_3_valid_checksum_but_not_an_object(warm: Path) -> None:
    entry = _obj_entry(warm)
    symbol = _symbol(warm)
    entry.write_bytes(encode(b"\x7fELF" + bytes(200)))  # header and sha256 are right
    for index in (warm / "index").rglob("*"):  # else the index's object sha256 refuses it
        if index.is_file():
            index.unlink()
    runs = [_build(warm) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ok"
    assert "holds a bad payload (malformed ELF" in runs[0].stderr  # found, removed, rebuilt
    assert "bad payload" not in runs[1].stderr
    rebuilt = decode(entry.read_bytes())
    assert rebuilt is not None
    assert object_problem(rebuilt, symbol, host().triple) is None


def test_reproducer_4_a_fifo_in_place_of_an_entry(warm: Path) -> None:
    entry = _obj_entry(warm)
    entry.unlink()
    os.mkfifo(entry)
    runs = [_build(warm) for _ in range(2)]  # blocked forever before (the timeout fails)
    for done in runs:
        assert done.returncode == 0, done.stderr
    assert "is a FIFO, not a regular file; removing it" in runs[0].stderr
    assert stat.S_ISREG(os.lstat(entry).st_mode)  # removed, rebuilt as a regular file


def test_a_process_that_dies_loading_an_entry_kills_only_itself(warm: Path) -> None:
    crashed = _build(warm, "crash-while-loading")
    assert crashed.returncode == -signal.SIGSEGV
    entry = _obj_entry(warm)
    assert len(list(entry.parent.glob(f"{entry.name}.loading-*"))) == 1  # left behind
    runs = [_build(warm) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr
    assert "a process died while loading cache entry" in runs[0].stderr
    assert "died while loading" not in runs[1].stderr
    assert [p.name for p in (warm / "quarantine").iterdir()] == [f"obj-{entry.name}"]
    assert not list(warm.rglob("*.loading-*"))


@T.prim_func
def inc(a: T.Buffer((8,), "int32")):
    for i in T.serial(8):
        a[i] = a[i] + 1


def test_symlinks_and_bad_index_entries_are_dropped(tmp_path: Path, caplog) -> None:
    cache = DiskCache(tmp_path / "c")
    runtime.build(inc, cache=cache)
    index = next(p for p in (tmp_path / "c" / "index").rglob("*") if p.is_file())
    index.write_bytes(encode(b"../../etc/passwd"))
    obj = _obj_entry(tmp_path / "c")
    target = tmp_path / "elsewhere"
    target.write_bytes(obj.read_bytes())
    obj.unlink()
    obj.symlink_to(target)
    a = np.zeros(8, np.int32)
    runtime.build(inc, cache=cache)["inc"](a)
    np.testing.assert_array_equal(a, 1)
    assert "does not hold an object key" in caplog.text
    key = decode(index.read_bytes()).decode().split()[1]  # type: ignore[union-attr]
    cache.path("obj", key)
    assert cache.get("obj", key) is not None
    obj.unlink()
    obj.symlink_to(target)
    assert cache.get("obj", key) is None
    assert "is a symbolic link" in caplog.text
    assert not obj.is_symlink()  # the link went ...
    assert target.exists()  # ... not what it named


def test_new_directories_are_private_and_foreign_ones_refused(tmp_path: Path, caplog) -> None:
    cache = DiskCache(tmp_path / "new" / "cache")
    cache.put("obj", "abc123", b"payload")
    for d in (tmp_path / "new" / "cache", tmp_path / "new" / "cache" / "obj"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    if os.getuid() != 0:
        pytest.skip("needs root to hand a directory to another user")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    os.chown(foreign, 65534, 65534)
    refused = DiskCache(foreign)
    assert not refused.usable
    assert "owned by another user" in caplog.text
    a = np.zeros(8, np.int32)
    runtime.build(inc, cache=refused)["inc"](a)  # builds without a cache
    np.testing.assert_array_equal(a, 1)
    assert not list(foreign.iterdir())


def test_object_check_rules() -> None:
    triple = host().triple
    if expected_format(triple) is None:
        pytest.skip("objects of this host are not ELF")
    src = compile_module.lower_tir("inc", inc)
    obj = compile_module.compile_ir(compile_module.lower(src, "inc", host(), False)).obj
    assert object_problem(obj, "inc", triple) is None
    assert object_problem(obj, "other", triple) == "symbol 'other' is not defined"
    assert object_problem(b"MZ" + obj[2:], "inc", triple) == "not an ELF file (bad magic)"
    assert "expected EM_AARCH64" in (object_problem(obj, "inc", "aarch64-unknown-linux-gnu")
                                     or "")
    assert "not ELF" in (object_problem(obj, "inc", "x86_64-apple-darwin") or "")
    assert "section" in (object_problem(obj[:100], "inc", triple) or "")
