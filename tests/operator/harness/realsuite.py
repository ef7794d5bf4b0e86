"""What the real-server suite's tests share: namespaces, and operators run as a release's
service account whose requests are checked against the audit log."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .faults import FaultMode
from .operator_rights import undeclared
from .processes import OperatorProcess
from .realcluster import RealCluster
from .releases import Release

PROFILER_NAMESPACE = "roofline-system"
NFD_NAMESPACE = "roofline-nfd"
TEST_OPERATOR_ARGS = ("--resync-seconds", "2", "--batch-window-seconds", "0.1")


@dataclass
class RealOperators:
    """Starts ``roofline operator`` as a release's service account; checks its requests."""

    cluster: RealCluster
    workdir: Path

    def __post_init__(self) -> None:
        self.started: list[tuple[OperatorProcess, Release]] = []
        self.audit_start = self.cluster.control_plane.audit_size()

    def start(self, release: Release, *extra_args: str, wait: bool = True) -> OperatorProcess:
        workdir = self.workdir / f"operator-{len(self.started)}"
        workdir.mkdir()
        process = OperatorProcess(
            release.kubeconfig,
            workdir,
            namespace=release.namespace,
            extra_args=[*TEST_OPERATOR_ARGS, *extra_args],
            env=release.env,
        )
        self.started.append((process, release))
        return process.start(wait=wait)

    def forbidden(self) -> list[str]:
        """Every request of the started operators' accounts that the API server refused (403)."""
        users = {release.username for _, release in self.started}
        refused = []
        for user in sorted(users):
            for event in self.cluster.control_plane.audit_events(user, self.audit_start):
                received = datetime.fromisoformat(
                    event["requestReceivedTimestamp"].replace("Z", "+00:00")
                ).timestamp()
                if self.cluster.control_plane.during_outage(received):
                    continue
                if event.get("responseStatus", {}).get("code") == 403:
                    ref = event.get("objectRef", {})
                    refused.append(
                        f"{event['verb']} {ref.get('apiGroup', '')}/{ref.get('resource')}"
                        f"{'/' + ref['subresource'] if ref.get('subresource') else ''}"
                        f" in {ref.get('namespace', '(cluster)')} by {user}"
                    )
        return refused

    def undeclared(self) -> list[str]:
        """Requests the operators made that no code path in ``OPERATOR_REQUESTS`` declares."""
        found: list[str] = []
        for _, release in self.started:
            events = self.cluster.control_plane.audit_events(release.username, self.audit_start)
            found += undeclared(events, release.namespace, release.namespace)
        return sorted(set(found))


def remove_everything(cluster: RealCluster) -> None:
    """Leave the shared cluster as the next test expects it: no profiles, nodes or pods."""
    for profile in cluster.list("rooflineprofiles", group="roofline.dev"):
        name = profile["metadata"]["name"]
        cluster.patch(
            "rooflineprofiles", name, {"metadata": {"finalizers": None}}, group="roofline.dev"
        )
        if cluster.get("rooflineprofiles", name, group="roofline.dev"):
            cluster.delete("rooflineprofiles", name, group="roofline.dev")
    for namespace in (PROFILER_NAMESPACE, NFD_NAMESPACE):
        if cluster.get("namespaces", namespace) is None:
            continue
        for pod in cluster.list("pods", namespace):
            cluster.nodes.pods_api.remove_now("pods", namespace, pod["metadata"]["name"])
        for feature in cluster.list("nodefeatures", namespace, group="nfd.k8s-sigs.io"):
            cluster.delete(
                "nodefeatures", feature["metadata"]["name"], namespace, group="nfd.k8s-sigs.io"
            )
        for config in cluster.list("configmaps", namespace):
            if config["metadata"]["name"] != "kube-root-ca.crt":
                cluster.delete("configmaps", config["metadata"]["name"], namespace)
    for node in cluster.list("nodes"):
        cluster.delete("nodes", node["metadata"]["name"])
    cluster.faults.modes.clear()
    cluster.faults.gpus.clear()
    cluster.faults.default = FaultMode.SUCCEED_INSTANTLY


def labels_of(cluster: RealCluster, node: str) -> dict[str, Any]:
    found = cluster.get("nodes", node) or {}
    return dict(found.get("metadata", {}).get("labels") or {})
