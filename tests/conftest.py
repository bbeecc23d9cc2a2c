"""Suite-wide settings: hypothesis profiles sized for a 2-core CI machine, a private
on-disk kernel cache, and the CheckImmutable check on every pass of every PassContext."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from irkernel import instrument, transform

settings.register_profile(
    "ci", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "thorough", max_examples=1000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("IRKERNEL_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session", autouse=True)
def irkernel_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Compiled kernels go to a per-session cache directory, not ~/.cache."""
    path = tmp_path_factory.mktemp("irkernel-cache")
    previous = os.environ.get("IRKERNEL_CACHE_DIR")
    os.environ["IRKERNEL_CACHE_DIR"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("IRKERNEL_CACHE_DIR", None)
    else:
        os.environ["IRKERNEL_CACHE_DIR"] = previous


@pytest.fixture(autouse=True)
def _check_immutable(request: pytest.FixtureRequest,
                     monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every pass of every test checks that it did not mutate its input: on the thread's
    default context and on every PassContext the test (or the library) makes.

    Each context gets a CheckImmutable's ``run_before_pass``/``run_after_pass`` beside
    the hooks of its own instruments (first before, last after, so the test's own
    instruments see passes as usual and speak first when they raise), while
    ``ctx.instruments`` still lists only what the test gave. Tests that inspect the
    hook tuples themselves opt out with ``@pytest.mark.no_immutable_check``.
    """
    if request.node.get_closest_marker("no_immutable_check"):
        yield
        return
    original = transform.PassContext._set_instruments

    def with_check(ctx: transform.PassContext, instruments: tuple[object, ...]) -> None:
        original(ctx, instruments)
        checker = instrument.CheckImmutable()
        ctx._before_hooks = (checker.run_before_pass, *ctx._before_hooks)
        ctx._after_hooks = (*ctx._after_hooks, checker.run_after_pass)

    monkeypatch.setattr(transform.PassContext, "_set_instruments", with_check)
    default = transform.PassContext.current()  # made before the patch: re-install
    with_check(default, default.instruments)
    yield
    original(default, default.instruments)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "no_immutable_check: the test inspects a PassContext's "
                            "hook tuples, so the suite-wide CheckImmutable hooks stay out")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite the expected sections of tests/passes/golden/*/*.ir "
                          "(refused when CI is set)")
