"""Fixtures of the operator's unit tests, opt-in by name."""

from __future__ import annotations

import kopf
import pytest


@pytest.fixture
def quiet_events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Kopf posts Events only inside a running operator; record them instead."""
    posted: list[tuple[str, str]] = []
    monkeypatch.setattr(kopf, "warn", lambda _, reason, message: posted.append((reason, message)))
    monkeypatch.setattr(
        kopf, "event", lambda _, type, reason, message: posted.append((reason, message))
    )
    return posted
