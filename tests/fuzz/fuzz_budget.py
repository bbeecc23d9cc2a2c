"""Settings of the fuzz tests: a fixed, derandomized example budget (about a minute in all).

Every fuzz test takes its example count from :func:`budget`, scaled by
``IRKERNEL_FUZZ_SCALE`` (default 1: what CI runs). A long local run::

    IRKERNEL_FUZZ_SCALE=50 .venv/bin/python -m pytest tests/fuzz -q

Examples are derandomized (the same cases every run, so CI never flakes on a
new one); a long run with ``IRKERNEL_FUZZ_RANDOM=1`` explores new ones, and
``docs/fuzzing.md`` has the atheris entry point for coverage-guided runs.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SCALE = float(os.environ.get("IRKERNEL_FUZZ_SCALE", "1"))
RANDOM = os.environ.get("IRKERNEL_FUZZ_RANDOM", "") not in ("", "0")


def budget(examples: int) -> settings:
    """Hypothesis settings for ``examples`` cases (times ``IRKERNEL_FUZZ_SCALE``)."""
    return settings(max_examples=max(1, int(examples * SCALE)), deadline=None,
                    derandomize=not RANDOM, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
