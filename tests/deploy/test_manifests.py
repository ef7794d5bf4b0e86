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
