"""Fixtures of the pass-infrastructure tests: a scoped pass registry and a clean default context."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from irkernel.transform import PassContext
from irkernel.transform import registry as _pass_registry


@pytest.fixture
def scoped_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made in the test vanish after it (the registry is append-only)."""
    monkeypatch.setattr(_pass_registry, "_REGISTRY", dict(_pass_registry._REGISTRY))


@pytest.fixture
def default_ctx() -> Iterator[PassContext]:
    """The thread's default context, with its instruments cleared after the test."""
    ctx = PassContext.current()
    yield ctx
    ctx.override_instruments(None)
