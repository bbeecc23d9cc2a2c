"""Scale-out: map_modules on serial, threads, local processes and Dask; pickle size and time.

Run (the figures in bench/README.md came from this)::

    PYTHONPATH=. .venv/bin/python bench/bench_scale_out.py [--nodes 400000] [--modules 8]

Every engine is timed in a block of its own: a warm-up call (process pools and
the Dask cluster are started before it, so their workers have imported
irkernel and loaded the Numba kernels), then ``--rounds`` timed calls, a pause
between blocks; the figure is the median, and every ratio is against the
serial block of the same run. Each worker runs one thread (the graph kernels
are single-threaded); the thread engine runs two threads in this process.
``engine="local"`` as a string (the warm pool, started by the first call and
reused by the next) is reported separately: two calls in a row from no pool,
the first with the pool's startup, the second on its warm workers.

``pytest bench/bench_scale_out.py`` runs the same measurement once and checks the
targets of the issue (set IRKERNEL_BENCH_REPORT_ONLY=1 to only report).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import operator
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import irkernel as ik
from irkernel import scaleout, testing, transform
from irkernel.scaleout import open_engine, pack

PAUSE_S = 2.0


def _median_time(fn: Callable[[], Any], rounds: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of this process and of ``pids`` (Linux /proc)."""
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _block(name: str, fn: Callable[[], Any], rounds: int, out: dict[str, float],
           cpu: dict[str, float], pids: Callable[[], list[int]] = list) -> None:
    """Median wall time of ``fn`` and the median CPU seconds it took (caller + workers)."""
    time.sleep(PAUSE_S)
    fn()  # warm-up
    walls, cpus = [], []
    for _ in range(rounds):
        workers = pids()
        cpu0, start = _cpu_seconds(workers), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(_cpu_seconds(workers) - cpu0)
    out[name], cpu[name] = statistics.median(walls), statistics.median(cpus)
    print(f"  {name:<28} {out[name]:8.3f} s wall {cpu[name]:8.3f} s CPU "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)


def measure_engines(n_nodes: int, n_modules: int, rounds: int, workers: int,
                    with_dask: bool) -> dict[str, Any]:
    """Median seconds of ``map_modules("O2", mods)`` per engine, and the speedups."""
    mods = [testing.random_module(n_nodes, seed=seed) for seed in range(n_modules)]
    print(f"{n_modules} modules of {n_nodes:,} nodes, O2, {workers} workers "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)
    want = transform.map_modules("O2", mods, engine="serial")
    o2 = transform.get_pass("O2")
    cpu = time.process_time()
    for mod in mods:
        o2(mod)
    print(f"  O2 CPU per module             {(time.process_time() - cpu) / n_modules:8.3f} s")
    times: dict[str, float] = {}
    cpu: dict[str, float] = {}
    _block("serial", lambda: transform.map_modules("O2", mods, engine="serial"), rounds, times,
           cpu)
    with cf.ThreadPoolExecutor(workers) as threads:
        _block("thread", lambda: transform.map_modules("O2", mods, engine=threads), rounds,
               times, cpu)
    with transform.local_executor(workers) as pool:
        got = transform.map_modules("O2", mods, engine=pool)
        assert all(ik.structural_equal(a, b) for a, b in zip(got, want, strict=True))
        _block("local (warm pool)", lambda: transform.map_modules("O2", mods, engine=pool),
               rounds, times, cpu, lambda: list(pool._processes))
    if with_dask:
        import distributed

        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                      host="127.0.0.1", dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            got = transform.map_modules("O2", mods, engine=client)
            assert all(ik.structural_equal(a, b) for a, b in zip(got, want, strict=True))
            _block("dask (loopback)", lambda: transform.map_modules("O2", mods, engine=client),
                   rounds, times, cpu, lambda: list(client.run(os.getpid).values()))
    times.update(measure_local_twice(mods, workers, want))
    serial = times["serial"]
    speedups = {k: serial / v for k, v in times.items() if k != "serial"}
    if "dask (loopback)" in times:
        speedups["dask / local time"] = times["dask (loopback)"] / times["local (warm pool)"]
    return {"seconds": times, "cpu_seconds": cpu, "speedup_vs_serial": speedups,
            "task_bytes": pack((mods[0],)).nbytes, "result_bytes": pack(want[0]).nbytes}


def measure_local_twice(mods: list[Any], workers: int, want: list[Any]) -> dict[str, float]:
    """``map_modules("O2", mods, engine="local")`` twice in a row from no warm pool: the
    first call starts the pool (startup included), the second reuses its workers."""
    scaleout.shutdown()
    out: dict[str, float] = {}
    time.sleep(PAUSE_S)
    for call in ("first", "second"):  # back to back, as a program calling it twice would
        key = f"engine='local', {call} call"
        start = time.perf_counter()
        got = transform.map_modules("O2", mods, engine="local", max_workers=workers)
        out[key] = time.perf_counter() - start
        print(f"  {key:<28} {out[key]:8.3f} s", flush=True)
        assert all(ik.structural_equal(a, b) for a, b in zip(got, want, strict=True))
    scaleout.shutdown()
    return out


