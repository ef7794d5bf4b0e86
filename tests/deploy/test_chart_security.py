"""Security posture of the rendered chart: restricted pods and least-privilege RBAC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .rendering import SCENARIOS, objects_of_kind, render_objects, scenario_id, scenario_values

RBAC_KINDS = ("ClusterRole", "Role")
#: Verbs that let a subject grant itself more than it has.
ESCALATING_VERBS = {"bind", "escalate", "impersonate"}
#: Resources whose mere reading leaks credentials or rewrites permissions.
SENSITIVE_RESOURCES = {
    "secrets",
    "serviceaccounts/token",
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
}


def rules(objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (role, rule)
        for kind in RBAC_KINDS
        for role in objects_of_kind(objects, kind)
        for rule in role["rules"]
    ]


def operator_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = objects_of_kind(objects, "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_the_operator_runs_as_non_root_on_a_read_only_root_filesystem(
    scenario: Path | None,
) -> None:
    pod = operator_pod(render_objects(scenario_values(scenario)))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["runAsNonRoot"] is True
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_the_operator_drops_all_capabilities_under_the_runtime_default_seccomp_profile(
    scenario: Path | None,
) -> None:
    pod = operator_pod(render_objects(scenario_values(scenario)))
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in pod["containers"]:
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert "privileged" not in container["securityContext"]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_the_operator_pod_uses_no_host_namespaces_or_host_paths(scenario: Path | None) -> None:
    pod = operator_pod(render_objects(scenario_values(scenario)))
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(field)
    for volume in pod.get("volumes", []):
        assert "hostPath" not in volume
    for container in pod["containers"]:
        for port in container["ports"]:
            assert "hostPort" not in port


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_the_operator_container_has_memory_limits(scenario: Path | None) -> None:
    pod = operator_pod(render_objects(scenario_values(scenario)))
    for container in pod["containers"]:
        assert container["resources"]["limits"]["memory"]
        assert container["resources"]["requests"]["cpu"]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_no_rbac_rule_uses_a_wildcard(scenario: Path | None) -> None:
    for role, rule in rules(render_objects(scenario_values(scenario))):
        for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            assert not any("*" in entry for entry in rule.get(field, [])), (
                role["metadata"]["name"],
                rule,
            )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_no_rbac_rule_touches_secrets_or_permissions(scenario: Path | None) -> None:
    for role, rule in rules(render_objects(scenario_values(scenario))):
        assert SENSITIVE_RESOURCES.isdisjoint(rule["resources"]), (role["metadata"]["name"], rule)
        assert ESCALATING_VERBS.isdisjoint(rule["verbs"]), (role["metadata"]["name"], rule)


def test_pods_are_created_and_deleted_only_in_the_profiler_namespaces() -> None:
    values = {"profiler": {"namespace": "gpu-profiling"}}
    for role, rule in rules(render_objects(values)):
        if "pods" in rule["resources"] and {"create", "delete", "deletecollection"} & set(
            rule["verbs"]
        ):
            assert role["kind"] == "Role"
            assert role["metadata"]["namespace"] == "gpu-profiling"


def test_cluster_wide_grants_are_exactly_what_the_operator_needs() -> None:
    (cluster_role,) = objects_of_kind(render_objects(), "ClusterRole")
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in cluster_role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    # No pods: they are granted (and watched) in the profiler namespaces only (test_rbac.py).
    assert granted == {
        ("roofline.dev", "rooflineprofiles"): {"list", "watch", "patch"},
        ("roofline.dev", "rooflineprofiles/status"): {"patch"},
        ("roofline.dev", "rooflineprofiles/finalizers"): {"update"},
        ("", "nodes"): {"list", "watch", "patch"},
        ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
        ("", "namespaces"): {"list", "watch"},
    }


def test_the_created_profiler_namespace_enforces_the_restricted_pod_security_standard() -> None:
    values = {"profiler": {"namespace": "gpu-profiling", "createNamespace": True}}
    (namespace,) = objects_of_kind(render_objects(values), "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_without_rbac_the_chart_creates_no_roles() -> None:
    objects = render_objects({"rbac": {"create": False}})
    kinds = {obj["kind"] for obj in objects}
    assert kinds.isdisjoint({"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"})


def test_the_profiler_namespace_role_lets_the_operator_delete_finished_pods_in_bulk() -> None:
    (role,) = [
        r
        for r in objects_of_kind(render_objects(), "Role")
        if any("pods" in rule["resources"] for rule in r["rules"])
    ]
    pod_verbs = {
        verb for rule in role["rules"] if "pods" in rule["resources"] for verb in rule["verbs"]
    }
    assert {"create", "delete", "deletecollection", "watch"} <= pod_verbs
