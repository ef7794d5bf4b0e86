"""The chart installed on the real node as a platform engineer installs it, operator pod and all.

The chart is rendered with Helm's engine (``scripts/generate-manifests.py``, as every chart test
does) and applied with the real ``kubectl``, objects in the order ``helm install`` applies them
(service account and RBAC before the Deployment that needs them), its CRD first as Helm installs
a chart's ``crds/``. The images are the ones ``make images`` built and the node imported, used
with ``imagePullPolicy: Never``: nothing is pulled, and a missing image is an error rather than a
download attempt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.deploy.rendering import generator

from .nodeconfig import GPU_RESOURCE
from .processes import Kubectl
from .waiting import wait_for

#: ``helm install``'s order for the kinds the chart renders (Helm's InstallOrder).
INSTALL_ORDER = (
    "Namespace",
    "ServiceAccount",
    "ConfigMap",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
)
#: Short rounds, as every operator test runs; the chart passes them as extra arguments.
TEST_OPERATOR_ARGS = ["--resync-seconds=2", "--batch-window-seconds=0.1"]


def image_values(reference: str) -> dict[str, str]:
    """``registry/repository:tag`` as the chart's image values."""
    name, _, tag = reference.rpartition(":")
    registry, _, repository = name.partition("/")
    return {"registry": registry, "repository": repository, "tag": tag}


def node_values(operator_image: str, profiler_image: str) -> dict[str, Any]:
    """The chart's values for the real node: its images, and a toleration of the GPU taint, since
    the only node is a GPU node (a cluster would run the operator on a CPU node)."""
    return {
        "image": {**image_values(operator_image), "pullPolicy": "Never"},
        "profiler": {"image": image_values(profiler_image)},
        "operator": {"extraArgs": TEST_OPERATOR_ARGS},
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }


def install_order(obj: Mapping[str, Any]) -> int:
    kind = obj.get("kind", "")
    return INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)


def render_release(values: Mapping[str, Any], release: str, namespace: str) -> list[dict[str, Any]]:
    rendered = generator().render_templates(dict(values), release=release, namespace=namespace)
    objects = [o for documents in rendered.values() for o in documents]
    return sorted(objects, key=install_order)


@dataclass
class NodeRelease:
    name: str
    namespace: str
    objects: list[dict[str, Any]] = field(default_factory=list)

    def the(self, kind: str) -> dict[str, Any]:
        (found,) = [o for o in self.objects if o["kind"] == kind]
        return found

    @property
    def service_account(self) -> str:
        return str(self.the("ServiceAccount")["metadata"]["name"])

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    @property
    def deployment(self) -> str:
        return str(self.the("Deployment")["metadata"]["name"])

    @property
    def pod_labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.the("Deployment")["spec"]["selector"]["matchLabels"]
        return labels


def install_crds(kubectl: Kubectl, workdir: Path) -> None:
    crds = generator().chart_crds()
    path = workdir / "crds.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))
    kubectl("apply", "-f", str(path))
    for crd in crds:
        # Polled: `kubectl wait` errors out on a CRD whose status has no conditions yet.
        name = crd["metadata"]["name"]
        wait_for(
            lambda name=name: any(
                (c["type"], c["status"]) == ("Established", "True")
                for c in kubectl.json("get", "crd", name).get("status", {}).get("conditions") or []
            ),
            60,
            f"CRD {name} to be established",
            interval=0.5,
        )


def install(
    kubectl: Kubectl,
    workdir: Path,
    values: Mapping[str, Any],
    release: str,
    namespace: str,
    transform: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
) -> NodeRelease:
    """``helm install --create-namespace``: the chart's CRDs, then its objects with kubectl;
    ``transform`` may break the rendered objects first (to show the suite notices)."""
    objects = render_release(values, release, namespace)
    if transform is not None:
        objects = transform(objects)
    install_crds(kubectl, workdir)
    if kubectl("get", "namespace", namespace, check=False).returncode != 0:
        kubectl("create", "namespace", namespace)
    path = workdir / f"{release}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    kubectl("apply", "-f", str(path))
    return NodeRelease(release, namespace, objects)


def uninstall(kubectl: Kubectl, workdir: Path, release: NodeRelease) -> None:
    """``helm uninstall``: the release's objects deleted, the operator pod gone with them."""
    path = workdir / f"{release.name}-uninstall.json"
    items = [o for o in release.objects if o["kind"] != "Namespace"]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    kubectl("delete", "-f", str(path), "--wait=true", "--ignore-not-found", timeout=120)
    selector = ",".join(f"{k}={v}" for k, v in release.pod_labels.items())
    wait_for(
        lambda: not kubectl.json("get", "pods", "-n", release.namespace, "-l", selector)["items"],
        120,
        "the operator pod to be gone",
        interval=0.5,
    )


def operator_pod(kubectl: Kubectl, release: NodeRelease) -> dict[str, Any] | None:
    """The release's operator pod that is Ready, if one is."""
    selector = ",".join(f"{k}={v}" for k, v in release.pod_labels.items())
    pods = kubectl.json("get", "pods", "-n", release.namespace, "-l", selector)["items"]
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        conditions = pod.get("status", {}).get("conditions") or []
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            found: dict[str, Any] = pod
            return found
    return None


def wait_operator_ready(
    kubectl: Kubectl, release: NodeRelease, timeout: float = 120
) -> dict[str, Any]:
    return wait_for(
        lambda: operator_pod(kubectl, release),
        timeout,
        f"the {release.name} operator pod to be Ready",
        interval=0.5,
    )
