"""The Ray engine (optional: ``irkernel[ray]``; skipped where ray is not installed, as in CI)."""

from __future__ import annotations

import operator
import os

import pytest

ray = pytest.importorskip("ray")

import irkernel as ik  # noqa: E402
from irkernel import testing, transform  # noqa: E402
from irkernel.scaleout import call_task  # noqa: E402
from irkernel.transform import TaskError, WorkerLostError, open_engine  # noqa: E402


@pytest.fixture(scope="module")
def ray_started():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_results_errors_and_modules(ray_started):
    with open_engine(ray_started) as eng:
        assert (eng.name, eng.workers) == ("ray", 2)
        assert eng.run(operator.mul, [(i, i) for i in range(6)]) == [i * i for i in range(6)]
        [err] = eng.run(operator.truediv, [(1, 0)], on_error="return")
    assert isinstance(err, TaskError)
    assert "ZeroDivisionError" in err.traceback
    mods = [testing.random_module(1000, seed=s, call_funcs=True) for s in range(3)]
    want = transform.map_modules("O2", mods, engine="serial")
    got = transform.map_modules("O2", mods, engine=ray_started)
    assert all(ik.structural_equal(a, b) for a, b in zip(got, want, strict=True))


def test_a_worker_that_dies_is_a_worker_lost_error(ray_started):
    with open_engine(ray_started) as eng:
        eng._remote[call_task] = ray_started.remote(max_retries=0)(call_task)  # no retries
        [err] = eng.run(os._exit, [(1,)], on_error="return")
    assert isinstance(err, WorkerLostError)
    assert "WorkerCrashedError" in str(err)
