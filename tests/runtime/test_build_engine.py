"""runtime.build(engine=...): kernel batches compile on an engine's workers, link here.

Only LLVM IR text travels and object bytes come back, so a build on workers must
give bitwise the outputs of an in-process build; a batch whose worker fails or is
lost is an error naming its kernels, with nothing half written to the cache.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

import runtime
from irkernel import scaleout, transform
from irkernel.testing.strategies import functions_with_inputs
from runtime.cache import DiskCache

SPECIALIZED = {"runtime.generic_max_elements": 0}  # a kernel per signature: many batches


@pytest.fixture(scope="module")
def pool():
    with transform.local_executor(max_workers=2) as executor:
        yield executor


@settings(max_examples=8, deadline=None)
@given(case=functions_with_inputs(module=True, shapes="small"))
def test_builds_on_worker_processes_equal_in_process_builds(pool, case) -> None:
    mod, inputs = case
    with transform.PassContext(config=SPECIALIZED):
        here = runtime.build(mod, cache=False)["main"](*inputs)
        there = runtime.build(mod, cache=False, engine=pool)["main"](*inputs)
    for a, b in zip(here, there, strict=True):
        np.testing.assert_array_equal(a, b)


def test_engine_local_compiles_on_the_warm_pool_of_map_modules() -> None:
    mod, inputs = _module()
    want = runtime.build(mod, cache=False)["main"](*inputs)
    got = runtime.build(mod, cache=False, engine="local")["main"](*inputs)
    np.testing.assert_array_equal(got[0], want[0])
    pool = scaleout.warm_pool()
    assert pool is not None  # given back, not shut down, when the build ended
    runtime.build(mod, cache=False, engine="local")
    assert scaleout.warm_pool() is pool


def test_engine_serial_and_thread_build_the_same_kernels() -> None:
    mod, inputs = _module()
    with transform.PassContext(config=SPECIALIZED):
        want = runtime.build(mod, cache=False)["main"](*inputs)
        for engine in ("serial", "thread"):
            got = runtime.build(mod, cache=False, engine=engine)["main"](*inputs)
            np.testing.assert_array_equal(got[0], want[0])


class _LostWorkers(ThreadPoolExecutor):
    """An executor whose every task fails as a lost worker would."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_exception(RuntimeError("worker lost"))
        return future


def test_a_lost_worker_names_the_kernels_and_leaves_no_cache_entry(tmp_path) -> None:
    mod, _ = _module()
    disk = DiskCache(tmp_path / "cache")
    with _LostWorkers() as lost, pytest.raises(RuntimeError) as info:
        with transform.PassContext(config=SPECIALIZED):
            runtime.build(mod, cache=disk, engine=lost)
    message = str(info.value)
    assert "worker lost" in message and "exp" in message
    assert not list((tmp_path / "cache").rglob("*.o*")) and not [
        p for p in (tmp_path / "cache").rglob("*") if p.is_file() and "index" in p.parts]


def test_a_bad_engine_is_one_error_naming_it() -> None:
    mod, _ = _module()
    with pytest.raises(TypeError, match="engine must be"):
        runtime.build(mod, cache=False, engine=42)
    with pytest.raises(ValueError, match="unknown engine 'processes'.*'serial', 'thread'"):
        runtime.build(mod, cache=False, engine="processes")


def test_a_failed_batch_chains_the_engines_task_error(tmp_path) -> None:
    mod, _ = _module()
    with _LostWorkers() as lost, pytest.raises(RuntimeError) as info:
        with transform.PassContext(config=SPECIALIZED):
            runtime.build(mod, cache=False, engine=lost)
    assert isinstance(info.value.__cause__, scaleout.TaskError)


def _module() -> tuple[Any, list[np.ndarray]]:
    import irkernel as ik

    bb = ik.GraphBuilder("main")
    x = bb.param("x", (8, 16), "float32")
    y = bb.add(bb.exp(x), bb.call("sum", x, axis=1, keepdims=True))
    mod = ik.IRModule({"main": bb.finish([y])})
    return mod, [np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16)]
