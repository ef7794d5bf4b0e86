"""The engine's CPU budget: a process moved in runs under the quota, and release puts it back
where it was and removes the cgroup, leaving the host as it found it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.live.cpu_budget import CpuBudget, unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def test_a_budget_caps_a_busy_process_and_release_leaves_nothing_behind() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        before = Path(f"/proc/{busy.pid}/cgroup").read_text()
        budget = CpuBudget("roofline-budget-test", 0.1)
        try:
            budget.add([busy.pid])
            assert budget.members() == [busy.pid]
            start, used = time.monotonic(), cpu_seconds(busy.pid)
            time.sleep(2.0)
            share = (cpu_seconds(busy.pid) - used) / (time.monotonic() - start)
            # A tenth of a core, with the clock tick's resolution (10 ms in 2 s) to spare.
            assert share < 0.1 + 0.05, share
            budget.set_cpus(None)
            limit = "cpu.max" if budget.v2 else "cpu.cfs_quota_us"
            assert (budget.path / limit).read_text().split()[0] in ("-1", "max")
        finally:
            budget.release()
        assert not budget.path.exists()
        assert Path(f"/proc/{busy.pid}/cgroup").read_text() == before
    finally:
        busy.kill()
        busy.wait(timeout=10)
