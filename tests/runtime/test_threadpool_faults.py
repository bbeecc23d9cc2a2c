"""The parallel-loop pool under faults (issue 28 part 5): a KeyboardInterrupt or another
exception on the launching thread, a launching Python thread that dies, and a fork
while another thread launches all leave the pool able to run the next launch, with
every iteration run exactly once.

A launch is native code: nothing can stop it half way in Python, so each fault lands
between the launch's return and the next bytecode; what must hold is that the pool's
lock is free and no chunk of the old launch is left for the next one.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

import numpy as np
import pytest

import runtime
from irkernel.tir import script as T
from runtime import threadpool

N = 64
#: Inner iterations per element: a launch takes tens of milliseconds.
REPS = 200_000


@pytest.fixture(autouse=True)
def _two_threads():
    previous = runtime.get_num_threads()
    runtime.set_num_threads(2)
    yield
    runtime.set_num_threads(previous)


@pytest.fixture(scope="module")
def slow_kernel():
    @T.prim_func(name="slow_parallel")
    def slow(out: T.Buffer((N,), "float64"), hits: T.Buffer((N,), "int64")):
        for i in T.parallel(N):
            for j in T.serial(REPS):
                out[i] = out[i] * 0.999999 + 1.0
            hits[i] = hits[i] + 1

    return runtime.build(slow, cache=False)["slow_parallel"]


def _check_pool_works(kernel) -> None:
    """One launch after the fault: every iteration once, the same value everywhere."""
    out, hits = np.zeros(N), np.zeros(N, np.int64)
    kernel(out, hits)
    np.testing.assert_array_equal(hits, 1)
    assert np.all(out == out[0]) and out[0] > 0


def _launch_until(kernel, stop: threading.Event, counter: list[int]) -> None:
    out, hits = np.zeros(N), np.zeros(N, np.int64)
    while not stop.is_set():
        kernel(out, hits)
        counter[0] += 1


def test_keyboard_interrupt_during_launches(slow_kernel) -> None:
    out, hits = np.zeros(N), np.zeros(N, np.int64)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    launches = 0
    try:
        with pytest.raises(KeyboardInterrupt):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                slow_kernel(out, hits)
                launches += 1
    finally:
        timer.cancel()
    # the interrupted launch finished whole (the interrupt may land before the count)
    assert np.all(hits == hits[0]) and hits[0] in (launches, launches + 1), (hits, launches)
    _check_pool_works(slow_kernel)


def wait_child(pid: int, what: str, timeout: float = 120.0) -> int:
    """The exit code of forked child ``pid``; the test fails (naming ``what``) and the
    child is killed when it runs longer than ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung {what}")
        time.sleep(0.02)


def _raise_in(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                      ctypes.py_object(exc_type))
    assert done == 1


@pytest.mark.parametrize("exc_type", [ValueError, KeyboardInterrupt])
def test_a_launching_thread_that_dies_mid_launch(slow_kernel, exc_type) -> None:
    """An exception delivered to a Python thread inside a launch kills the thread as
    the launch returns; the pool serves the next launch from another thread."""
    stop, counter, died = threading.Event(), [0], []

    def work() -> None:
        try:
            _launch_until(slow_kernel, stop, counter)
        except BaseException as exc:  # NOTE: recorded: the death is what is tested
            died.append(type(exc))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    time.sleep(0.15)  # inside a launch (each takes tens of ms)
    _raise_in(thread, exc_type)
    thread.join(60)
    stop.set()
    assert not thread.is_alive()
    assert died == [exc_type]
    _check_pool_works(slow_kernel)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_while_another_thread_launches(slow_kernel) -> None:
    """The child is forked while the parent's pool runs a launch (busy, workers mid-chunk);
    the child has neither, and its own launches run every iteration once."""
    stop, counter = threading.Event(), [0]
    thread = threading.Thread(target=_launch_until, args=(slow_kernel, stop, counter),
                              daemon=True)
    thread.start()
    time.sleep(0.15)
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only when its launches ran completely
        code = 1
        try:
            for _ in range(3):
                _check_pool_works(slow_kernel)
            code = 0
        finally:
            os._exit(code)
    try:
        assert wait_child(pid, "in a parallel loop") == 0
    finally:
        stop.set()
        thread.join(60)
    _check_pool_works(slow_kernel)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_fork_while_another_thread_sets_the_thread_count(slow_kernel) -> None:
    """The pool's Python lock is not inherited held: the child can read and set the count."""
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            runtime.set_num_threads(2)
            threadpool.get_num_threads()

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        for _ in range(20):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    runtime.set_num_threads(2)
                    _check_pool_works(slow_kernel)
                    code = 0
                finally:
                    os._exit(code)
            assert wait_child(pid, "on the pool's lock", 60) == 0
    finally:
        stop.set()
        thread.join(10)
