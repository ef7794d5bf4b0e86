"""The chart's identity and rights on a real API server, as `helm install` would create them.

The chart is rendered with Helm's own engine (``scripts/generate-manifests.py``, the code that
writes ``manifests/``), and only what makes up the operator's identity is applied: namespaces, the
service account, and every Role, ClusterRole and binding. The operator then runs with a bound
token of that service account, so it has exactly the rights the chart grants: a missing verb is
a 403 in the API server's audit log, which the real-server suite fails on.

Without kube-controller-manager nothing creates a namespace's ``default`` service account, which
the ServiceAccount admission plugin needs for the profiler pods; it is created here in each
profiler namespace, as that controller would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.deploy.rendering import generator

from .controlplane import ApiRequestError
from .realcluster import RealCluster

IDENTITY_KINDS = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
)


@dataclass
class Release:
    name: str
    namespace: str
    service_account: str
    kubeconfig: Path
    env: dict[str, str]
    objects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


def render_identity(
    values: Mapping[str, Any], release: str, namespace: str
) -> list[dict[str, Any]]:
    rendered = generator().render_templates(dict(values), release=release, namespace=namespace)
    return [o for objects in rendered.values() for o in objects if o.get("kind") in IDENTITY_KINDS]


def deployment_env(values: Mapping[str, Any], release: str, namespace: str) -> dict[str, str]:
    """The operator container's literal environment, as the chart's Deployment sets it."""
    rendered = generator().render_templates(dict(values), release=release, namespace=namespace)
    deployment = next(
        o for objects in rendered.values() for o in objects if o.get("kind") == "Deployment"
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e}


def install(
    cluster: RealCluster,
    kubectl: Path,
    values: Mapping[str, Any],
    release: str,
    namespace: str,
    profiler_namespaces: tuple[str, ...],
    transform: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
) -> Release:
    """Apply the release's identity; ``transform`` may alter the rendered objects first (to
    show that the suite notices a rule gone missing)."""
    objects = render_identity(values, release, namespace)
    if transform is not None:
        objects = transform(objects)
    namespaces = {namespace, *profiler_namespaces}
    for name in sorted(namespaces):
        try:
            cluster.create("namespaces", {"metadata": {"name": name}})
        except ApiRequestError as error:
            if error.status != 409:
                raise
    cluster.apply_objects([o for o in objects if o["kind"] != "Namespace"], kubectl)
    for name in sorted(namespaces):
        try:
            cluster.create("serviceaccounts", {"metadata": {"name": "default"}}, namespace=name)
        except ApiRequestError as error:
            if error.status != 409:
                raise
    account = next(o for o in objects if o["kind"] == "ServiceAccount")["metadata"]["name"]
    kubeconfig = cluster.control_plane.service_account_kubeconfig(
        namespace, account, cluster.workdir / f"{release}.kubeconfig"
    )
    # In a pod the operator reads its namespace from the service-account token's directory.
    env = {**deployment_env(values, release, namespace), "ROOFLINE_OPERATOR_NAMESPACE": namespace}
    return Release(release, namespace, account, kubeconfig, env, objects)
