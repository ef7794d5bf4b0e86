"""Fixtures of the operator's unit tests, opt-in by name."""

from __future__ import annotations

import kopf
import pytest
from prometheus_client import CollectorRegistry

from roofline_operator.run.metrics import OperatorMetrics


@pytest.fixture
def quiet_events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Kopf posts Events only inside a running operator; record them instead."""
    posted: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "warn", lambda _, reason, message: posted.append((reason, message)))
    monkeypatch.setattr(
        kopf, "event", lambda _, type, reason, message: posted.append((reason, message))
    )
    return posted


@pytest.fixture
def registry() -> CollectorRegistry:
    """A registry of this test's own, so no two tests' metrics meet."""
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> OperatorMetrics:
    """The operator's metrics, registered in :func:`registry`."""
    return OperatorMetrics(registry)
