"""manifests/: the chart's default rendering for `kubectl apply`, never edited by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as kubernetes_validate

from .rendering import NAMESPACE, ROOT, generator, kube_versions

MANIFESTS = ROOT / "manifests"


def documents(relative: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / relative).read_text()) if d]


def test_the_committed_manifests_match_the_chart() -> None:
    stale = generator().stale_files(MANIFESTS)
    assert stale == [], f"regenerate with: python scripts/generate-manifests.py ({stale})"


def test_an_edited_manifest_is_reported_stale(tmp_path: Path) -> None:
    written = generator().write_manifests(tmp_path)
    assert generator().stale_files(tmp_path) == []
    edited = tmp_path / written[-1]
    edited.write_text(edited.read_text().replace("roofline", "rooflime", 1))
    (tmp_path / written[0]).unlink()
    assert generator().stale_files(tmp_path) == [written[0], written[-1]]


def test_the_check_command_fails_until_the_manifests_are_regenerated(tmp_path: Path) -> None:
    module = generator()
    assert module.main(["--check", "--output", str(tmp_path)]) == 1
    assert module.main(["--output", str(tmp_path)]) == 0
    assert module.main(["--check", "--output", str(tmp_path)]) == 0


def test_kubectl_apply_order_puts_the_namespace_and_crd_first() -> None:
    files = sorted(p.name for p in MANIFESTS.glob("*.yaml"))
    assert files == ["00-namespace.yaml", "01-crds.yaml", "02-roofline-operator.yaml"]
    (namespace,) = documents("00-namespace.yaml")
    assert namespace["metadata"]["name"] == NAMESPACE
    assert [c["metadata"]["name"] for c in documents("01-crds.yaml")] == [
        "rooflineprofiles.roofline.dev"
    ]
    namespaced = [o for o in documents("02-roofline-operator.yaml") if "namespace" in o["metadata"]]
    assert namespaced
    assert {o["metadata"]["namespace"] for o in namespaced} == {NAMESPACE}


def test_plain_manifests_do_not_claim_helm_manages_them() -> None:
    for relative in ("02-roofline-operator.yaml", "monitoring/roofline-monitoring.yaml"):
        for obj in documents(relative):
            labels = obj["metadata"].get("labels", {})
            assert "helm.sh/chart" not in labels
            assert labels.get("app.kubernetes.io/managed-by") != "Helm"


@pytest.mark.parametrize("version", kube_versions())
def test_the_plain_manifests_validate_against_the_kubernetes_schemas(version: str) -> None:
    for relative in ("00-namespace.yaml", "01-crds.yaml", "02-roofline-operator.yaml"):
        for obj in documents(relative):
            kubernetes_validate.validate(obj, version, strict=True)


def test_the_monitoring_manifests_are_labelled_for_kube_prometheus_stack() -> None:
    objects = documents("monitoring/roofline-monitoring.yaml")
    assert {o["kind"] for o in objects} == {"ServiceMonitor", "PrometheusRule", "ConfigMap"}
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            assert obj["metadata"]["labels"]["grafana_dashboard"] == "1"
        else:
            assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def _applied_in_order() -> list[dict[str, Any]]:
    """Every object in the order ``kubectl apply -f manifests/`` creates them: files by name,
    then documents in file order."""
    return [obj for path in sorted(MANIFESTS.glob("*.yaml")) for obj in documents(path.name)]


def test_a_deployment_comes_after_the_account_and_rights_its_pods_run_with() -> None:
    """``kubectl apply`` creates objects in file order: a Deployment applied before its
    ServiceAccount gets ``FailedCreate ... serviceaccount not found`` until the account appears
    (seen on a real cluster). Helm installs accounts and RBAC first; the manifests do too."""
    applied = _applied_in_order()
    position = {(o["kind"], o["metadata"]["name"]): i for i, o in enumerate(applied)}
    deployments = [(i, o) for i, o in enumerate(applied) if o["kind"] == "Deployment"]
    assert deployments
    for at, deployment in deployments:
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        assert position[("Namespace", deployment["metadata"]["namespace"])] < at
        assert position[("ServiceAccount", account)] < at
        for obj in applied:
            subjects = obj.get("subjects") or []
            if any(s.get("kind") == "ServiceAccount" and s["name"] == account for s in subjects):
                bound = position[(obj["kind"], obj["metadata"]["name"])]
                role = position[(obj["roleRef"]["kind"], obj["roleRef"]["name"])]
                assert max(bound, role) < at, f"{obj['kind']} {obj['metadata']['name']}"


@pytest.mark.parametrize(
    "relative", ["02-roofline-operator.yaml", "monitoring/roofline-monitoring.yaml"]
)
def test_each_manifest_lists_its_objects_in_helms_install_order(relative: str) -> None:
    kinds = [o["kind"] for o in documents(relative)]
    # Helm's InstallOrder (helm/helm pkg/releaseutil/kind_sorter.go) for the kinds the chart has;
    # kinds Helm does not list come last, alphabetically.
    helm = ["ServiceAccount", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "Role"]
    helm += ["RoleBinding", "Service", "Deployment"]
    known = [k for k in kinds if k in helm]
    assert known == sorted(known, key=helm.index)
    unknown = kinds[len(known) :]
    assert all(k not in helm for k in unknown), kinds
    assert unknown == sorted(unknown)
