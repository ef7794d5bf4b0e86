"""values.yaml and values.schema.json: documented, closed, and refusing bad values early."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import pytest
import yaml

from .rendering import CHART_DIR, SCENARIOS, scenario_id, scenario_values, walk

SCHEMA = json.loads((CHART_DIR / "values.schema.json").read_text())
VALUES_TEXT = (CHART_DIR / "values.yaml").read_text()
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w.-]*):(?P<rest>.*)$")


def with_value(path: str, value: Any) -> dict[str, Any]:
    """A values override that sets the dotted ``path`` to ``value``."""
    root: dict[str, Any] = {}
    node = root
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return root


def test_the_schema_is_draft_07() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(SCHEMA)


def test_every_object_in_the_schema_with_properties_is_closed() -> None:
    for node in walk(SCHEMA):
        if isinstance(node, dict) and "properties" in node:
            assert node.get("additionalProperties") is False, sorted(node["properties"])


def test_every_default_value_is_described_by_the_schema() -> None:
    defaults = yaml.safe_load(VALUES_TEXT)
    jsonschema.Draft7Validator(SCHEMA).validate(defaults)
    assert set(defaults) == set(SCHEMA["properties"])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_id)
def test_every_scenario_passes_the_schema(scenario: Path | None) -> None:
    with helm_python.Chart.load(CHART_DIR) as chart:
        chart.validate_schema(scenario_values(scenario))


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"replicaCount": 2}, id="unknown-top-level-key"),
        pytest.param(with_value("image.name", "x"), id="unknown-nested-key"),
        pytest.param(with_value("metrics.port", "9090"), id="port-as-string"),
        pytest.param(with_value("metrics.port", 70000), id="port-out-of-range"),
        pytest.param(with_value("image.pullPolicy", "Sometimes"), id="unknown-pull-policy"),
        pytest.param(with_value("image.digest", "sha256:abc"), id="truncated-digest"),
        pytest.param(with_value("profiler.namespace", "GPU_Profiling"), id="invalid-namespace"),
        pytest.param(
            with_value("prometheusRule.underfilledBatch.window", "30 minutes"),
            id="window-not-a-prometheus-duration",
        ),
        pytest.param(
            with_value("prometheusRule.underfilledBatch.fillRatio", 0), id="zero-fill-ratio"
        ),
        pytest.param(
            with_value("prometheusRule.underfilledBatch.severity", "urgent"),
            id="unknown-severity",
        ),
        pytest.param(with_value("prometheusRule.degradedGpu.ratio", 1.5), id="ratio-above-one"),
        pytest.param(with_value("prometheusRule.degradedGpu.minPeers", 1), id="median-of-one"),
        pytest.param(
            with_value("prometheusRule.staleProfile.maxAgeSeconds", "7d"), id="age-not-seconds"
        ),
        pytest.param(with_value("serviceMonitor.enabled", "yes"), id="boolean-as-string"),
        pytest.param(with_value("grafanaDashboard.labels", {"a": 1}), id="label-not-a-string"),
        pytest.param(
            with_value("rbac.extraProfilerNamespaces", ["a", "a"]), id="duplicate-namespaces"
        ),
        pytest.param({"imagePullSecrets": [{"secret": "regcred"}]}, id="pull-secret-without-name"),
        pytest.param({"imagePullSecrets": [{"name": "Reg_Cred"}]}, id="pull-secret-bad-name"),
        pytest.param(with_value("profiler.serviceAccountName", "A B"), id="bad-account"),
    ],
)
def test_the_schema_rejects_bad_values(values: dict[str, Any]) -> None:
    with helm_python.Chart.load(CHART_DIR) as chart:
        with pytest.raises(helm_python.HelmValuesError):
            chart.validate_schema(values)
        with pytest.raises(helm_python.HelmValuesError):
            chart.render(values, name="roofline-operator", namespace="roofline-system")


def undocumented_keys(text: str) -> list[str]:
    """Keys of a values file that neither they nor an enclosing key explain in a comment.

    helm-docs reads the `# --` comment above a key; a block documented as a whole (a
    securityContext) may leave its children bare.
    """
    lines = text.splitlines()
    documented_parents: list[tuple[int, bool]] = []  # (indent, documented) of enclosing keys
    missing = []
    for number, line in enumerate(lines):
        match = KEY_LINE.match(line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent = len(match["indent"])
        while documented_parents and documented_parents[-1][0] >= indent:
            documented_parents.pop()
        commented = number > 0 and lines[number - 1].strip().startswith("#")
        inherited = any(documented for _, documented in documented_parents)
        is_leaf = match["rest"].strip() != ""
        if is_leaf and not (commented or inherited):
            missing.append(match["key"])
        documented_parents.append((indent, commented))
    return missing


def test_every_value_is_commented() -> None:
    assert undocumented_keys(VALUES_TEXT) == []


def test_an_uncommented_value_is_noticed() -> None:
    assert undocumented_keys("image:\n  # -- The tag.\n  tag: x\n  pullPolicy: Always\n") == [
        "pullPolicy"
    ]
