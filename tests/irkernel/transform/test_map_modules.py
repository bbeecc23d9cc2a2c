"""transform.map_modules: equal to serial on every engine, the PassContext travels,
mergeable instruments and statistics come back, on_error semantics, clear errors.

One warm process pool serves the module (``local_executor``); one test starts
``engine="local"`` itself. Dask has its own module (test_map_modules_dask.py).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import irkernel as ik
from irkernel import instrument, testing, transform
from irkernel.transform import PassContext, TaskError

FAILS_WITHOUT_MAIN = "FoldConstant,DeadCodeElimination{entry_functions=[main]}"


@pytest.fixture(scope="module")
def pool():
    with transform.local_executor(2) as executor:
        yield executor


@pytest.fixture(params=["thread", "pool"])
def engine(request, pool):
    return pool if request.param == "pool" else request.param


def _equal_lists(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert ik.structural_equal(a, b)


def _legalized(seed: int) -> ik.IRModule:
    """A module with PrimFuncs, call_tir and call_func nodes."""
    import passes

    spec = testing.GraphSpec(n_nodes=30, seed=seed, shapes="small")
    return passes.LegalizeOps()(testing.random_module(spec, call_funcs=True))


# ---------------------------------------------------------------------------
# equal to serial
# ---------------------------------------------------------------------------


@settings(max_examples=12)
@given(st.lists(testing.modules(), min_size=1, max_size=4), st.sampled_from(["O2", "O3"]),
       st.sampled_from(["thread", "pool"]), st.integers(1, 3))
def test_every_engine_matches_serial_on_random_modules(pool, mods, pipeline, which, chunk):
    engine = pool if which == "pool" else which
    want = transform.map_modules(pipeline, mods, engine="serial")
    got = transform.map_modules(pipeline, mods, engine=engine, max_workers=2, chunksize=chunk)
    _equal_lists(got, want)


def test_modules_with_prim_funcs_match_serial(engine):
    mods = [_legalized(seed) for seed in range(3)]
    assert all(any(transform.is_prim_func(f) for f in m.functions.values()) for m in mods)
    want = transform.map_modules("O2", mods, engine="serial")
    _equal_lists(transform.map_modules("O2", mods, engine=engine), want)


def test_engine_local_starts_and_stops_its_own_pool():
    mods = [testing.random_module(400, seed=s, call_funcs=True) for s in range(3)]
    want = transform.map_modules("O2", mods, engine="serial")
    _equal_lists(transform.map_modules("O2", mods, engine="local", max_workers=2), want)


def test_pass_objects_travel_as_their_text(pool):
    import passes

    mods = [testing.random_module(300, seed=s) for s in range(3)]
    for pipeline in (transform.get_pass("O2"), passes.FoldConstant(),
                     transform.get_pass("FoldConstant", max_elements=4),
                     transform.Sequential([passes.SimplifyArith(), passes.DeadCodeElimination()],
                                          name="mine")):
        want = transform.map_modules(pipeline, mods, engine="serial")
        _equal_lists(transform.map_modules(pipeline, mods, engine=pool), want)


def test_results_keep_identity_where_nothing_changed(engine):
    skip = testing.random_function(200, seed=3).with_attr("SkipOptimization", True)
    changing = testing.random_function(200, seed=4).with_attr("global_symbol", "main")
    mod = ik.IRModule({"main": changing, "skipped": skip.with_attr("global_symbol", "skipped")})
    same = ik.IRModule({"s": skip.with_attr("global_symbol", "s")})
    out = transform.map_modules("FoldConstant,SimplifyArith", [mod, same], engine=engine)
    assert out[1] is same  # unchanged: the caller's own object
    assert out[0] is not mod
    assert out[0]["skipped"] is mod["skipped"]  # an unchanged function is not copied back


# ---------------------------------------------------------------------------
# the PassContext travels
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("settings_", [
    {"opt_level": 0},
    {"disabled_pass": ["EliminateCommonSubexpr"]},
    {"opt_level": 0, "required_pass": ["DeadCodeElimination"]},
    {"config": {"FoldConstant.max_elements": 1}},
])
def test_context_settings_travel(engine, settings_):
    spec = testing.GraphSpec(n_nodes=300, seed=9, shapes="small")
    mods = [testing.random_module(spec.replace(seed=s)) for s in range(3)]
    default = transform.map_modules("O2", mods, engine="serial")
    with PassContext(**settings_):
        want = transform.map_modules("O2", mods, engine="serial")
        got = transform.map_modules("O2", mods, engine=engine)
    _equal_lists(got, want)
    # the setting matters for these modules, so the test would catch a lost context
    assert not all(ik.structural_equal(a, b) for a, b in zip(want, default, strict=True))


def test_timing_and_statistics_merge_into_the_callers(engine):
    mods = [testing.random_module(500, seed=s) for s in range(4)]
    serial_timing = instrument.PassTimingInstrument()
    with PassContext(instruments=[serial_timing]) as ctx:
        transform.map_modules("O2", mods, engine="serial")
        serial_stats = ctx.statistics
    timing = instrument.PassTimingInstrument()
    with PassContext(instruments=[timing]) as ctx:
        transform.map_modules("O2", mods, engine=engine, chunksize=3)
        stats = ctx.statistics
    assert stats == serial_stats
    assert stats["FoldConstant"]["nodes_folded"] > 0
    lines = {line.split()[0]: line.split() for line in timing.render().splitlines()[1:]}
    serial_lines = {line.split()[0]: line.split()
                    for line in serial_timing.render().splitlines()[1:]}
    assert set(lines) == set(serial_lines) >= {"O2", "FoldConstant", "DeadCodeElimination"}
    for name, fields in lines.items():
        assert fields[1] == serial_lines[name][1] == "4"  # calls: one per module
        counters = [f for f in fields if "=" in f]
        assert counters == [f for f in serial_lines[name] if "=" in f]


def test_instrument_that_cannot_travel_is_named(engine):
    class Locked(instrument.PassInstrument):
        def __init__(self):
            self.lock = threading.Lock()

    mods = [testing.random_module(50, seed=1)]
    with PassContext(instruments=[Locked()]), \
            pytest.raises(TypeError, match="instrument Locked cannot travel to workers"):
        transform.map_modules("O2", mods, engine=engine)
    with PassContext(instruments=[Locked()]):  # serial uses the caller's instruments
        assert len(transform.map_modules("O2", mods, engine="serial")) == 1


def test_checking_instrument_runs_on_workers(engine):
    """VerifyEach travels as a copy: a pass that breaks a module fails that module."""
    mods = [testing.random_module(100, seed=s) for s in range(2)]
    with PassContext(instruments=[instrument.VerifyEach()]):
        _equal_lists(transform.map_modules("O2", mods, engine=engine),
                     transform.map_modules("O2", mods, engine="serial"))


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------


def _mixed_modules():
    """Modules 1 and 3 have no ``main``: DeadCodeElimination{entry_functions=[main]} fails."""
    good = [testing.random_module(200, seed=s) for s in range(3)]
    bad = ik.IRModule({"other": testing.random_function(50, seed=7).with_attr("global_symbol", "other")})
    return [good[0], bad, good[1], bad, good[2]]


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_on_error_raise_names_the_first_failing_module(engine, chunk):
    with pytest.raises(TaskError, match=r"module 1 failed on .*entry functions \['main'\]") \
            as info:
        transform.map_modules(FAILS_WITHOUT_MAIN, _mixed_modules(), engine=engine,
                              chunksize=chunk)
    err = info.value
    assert err.index == 1
    assert isinstance(err.exception, ValueError)
    assert "Traceback" in err.traceback
    assert "dead_code" in err.traceback


@pytest.mark.parametrize("which", ["serial", "thread", "pool"])
def test_on_error_return_fills_the_failing_slots(pool, which):
    engine = pool if which == "pool" else which
    mods = _mixed_modules()
    out = transform.map_modules(FAILS_WITHOUT_MAIN, mods, engine=engine, on_error="return",
                                chunksize=2)
    assert [isinstance(r, TaskError) for r in out] == [False, True, False, True, False]
    assert [r.index for r in out if isinstance(r, TaskError)] == [1, 3]
    want = transform.map_modules("FoldConstant,DeadCodeElimination", mods[::2], engine="serial")
    _equal_lists(out[::2], want)


def test_malformed_module_fails_alone_and_the_pool_survives(pool):
    good = testing.random_module(100, seed=2)
    f = good["main"]
    fields = {k: getattr(f, k) for k in f.__dataclass_fields__}
    a0 = np.array(f.a0)
    a0[-1] = 10**6  # an operand past the end: rejected when the worker loads it
    bad = ik.IRModule({"main": ik.Function(**{**fields, "a0": a0})})
    out = transform.map_modules("O2", [good, bad, good], engine=pool, on_error="return",
                                chunksize=1)
    assert isinstance(out[1], TaskError)
    assert isinstance(out[1].exception, ik.IRError)
    assert "out of range" in str(out[1])
    assert ik.structural_equal(out[0], transform.map_modules("O2", [good], engine="serial")[0])
    assert transform.map_modules("O2", [good], engine=pool)[0] is not None  # pool still works


def test_pass_that_cannot_travel_is_refused_before_any_work(pool):
    import passes

    @transform.function_pass(opt_level=0, name="LocalOnly")
    def local_only(func, mod, ctx):
        return func

    mods = [testing.random_module(50, seed=1)]
    with pytest.raises(TypeError, match=r"'LocalOnly' cannot travel .*not a registered pass"):
        transform.map_modules(local_only, mods, engine=pool)
    with pytest.raises(TypeError, match=r"'FoldConstant' cannot travel .*options are not known"):
        transform.map_modules(passes.FoldConstant(max_elements=3), mods, engine=pool)
    # in process, the Pass object itself runs
    assert transform.map_modules(local_only, mods, engine="thread")[0] is mods[0]


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"pipeline": 3}, TypeError, "pipeline must be a Pass or a textual pipeline"),
    ({"pipeline": "NoSuchPass"}, ValueError, "unknown pass 'NoSuchPass'"),
    ({"modules": ik.IRModule({})}, TypeError, "modules must be an iterable of IRModule"),
    ({"modules": [ik.IRModule({}), "x"]}, TypeError, r"modules\[1\] is str"),
    ({"on_error": "skip"}, ValueError, "on_error must be"),
    ({"chunksize": 0}, ValueError, "chunksize must be >= 1"),
    ({"engine": "gpu"}, ValueError, "unknown engine 'gpu'"),
])
def test_bad_arguments(kwargs, error, match):
    args = {"pipeline": "O2", "modules": [ik.IRModule({})], "engine": "thread", **kwargs}
    with pytest.raises(error, match=match):
        transform.map_modules(args.pop("pipeline"), args.pop("modules"), **args)


def test_empty_input_gives_empty_output(engine):
    assert transform.map_modules("O2", [], engine=engine) == []
