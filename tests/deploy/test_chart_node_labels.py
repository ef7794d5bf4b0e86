"""The node-label backend: node patches by default, NFD NodeFeature objects on request.

RBAC follows the choice: the node backend may patch nodes and has no NodeFeature access; the
nodeFeature backend may not patch nodes and manages NodeFeatures only in the release namespace.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from .rendering import CHART_DIR, NAMESPACE, objects_of_kind, render_objects, the_one

NFD = {"nodeLabels": {"backend": "nodeFeature"}}
NFD_VERBS = {"create", "patch", "delete", "list"}


def env_of(objects: list[dict[str, Any]]) -> dict[str, str]:
    (container,) = the_one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def verbs_on(objects: list[dict[str, Any]], group: str, resource: str) -> dict[str, set[str]]:
    """Verbs granted on a resource, per namespace ("" for the ClusterRole)."""
    granted: dict[str, set[str]] = {}
    for kind in ("ClusterRole", "Role"):
        for role in objects_of_kind(objects, kind):
            for rule in role["rules"]:
                if group in rule["apiGroups"] and resource in rule["resources"]:
                    where = role["metadata"].get("namespace", "")
                    granted.setdefault(where, set()).update(rule["verbs"])
    return granted


@pytest.mark.parametrize(
    ("values", "backend"),
    [pytest.param({}, "node", id="default"), pytest.param(NFD, "nodeFeature", id="nfd")],
)
def test_the_backend_reaches_the_operator_as_an_environment_variable(
    values: dict[str, Any], backend: str
) -> None:
    assert env_of(render_objects(values))["ROOFLINE_NODE_LABEL_BACKEND"] == backend


def test_extra_environment_variables_are_kept_beside_the_backend() -> None:
    values = {"operator": {"extraEnv": [{"name": "TZ", "value": "UTC"}]}} | NFD
    assert env_of(render_objects(values)) == {
        "ROOFLINE_NODE_LABEL_BACKEND": "nodeFeature",
        "ROOFLINE_STATUS_MAX_NODES": "100",
        "TZ": "UTC",
    }


def test_the_node_backend_patches_nodes_and_has_no_node_features() -> None:
    objects = render_objects({})
    assert verbs_on(objects, "", "nodes") == {"": {"list", "watch", "patch"}}
    assert verbs_on(objects, "nfd.k8s-sigs.io", "nodefeatures") == {}


def test_the_node_feature_backend_never_patches_nodes() -> None:
    objects = render_objects(NFD)
    assert verbs_on(objects, "", "nodes") == {"": {"list", "watch"}}
    assert verbs_on(objects, "nfd.k8s-sigs.io", "nodefeatures") == {NAMESPACE: NFD_VERBS}


def test_the_node_feature_role_is_bound_to_the_operators_service_account() -> None:
    objects = render_objects(NFD)
    (role,) = [
        r
        for r in objects_of_kind(objects, "Role")
        if r["metadata"]["name"].endswith("nodefeatures")
    ]
    (binding,) = [
        b
        for b in objects_of_kind(objects, "RoleBinding")
        if b["roleRef"]["name"] == role["metadata"]["name"]
    ]
    account = the_one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    ]


def test_the_operator_may_read_model_config_maps_in_profiler_namespaces_only() -> None:
    values = {"profiler": {"namespace": "profiling"}, "rbac": {"extraProfilerNamespaces": ["lab"]}}
    granted = verbs_on(render_objects(values), "", "configmaps")
    assert granted == {"profiling": {"get", "create", "delete"}, "lab": {"get", "create", "delete"}}


@pytest.mark.parametrize("backend", ["nodes", "nfd", ""])
def test_values_refuse_an_unknown_backend(backend: str) -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"nodeLabels": {"backend": backend}}, schema)
