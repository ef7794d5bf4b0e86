"""``roofline export`` against the real schemas: every object it writes, from a saved result and
from a RooflineProfile's status, passes a server-side dry run on the real kube-apiserver with the
pinned upstream CRDs installed (KEDA v2.21.1, Kueue v0.17.0, the Gateway API Inference Extension
v1.6.2's InferencePool), with kubectl's strict field validation; broken objects of the same kinds
are refused; the engine-args patch patches a real Deployment; ``--profile`` reads the profile
through the real kubectl; the gateway's Helm values set only keys the pinned inferencepool chart's
templates read, and the InferencePool that chart's template makes of them passes the dry run; and
the endpoint picker's configuration uses only fields of the pinned picker's own types.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.cli.export_sources import PROFILE, status_profile, write_result, write_status
from tests.operator.harness import Kubectl
from tests.operator.harness.commands import product_environment, roofline_argv
from tests.operator.harness.controlplane import ControlPlaneUnavailable
from tests.operator.harness.realcluster import RealCluster
from tests.operator.harness.upstream import (
    CHART_POOL_TEMPLATE,
    CHART_TEMPLATES,
    CHART_VALUES,
    CRD_FILES,
    EPP_TYPES,
    upstream_schemas,
)

from roofline_cli.export.command import TARGETS

EXTRA = {"kueue": ["--tokens-per-second", "40000"]}


@pytest.fixture(scope="module")
def upstream() -> Path:
    try:
        return upstream_schemas()
    except ControlPlaneUnavailable as reason:
        pytest.skip(str(reason))


@pytest.fixture(scope="module")
def upstream_crds(real_cluster: RealCluster, upstream: Path) -> Iterator[list[str]]:
    """The upstream CRDs installed on the session's API server, removed afterwards."""
    cp = real_cluster.control_plane
    crds = [yaml.safe_load((upstream / name).read_text()) for name in CRD_FILES.values()]
    real_cluster.apply_objects(crds, cp.kubectl_binary)
    names = [crd["metadata"]["name"] for crd in crds]
    kubectl = Kubectl(cp.kubeconfig, real_cluster.workdir, cp.kubectl_binary)
    for name in names:
        kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    yield names
    for name in names:
        kubectl("delete", "crd", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("export-sources")
    return {"result": write_result(folder), "status": write_status(folder)}


def run_export(*argv: str) -> subprocess.CompletedProcess[str]:
    """The real ``roofline export``, in a process of its own."""
    return subprocess.run(
        [*roofline_argv(), "export", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=product_environment(),
    )


def exported(tmp_path: Path, *argv: str) -> Path:
    done = run_export(*argv)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "exported.yaml"
    path.write_text(done.stdout)
    return path


def dry_run(kubectl: Kubectl, path: Path) -> subprocess.CompletedProcess[str]:
    """``kubectl apply --dry-run=server`` with kubectl's default strict field validation."""
    return kubectl("apply", "--dry-run=server", "--validate=strict", "-f", str(path), check=False)


#: Kinds whose CRD is not fetched: llm-d's autoscaler's module is not served by the module proxy
#: (tests/cli/export/test_wva.py checks the VariantAutoscaling against its pinned sources).
WITHOUT_CRD = {"VariantAutoscaling"}
#: Targets whose output is Kubernetes objects (gateway writes a Helm chart's values).
OBJECT_TARGETS = [t for t in TARGETS if t not in ("engine-args", "gateway")] + ["engine-args"]


@pytest.mark.parametrize("source", ["result", "status"])
@pytest.mark.parametrize("target", OBJECT_TARGETS)
def test_every_exported_object_passes_a_server_side_dry_run(
    upstream_crds: list[str],
    kubectl: Kubectl,
    sources: dict[str, Path],
    tmp_path: Path,
    target: str,
    source: str,
) -> None:
    path = exported(
        tmp_path, "--target", target, "--from", str(sources[source]), *EXTRA.get(target, [])
    )
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    unchecked = [d for d in documents if d["kind"] in WITHOUT_CRD]
    if unchecked:
        documents = [d for d in documents if d["kind"] not in WITHOUT_CRD]
        path.write_text(yaml.safe_dump_all(documents))
    done = dry_run(kubectl, path)
    assert done.returncode == 0, done.stdout + done.stderr
    for document in documents:
        kind = document["kind"]
        assert f"{kind.lower()}" in done.stdout.lower(), (kind, done.stdout)
    assert done.stdout.count("(server dry run)") == len(documents)


def _with(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = json.loads(json.dumps(document))
    target: Any = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return changed


def chart_pool(values: dict[str, Any], release: str, namespace: str) -> dict[str, Any]:
    """The InferencePool the pinned inferencepool chart's template
    (``config/charts/inferencepool/templates/inferencepool.yaml`` of v1.5.0) makes of ``values``
    for a release, field by field (the template is checked to read each of them, below)."""
    pool, extension = values["inferencePool"], values["inferenceExtension"]
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": release, "namespace": namespace},
        "spec": {
            "targetPorts": [{"number": p["number"]} for p in pool["targetPorts"]],
            "appProtocol": "http",
            "selector": {"matchLabels": pool["modelServers"]["matchLabels"]},
            "endpointPickerRef": {
                "name": f"{release[:40]}-epp",
                "port": {"number": extension["extProcPort"]},
                "failureMode": extension["failureMode"],
            },
        },
    }


#: The lines of the chart's pool template that :func:`chart_pool` follows.
POOL_TEMPLATE_LINES = (
    "name: {{ .Release.Name }}",
    "{{- range .Values.inferencePool.targetPorts }}",
    "- number: {{ .number }}",
    'appProtocol: "http"',
    "{{- range $key, $value := .Values.inferencePool.modelServers.matchLabels }}",
    'name: {{ include "gateway-api-inference-extension.name" . }}',
    "number: {{ .Values.inferenceExtension.extProcPort | default 9002 }}",
    'failureMode: {{ .Values.inferenceExtension.failureMode | default "FailOpen" }}',
)


def _gateway_values(tmp_path: Path, source: Path, *extra: str) -> dict[str, Any]:
    path = exported(tmp_path, "--target", "gateway", "--from", str(source), *extra)
    values: dict[str, Any] = yaml.safe_load(path.read_text())
    return values


def _first_of(path: Path, kind: str) -> dict[str, Any]:
    if kind == "InferencePool":
        return chart_pool(yaml.safe_load(path.read_text()), "llama-3-1-8b", "default")
    found: dict[str, Any] = next(
        d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == kind
    )
    return found


BROKEN = [
    pytest.param(
        "keda", "ScaledObject", ("spec", "triggers", 0, "metadata", "threshold"), 24,
        "must be of type string", id="keda-threshold-as-a-number",
    ),
    pytest.param(
        "keda", "ScaledObject", ("spec", "minReplicaCount"), 50,
        "minReplicaCount must be less than or equal to maxReplicaCount", id="keda-min-above-max",
    ),
    pytest.param(
        "gateway", "InferencePool", ("spec", "targetPorts", 0, "number"), 70000,
        "should be less than or equal to 65535", id="pool-port",
    ),
    pytest.param(
        "gateway", "InferencePool", ("spec", "selector", "matchLabels"), {"app": "a/b"},
        "spec.selector.matchLabels.app", id="pool-selector",
    ),
    pytest.param(
        "kueue", "ClusterQueue",
        ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"), "plenty",
        "nominalQuota", id="queue-quota",
    ),
    pytest.param(
        "kueue", "ResourceFlavor", ("spec", "nodeLabel"), {"x": "y"},
        'unknown field "spec.nodeLabel"', id="flavor-misspelt",
    ),
    pytest.param(
        "kueue", "LocalQueue", ("spec", "clusterQueue"), "Not_A_Name",
        "spec.clusterQueue", id="local-queue-name",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("target", "kind", "path", "value", "message"), BROKEN)
def test_a_broken_object_is_refused_by_the_real_schema(
    upstream_crds: list[str],
    kubectl: Kubectl,
    sources: dict[str, Path],
    tmp_path: Path,
    target: str,
    kind: str,
    path: tuple[Any, ...],
    value: Any,
    message: str,
) -> None:
    good = _first_of(
        exported(tmp_path, "--target", target, "--from", str(sources["status"]),
                 *EXTRA.get(target, [])),
        kind,
    )  # fmt: skip
    for document in (good, _with(good, path, value)):
        candidate = tmp_path / "candidate.json"
        candidate.write_text(json.dumps(document))
        done = dry_run(kubectl, candidate)
        if document is good:
            assert done.returncode == 0, done.stderr
        else:
            assert done.returncode != 0, done.stdout
            assert message in done.stderr, done.stderr


@pytest.fixture
def deployment(kubectl: Kubectl, tmp_path: Path) -> Iterator[str]:
    """A vLLM Deployment as a user writes it (no controller runs it on this control plane)."""
    name = "llama-3-1-8b"
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.8.5",
                            "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct"],
                        }
                    ]
                },
            },
        },
    }
    path = tmp_path / "deployment.json"
    path.write_text(json.dumps(manifest))
    kubectl("apply", "-f", str(path))
    yield name
    kubectl("delete", "deployment", name, "-n", "default", "--wait=false", check=False)


