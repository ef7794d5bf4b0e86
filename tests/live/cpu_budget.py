"""A CPU budget of its own for the serving engine: a cgroup with a CPU weight, and a quota to cut.

On a shared machine the engine's speed follows everyone else's load: measured here, the median
inter-token latency of the same vLLM under the same requests moved between 42 and 168 ms from one
15-second window to the next at a load average of 22 on 2 cores (docs/testing-operator.md). A
prediction calibrated in one minute cannot be checked against the next. So the engine, pinned to
one core, runs in a cgroup of its own with a CPU weight 64 times a normal task's and no quota:
that core is its own however loaded the machine is, and the other core everyone else's. A quota
(:meth:`CpuBudget.set_cpus`) is the slowed engine ("its CPU cut"), none the recovered one. A
quota is not how to give the engine a steady speed: vLLM's processes poll while they wait, spend
the quota on it and are throttled in the middle of steps, which made the step times bimodal and
their median jump between the modes (docs/testing-operator.md).

cgroup v1 (the ``cpu`` controller's ``cpu.cfs_quota_us``, ``cpu.shares``) and v2 (``cpu.max``,
``cpu.weight``, where the root's ``cgroup.subtree_control`` already enables ``cpu``: this never
changes the host's cgroup configuration) are both handled. Needs root. Every process moved in is
moved back to the cgroup it came from, and the cgroup is removed; :meth:`release` checks both.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
#: The scheduling period of the quota: short, so a throttled engine is slowed smoothly rather
#: than stopped for most of a long period.
PERIOD_MICROSECONDS = 20_000
#: cgroup v1 ``cpu.shares`` of a normal task is 1024: 64 times that wins the quota against any
#: load this machine sees (the quota, not the weight, bounds what the engine takes from others).
SHARES = 65536
#: cgroup v2 ``cpu.weight`` of a normal task is 100; 10000 is the most.
WEIGHT = 10000


class CpuBudgetUnavailable(Exception):
    """No cgroup CPU controller this process may use; the reason is the message."""


def _v2_cpu_enabled() -> bool:
    control = ROOT / "cgroup.subtree_control"
    return control.exists() and "cpu" in control.read_text().split()


def unavailable_reason() -> str | None:
    """Why a CPU budget cannot be made here (None when it can)."""
    if os.geteuid() != 0:
        return "a cgroup CPU budget for the engine needs root"
    if (ROOT / "cpu" / "cpu.cfs_quota_us").exists():
        return None
    if (ROOT / "cgroup.controllers").exists():
        if _v2_cpu_enabled():
            return None
        return "cgroup v2 without the cpu controller enabled in the root's subtree_control"
    return "no cgroup CPU controller (neither /sys/fs/cgroup/cpu nor cgroup v2)"


def _own_cgroup(pid: int, v2: bool) -> str:
    """The cgroup path of ``pid`` in the CPU hierarchy, from ``/proc/PID/cgroup``."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if (v2 and number == "0") or (not v2 and "cpu" in controllers.split(",")):
            return path
    raise CpuBudgetUnavailable(f"process {pid} is in no CPU cgroup")


class CpuBudget:
    """One cgroup under the CPU hierarchy's root, named after this process."""

    def __init__(self, name: str, cpus: float | None = None) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise CpuBudgetUnavailable(reason)
        self.v2 = not (ROOT / "cpu" / "cpu.cfs_quota_us").exists()
        self.hierarchy = ROOT if self.v2 else ROOT / "cpu"
        self.path = self.hierarchy / f"{name}-{os.getpid()}"
        #: Where each moved process came from, to put it back.
        self.origins: dict[int, str] = {}
        self.path.mkdir()
        if self.v2:
            (self.path / "cpu.weight").write_text(str(WEIGHT))
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_MICROSECONDS))
            (self.path / "cpu.shares").write_text(str(SHARES))
        self.set_cpus(cpus)

    def set_cpus(self, cpus: float | None) -> None:
        """At most ``cpus`` cores' worth of CPU time for every process in the budget; ``None``
        for no quota (the weight alone)."""
        quota = None if cpus is None else max(int(cpus * PERIOD_MICROSECONDS), 1000)
        if self.v2:
            limit = "max" if quota is None else str(quota)
            (self.path / "cpu.max").write_text(f"{limit} {PERIOD_MICROSECONDS}")
        else:
            (self.path / "cpu.cfs_quota_us").write_text("-1" if quota is None else str(quota))
        self.cpus = cpus

    def add(self, pids: Iterable[int]) -> None:
        """Move whole processes (every thread) into the budget."""
        for pid in pids:
            self.origins[pid] = _own_cgroup(pid, self.v2)
            (self.path / "cgroup.procs").write_text(str(pid))

    def members(self) -> list[int]:
        text = (self.path / "cgroup.procs").read_text() if self.path.exists() else ""
        return [int(p) for p in text.split()]

    def release(self) -> None:
        """Every process back where it came from (or to the root, once its origin is gone), the
        cgroup removed; raises if something stays."""
        for pid in self.members():
            origin = self.hierarchy / self.origins.get(pid, "/").lstrip("/")
            target = origin if origin.is_dir() else self.hierarchy
            with contextlib.suppress(ProcessLookupError):
                (target / "cgroup.procs").write_text(str(pid))
        left = self.members()
        if left:
            raise RuntimeError(f"processes {left} are still in {self.path}")
        if self.path.exists():
            self.path.rmdir()
