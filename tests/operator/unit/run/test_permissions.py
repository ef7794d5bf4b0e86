"""The operator's table of API permissions: which grants each deployment needs, and its docs form.

That the table is exactly what the code uses and what the chart grants is checked in
``tests/deploy/test_rbac.py``.
"""

from __future__ import annotations

from roofline_operator.run.permissions import (
    NODE_BACKEND,
    NODE_FEATURE_BACKEND,
    PEERING,
    PERMISSIONS,
    Scope,
    markdown_table,
    required,
)

NODES = (Scope.CLUSTER, "", "nodes")
NODE_FEATURES = (Scope.OPERATOR_NAMESPACE, "nfd.k8s-sigs.io", "nodefeatures")
PEERINGS = (Scope.CLUSTER, "kopf.dev", "clusterkopfpeerings")


def test_every_condition_a_permission_names_is_one_the_deployments_set() -> None:
    conditions = {p.when for p in PERMISSIONS} - {None}
    assert conditions == {NODE_BACKEND, NODE_FEATURE_BACKEND, PEERING}


def test_without_conditions_only_the_unconditional_permissions_are_required() -> None:
    grants = required(())
    assert grants[NODES] == {"list", "watch"}
    assert NODE_FEATURES not in grants
    assert PEERINGS not in grants
    assert grants[(Scope.PROFILER_NAMESPACES, "", "pods")] == {
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "watch",
    }


def test_the_node_backend_adds_patching_nodes_to_the_same_grant() -> None:
    grants = required([NODE_BACKEND])
    assert grants[NODES] == {"list", "watch", "patch"}
    assert NODE_FEATURES not in grants


def test_the_node_feature_backend_writes_node_features_and_never_patches_nodes() -> None:
    grants = required([NODE_FEATURE_BACKEND])
    assert grants[NODES] == {"list", "watch"}
    assert grants[NODE_FEATURES] == {"create", "patch", "delete", "list"}


def test_grants_of_one_resource_in_one_scope_are_merged() -> None:
    grants = required([NODE_BACKEND, NODE_FEATURE_BACKEND, PEERING])
    configmaps = grants[(Scope.PROFILER_NAMESPACES, "", "configmaps")]
    assert configmaps == {"get", "create", "delete"}
    declared = {(p.scope, p.group, p.resource) for p in PERMISSIONS}
    assert set(grants) == declared


def test_an_unknown_condition_requires_nothing_more() -> None:
    assert required(["nodeLabels.backend=none"]) == required(())


def test_the_docs_table_has_a_row_per_permission_saying_when_it_is_needed() -> None:
    header, rule, *rows = markdown_table().splitlines()
    assert header == "| scope | API group | resource | verbs | used by | why |"
    assert rule == "|---|---|---|---|---|---|"
    assert len(rows) == len(PERMISSIONS)
    (node_patch,) = [r for r in rows if "`nodes`" in r and "patch" in r]
    assert node_patch.startswith("| cluster | core | `nodes` | patch | operator |")
    assert node_patch.endswith("(only with `nodeLabels.backend=node`) |")
    assert sum("(only with" in r for r in rows) == sum(p.when is not None for p in PERMISSIONS)
