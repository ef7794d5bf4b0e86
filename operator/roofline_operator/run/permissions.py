"""Every Kubernetes API permission the operator uses, and why: the one source of its RBAC.

The chart's ClusterRole and Roles, the generated ``manifests/`` and the table in
``docs/operator.md`` are checked against this table (``tests/deploy/test_rbac.py``), and the
table against the code: the requests :class:`~roofline_operator.run.kubeapi.KubeClient` sends (each
of its methods, recorded) and the resources Kopf watches for the registered handlers. A verb the
code uses and the chart lacks fails there, and so does a granted verb nothing uses.

Pure module: no Kubernetes client, no Kopf.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from roofline_operator.core.names import GROUP, PLURAL
from roofline_operator.decide.node_features import NFD_GROUP, NFD_PLURAL


class Scope(str, enum.Enum):
    """Where a permission is granted."""

    #: The ClusterRole.
    CLUSTER = "cluster"
    #: A Role in each profiler namespace (``--namespace`` and every ``--extra-namespace``).
    PROFILER_NAMESPACES = "profiler namespaces"
    #: A Role in the operator's own namespace.
    OPERATOR_NAMESPACE = "operator namespace"


class Caller(str, enum.Enum):
    #: :class:`~roofline_operator.run.kubeapi.KubeClient`, the operator's own requests.
    OPERATOR = "operator"
    #: Kopf: watches for the handlers, finalizers, Events, resource and namespace discovery.
    KOPF = "kopf"


#: Conditions under which a permission is needed; ``None`` is always.
NODE_BACKEND = "nodeLabels.backend=node"
NODE_FEATURE_BACKEND = "nodeLabels.backend=nodeFeature"
PEERING = "--peering"


@dataclass(frozen=True)
class Permission:
    group: str
    resource: str
    verbs: tuple[str, ...]
    scope: Scope
    caller: Caller
    why: str
    #: When the permission is needed (one of the conditions above); ``None``: always.
    when: str | None = None


PERMISSIONS: tuple[Permission, ...] = (
    Permission(
        GROUP,
        PLURAL,
        ("list", "watch"),
        Scope.CLUSTER,
        Caller.KOPF,
        "watch the profiles (daemons, the claim index, the finalizer)",
    ),
    Permission(
        GROUP,
        PLURAL,
        ("patch",),
        Scope.CLUSTER,
        Caller.KOPF,
        "Kopf's finalizer and progress annotations",
    ),
    Permission(
        GROUP,
        f"{PLURAL}/status",
        ("patch",),
        Scope.CLUSTER,
        Caller.OPERATOR,
        "the status, one merge patch per round",
    ),
    Permission(
        GROUP,
        f"{PLURAL}/finalizers",
        ("update",),
        Scope.CLUSTER,
        Caller.OPERATOR,
        "profiler pods' owner reference with blockOwnerDeletion (checked by the API server "
        "when the pod is created)",
    ),
    Permission(
        "",
        "nodes",
        ("list", "watch"),
        Scope.CLUSTER,
        Caller.OPERATOR,
        "select nodes (a priming LIST, then Kopf's watch)",
    ),
    Permission(
        "",
        "nodes",
        ("patch",),
        Scope.CLUSTER,
        Caller.OPERATOR,
        "roofline.dev/* labels and the record annotation, one merge patch",
        NODE_BACKEND,
    ),
    Permission(
        "",
        "pods",
        ("create", "delete", "deletecollection", "get", "list", "watch"),
        Scope.PROFILER_NAMESPACES,
        Caller.OPERATOR,
        "profiler pods: create, watch, look up one the watch lags on, delete finished ones by "
        "collection (label-selected; a node where a look-alike shows is left out)",
    ),
    Permission(
        "",
        "configmaps",
        ("get",),
        Scope.PROFILER_NAMESPACES,
        Caller.OPERATOR,
        "model configs named by spec.models[].configMapRef; the models ConfigMap read back "
        "each round before a pod mounts it (owner, immutability and content checked)",
    ),
    Permission(
        "",
        "configmaps",
        ("create", "delete"),
        Scope.PROFILER_NAMESPACES,
        Caller.OPERATOR,
        "the ConfigMap that carries a profile's models to its pods (mounted, not argv), "
        "named after the profile's UID; deleted only with the UID it was created with",
    ),
    Permission(
        "",
        "events",
        ("create",),
        Scope.OPERATOR_NAMESPACE,
        Caller.KOPF,
        "Events of the (cluster-scoped) profiles, posted in the operator's namespace",
    ),
    Permission(
        NFD_GROUP,
        NFD_PLURAL,
        ("create", "patch", "delete", "list"),
        Scope.OPERATOR_NAMESPACE,
        Caller.OPERATOR,
        "one NodeFeature per profile and node, rewritten whole (a JSON patch); listed to restore "
        "records and to release a profile",
        NODE_FEATURE_BACKEND,
    ),
    Permission(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        ("list", "watch"),
        Scope.CLUSTER,
        Caller.KOPF,
        "Kopf's resource discovery",
    ),
    Permission(
        "",
        "namespaces",
        ("list", "watch"),
        Scope.CLUSTER,
        Caller.KOPF,
        "Kopf follows the profiler namespaces appearing and disappearing",
    ),
    Permission(
        "kopf.dev",
        "clusterkopfpeerings",
        ("get", "list", "watch", "patch"),
        Scope.CLUSTER,
        Caller.KOPF,
        "peering between replicas (the chart runs one replica, --standalone)",
        PEERING,
    ),
)

#: A grant: ``(scope, API group, resource)`` to its verbs.
Grants = dict[tuple[Scope, str, str], frozenset[str]]


def required(conditions: Iterable[str]) -> Grants:
    """The grants the operator needs when ``conditions`` hold (e.g. the label backend)."""
    active = set(conditions)
    grants: dict[tuple[Scope, str, str], set[str]] = {}
    for permission in PERMISSIONS:
        if permission.when is None or permission.when in active:
            key = (permission.scope, permission.group, permission.resource)
            grants.setdefault(key, set()).update(permission.verbs)
    return {key: frozenset(verbs) for key, verbs in grants.items()}


def markdown_table() -> str:
    """The RBAC table of ``docs/operator.md``."""
    lines = [
        "| scope | API group | resource | verbs | used by | why |",
        "|---|---|---|---|---|---|",
    ]
    for p in PERMISSIONS:
        when = f" (only with `{p.when}`)" if p.when else ""
        group = f"`{p.group}`" if p.group else "core"
        verbs = ", ".join(p.verbs)
        lines.append(
            f"| {p.scope.value} | {group} | `{p.resource}` | {verbs} | {p.caller.value} | "
            f"{p.why}{when} |"
        )
    return "\n".join(lines) + "\n"
