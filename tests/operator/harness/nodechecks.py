"""What a test reads off the real node besides the API: the container processes the kubelet
started (their user, capabilities and root file system, from /proc), and the operator pod's
metrics through its pod IP, as Prometheus would scrape them.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

CGROUP_ROOT = Path("/sys/fs/cgroup/pids")


@dataclass(frozen=True)
class ContainerProcess:
    pid: int
    uid: int
    gid: int
    #: Effective capabilities, as the hexadecimal mask of /proc/PID/status.
    capabilities: int
    read_only_root: bool
    no_new_privileges: bool


def container_id(pod: Mapping[str, Any], index: int = 0) -> str | None:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    if len(statuses) <= index or not statuses[index].get("containerID"):
        return None
    return str(statuses[index]["containerID"]).split("://", 1)[1]


def _status_fields(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def _root_is_read_only(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return "ro" in fields[5].split(",")
    raise AssertionError(f"process {pid} has no root mount")


def container_process(pod: Mapping[str, Any]) -> ContainerProcess | None:
    """The first process of the pod's first container, as the kernel sees it; ``None`` when the
    container is not running (any more). Found through the pod's cgroup, where the kubelet and
    runc put it (``kubepods/<qos>/pod<uid>/<container id>``)."""
    found = container_id(pod)
    if found is None:
        return None
    uid = pod["metadata"]["uid"]
    for directory in CGROUP_ROOT.glob(f"kubepods/**/pod{uid}/{found}"):
        pids = (directory / "cgroup.procs").read_text().split()
        if not pids:
            return None
        pid = int(pids[0])
        try:
            status = _status_fields(pid)
            return ContainerProcess(
                pid=pid,
                uid=int(status["Uid"].split()[1]),
                gid=int(status["Gid"].split()[1]),
                capabilities=int(status["CapEff"], 16),
                read_only_root=_root_is_read_only(pid),
                no_new_privileges=status.get("NoNewPrivs") == "1",
            )
        except FileNotFoundError:  # it ended meanwhile
            return None
    return None


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """One scrape of a Prometheus endpoint: every sample by name, as (labels, value)."""
    with urllib.request.urlopen(url, timeout=10) as rsp:
        text = rsp.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return samples


def sample(
    samples: Mapping[str, list[tuple[dict[str, str], float]]], name: str, **labels: str
) -> float | None:
    for have, value in samples.get(name, []):
        if all(have.get(k) == v for k, v in labels.items()):
            return value
    return None
