"""A real cluster for the tests: the control plane, the stand-in nodes, and the admin's hands.

The same reading and writing surface as the emulated :class:`Cluster` (``get``, ``list``,
``create``, ``patch``, ``delete``, ``add_gpu_node``, ``set_fault``, ``finished_pods``), so the
profile helpers work on both; everything goes through the real API server as the admin. Nodes are
created as a kubelet registers them, then their capacity (GPUs included) is written through the
``nodes/status`` subresource, which a plain create ignores, and the not-ready taint the API
server puts on every new node is lifted as the node lifecycle controller would.
"""

from __future__ import annotations

import builtins
import json
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from .cluster import ObjectReads, gpu_node
from .controlplane import ApiRequestError, ControlPlane
from .faults import FaultBook, FaultMode, SyntheticGpu
from .kubelet import PodRun
from .standin import StandInNodes

MERGE = "application/merge-patch+json"
#: Served version of each API group the tests touch.
GROUP_VERSIONS = {
    "": "v1",
    "roofline.dev": "v1alpha1",
    "nfd.k8s-sigs.io": "v1alpha1",
    "apiextensions.k8s.io": "v1",
    "rbac.authorization.k8s.io": "v1",
    "apps": "v1",
    "coordination.k8s.io": "v1",
}


def resource_path(plural: str, namespace: str | None = None, group: str = "") -> str:
    version = GROUP_VERSIONS[group]
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    if namespace:
        base += f"/namespaces/{namespace}"
    return f"{base}/{plural}"


class ApiObjects(ObjectReads):
    """Reading and writing objects on a real control plane as its admin, and ``kubectl apply``."""

    def __init__(self, control_plane: ControlPlane, workdir: Path) -> None:
        self.control_plane = control_plane
        self.api = control_plane.admin
        self.workdir = workdir

    @property
    def kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    # ---------------------------------------------------------------- objects
    def get(
        self, plural: str, name: str, namespace: str | None = None, group: str = ""
    ) -> dict[str, Any] | None:
        try:
            return self.api.request("GET", f"{resource_path(plural, namespace, group)}/{name}")
        except ApiRequestError as error:
            if error.status == 404:
                return None
            raise

    def list(
        self,
        plural: str,
        namespace: str | None = None,
        group: str = "",
        labels: Mapping[str, str] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        query = ""
        if labels:
            query = "?" + urlencode(
                {"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())}
            )
        items: builtins.list[dict[str, Any]] = self.api.request(
            "GET", resource_path(plural, namespace, group) + query
        )["items"]
        return items

    def list_metadata(
        self, plural: str, namespace: str | None = None, group: str = ""
    ) -> dict[str, Any]:
        """A list's own metadata (its ``resourceVersion``: the cluster's state as of now)."""
        listed = self.api.request("GET", resource_path(plural, namespace, group) + "?limit=1")
        metadata: dict[str, Any] = listed["metadata"]
        return metadata

    def create(
        self, plural: str, body: dict[str, Any], namespace: str | None = None, group: str = ""
    ) -> dict[str, Any]:
        return self.api.request("POST", resource_path(plural, namespace, group), body)

    def patch(
        self,
        plural: str,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
        group: str = "",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        path = f"{resource_path(plural, namespace, group)}/{quote(name)}"
        if subresource:
            path += f"/{subresource}"
        return self.api.request("PATCH", path, patch, MERGE)

    def delete(self, plural: str, name: str, namespace: str | None = None, group: str = "") -> None:
        self.api.request("DELETE", f"{resource_path(plural, namespace, group)}/{quote(name)}")

    def apply_objects(self, objects: Iterable[Mapping[str, Any]], kubectl: Path) -> None:
        """``kubectl apply`` of the objects, server-side, as an installer would."""
        documents = {"apiVersion": "v1", "kind": "List", "items": [dict(o) for o in objects]}
        path = self.workdir / f"apply-{len(list(self.workdir.glob('apply-*')))}.json"
        path.write_text(json.dumps(documents))
        result = subprocess.run(
            [
                str(kubectl),
                "--kubeconfig",
                str(self.kubeconfig),
                "apply",
                "--server-side",
                "--force-conflicts",
                "-f",
                str(path),
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise AssertionError(f"kubectl apply failed:\n{result.stdout}{result.stderr}")


class RealCluster(ApiObjects):
    """The control plane with the stand-in scheduler and kubelet of test nodes."""

    def __init__(self, control_plane: ControlPlane, workdir: Path) -> None:
        super().__init__(control_plane, workdir)
        self.faults = FaultBook(default=FaultMode.SUCCEED_INSTANTLY)
        self.nodes = StandInNodes(self.api, self.faults, workdir)

    def start(self) -> RealCluster:
        self.nodes.start()
        return self

    def stop(self) -> None:
        self.nodes.stop()

    # ---------------------------------------------------------------- nodes and faults
    def add_gpu_node(
        self,
        name: str,
        mode: FaultMode | None = None,
        synthetic_gpus: tuple[SyntheticGpu, ...] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        self.set_fault(name, mode)
        if synthetic_gpus is not None:
            self.faults.gpus[name] = synthetic_gpus
        node = gpu_node(name, **kwargs)
        status = node.pop("status")
        self.create("nodes", node)
        self.patch("nodes", name, {"status": status}, subresource="status")
        # The TaintNodesByCondition admission plugin taints every new node not-ready; the node
        # lifecycle controller lifts the taint once the node reports Ready. Without
        # kube-controller-manager, that is done here.
        return self.patch("nodes", name, {"spec": {"taints": node["spec"]["taints"] or None}})

    def set_fault(self, node: str, mode: FaultMode | None) -> None:
        if mode is None:
            self.faults.modes.pop(node, None)
        else:
            self.faults.modes[node] = mode

    def runs(self, nodes: Iterable[str] | None = None) -> builtins.list[PodRun]:
        wanted = None if nodes is None else set(nodes)
        return [r for r in self.nodes.kubelet.runs if wanted is None or r.node in wanted]

    def finished_pods(
        self, labels: Mapping[str, str] | None = None
    ) -> builtins.list[dict[str, Any]]:
        """Pods as they stood when they ended, including those deleted since."""
        wanted = dict(labels or {})
        return [
            p
            for p in list(self.nodes.kubelet.finished)
            if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]

    def internal_errors(self) -> builtins.list[str]:
        return list(self.nodes.errors)
