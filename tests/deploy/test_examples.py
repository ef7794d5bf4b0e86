"""manifests/examples: what a user applies first works as written and the pieces fit together."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from kubernetes_validate import utils as kubernetes_validate

from roofline_operator.core.names import LABEL_CLASS, LABEL_PROFILE, NODE_LABEL_KEYS
from roofline_operator.core.spec import parse_spec
from roofline_profiler.core import limits

from .rendering import CHART_DIR, ROOT, kube_versions

EXAMPLES = ROOT / "manifests" / "examples"
DEFAULT = EXAMPLES / "rooflineprofile.yaml"
MODELS = EXAMPLES / "rooflineprofile-models.yaml"
KUEUE = EXAMPLES / "kueue.yaml"
POD_MONITOR = EXAMPLES / "serving-podmonitor.yaml"
#: Plain scalars that YAML 1.1 readers (kubectl, sigs.k8s.io/yaml) turn into booleans.
YAML11_BOOLEANS = re.compile(r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$")
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"


def load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def yaml11_boolean_keys(text: str) -> list[str]:
    """Unquoted mapping keys that a YAML 1.1 reader would read as true or false."""
    found = []
    for root in yaml.compose_all(text):
        stack = [root]
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if key.style is None and YAML11_BOOLEANS.match(str(key.value)):
                        found.append(str(key.value))
                    stack.append(value)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
    return found


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_no_example_has_a_key_that_kubectl_reads_as_a_boolean(path: Path) -> None:
    assert yaml11_boolean_keys(path.read_text()) == []


def test_the_yaml11_check_catches_the_bare_n_trap() -> None:
    assert yaml11_boolean_keys("shape: {k: 8192, n: 8192}") == ["n"]
    assert yaml11_boolean_keys('shape: {k: 8192, "n": 8192}') == []


def test_the_default_example_asks_for_a_gpu_tolerates_the_gpu_taint_and_assumes_no_gfd() -> None:
    (profile,) = load(DEFAULT)
    spec = profile["spec"]
    assert "nodeSelector" not in spec
    assert "nodeSelectorTerms" not in spec
    # GPU Feature Discovery labels are nvidia.com/gpu.<fact> (gpu.present, gpu.product, ...).
    assert "nvidia.com/gpu." not in yaml.safe_dump(spec)
    parsed = parse_spec(spec)
    assert parsed.selection.gpu_resource == "nvidia.com/gpu"
    assert parsed.selection.gpus_per_node == 1
    assert parsed.shape is None, "the profiler's default shape"
    assert parsed.min_batch_efficiency_percent is None, "the profiler's default efficiency"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert limits.DEFAULT_SHAPE == (4096, 14336)


def test_the_chart_example_profile_is_the_default_example() -> None:
    (profile,) = load(DEFAULT)
    chart = yaml.safe_load((CHART_DIR / "values.yaml").read_text())["exampleProfile"]
    assert (chart["name"], chart["spec"]) == (profile["metadata"]["name"], profile["spec"])


def test_the_models_example_is_the_default_profile_plus_models_so_they_never_overlap() -> None:
    (default,) = load(DEFAULT)
    (models,) = load(MODELS)
    assert models["metadata"]["name"] == default["metadata"]["name"]
    extra = {"models", "slo", "gpuHourCost"}
    assert {k: v for k, v in models["spec"].items() if k not in extra} == default["spec"]
    assert parse_spec(models["spec"]).models


def test_the_kueue_walkthrough_admits_its_deployment_onto_measured_classes() -> None:
    docs = load(KUEUE)
    (default,) = load(DEFAULT)
    flavors = {f["metadata"]["name"]: f for f in by_kind(docs, "ResourceFlavor")}
    cluster_queues = {q["metadata"]["name"]: q for q in by_kind(docs, "ClusterQueue")}
    local_queues = {q["metadata"]["name"]: q for q in by_kind(docs, "LocalQueue")}
    (deployment,) = by_kind(docs, "Deployment")
    assert len(flavors) >= 2, "one flavor per measured class"
    for flavor in flavors.values():
        labels = flavor["spec"]["nodeLabels"]
        assert labels[LABEL_PROFILE] == default["metadata"]["name"]
        assert LABEL_CLASS in labels, "flavors select the stable class label, not a measured number"
        assert set(labels) <= {LABEL_PROFILE, *NODE_LABEL_KEYS}, "only labels the operator writes"
        assert all(isinstance(v, str) for v in labels.values())
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in flavor[
            "spec"
        ]["tolerations"]
    # Kueue adds up the quotas of one queue's flavors: each class is a queue of its own.
    used = []
    for queue in cluster_queues.values():
        (group,) = queue["spec"]["resourceGroups"]
        (flavor,) = group["flavors"]
        used.append(flavor["name"])
        assert {r["name"] for r in flavor["resources"]} == set(group["coveredResources"])
    assert sorted(used) == sorted(flavors)
    assert {q["spec"]["clusterQueue"] for q in local_queues.values()} == set(cluster_queues)
    queue = local_queues[deployment["metadata"]["labels"][QUEUE_NAME_LABEL]]
    assert deployment["metadata"]["namespace"] == queue["metadata"]["namespace"]
    (group,) = cluster_queues[queue["spec"]["clusterQueue"]]["spec"]["resourceGroups"]
    covered = set(group["coveredResources"])
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        assert set(container["resources"]["requests"]) <= covered
        assert "nvidia.com/gpu" in container["resources"]["requests"]


@pytest.mark.parametrize("version", kube_versions())
def test_the_walkthrough_deployment_validates_against_the_kubernetes_schemas(version: str) -> None:
    (deployment,) = by_kind(load(KUEUE), "Deployment")
    kubernetes_validate.validate(deployment, version, strict=True)


POD_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PodMonitor"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["selector", "podMetricsEndpoints"],
            "additionalProperties": False,
            "properties": {
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "selector": {"type": "object"},
                "podMetricsEndpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string"},
                            "scrapeTimeout": {"type": "string"},
                            # The Prometheus Operator's RelabelConfig.
                            "relabelings": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "properties": {
                                        "sourceLabels": {
                                            "type": "array",
                                            "items": {
                                                "type": "string",
                                                "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$",
                                            },
                                        },
                                        "separator": {"type": "string"},
                                        "targetLabel": {"type": "string"},
                                        "regex": {"type": "string"},
                                        "modulus": {"type": "integer"},
                                        "replacement": {"type": "string"},
                                        "action": {
                                            "enum": [
                                                "replace",
                                                "keep",
                                                "drop",
                                                "hashmod",
                                                "labelmap",
                                                "labeldrop",
                                                "labelkeep",
                                            ]
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_the_serving_pod_monitor_scrapes_every_engine_the_rules_read_and_the_walkthrough_pods() -> (
    None
):
    (monitor,) = load(POD_MONITOR)
    jsonschema.validate(monitor, POD_MONITOR_SCHEMA)
    (expression,) = monitor["spec"]["selector"]["matchExpressions"]
    assert expression["operator"] == "In"
    assert set(expression["values"]) >= {"vllm", "sglang", "tgi"}
    (deployment,) = by_kind(load(KUEUE), "Deployment")
    template = deployment["spec"]["template"]
    assert template["metadata"]["labels"][expression["key"]] in expression["values"]
    ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} <= ports


def test_the_serving_pod_monitor_gives_tgi_series_the_model_from_the_pods_annotation() -> None:
    """TGI labels no series with its model; the relabeling copies the annotation into
    ``model_name`` for TGI pods only, as Prometheus applies it (regex fully anchored)."""
    (monitor,) = load(POD_MONITOR)
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (rule,) = endpoint["relabelings"]
    assert rule["targetLabel"] == "model_name"

    def relabel(labels: dict[str, str]) -> str | None:
        joined = ";".join(labels.get(name, "") for name in rule["sourceLabels"])
        match = re.fullmatch(rule["regex"], joined)
        return match.expand(rule["replacement"].replace("$1", r"\1")) if match else None

    annotation = "__meta_kubernetes_pod_annotation_roofline_dev_served_model"
    name = "__meta_kubernetes_pod_label_app_kubernetes_io_name"
    served = "meta-llama/Llama-3.1-8B-Instruct"
    assert relabel({name: "tgi", annotation: served}) == served
    assert relabel({name: "vllm", annotation: served}) is None
    assert relabel({name: "tgi"}) is None
