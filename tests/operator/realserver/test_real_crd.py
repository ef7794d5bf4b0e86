"""The CRD and the shipped manifests, proven by a real API server rather than by our reading of
the schema: good RooflineProfiles are admitted, bad ones refused with the message the CRD and
docs/contracts.md promise (CEL rules included), every manifest in ``manifests/`` and every chart
scenario passes ``kubectl apply --dry-run=server``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.deploy.rendering import (
    NAMESPACE,
    ROOT,
    SCENARIOS,
    render_objects,
    scenario_id,
    scenario_values,
)
from tests.operator.harness import Kubectl
from tests.operator.harness.profiles import EXAMPLE_PATH
from tests.operator.harness.realcluster import RealCluster

#: Kinds of CRDs the project does not own; their objects are skipped (no such CRD is installed).
FOREIGN_KINDS = {
    "ServiceMonitor",
    "PrometheusRule",
    "PodMonitor",
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
}


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


def _dry_run_objects(kubectl: Kubectl, tmp_path: Path, objects: list[dict[str, Any]]) -> list[str]:
    """Server dry-run of every object we own; returns the kinds skipped as foreign."""
    ours = [o for o in objects if o.get("kind") not in FOREIGN_KINDS]
    path = tmp_path / "objects.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": ours}))
    kubectl("apply", "--dry-run=server", "-f", str(path))
    return sorted({o["kind"] for o in objects if o.get("kind") in FOREIGN_KINDS})


def test_every_manifest_applies_with_server_dry_run(
    real_cluster: RealCluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    documents = [
        doc
        for path in sorted((ROOT / "manifests").rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    assert documents
    # The namespaces must exist for a dry run of the objects in them.
    namespaces = {NAMESPACE} | {d["metadata"].get("namespace") for d in documents} - {None}
    for namespace in namespaces:
        if real_cluster.get("namespaces", namespace) is None:
            real_cluster.create("namespaces", {"metadata": {"name": namespace}})
    skipped = _dry_run_objects(kubectl, tmp_path, documents)
    assert set(skipped) <= FOREIGN_KINDS


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_every_chart_scenario_applies_with_server_dry_run(
    real_cluster: RealCluster, kubectl: Kubectl, tmp_path: Path, scenario: Path | None
) -> None:
    objects = render_objects(scenario_values(scenario))
    for namespace in {o["metadata"].get("namespace") for o in objects} - {None}:
        if real_cluster.get("namespaces", namespace) is None:
            real_cluster.create("namespaces", {"metadata": {"name": namespace}})
    _dry_run_objects(kubectl, tmp_path, objects)