def measure_pickle(n_nodes: int, rounds: int) -> dict[str, float]:
    """Size and time of pickling one module, per node."""
    mod = testing.random_module(n_nodes, seed=1)

    def oob() -> None:
        buffers: list[pickle.PickleBuffer] = []
        data = pickle.dumps(mod, protocol=5, buffer_callback=buffers.append)
        pickle.loads(data, buffers=buffers)

    def in_band() -> None:
        pickle.loads(pickle.dumps(mod, protocol=5))

    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps(mod, protocol=5, buffer_callback=buffers.append)
    size = len(header) + sum(b.raw().nbytes for b in buffers)
    t_oob = _median_time(oob, rounds)
    t_in = _median_time(in_band, rounds)
    return {"nodes": n_nodes, "bytes_per_node": size / n_nodes, "header_bytes": len(header),
            "dumps_loads_out_of_band_s": t_oob, "dumps_loads_in_band_s": t_in,
            "ns_per_node_out_of_band": t_oob / n_nodes * 1e9,
            "ns_per_node_in_band": t_in / n_nodes * 1e9}


def measure_task_overhead(n_tasks: int, workers: int, with_dask: bool) -> dict[str, float]:
    """Seconds per trivial task (``operator.add``) through each engine, after warm-up."""
    tasks = [(i, i) for i in range(n_tasks)]
    out: dict[str, float] = {}
    engines: list[tuple[str, Any]] = [("serial", "serial")]
    with transform.local_executor(workers) as pool:
        engines.append(("local", pool))
        if with_dask:
            import distributed

            cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                               processes=True, host="127.0.0.1",
                                               dashboard_address=None)
            client = distributed.Client(cluster)
            engines.append(("dask", client))
        try:
            for name, engine in engines:
                with open_engine(engine) as eng:
                    time.sleep(PAUSE_S)
                    out[name] = _median_time(lambda e=eng: e.run(operator.add, tasks), 3) / n_tasks
                    eng.window = n_tasks  # every task in flight: the engine's throughput
                    out[name + " (all in flight)"] = _median_time(
                        lambda e=eng: e.run(operator.add, tasks), 3) / n_tasks
                    print(f"  per task {name:<8} {out[name] * 1e6:10.1f} us, all in flight "
                          f"{out[name + ' (all in flight)'] * 1e6:10.1f} us", flush=True)
        finally:
            if with_dask:
                client.close()
                cluster.close()
    return out


def run(n_nodes: int = 400_000, n_modules: int = 8, rounds: int = 5, workers: int = 2,
        with_dask: bool = True) -> dict[str, Any]:
    print("pickle, 1e6 nodes:", flush=True)
    pick = measure_pickle(1_000_000, rounds)
    for key, value in pick.items():
        print(f"  {key:<28} {value:.4g}")
    engines = measure_engines(n_nodes, n_modules, rounds, workers, with_dask)
    print("per-task overhead:", flush=True)
    overhead = measure_task_overhead(200, workers, with_dask)
    return {"pickle": pick, "engines": engines, "task_overhead_s": overhead}


def test_scale_out_targets() -> None:
    """The issue's targets, measured once (see the module docstring)."""
    sys.path.insert(0, os.path.dirname(__file__))
    from benchutil import check

    result = run(rounds=3)
    speed = result["engines"]["speedup_vs_serial"]
    check(speed["local (warm pool)"] >= 1.5, f"local vs serial {speed['local (warm pool)']:.2f}x")
    check(speed["dask / local time"] <= 1.5, f"dask / local {speed['dask / local time']:.2f}")
    second = speed["engine='local', second call"]
    check(second >= 1.3, f"engine='local' second call vs serial {second:.2f}x")
    check(result["pickle"]["dumps_loads_out_of_band_s"] <= 0.2, "1e6-node dumps+loads > 0.2 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=400_000)
    parser.add_argument("--modules", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-dask", action="store_true")
    args = parser.parse_args()
    result = run(args.nodes, args.modules, args.rounds, args.workers, not args.no_dask)
    print("\nspeedup vs serial (same run):")
    for key, value in result["engines"]["speedup_vs_serial"].items():
        print(f"  {key:<32} {value:6.2f}")
    print(f"bytes per task / result: {result['engines']['task_bytes']:,} / "
          f"{result['engines']['result_bytes']:,}")


if __name__ == "__main__":
    main()
