"""Issue 28: a tampered cache must never hang, crash or run the wrong kernel.

The reproducer: the index payloads of one build rotated among their keys (each
entry keeps a valid header and checksum). A new process building the same
module bound every kernel to another kernel's code: wrong results, or reads
of argument slots that are not there (a loop bound from garbage: 100% CPU for
minutes). Index entries now name the key they were written for and the
object's sha256, and the loader checks each symbol's ABI record.

``hostile_cache_states.py`` then checks over 200 hostile states in one child
process (a hang or a crash there fails this test, with the state it was in).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from runtime.cache import decode

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

BUILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import runtime
    from hostile_cache_states import SMALL, check_small
    check_small(runtime.build(SMALL))
    print("ok")
""")


def _run(args: list[str], cache_dir: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "IRKERNEL_CACHE_DIR": str(cache_dir),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, timeout=timeout,
                          capture_output=True, text=True, check=False)


def test_reproducer_rotated_index_payloads(tmp_path: Path) -> None:
    first = _run(["-c", BUILD, str(HERE)], tmp_path, 240)
    assert first.returncode == 0, first.stderr
    files = sorted(p for p in (tmp_path / "index").rglob("*") if p.is_file())
    assert len(files) == 4
    payloads = [f.read_bytes() for f in files]
    for path, data in zip(files, payloads[1:] + payloads[:1], strict=True):
        path.write_bytes(data)  # header and sha256 stay valid
    assert all(decode(f.read_bytes()) is not None for f in files)
    runs = [_run(["-c", BUILD, str(HERE)], tmp_path, 120) for _ in range(2)]  # hung before
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ok"
    assert runs[0].stderr.count("was written for key") == 4  # each one dropped, rebuilt
    assert "was written for key" not in runs[1].stderr


def test_hostile_cache_states(tmp_path: Path) -> None:
    try:
        done = _run([str(HERE / "hostile_cache_states.py"), str(tmp_path)], tmp_path, 300)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        last = out.strip().splitlines()[-1:] or ["(before the first state)"]
        raise AssertionError(f"a build hung in {last[0]}") from None
    last = done.stdout.strip().splitlines()[-1:] or [""]
    assert done.returncode == 0, f"{last[0]}\n{done.stderr[-3000:]}"
    summary = re.fullmatch(r"checked (\d+) dropped (\d+) abi (\d+)", last[0])
    assert summary is not None, last[0]
    checked, dropped, abi = map(int, summary.groups())
    assert checked >= 200
    assert dropped >= checked  # every state but the identity permutation had a bad entry
    assert abi >= 24  # forged entries: caught by the loader's ABI record check
