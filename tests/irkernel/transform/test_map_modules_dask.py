"""map_modules and engines on Dask: a real two-process cluster on loopback, one per module.

Workers that die are restarted by their nannies; the scheduler retries a task
once (``allowed-failures`` is 1 here, to keep the test short) and then reports
KilledWorker, which the engine turns into a WorkerLostError.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

import irkernel as ik  # noqa: E402
from irkernel import instrument, testing, transform  # noqa: E402
from irkernel.transform import PassContext, TaskError, WorkerLostError, open_engine  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as dask_client:
        yield dask_client


def die_once(marker: str) -> str:
    """Kill this worker the first time (the marker file records it), then succeed."""
    if not os.path.exists(marker):
        with open(marker, "w", encoding="utf-8") as fh:
            fh.write("died")
        os._exit(1)
    return "survived"


def test_engine_of_a_client(client):
    with open_engine(client) as eng:
        assert (eng.name, eng.in_process, eng.workers) == ("dask", False, 2)
        assert eng.run(pow, [(2, k) for k in range(10)]) == [2**k for k in range(10)]
    assert client.status == "running"  # a borrowed client stays open


def test_scheduler_address_opens_and_closes_its_own_client(client):
    address = client.scheduler.address
    with open_engine(address) as eng:
        assert eng.name == "dask"
        assert eng.run(pow, [(3, 2)]) == [9]
        own = eng.client
    assert own.status == "closed"


def test_matches_serial_with_call_funcs_and_prim_funcs(client):
    import passes

    spec = testing.GraphSpec(n_nodes=30, seed=3, shapes="small")
    mods = [testing.random_module(800, seed=s, call_funcs=True) for s in range(4)]
    mods.append(passes.LegalizeOps()(testing.random_module(spec, call_funcs=True)))
    want = transform.map_modules("O2", mods, engine="serial")
    got = transform.map_modules("O2", mods, engine=client, chunksize=2)
    assert all(ik.structural_equal(a, b) for a, b in zip(got, want, strict=True))


@settings(max_examples=5, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(testing.modules(), min_size=1, max_size=3))
def test_random_modules_match_serial(client, mods):
    want = transform.map_modules("O2", mods, engine="serial")
    got = transform.map_modules("O2", mods, engine=client)
    assert all(ik.structural_equal(a, b) for a, b in zip(got, want, strict=True))


def test_context_instruments_and_errors_travel(client):
    mods = [testing.random_module(300, seed=s) for s in range(3)]
    bad = ik.IRModule({"other": testing.random_function(40, seed=1).with_attr("global_symbol", "other")})
    timing = instrument.PassTimingInstrument()
    with PassContext(opt_level=1, instruments=[timing]) as ctx:
        want = transform.map_modules("O2", mods, engine="serial")
        out = transform.map_modules("FoldConstant,DeadCodeElimination{entry_functions=[main]}",
                                    [*mods, bad], engine=client, on_error="return")
        got = transform.map_modules("O2", mods, engine=client)
    assert all(ik.structural_equal(a, b) for a, b in zip(got, want, strict=True))
    assert isinstance(out[3], TaskError)
    assert out[3].index == 3
    assert "entry functions ['main']" in str(out[3])
    assert "Traceback" in out[3].traceback
    assert ctx.statistics["FoldConstant"]["nodes_folded"] > 0
    assert "DeadCodeElimination" in timing.render()


def test_a_worker_that_dies_once_is_retried(client, tmp_path):
    with open_engine(client) as eng:
        assert eng.run(die_once, [(str(tmp_path / "marker"),)]) == ["survived"]


def test_a_task_that_keeps_killing_workers_is_a_worker_lost_error(client):
    with open_engine(client) as eng:
        [err] = eng.run(os._exit, [(1,)], on_error="return")
    assert isinstance(err, WorkerLostError)
    assert "KilledWorker" in str(err)
    client.wait_for_workers(2, timeout=60)  # the nannies restart them


def test_cli_opt_with_scheduler(client, tmp_path):
    import io

    from irkernel.cli import main

    sources = []
    for seed in range(3):
        path = tmp_path / f"m{seed}.ir"
        path.write_text(testing.random_module(200, seed=seed).script())
        sources.append(str(path))
    out_dir = tmp_path / "out"
    code = main(["opt", *sources, "-p", "O2", "--scheduler", client.scheduler.address, "-o",
                 str(out_dir)], out=io.StringIO())
    assert code == 0
    for source in sources:
        want = transform.get_pass("O2")(ik.parse(Path(source).read_text()))
        got = ik.parse((out_dir / os.path.basename(source)).read_text())
        assert ik.structural_equal(got, want)
