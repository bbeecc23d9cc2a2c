"""Suite-wide settings: hypothesis profiles sized for a 2-core CI machine, a private
on-disk kernel cache, and the CheckImmutable instrument on every pass."""

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
def _check_immutable():
    """Every pass run on the default context checks that it did not mutate its input."""
    ctx = transform.PassContext.current()
    previous = list(ctx.instruments)
    ctx.override_instruments([*previous, instrument.CheckImmutable()])
    yield
    ctx.override_instruments(previous)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite the expected sections of tests/passes/golden/*/*.ir")
