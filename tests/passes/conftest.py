"""Options and fixtures of the graph-pass tests.

``--update-goldens`` (or ``IRKERNEL_UPDATE_GOLDENS=1``) makes the golden
tests rewrite the ``# expected`` section of every ``golden/<Pass>/*.ir``
file with the current output instead of comparing, so a diff in review is
the behaviour change. The option is registered by ``tests/conftest.py``.
Under CI (the ``CI`` environment variable set) update mode is refused: the
golden tests fail.
"""

from __future__ import annotations

import os

import pytest
from passes_helpers import golden_update_requested


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    """True in update mode; fails the test when ``CI`` is set (passes_helpers says why)."""
    return golden_update_requested(
        bool(request.config.getoption("--update-goldens", default=False)), os.environ)


@pytest.fixture
def impure_op(monkeypatch: pytest.MonkeyPatch) -> str:
    """Name of an impure unary op (``-x``, but marked impure like a random draw).

    The op registry is append-only: the op goes into copies of its tables that
    vanish after the test.
    """
    import numpy as np

    from irkernel import ops
    from irkernel.ir.ids import ENC_UNARY, NUMERIC_DTYPES
    from irkernel.ir.ops import registry
    from irkernel.ir.ops.references import ufunc
    from irkernel.ir.ops.type_rules import elementwise_rule

    monkeypatch.setattr(registry, "_ops", list(registry._ops))
    monkeypatch.setattr(registry, "_by_name", dict(registry._by_name))
    monkeypatch.setattr(registry, "_arrays", [])
    name = "test_impure_negative"
    ops.register_op(ops.OpDef(name, ENC_UNARY, 1, elementwise_rule(NUMERIC_DTYPES),
                              ufunc(np.negative), ops.OPAQUE, pure=False))
    return name
