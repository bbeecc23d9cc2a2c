"""Engines: resolving ``engine=``, results in task order, errors with the worker's traceback,
a killed worker is an error (never a hang), the in-flight window, cancellation.

Tasks are library functions (``operator``, ``os``, the pipeline parser) so that
worker processes import them by name.
"""

from __future__ import annotations

import concurrent.futures as cf
import operator
import os
import signal
import threading
import time

import pytest

from irkernel import scaleout, transform
from irkernel.scaleout import (
    Engine,
    RemoteError,
    SerialEngine,
    TaskError,
    WorkerLostError,
    open_engine,
)


@pytest.fixture(scope="module")
def pool():
    """One warm local pool for the module (starting processes is the slow part)."""
    with scaleout.local_executor(2) as executor:
        yield executor


@pytest.fixture(params=["serial", "thread", "pool"])
def engine(request, pool):
    return pool if request.param == "pool" else request.param


def test_named_engines_and_their_properties():
    with open_engine("serial") as eng:
        assert isinstance(eng, SerialEngine)
        assert (eng.in_process, eng.workers) == (True, 1)
    with open_engine("thread", max_workers=3) as eng:
        assert (eng.name, eng.in_process, eng.workers) == ("thread", True, 3)
    with open_engine("local", max_workers=1) as eng:
        assert (eng.name, eng.in_process, eng.workers) == ("local", False, 1)
        assert eng.executor._mp_context.get_start_method() == scaleout.start_method()


def test_start_method_is_never_fork():
    assert scaleout.start_method() in ("forkserver", "spawn")


def test_existing_executors_are_borrowed_not_closed(pool):
    with open_engine(pool) as eng:
        assert (eng.name, eng.in_process) == ("executor", False)
    assert pool.submit(operator.add, 1, 2).result() == 3  # still usable
    with cf.ThreadPoolExecutor(2) as threads, open_engine(threads) as eng:
        assert (eng.name, eng.in_process) == ("thread", True)


@pytest.mark.parametrize(("engine_arg", "error", "match"), [
    ("processes", ValueError, "unknown engine 'processes'.*'serial', 'thread', 'local'"),
    (42, TypeError, "engine must be one of"),
    (object(), TypeError, "got object"),
])
def test_bad_engine_is_named(engine_arg, error, match):
    with pytest.raises(error, match=match):
        open_engine(engine_arg)


@pytest.mark.parametrize(("workers", "error"), [(0, ValueError), (True, TypeError),
                                                (1.5, TypeError)])
def test_bad_max_workers(workers, error):
    with pytest.raises(error, match="max_workers"):
        open_engine("thread", max_workers=workers)


def test_results_come_back_in_task_order(engine):
    with open_engine(engine, max_workers=2) as eng:
        assert eng.run(operator.mul, [(i, i) for i in range(30)]) == [i * i for i in range(30)]


def test_a_failing_task_names_its_index_and_carries_the_worker_traceback(engine):
    tasks = [(1, 1), (1, 0), (6, 3), (2, 0)]
    with open_engine(engine, max_workers=2) as eng:
        out = eng.run(operator.truediv, tasks, on_error="return")
        assert (out[0], out[2]) == (1.0, 2.0)
        for index in (1, 3):
            err = out[index]
            assert isinstance(err, TaskError)
            assert err.index == index
            assert isinstance(err.exception, ZeroDivisionError)
            assert err.__cause__ is err.exception
            assert "ZeroDivisionError" in err.traceback
            assert err.worker.rsplit(":", 1)[1].isdigit()  # host:pid
            assert f"task {index} failed on {err.worker}" in str(err)
        with pytest.raises(TaskError, match=r"task 1 failed .*ZeroDivisionError") as info:
            eng.run(operator.truediv, tasks)
        assert info.value.index == 1


def test_exception_that_does_not_pickle_comes_back_as_remote_error(pool):
    with open_engine(pool) as eng:
        [err] = eng.run(transform.parse_pipeline, [("FoldConstant,(",)], on_error="return")
    assert isinstance(err.exception, RemoteError)
    assert err.exception.type_name == "PipelineParseError"
    assert "PipelineParseError" in err.traceback