def test_the_engine_args_patch_appends_the_flags_to_a_real_deployment(
    upstream_crds: list[str],
    kubectl: Kubectl,
    sources: dict[str, Path],
    tmp_path: Path,
    deployment: str,
) -> None:
    patch = exported(
        tmp_path, "--target", "engine-args", "--form", "patch", "--from", str(sources["status"])
    )
    done = kubectl(
        "patch", "deployment", deployment, "-n", "default", "--type", "json",
        "--patch-file", str(patch), "--dry-run=server", "-o", "json",
    )  # fmt: skip
    (container,) = json.loads(done.stdout)["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--max-num-seqs=24",
        "--max-model-len=8192",
    ]


@pytest.fixture
def profile_in_cluster(kubectl: Kubectl, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The status source's RooflineProfile, created and its status written through the status
    subresource, as the operator writes it; removed afterwards (no operator runs here, so no
    finalizer holds it)."""
    document = status_profile()
    status = document.pop("status")
    spec = yaml.safe_load(
        (
            Path(__file__).resolve().parents[3] / "manifests/examples/rooflineprofile.yaml"
        ).read_text()
    )["spec"]
    document["spec"] = {**spec, **document["spec"]}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(document))
    kubectl("apply", "-f", str(path))
    patch = tmp_path / "status.json"
    patch.write_text(json.dumps({"status": status}))
    kubectl(
        "patch", "rooflineprofiles.roofline.dev", PROFILE, "--subresource=status",
        "--type", "merge", "--patch-file", str(patch),
    )  # fmt: skip
    yield document
    kubectl("delete", "rooflineprofiles.roofline.dev", PROFILE, "--wait=false", check=False)


@pytest.mark.parametrize("target", ["itl-configmap", "kueue", "keda"])
def test_export_reads_the_profile_from_the_cluster_with_kubectl(
    upstream_crds: list[str],
    kubectl: Kubectl,
    sources: dict[str, Path],
    profile_in_cluster: dict[str, Any],
    target: str,
) -> None:
    """The status as the real API server stores it (pruned to the CRD's schema) exports the same
    objects as the status the operator built: every field export reads is in the schema."""
    cluster_args = ["--kubectl", kubectl.binary, "--kubeconfig", str(kubectl.kubeconfig)]
    extra = EXTRA.get(target, [])
    from_cluster = run_export("--target", target, "--profile", PROFILE, *cluster_args, *extra)
    from_file = run_export("--target", target, "--from", str(sources["status"]), *extra)
    assert from_cluster.returncode == 0, from_cluster.stderr
    assert from_cluster.stdout == from_file.stdout


def test_a_profile_the_cluster_does_not_have_is_one_line(
    upstream_crds: list[str], kubectl: Kubectl
) -> None:
    done = run_export(
        "--target", "keda", "--profile", "absent", "--kubectl", kubectl.binary,
        "--kubeconfig", str(kubectl.kubeconfig),
    )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("roofline: error: --profile absent: kubectl get")
    assert "NotFound" in line


def json_fields(go_source: str, struct: str) -> set[str]:
    """The JSON names of one Go struct's fields."""
    body = re.search(rf"type {struct} struct \{{(.*?)\n\}}", go_source, re.S)
    assert body, struct
    return set(re.findall(r'json:"([A-Za-z]+)[,"]', body.group(1)))


def unknown_picker_fields(config: dict[str, Any], types: str, detector: str) -> set[str]:
    """Fields of an exported EndpointPickerConfig that the pinned picker's types do not have."""
    unknown = set(config) - json_fields(types, "EndpointPickerConfig") - {"apiVersion", "kind"}
    for plugin in config.get("plugins", []):
        unknown |= set(plugin) - json_fields(types, "PluginSpec")
        if plugin.get("type") == "utilization-detector":
            unknown |= set(plugin.get("parameters", {})) - json_fields(detector, "apiConfig")
    unknown |= set(config.get("saturationDetector", {})) - json_fields(
        types, "SaturationDetectorConfig"
    )
    for profile in config.get("schedulingProfiles", []):
        unknown |= set(profile) - json_fields(types, "SchedulingProfile")
        for plugin in profile.get("plugins", []):
            unknown |= set(plugin) - json_fields(types, "SchedulingPlugin")
    return unknown


def test_the_endpoint_picker_config_uses_only_fields_of_the_pinned_pickers_types(
    upstream: Path, sources: dict[str, Path], tmp_path: Path
) -> None:
    types, detector = ((upstream / name).read_text() for name in EPP_TYPES)
    values = _gateway_values(tmp_path, sources["status"], "--flow-control")
    extension = values["inferenceExtension"]
    config = yaml.safe_load(extension["pluginsCustomConfig"][extension["pluginsConfigFile"]])
    assert config["featureGates"] == ["flowControl"]
    assert unknown_picker_fields(config, types, detector) == set()
    # The check itself catches a misspelt threshold (the autoscaler's name for it).
    misspelt = json.loads(json.dumps(config))
    misspelt["plugins"][-1]["parameters"]["kvCacheThreshold"] = 0.8
    assert unknown_picker_fields(misspelt, types, detector) == {"kvCacheThreshold"}


def value_paths(values: Any, prefix: str = "") -> set[str]:
    """The dotted paths of ``values`` down to what a template reads whole: a list, a scalar, or
    a map whose keys are the user's (labels, file names)."""
    if not isinstance(values, dict) or prefix.endswith(("matchLabels", "pluginsCustomConfig")):
        return {prefix}
    return {p for k, v in values.items() for p in value_paths(v, f"{prefix}.{k}" if prefix else k)}


def unread_values(values: dict[str, Any], templates: str) -> set[str]:
    """The paths of ``values`` that no template of the chart reads."""
    read = set(re.findall(r"\.Values\.([A-Za-z0-9_.]+)", templates))
    return {p for p in value_paths(values) if p not in read}


def test_the_gateway_values_are_values_the_pinned_chart_reads(
    upstream: Path, sources: dict[str, Path], tmp_path: Path
) -> None:
    """Every key of the exported values is read by the pinned chart's templates, and exists in its
    values.yaml or is one of the keys it documents there (pluginsCustomConfig, modelServers)."""
    templates = "\n".join((upstream / name).read_text() for name in CHART_TEMPLATES)
    chart_values = (upstream / CHART_VALUES).read_text()
    for source in ("result", "status"):
        values = _gateway_values(tmp_path, sources[source])
        assert unread_values(values, templates) == set()
        for path in value_paths(values):
            assert path.rsplit(".", 1)[-1] in chart_values, path
    # The check catches a key the chart does not read: the InferencePool's own name for the
    # selector, which the chart spells modelServers.
    misnamed = _gateway_values(tmp_path, sources["status"])
    misnamed["inferencePool"]["selector"] = misnamed["inferencePool"].pop("modelServers")
    assert unread_values(misnamed, templates) == {"inferencePool.selector.matchLabels"}


@pytest.mark.parametrize("failure_mode", ["FailOpen", "FailClose"])
def test_the_pool_the_chart_makes_of_the_values_passes_a_server_side_dry_run(
    upstream_crds: list[str],
    upstream: Path,
    kubectl: Kubectl,
    sources: dict[str, Path],
    tmp_path: Path,
    failure_mode: str,
) -> None:
    template = (upstream / CHART_POOL_TEMPLATE).read_text()
    assert [line for line in POOL_TEMPLATE_LINES if line not in template] == []
    values = _gateway_values(tmp_path, sources["status"], "--failure-mode", failure_mode)
    pool = chart_pool(values, "llama-3-1-8b", "default")
    path = tmp_path / "pool.json"
    path.write_text(json.dumps(pool))
    done = dry_run(kubectl, path)
    assert done.returncode == 0, done.stderr
    assert "inferencepool.inference.networking.k8s.io/llama-3-1-8b created" in done.stdout


def test_the_guides_rooflineprofile_is_admitted(kubectl: Kubectl, tmp_path: Path) -> None:
    """docs/export.md starts from this object: the real API server takes it as written."""
    guide = (Path(__file__).resolve().parents[3] / "docs" / "export.md").read_text()
    (block,) = (
        block
        for block in re.findall(r"```yaml\n(.*?)```", guide, re.S)
        if block.startswith("apiVersion: roofline.dev/")
    )
    profile = yaml.safe_load(block)
    path = tmp_path / "guide-profile.json"
    path.write_text(json.dumps(profile))
    done = dry_run(kubectl, path)
    assert done.returncode == 0, done.stderr
