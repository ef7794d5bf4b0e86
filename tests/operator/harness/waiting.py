"""Polling with a deadline: how a test waits for an eventually consistent system.

A reconcile loop converges at its own pace; a fixed ``sleep`` is either flaky or slow. Every wait
in the suite polls a condition until it holds or the deadline passes, and on failure reports what
it was waiting for and the last value it saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
DEFAULT_INTERVAL_SECONDS = 0.2


def wait_for(
    condition: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = DEFAULT_INTERVAL_SECONDS,
) -> T:
    """Return the first truthy value of ``condition()``; raise AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}"
            )
        time.sleep(interval)