def test_a_killed_worker_is_a_worker_lost_error_not_a_hang():
    with open_engine("local", max_workers=1) as eng:
        [pid] = eng.run(os.getpid, [()])
        killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
        killer.start()
        try:
            out = eng.run(time.sleep, [(60,), (0,)], on_error="return")
        finally:
            killer.cancel()
    assert all(isinstance(err, WorkerLostError) for err in out)
    assert "BrokenProcessPool" in str(out[0])
    with pytest.raises(WorkerLostError, match="task 0 failed"):
        raise out[0]


def test_a_worker_exiting_is_a_worker_lost_error():
    with open_engine("local", max_workers=1) as eng, pytest.raises(WorkerLostError):
        eng.run(os._exit, [(3,)])


class _Counting(Engine):
    """Runs tasks when collected and records how many were in flight."""

    name = "counting"
    in_process = True

    def __init__(self, window):
        super().__init__(1, window=window)
        self.in_flight = 0
        self.peak = 0
        self.cancelled = 0

    def _submit(self, fn, *args):
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        return fn, args

    def _result(self, handle):
        self.in_flight -= 1
        fn, args = handle
        return fn(*args)

    def _cancel(self, handles):
        self.cancelled += len(handles)


def test_window_bounds_tasks_in_flight():
    eng = _Counting(window=3)
    assert eng.run(operator.add, [(i, 1) for i in range(10)]) == list(range(1, 11))
    assert eng.peak == 3


def test_raise_cancels_the_tasks_not_collected():
    eng = _Counting(window=4)
    with pytest.raises(TaskError):
        eng.run(operator.truediv, [(1, 0)] + [(1, 1)] * 9)
    assert eng.cancelled == 3


def test_bad_on_error():
    with pytest.raises(ValueError, match="on_error must be 'raise' or 'return'"):
        SerialEngine().run(operator.add, [], on_error="ignore")


def test_task_error_pickles_with_its_fields():
    import pickle

    err = TaskError("module 2", 2, ValueError("bad"), "Traceback ...", "host:1")
    back = pickle.loads(pickle.dumps(err))
    assert (back.label, back.index, back.traceback, back.worker) == ("module 2", 2,
                                                                    "Traceback ...", "host:1")
    assert str(back) == str(err)


def test_core_imports_without_dask():
    import subprocess
    import sys

    code = ("import sys; import irkernel, irkernel.scaleout; "
            "assert not {'distributed', 'dask', 'ray'} & set(sys.modules); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


# ---------------------------------------------------------------------------
# shared-memory transport of a process pool
# ---------------------------------------------------------------------------


def test_large_tasks_and_results_travel_through_ram_files(pool):
    import numpy as np

    from irkernel.scaleout import shared_files

    if shared_files.ram_directory() is None:
        pytest.skip("no /dev/shm on this platform")
    big = np.arange(1 << 18, dtype=np.int64)
    with open_engine(pool) as eng:
        directory = eng._ram_dir
        assert os.path.isdir(directory)
        out = eng.run(np.negative, [(big,), (big[:10],)])
        assert os.listdir(directory) == []  # every file was unlinked once mapped
    np.testing.assert_array_equal(out[0], -big)
    np.testing.assert_array_equal(out[1], -big[:10])
    assert not os.path.exists(directory)


def test_ram_file_write_failure_falls_back_to_none(tmp_path):
    import numpy as np

    from irkernel.scaleout.shared_files import write_shared

    buffers = [np.zeros(1 << 17, np.uint8)]
    assert write_shared(b"h", buffers, str(tmp_path / "missing" / "f")) is None
    assert write_shared(b"h", [np.zeros(8, np.uint8)], str(tmp_path / "small")) is None
    shared = write_shared(b"h", [*buffers, np.ones(3, np.uint8)], str(tmp_path / "f"))
    arrays = shared.buffers()
    assert [a.nbytes for a in arrays] == [1 << 17, 3]
    assert not arrays[0].flags.writeable
    assert not (tmp_path / "f").exists()  # unlinked once mapped
