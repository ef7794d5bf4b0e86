"""The operator's permissions (``roofline_operator.run.permissions``) as single requests, checked
against a real API server.

``PERMISSIONS`` is the product's one source of its RBAC; ``tests/deploy/test_rbac.py`` keeps the
chart equal to it and it equal to the code. The real-server suite checks it both ways against a
real API server: each request it lists is allowed to the chart's service account (a
``SubjectAccessReview`` against the rules the chart installed), and every request the operator
actually made during the suite (the API server's audit log) is one it lists, so the table cannot
drift from what the operator does on a real cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from roofline_operator.run.permissions import (
    NODE_BACKEND,
    NODE_FEATURE_BACKEND,
    PEERING,
    PERMISSIONS,
    Scope,
)

from .controlplane import ApiClient

#: Where a request goes: cluster-scoped (a cluster-wide list or watch included), the release's
#: namespace (events, NodeFeatures), or the profiler namespace (pods, ConfigMaps).
CLUSTER, RELEASE_NAMESPACE, PROFILER_NAMESPACE = (
    "cluster",
    "release namespace",
    "profiler namespace",
)
_SCOPES = {
    Scope.CLUSTER: CLUSTER,
    Scope.OPERATOR_NAMESPACE: RELEASE_NAMESPACE,
    Scope.PROFILER_NAMESPACES: PROFILER_NAMESPACE,
}
_BACKENDS = {None: "any", NODE_BACKEND: "node", NODE_FEATURE_BACKEND: "nodeFeature"}


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


#: One row per verb of every permission the chart grants by default (peering is off).
OPERATOR_REQUESTS = tuple(
    Request(
        f"{p.caller.value}: {p.why}",
        verb,
        p.group,
        p.resource.partition("/")[0],
        p.resource.partition("/")[2],
        _SCOPES[p.scope],
        _BACKENDS[p.when],
    )
    for p in PERMISSIONS
    if p.when != PEERING
    for verb in p.verbs
)


def namespace_of(request: Request, release_namespace: str, profiler_namespace: str) -> str:
    return {
        CLUSTER: "",
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
