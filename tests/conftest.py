"""Suite-wide settings: hypothesis profiles sized for a 2-core CI machine."""

from __future__ import annotations

import os

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
