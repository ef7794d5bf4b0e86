"""The Helm chart, rendered with Helm's engine: lint, Kubernetes schemas, wiring between objects."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import pytest
import yaml
from kubernetes_validate import utils as kubernetes_validate

from roofline_operator.run.config import load_config

from .rendering import (
    CHART_DIR,
    CRD_FILE,
    NAMESPACE,
    ROOT,
    SCENARIOS,
    kube_versions,
    objects_of_kind,
    render,
    render_objects,
    scenario_id,
    scenario_values,
    the_one,
)

#: Groups whose kinds the Kubernetes schemas do not know; test_monitoring_objects.py checks the
#: Prometheus Operator kinds structurally and this file checks RooflineProfile against its CRD.
NOT_IN_KUBERNETES_SCHEMAS = ("monitoring.coreos.com/", "roofline.dev/")

OLDEST, NEWEST = kube_versions()


def crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_FILE.read_text())
    return loaded


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_chart_lints_clean_in_every_scenario(scenario: Path | None) -> None:
    for version in (OLDEST, NEWEST):
        report = helm_python.lint(
            CHART_DIR, scenario_values(scenario), strict=True, kube_version=f"v{version}.0"
        )
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        assert not report["errors"], report["errors"]
        assert not problems, problems


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_every_rendered_object_validates_against_the_kubernetes_schemas(
    scenario: Path | None, version: str
) -> None:
    objects = render_objects(scenario_values(scenario))
    assert objects
    for obj in objects:
        if obj["apiVersion"].startswith(NOT_IN_KUBERNETES_SCHEMAS):
            continue
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", [OLDEST, NEWEST])
def test_the_crd_validates_against_the_kubernetes_schemas(version: str) -> None:
    kubernetes_validate.validate(crd(), version, strict=True)


def test_the_chart_ships_the_crd_from_its_crds_folder() -> None:
    with helm_python.Chart.load(CHART_DIR) as chart:
        names = [yaml.safe_load(c["data"])["metadata"]["name"] for c in chart.crds]
    assert names == ["rooflineprofiles.roofline.dev"]


def test_the_example_profile_satisfies_the_crd_schema() -> None:
    objects = render_objects({"exampleProfile": {"enabled": True}})
    profile = the_one(objects, "RooflineProfile")
    version = next(v for v in crd()["spec"]["versions"] if v["storage"])
    assert profile["apiVersion"] == f"roofline.dev/{version['name']}"
    assert "namespace" not in profile["metadata"], "RooflineProfile is cluster-scoped"
    jsonschema.validate(profile, version["schema"]["openAPIV3Schema"])


def test_a_profile_spec_the_crd_rejects_fails_the_same_check() -> None:
    objects = render_objects({"exampleProfile": {"enabled": True, "spec": {"dtype": "int3"}}})
    profile = the_one(objects, "RooflineProfile")
    version = next(v for v in crd()["spec"]["versions"] if v["storage"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(profile, version["schema"]["openAPIV3Schema"])


def test_the_operator_runs_as_one_standalone_replica_replaced_not_rolled() -> None:
    deployment = the_one(render_objects(), "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "--standalone" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_the_operator_accepts_the_arguments_the_chart_passes(scenario: Path | None) -> None:
    values = scenario_values(scenario)
    deployment = the_one(render_objects(values), "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    command, *argv = container["args"]
    assert command == "operator"
    config = load_config(argv, env={})
    namespace = values.get("profiler", {}).get("namespace") or NAMESPACE
    assert config.namespace == namespace
    assert config.metrics_port == container["ports"][0]["containerPort"]
    assert config.peering is None
    assert config.profiler_image.split("/")[-1].startswith("roofline")


def test_the_profiler_image_reference_follows_the_values() -> None:
    digest = "sha256:" + "ab" * 32
    values = {
        "image": {"registry": "registry.example.com", "repository": "ops/op", "tag": "1.2.3"},
        "profiler": {"image": {"registry": "", "repository": "prof", "digest": digest}},
    }
    container = the_one(render_objects(values), "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert container["image"] == "registry.example.com/ops/op:1.2.3"
    argv = container["args"]
    assert argv[argv.index("--profiler-image") + 1] == f"prof@{digest}"


def test_default_images_are_tagged_with_the_app_version() -> None:
    app_version = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["appVersion"]
    container = the_one(render_objects(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"].endswith(f":{app_version}")
    argv = container["args"]
    assert argv[argv.index("--profiler-image") + 1].endswith(f":{app_version}")


def test_probes_ask_the_metrics_port_readiness_on_readyz_and_liveness_on_healthz() -> None:
    """Ready means the operator can list its profiles (``/readyz``); alive does not depend on
    the API server (``/healthz``), so an outage does not restart the operator."""
    container = the_one(render_objects(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    port_names = {port["name"] for port in container["ports"]}
    paths = {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}
    for probe, path in paths.items():
        assert container[probe]["httpGet"]["path"] == path
        assert container[probe]["httpGet"]["port"] in port_names


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_the_metrics_service_and_service_monitor_reach_the_operator_pod(
    scenario: Path | None,
) -> None:
    objects = render_objects(scenario_values(scenario))
    pod_labels = the_one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    service = the_one(objects, "Service")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["metrics"]
    for monitor in objects_of_kind(objects, "ServiceMonitor"):
        assert (
            monitor["spec"]["selector"]["matchLabels"].items()
            <= service["metadata"]["labels"].items()
        )
        assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"metrics"}
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]


def test_selector_labels_never_carry_the_chart_version() -> None:
    deployment = the_one(render_objects(), "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert "helm.sh/chart" not in selector
    assert "app.kubernetes.io/version" not in selector


def test_profiler_pod_permissions_follow_every_profiler_namespace() -> None:
    values = {
        "profiler": {"namespace": "gpu-profiling", "createNamespace": True},
        "rbac": {"extraProfilerNamespaces": ["team-a", "gpu-profiling"]},
    }
    objects = render_objects(values)
    roles = {
        r["metadata"]["namespace"]
        for r in objects_of_kind(objects, "Role")
        if "pods" in r["rules"][0]["resources"]
    }
    bindings = {
        b["metadata"]["namespace"]
        for b in objects_of_kind(objects, "RoleBinding")
        if b["roleRef"]["name"].endswith("-profiler-pods")
    }
    assert roles == bindings == {"gpu-profiling", "team-a"}
    namespace = the_one(objects, "Namespace")
    assert namespace["metadata"]["name"] == "gpu-profiling"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"profiler": {"createNamespace": True}},
            "profiler.createNamespace",
            id="creating-the-release-namespace",
        ),
        pytest.param(
            {"serviceAccount": {"create": False}},
            "serviceAccount.name",
            id="granting-the-default-service-account",
        ),
    ],
)
def test_combinations_that_cannot_work_fail_with_a_message(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm_python.HelmRenderError, match=message):
        render(values)


def test_optional_objects_appear_only_when_enabled() -> None:
    kinds = {obj["kind"] for obj in render_objects()}
    assert kinds.isdisjoint({"ServiceMonitor", "PrometheusRule", "ConfigMap", "RooflineProfile"})
    enabled = {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
        "exampleProfile": {"enabled": True},
    }
    kinds = {obj["kind"] for obj in render_objects(enabled)}
    assert {"ServiceMonitor", "PrometheusRule", "ConfigMap", "RooflineProfile"} <= kinds


def notes(values: dict[str, Any]) -> str:
    with helm_python.Chart.load(CHART_DIR) as chart:
        rendered = chart.render(values, name="roofline-operator", namespace=NAMESPACE)
    return rendered["roofline-operator/templates/NOTES.txt"]


def test_the_install_notes_point_at_the_profiler_namespace_and_the_metrics_service() -> None:
    text = notes({"profiler": {"namespace": "gpu-profiling", "createNamespace": True}})
    assert "kubectl -n gpu-profiling get pods -l app.kubernetes.io/name=roofline-profiler" in text
    assert "svc/roofline-operator-metrics 9090" in text


def test_the_install_notes_warn_when_monitoring_objects_lack_a_release_label() -> None:
    unlabelled = notes({"serviceMonitor": {"enabled": True}})
    labelled = notes({"serviceMonitor": {"enabled": True, "additionalLabels": {"release": "kps"}}})
    assert "WARNING" in unlabelled
    assert "WARNING" not in labelled


@pytest.mark.parametrize(
    "secrets",
    [
        pytest.param([{"name": "regcred"}, {"name": "mirror"}], id="pod-spec-form"),
        pytest.param(["regcred", "mirror"], id="plain-names"),
    ],
)
def test_pull_secrets_reach_the_operator_pod_and_every_profiler_pod(secrets: list[Any]) -> None:
    values = {"imagePullSecrets": secrets, "profiler": {"serviceAccountName": "roofline-profiler"}}
    pod = the_one(render_objects(values), "Deployment")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror"}]
    container = pod["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    config = load_config(container["args"][1:], env=env)
    assert config.pod_defaults.image_pull_secrets == ("regcred", "mirror")
    assert config.pod_defaults.service_account == "roofline-profiler"


def test_without_pull_secrets_neither_pod_names_any() -> None:
    pod = the_one(render_objects(), "Deployment")["spec"]["template"]["spec"]
    assert "imagePullSecrets" not in pod
    names = {e["name"] for e in pod["containers"][0]["env"]}
    assert "ROOFLINE_PROFILER_IMAGE_PULL_SECRETS" not in names


def scale_bench_peak_rss_mib() -> tuple[int, float]:
    """The largest node count of bench/results/operator_scale.md and its peak RSS (MiB)."""
    text = (ROOT / "bench" / "results" / "operator_scale.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| nodes |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    rss = columns.index("operator peak RSS (MiB)")
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if re.match(r"^\| \d+ \|", line)
    ]
    nodes, peak = max((int(r[0]), float(r[rss])) for r in rows)
    return nodes, peak


def mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", quantity)
    assert match, f"memory quantity {quantity!r} is not in Ki/Mi/Gi"
    return int(match.group(1)) * units[match.group(2)]


def test_the_default_memory_limit_holds_the_largest_scale_bench_with_headroom() -> None:
    nodes, peak = scale_bench_peak_rss_mib()
    assert nodes >= 10_000
    resources = the_one(render_objects(), "Deployment")["spec"]["template"]["spec"]["containers"][
        0
    ]["resources"]
    assert mebibytes(resources["limits"]["memory"]) >= 1.25 * peak
    assert mebibytes(resources["requests"]["memory"]) >= peak / 2
