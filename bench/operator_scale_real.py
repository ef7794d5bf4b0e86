"""The scale benchmark's real-server mode: the same two rounds on a real etcd and kube-apiserver.

The control plane of the real-server tests (``scripts/control-plane.sh``, built once) with the
chart's RBAC; the operator runs as the chart's service account. The tests' stand-in scheduler and
kubelet finish every profiler pod at once with a synthetic result, as the emulator's instant nodes
do. Requests are counted from the API server's audit log of the operator's account (watch
connections excluded); etcd's database size is read from its maintenance status after each size.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from tests.operator.harness import wait_for
from tests.operator.harness.controlplane import ApiRequestError, ControlPlane, build_binaries
from tests.operator.harness.processes import OperatorProcess
from tests.operator.harness.profiles import CRD_PATH, GROUP, PLURAL
from tests.operator.harness.realcluster import RealCluster
from tests.operator.harness.releases import Release, install

NAMESPACE = "roofline-system"


def _reconciled(cluster: RealCluster, nodes: int) -> bool:
    found = cluster.get(PLURAL, "scale", group=GROUP) or {}
    status = found.get("status") or {}
    summary = status.get("summary") or {}
    if (summary.get("matched"), summary.get("profiled")) != (nodes, nodes):
        return False
    ready: dict[str, Any] = next(
        (c for c in status.get("conditions", []) if c.get("type") == "Ready"), {}
    )
    if ready.get("status") != "True" or status.get("observedGeneration") != found.get(
        "metadata", {}
    ).get("generation"):
        return False
    return len(cluster.list("nodes", labels={"roofline.dev/profile": "scale"})) == nodes


def _served(cluster: RealCluster) -> bool:
    try:
        cluster.list_metadata(PLURAL, group=GROUP)
    except ApiRequestError:
        return False
    return True


def _requests(cp: ControlPlane, user: str, since: int) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for event in cp.audit_events(user, since):
        ref = event.get("objectRef") or {}
        if ref.get("resource"):
            resource = ref["resource"] + (
                f"/{ref['subresource']}" if ref.get("subresource") else ""
            )
            counts[(event["verb"], resource)] += 1
    return counts


def _install_operator(cp: ControlPlane, cluster: RealCluster) -> Release:
    """The CRDs, served, and the chart's identity (service account and RBAC) for the operator."""
    crds = [d for d in yaml.safe_load_all(CRD_PATH.read_text()) if d]
    cluster.apply_objects(crds, cp.kubectl_binary)
    wait_for(lambda: _served(cluster), timeout=60, what="the CRD to be served")
    return install(cluster, cp.kubectl_binary, {}, "roofline-operator", NAMESPACE, (NAMESPACE,))


def _timed_round(
    cp: ControlPlane, cluster: RealCluster, user: str, nodes: int, action: Callable[[], object]
) -> Any:
    """From ``action`` to every node reconciled, as ``operator_scale.RoundFigures``, with the
    requests of the operator's account in the audit log meanwhile."""
    from operator_scale import RoundFigures  # the script's own figures

    since = cp.audit_size()
    start = time.monotonic()
    action()
    wait_for(
        lambda: _reconciled(cluster, nodes),
        timeout=1200,
        what=f"{nodes} nodes to be reconciled",
        interval=1.0,
    )
    seconds = time.monotonic() - start
    return RoundFigures(seconds, _requests(cp, user, since), nodes)


def _profile_rounds(
    cp: ControlPlane, cluster: RealCluster, user: str, nodes: int, profile: dict[str, Any]
) -> tuple[Any, int, Any]:
    """The first round (creating the profile), the size of its status after it, and the
    re-profile round (a spec change that affects measurements)."""
    first = _timed_round(
        cp, cluster, user, nodes, lambda: cluster.create(PLURAL, profile, group=GROUP)
    )
    found = cluster.get(PLURAL, "scale", group=GROUP) or {}
    size = len(json.dumps(found.get("status") or {}, separators=(",", ":")).encode())
    reprofile = _timed_round(
        cp,
        cluster,
        user,
        nodes,
        lambda: cluster.patch(
            PLURAL, "scale", {"spec": {"batches": [1, 2, 4, 8, 16]}}, group=GROUP
        ),
    )
    return first, size, reprofile


def measure_real(nodes: int, workdir: Path, models: int) -> Any:
    """One size on the real server, as ``operator_scale.SizeFigures``."""
    from operator_scale import SizeFigures, scale_profile  # the script's own figures

    load_before = os.getloadavg()[0]
    with ControlPlane(build_binaries(), workdir / "control-plane") as cp:
        (workdir / "nodes").mkdir()
        cluster = RealCluster(cp, workdir / "nodes").start()
        try:
            release = _install_operator(cp, cluster)
            for index in range(nodes):
                cluster.add_gpu_node(f"gpu-{index:05d}", labels={"pool": "scale"})
            operator = OperatorProcess(
                release.kubeconfig, workdir, namespace=NAMESPACE, env=release.env
            )
            started = time.monotonic()
            operator.start()
            startup = time.monotonic() - started
            try:
                profile = scale_profile(nodes, models)
                first, size, reprofile = _profile_rounds(
                    cp, cluster, release.username, nodes, profile
                )
                rss = operator.peak_rss_bytes()
                if cluster.internal_errors():
                    raise RuntimeError(f"stand-in nodes failed: {cluster.internal_errors()}")
                load = (load_before, os.getloadavg()[0])
                figures = SizeFigures(nodes, first, reprofile, rss, models, size, startup, load)
                return dataclasses.replace(figures, etcd_db_bytes=cp.etcd_db_size_bytes())
            finally:
                operator.stop()
        finally:
            cluster.stop()
