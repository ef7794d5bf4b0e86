"""What the operator asks of the API server, code path by code path, and how to check a grant.

:data:`OPERATOR_REQUESTS` is the list the chart's RBAC must cover. The real-server suite checks
it both ways: each row is allowed to the chart's service account (a ``SubjectAccessReview``
against the rules the chart installed), and every request the operator actually made during the
suite (the API server's audit log) matches a row, so the table cannot drift from the code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .controlplane import ApiClient

#: Where a request goes: cluster-scoped, any namespace (a cluster-wide list/watch), the
#: release's namespace (events, NodeFeatures), or the profiler namespace (pods, ConfigMaps).
CLUSTER, ALL_NAMESPACES, RELEASE_NAMESPACE, PROFILER_NAMESPACE = (
    "cluster",
    "all namespaces",
    "release namespace",
    "profiler namespace",
)


@dataclass(frozen=True)
class Request:
    code_path: str
    verb: str
    group: str
    resource: str
    subresource: str = ""
    scope: str = CLUSTER
    backend: str = "any"  # "node" or "nodeFeature" when only one label backend makes it

    @property
    def resource_name(self) -> str:
        return self.resource + (f"/{self.subresource}" if self.subresource else "")


R = "roofline.dev"
NFD = "nfd.k8s-sigs.io"
OPERATOR_REQUESTS = (
    Request("Kopf: watch profiles", "list", R, "rooflineprofiles"),
    Request("Kopf: watch profiles", "watch", R, "rooflineprofiles"),
    Request("Kopf: finalizer and progress annotations", "patch", R, "rooflineprofiles"),
    Request("status writes (status.py)", "patch", R, "rooflineprofiles", "status"),
    Request(
        "profiler pods' blockOwnerDeletion owner reference",
        "update",
        R,
        "rooflineprofiles",
        "finalizers",
    ),
    Request("node watch (nodes.py)", "list", "", "nodes"),
    Request("node watch (nodes.py)", "watch", "", "nodes"),
    Request("node labels and records (apply.py)", "patch", "", "nodes", backend="node"),
    Request("pod watch (pods.py)", "list", "", "pods", scope=ALL_NAMESPACES),
    Request("pod watch (pods.py)", "watch", "", "pods", scope=ALL_NAMESPACES),
    Request("profiler pods (apply.py)", "create", "", "pods", scope=PROFILER_NAMESPACE),
    Request("profiler pods (apply.py)", "delete", "", "pods", scope=PROFILER_NAMESPACE),
    Request(
        "finished pods in one request (apply.py)",
        "deletecollection",
        "",
        "pods",
        scope=PROFILER_NAMESPACE,
    ),
    Request("pods of a round, primed (kubeapi.py)", "list", "", "pods", scope=PROFILER_NAMESPACE),
    Request("model configs (model_sources.py)", "get", "", "configmaps", scope=PROFILER_NAMESPACE),
    Request("Kopf: events", "create", "", "events", scope=RELEASE_NAMESPACE),
    Request(
        "Kopf: resource discovery", "list", "apiextensions.k8s.io", "customresourcedefinitions"
    ),
    Request(
        "Kopf: resource discovery", "watch", "apiextensions.k8s.io", "customresourcedefinitions"
    ),
    Request("Kopf: namespaces", "list", "", "namespaces"),
    Request("Kopf: namespaces", "watch", "", "namespaces"),
    Request(
        "record annotations on NodeFeatures, read back (engine.py)",
        "list",
        NFD,
        "nodefeatures",
        scope=RELEASE_NAMESPACE,
        backend="nodeFeature",
    ),
    Request(
        "NodeFeatures (apply.py)",
        "create",
        NFD,
        "nodefeatures",
        scope=RELEASE_NAMESPACE,
        backend="nodeFeature",
    ),
    Request(
        "NodeFeatures (apply.py)",
        "patch",
        NFD,
        "nodefeatures",
        scope=RELEASE_NAMESPACE,
        backend="nodeFeature",
    ),
    Request(
        "NodeFeatures (apply.py)",
        "delete",
        NFD,
        "nodefeatures",
        scope=RELEASE_NAMESPACE,
        backend="nodeFeature",
    ),
    Request(
        "a deleted profile's NodeFeatures (kubeapi.py)",
        "deletecollection",
        NFD,
        "nodefeatures",
        scope=RELEASE_NAMESPACE,
        backend="nodeFeature",
    ),
)


def namespace_of(request: Request, release_namespace: str, profiler_namespace: str) -> str:
    return {
        CLUSTER: "",
        ALL_NAMESPACES: "",
        RELEASE_NAMESPACE: release_namespace,
        PROFILER_NAMESPACE: profiler_namespace,
    }[request.scope]


def allowed(api: ApiClient, user: str, request: Request, namespace: str) -> tuple[bool, str]:
    """Whether RBAC lets ``user`` (a service account) make ``request``: (allowed, reason)."""
    namespace_name = user.split(":")[2] if user.startswith("system:serviceaccount:") else ""
    attributes: dict[str, Any] = {
        "verb": request.verb,
        "group": request.group,
        "resource": request.resource,
        "subresource": request.subresource,
    }
    if namespace:
        attributes["namespace"] = namespace
    review = api.request(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{namespace_name}",
                    "system:authenticated",
                ],
                "resourceAttributes": attributes,
            },
        },
    )
    status = review.get("status", {})
    return bool(status.get("allowed")), str(status.get("reason") or status.get("evaluationError"))


def undeclared(
    events: Iterable[Mapping[str, Any]], release_namespace: str, profiler_namespace: str
) -> list[str]:
    """Audited resource requests that no row of :data:`OPERATOR_REQUESTS` declares."""
    rows = {
        (
            r.verb,
            r.group,
            r.resource_name,
            namespace_of(r, release_namespace, profiler_namespace),
        )
        for r in OPERATOR_REQUESTS
    }
    found = []
    for event in events:
        ref = event.get("objectRef")
        if not ref:
            continue  # discovery and other non-resource requests
        verb = event["verb"]
        key = (
            verb,
            ref.get("apiGroup", ""),
            ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else ""),
            ref.get("namespace", ""),
        )
        if key not in rows:
            found.append(" ".join(part or "-" for part in key))
    return sorted(set(found))
