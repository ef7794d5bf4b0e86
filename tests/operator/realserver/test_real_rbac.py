"""The chart's RBAC against what the operator's code paths ask of the API server.

Every row of ``OPERATOR_REQUESTS`` must be allowed to the chart's service account by the rules the
chart installed (a SubjectAccessReview on the real server); the suite's fixture separately checks
that every request the operator made is a row of that table and none was refused.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.operator.harness.operator_rights import OPERATOR_REQUESTS, Request, allowed, namespace_of
from tests.operator.harness.realcluster import RealCluster
from tests.operator.harness.realsuite import NFD_NAMESPACE, PROFILER_NAMESPACE
from tests.operator.harness.releases import Release, install


def _rows(backend: str) -> list[Any]:
    return [
        pytest.param(r, id=f"{r.verb}-{r.resource_name.replace('/', '-')}-{r.scope.split()[0]}")
        for r in OPERATOR_REQUESTS
        if r.backend in ("any", backend)
    ]


@pytest.mark.parametrize("request_", _rows("node"))
def test_the_chart_grants_each_request_of_the_node_backend(
    real_cluster: RealCluster, node_release: Release, request_: Request
) -> None:
    namespace = namespace_of(request_, node_release.namespace, PROFILER_NAMESPACE)
    ok, reason = allowed(real_cluster.api, node_release.username, request_, namespace)
    assert ok, f"{request_.code_path}: {request_.verb} {request_.resource_name} denied: {reason}"


@pytest.mark.parametrize("request_", _rows("nodeFeature"))
def test_the_chart_grants_each_request_of_the_node_feature_backend(
    real_cluster: RealCluster, nfd_release: Release, request_: Request
) -> None:
    namespace = namespace_of(request_, nfd_release.namespace, NFD_NAMESPACE)
    ok, reason = allowed(real_cluster.api, nfd_release.username, request_, namespace)
    assert ok, f"{request_.code_path}: {request_.verb} {request_.resource_name} denied: {reason}"


def _without_verb(objects: list[dict[str, Any]], resource: str, verb: str) -> list[dict[str, Any]]:
    changed = copy.deepcopy(objects)
    for obj in changed:
        for rule in obj.get("rules", []):
            if resource in rule.get("resources", []) and verb in rule["verbs"]:
                rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    return changed


@pytest.mark.parametrize(
    ("resource", "verb"),
    [
        pytest.param("nodes", "patch", id="nodes-patch"),
        pytest.param("pods", "deletecollection", id="pods-deletecollection"),
    ],
)
def test_removing_a_verb_from_the_chart_fails_the_check(
    real_cluster: RealCluster, resource: str, verb: str
) -> None:
    """The check has teeth: a release whose rules lack one verb is denied exactly that."""
    release = install(
        real_cluster,
        real_cluster.control_plane.kubectl_binary,
        {},
        f"rbac-{resource}-{verb}",
        f"rbac-{resource}",
        (f"rbac-{resource}",),
        transform=lambda objects: _without_verb(objects, resource, verb),
    )
    denied = [
        r
        for r in OPERATOR_REQUESTS
        if r.backend in ("any", "node")
        and not allowed(
            real_cluster.api,
            release.username,
            r,
            namespace_of(r, release.namespace, release.namespace),
        )[0]
    ]
    assert [(r.verb, r.resource_name) for r in denied] == [(verb, resource)]
