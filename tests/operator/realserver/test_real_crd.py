"""The CRD and the shipped manifests, proven by a real API server rather than by our reading of
the schema: good RooflineProfiles are admitted, bad ones refused with the message the CRD and
docs/contracts.md promise (CEL rules included), and every shipped file (``manifests/``, the
examples, the monitoring objects, the chart's CRD, every chart scenario as Helm renders it) passes
``kubectl apply --dry-run=server -f`` read from the file by the real kubectl, as users apply it:
an earlier version of this suite parsed the files with PyYAML and handed kubectl JSON, so a key
that kubectl reads as a YAML 1.1 boolean (the CRD's bare ``n``) never reached the server as
kubectl reads it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.deploy.rendering import (
    CRD_FILE,
    ROOT,
    SCENARIOS,
    generator,
    scenario_id,
    scenario_values,
)
from tests.operator.harness import Kubectl
from tests.operator.harness.profiles import EXAMPLE_PATH
from tests.operator.harness.realcluster import RealCluster


def example_with(*changes: tuple[tuple[str, ...], Any]) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(yaml.safe_load(EXAMPLE_PATH.read_text()))
    doc["metadata"] = {"name": "table"}
    for path, value in changes:
        target = doc
        for key in path[:-1]:
            target = target.setdefault(key, {})
        if value is None:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value
    return doc


GOOD = [
    pytest.param(example_with(), id="the-example"),
    pytest.param(
        example_with((("spec", "shape"), None), (("spec", "weightShape"), "4096x14336")),
        id="weight-shape",
    ),
    pytest.param(
        example_with(
            (("spec", "models"), [{"name": "llama", "preset": "llama-3.1-8b"}]),
            (("spec", "slo"), {"interTokenLatency": "50ms"}),
            (("spec", "gpuHourCost"), "2.50"),
        ),
        id="model-plan",
    ),
    pytest.param(example_with((("spec", "reprofileInterval"), "1h")), id="hourly"),
    pytest.param(
        example_with(
            (("spec", "resources"), {"requests": {"memory": 4096}, "limits": {"memory": "4Ki"}})
        ),
        id="memory-request-at-its-limit",
    ),
    pytest.param(
        example_with(
            (("spec", "resources"), {"requests": {"cpu": "500m"}, "limits": {"cpu": "0.5"}})
        ),
        id="cpu-request-at-its-limit",
    ),
    pytest.param(example_with((("spec", "device"), "cpu")), id="cpu-profile"),
    pytest.param(
        example_with(
            (("spec", "workload"), {"promptTokens": 1000, "outputTokens": 200}),
            (("spec", "slo"), {"interTokenLatency": "50ms", "timeToFirstToken": "60m"}),
        ),
        id="workload-with-ttft-target-at-limit",
    ),
]

BAD = [
    pytest.param(
        example_with((("metadata", "name"), "p" * 64)),
        "the name must fit a label value (at most 63 characters)",
        id="long-name",
    ),
    pytest.param(
        example_with((("spec", "reprofileInterval"), "30s")),
        "reprofileInterval must be at least 1m",
        id="interval-under-1m",
    ),
    pytest.param(
        example_with((("spec", "reprofileInterval"), "10m")),
        "reprofileInterval must be longer than timeoutSeconds",
        id="interval-under-timeout",
    ),
    pytest.param(
        example_with(
            (("spec", "weightShape"), "4096x4096"), (("spec", "shape"), {"k": 4096, "n": 4096})
        ),
        "set weightShape or shape, not both",
        id="both-shapes",
    ),
    pytest.param(
        example_with((("spec", "shape"), {"k": 65536, "n": 65536})),
        "shape k*n must be at most 2^30 elements",
        id="huge-shape",
    ),
    pytest.param(
        example_with((("spec", "shape"), {"k": 8192, "false": 8192})),
        'spec.shape has a key "false"',
        id="bare-n-read-as-false",
    ),
    pytest.param(
        example_with((("spec", "models"), [{"name": "m", "preset": "x", "config": {}}])),
        "a model needs exactly one of preset, config or configMapRef",
        id="two-model-sources",
    ),
    pytest.param(
        example_with((("spec", "slo"), {"interTokenLatency": "90s"})),
        "interTokenLatency must be above 0 and at most 60s",
        id="slow-slo",
    ),
    pytest.param(
        example_with(
            (("spec", "workload"), {"promptTokens": 1000, "outputTokens": 200}),
            (("spec", "slo"), {"timeToFirstToken": "3601s"}),
        ),
        "timeToFirstToken must be above 0 and at most 3600s",
        id="slow-ttft-slo",
    ),
    pytest.param(
        example_with((("spec", "slo"), {"timeToFirstToken": "2s"})),
        "slo.timeToFirstToken needs spec.workload",
        id="ttft-slo-without-workload",
    ),
    pytest.param(
        example_with((("spec", "workload"), {"promptTokens": 1000})),
        "spec.workload.outputTokens: Required value",
        id="workload-without-output",
    ),
    pytest.param(
        example_with((("spec", "tolerations"), [{"operator": "Exists", "value": "x", "key": "k"}])),
        "operator Exists takes no value",
        id="exists-with-value",
    ),
    pytest.param(
        example_with((("spec", "dtype"), "float64")),
        'spec.dtype: Unsupported value: "float64"',
        id="unknown-dtype",
    ),
    pytest.param(
        example_with(
            (("spec", "resources"), {"requests": {"memory": "8Gi"}, "limits": {"memory": "4Gi"}})
        ),
        "spec.resources.requests.memory must be at most spec.resources.limits.memory",
        id="memory-request-over-limit",
    ),
    pytest.param(
        example_with(
            (("spec", "resources"), {"requests": {"cpu": "4"}, "limits": {"cpu": "500m"}})
        ),
        "spec.resources.requests.cpu must be at most spec.resources.limits.cpu",
        id="cpu-request-over-limit",
    ),
    pytest.param(
        example_with((("spec", "resources"), {"limits": {"memory": "1" * 65}})),
        "spec.resources.limits.memory: Too long",
        id="quantity-too-long",
    ),
    pytest.param(
        example_with((("spec", "device"), "tpu")),
        'spec.device: Unsupported value: "tpu"',
        id="unknown-device",
    ),
    pytest.param(
        example_with((("spec", "maxParallel"), 0)),
        "spec.maxParallel: Invalid value: 0",
        id="zero-parallel",
    ),
    pytest.param(
        example_with((("spec", "maxParalel"), 3)),
        'unknown field "spec.maxParalel"',
        id="misspelt-field",
    ),
]


def _apply_dry_run(kubectl: Kubectl, tmp_path: Path, doc: dict[str, Any]) -> Any:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(doc))
    return kubectl("apply", "--dry-run=server", "-f", str(path), check=False)


@pytest.mark.parametrize("doc", GOOD)
def test_a_good_profile_is_admitted(
    real_cluster: RealCluster, kubectl: Kubectl, tmp_path: Path, doc: dict[str, Any]
) -> None:
    result = _apply_dry_run(kubectl, tmp_path, doc)
    assert result.returncode == 0, result.stderr
    assert "created (server dry run)" in result.stdout


@pytest.mark.parametrize(("doc", "message"), BAD)
def test_a_bad_profile_is_refused_with_the_promised_message(
    real_cluster: RealCluster, kubectl: Kubectl, tmp_path: Path, doc: dict[str, Any], message: str
) -> None:
    result = _apply_dry_run(kubectl, tmp_path, doc)
    assert result.returncode != 0, f"admitted: {result.stdout}"
    assert message in " ".join(result.stderr.split()), result.stderr


def read_by_kubectl(kubectl: Kubectl, *paths: Path) -> list[dict[str, Any]]:
    """The objects of ``paths`` as kubectl reads them (``create --dry-run=client -o json``,
    which prints one JSON document per object)."""
    flags = [a for path in paths for a in ("-f", str(path))]
    text = kubectl("create", "--dry-run=client", "-o", "json", *flags).stdout
    decoder, objects, at = json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        obj, at = decoder.raw_decode(text, at)
        objects += obj.get("items", []) if obj.get("kind") == "List" else [obj]
    return objects


def _ensure_namespaces(real_cluster: RealCluster, kubectl: Kubectl, path: Path) -> None:
    """Create the namespaces the objects of ``path`` live in (as read by kubectl), which a
    server dry run needs to exist: it creates nothing, the Namespace objects included."""
    items = read_by_kubectl(kubectl, path)
    for namespace in {o["metadata"].get("namespace") for o in items} - {None}:
        if real_cluster.get("namespaces", namespace) is None:
            real_cluster.create("namespaces", {"metadata": {"name": namespace}})


def _apply_as_users_do(real_cluster: RealCluster, kubectl: Kubectl, path: Path) -> str:
    """``kubectl apply --dry-run=server -f PATH``: kubectl reads the files, the server checks
    every object (schemas, CEL rules, the CRD's own validity)."""
    _ensure_namespaces(real_cluster, kubectl, path)
    result = kubectl("apply", "--dry-run=server", "-f", str(path), check=False)
    assert result.returncode == 0, f"kubectl apply -f {path}:\n{result.stdout}{result.stderr}"
    return result.stdout


#: What users apply as they find it: the plain manifests (``kubectl apply -f manifests/``),
#: the examples, the monitoring objects, the chart's CRD (what ``helm install`` installs first).
SHIPPED = [
    pytest.param(ROOT / "manifests", id="manifests"),
    pytest.param(ROOT / "manifests" / "examples", id="examples"),
    pytest.param(ROOT / "manifests" / "monitoring", id="monitoring"),
    pytest.param(CRD_FILE, id="chart-crd"),
]


@pytest.mark.parametrize("path", SHIPPED)
def test_every_shipped_file_applies_as_users_apply_it(
    real_cluster: RealCluster, kubectl: Kubectl, foreign_crds: list[Path], path: Path
) -> None:
    applied = _apply_as_users_do(real_cluster, kubectl, path)
    assert applied.count("(server dry run)") == len(read_by_kubectl(kubectl, path)), applied


def test_kubectl_reads_the_plain_manifests_crd_as_the_charts(kubectl: Kubectl) -> None:
    """The generated CRD is the chart's, as kubectl reads both: a YAML 1.1 reader took the
    generated file's bare key ``n`` for ``false``, so its shape lost the property ``n``."""
    (generated,) = read_by_kubectl(kubectl, ROOT / "manifests" / "01-crds.yaml")
    (chart,) = read_by_kubectl(kubectl, CRD_FILE)
    assert generated["spec"] == chart["spec"]
    spec = chart["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert {"k", "n"} <= set(spec["properties"]["shape"]["properties"])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_every_chart_scenario_applies_as_helm_renders_it(
    real_cluster: RealCluster,
    kubectl: Kubectl,
    foreign_crds: list[Path],
    tmp_path: Path,
    scenario: Path | None,
) -> None:
    """Each template's text as Helm renders it, read by kubectl (YAML 1.1, as Helm reads it)."""
    rendered = tmp_path / "rendered"
    rendered.mkdir()
    for name, text in generator().render_texts(scenario_values(scenario)).items():
        if text.strip():
            (rendered / name).write_text(text)
    _apply_as_users_do(real_cluster, kubectl, rendered)
