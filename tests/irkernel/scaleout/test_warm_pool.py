"""The warm pool of ``engine="local"``: reused across calls, resized, made again when broken,
closed by ``shutdown()`` and at interpreter exit; ``Engine.submit`` and its errors.

Tasks are library functions (``operator``, ``os``, ``time``) so that worker
processes import them by name.
"""

from __future__ import annotations

import operator
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from irkernel import scaleout, testing, transform
from irkernel.scaleout import TaskError, WorkerLostError, open_engine

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def fresh_pool():
    """Each test starts without a warm pool and leaves none behind."""
    scaleout.shutdown()
    yield
    scaleout.shutdown()


def _pids(eng: scaleout.Engine, n: int = 8) -> set[int]:
    return set(eng.run(os.getpid, [()] * n))


def _closed(executor) -> bool:
    try:
        executor.submit(operator.add, 1, 1).cancel()
    except RuntimeError:  # "cannot schedule new futures after shutdown"
        return True
    return False


def test_local_engines_reuse_one_warm_pool_and_its_workers(fresh_pool):
    with open_engine("local", max_workers=2) as eng:
        first, pids = eng.executor, _pids(eng)
    assert scaleout.warm_pool() is first and not _closed(first)  # closing gave it back
    with open_engine("local", max_workers=2) as eng:
        assert eng.executor is first
        # the same worker processes: the executor starts workers on demand, so the first
        # call may have used one of the two; no call starts a third
        assert len(_pids(eng) | pids) <= 2
    assert os.getpid() not in pids


def test_map_modules_local_reuses_the_warm_pool(fresh_pool):
    mods = [testing.random_module(2000, seed=s) for s in range(4)]
    want = transform.map_modules("O2", mods, engine="serial")
    first = transform.map_modules("O2", mods, engine="local", max_workers=2)
    pool = scaleout.warm_pool()
    assert pool is not None
    second = transform.map_modules("O2", mods, engine="local", max_workers=2)
    assert scaleout.warm_pool() is pool
    import irkernel as ik

    for a, b, c in zip(want, first, second, strict=True):
        assert ik.structural_equal(a, b) and ik.structural_equal(a, c)


def test_shutdown_closes_the_pool_and_the_next_call_opens_another(fresh_pool):
    with open_engine("local", max_workers=1) as eng:
        old = eng.executor
    scaleout.shutdown()
    assert scaleout.warm_pool() is None
    assert _closed(old)
    with open_engine("local", max_workers=1) as eng:
        assert eng.executor is not old
        assert eng.run(operator.add, [(1, 2)]) == [3]
    scaleout.shutdown()
    scaleout.shutdown()  # closing twice is harmless


def test_another_size_starts_another_pool(fresh_pool):
    with open_engine("local", max_workers=1) as eng:
        one = eng.executor
    with open_engine("local", max_workers=2) as eng:
        assert eng.executor is not one and eng.workers == 2
    assert _closed(one)


def test_a_pool_replaced_while_in_use_closes_when_its_user_does(fresh_pool):
    old = open_engine("local", max_workers=1)
    try:
        with open_engine("local", max_workers=2) as new:
            assert new.executor is not old.executor
        scaleout.shutdown()
        assert old.run(operator.mul, [(6, 7)]) == [42]  # still usable by its engine
        assert not _closed(old.executor)
    finally:
        old.close()
    assert _closed(old.executor)


def test_a_broken_pool_is_made_again(fresh_pool):
    with open_engine("local", max_workers=1) as eng:
        [pid] = eng.run(os.getpid, [()])
        broken = eng.executor
        killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
        killer.start()
        try:
            out = eng.run(time.sleep, [(60,)], on_error="return")
        finally:
            killer.cancel()
    assert isinstance(out[0], WorkerLostError)
    with open_engine("local", max_workers=1) as eng:
        assert eng.executor is not broken
        assert eng.run(operator.add, [(2, 2)]) == [4]


def test_interpreter_exit_closes_the_warm_pool():
    code = ("import os, irkernel.scaleout as s\n"
            "eng = s.open_engine('local', max_workers=1)\n"
            "print(eng.run(os.getpid, [()])[0])\n")  # exits without closing anything
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


# ---------------------------------------------------------------------------
# Engine.submit: one task at a time (what runtime.build's compiler uses)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["serial", "thread", "local"])
def test_submit_returns_a_future_with_the_engines_errors(name):
    with open_engine(name, max_workers=2) as eng:
        good = eng.submit(operator.mul, 6, 7)
        bad = eng.submit(operator.truediv, 1, 0)
        assert good.result() == 42 and good.done()
        assert (good.index, bad.index) == (0, 1)
        with pytest.raises(TaskError, match=r"task 1 failed .*ZeroDivisionError") as info:
            bad.result()
        assert "ZeroDivisionError" in info.value.traceback
        with pytest.raises(TaskError):  # the outcome is kept, not collected again
            bad.result()


def test_submit_to_a_lost_worker_raises_worker_lost_error(fresh_pool):
    with open_engine("local", max_workers=1) as eng:
        future = eng.submit(os._exit, 3)
        with pytest.raises(WorkerLostError, match="task 0 failed"):
            future.result()


def test_a_task_that_does_not_pickle_fails_alone_on_submit():
    with open_engine("thread") as eng:  # in process: nothing to pickle, it runs
        assert eng.submit(operator.call, lambda: 5).result() == 5
    with scaleout.local_executor(1) as pool, open_engine(pool) as eng:
        future = eng.submit(operator.call, lambda: 5)
        assert future.done()
        with pytest.raises(TaskError, match="pickling the task"):
            future.result()


def test_on_worker_start_needs_a_callable():
    with pytest.raises(TypeError, match="on_worker_start: fn must be callable"):
        scaleout.on_worker_start(42)
