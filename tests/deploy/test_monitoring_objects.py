"""ServiceMonitor and PrometheusRule, checked structurally.

The Kubernetes schemas do not cover the Prometheus Operator's kinds, and its CRDs are not
vendored here, so these closed schemas hold the fields of monitoring.coreos.com/v1 the chart
writes (names and types as in the Prometheus Operator API reference). A typo such as
`scrapeInterval` or `annotation` fails them, where the API server would silently prune it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from .rendering import CHART_DIR, SCENARIOS, render_objects, scenario_id, scenario_values

#: Prometheus duration, as the Prometheus Operator CRDs pattern it.
DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?"
    r"(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA = {
    "type": "object",
    "required": ["name", "namespace", "labels"],
    "properties": {
        "name": {"type": "string", "maxLength": 63},
        "namespace": {"type": "string"},
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
    },
    "additionalProperties": False,
}
RELABEL = {
    "type": "object",
    "properties": {
        "sourceLabels": {"type": "array", "items": {"type": "string"}},
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer"},
        "replacement": {"type": "string"},
        "action": {"type": "string"},
    },
    "additionalProperties": False,
}
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": METADATA,
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {
                    "type": "object",
                    "properties": {"matchLabels": STRING_MAP},
                    "additionalProperties": False,
                },
                "namespaceSelector": {
                    "type": "object",
                    "properties": {"matchNames": {"type": "array", "items": {"type": "string"}}},
                    "additionalProperties": False,
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["port"],
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": DURATION,
                            "scrapeTimeout": DURATION,
                            "honorLabels": {"type": "boolean"},
                            "relabelings": {"type": "array", "items": RELABEL},
                            "metricRelabelings": {"type": "array", "items": RELABEL},
                        },
                        "additionalProperties": False,
                    },
                },
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
RULE = {
    "type": "object",
    "required": ["expr"],
    "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
    "properties": {
        "record": {"type": "string", "pattern": "^[a-zA-Z_:][a-zA-Z0-9_:]*$"},
        "alert": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9]*$"},
        "expr": {"type": "string", "minLength": 1},
        "for": DURATION,
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
    },
    "additionalProperties": False,
}
PROMETHEUS_RULE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": METADATA,
        "spec": {
            "type": "object",
            "required": ["groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string"},
                            "interval": DURATION,
                            "rules": {"type": "array", "minItems": 1, "items": RULE},
                        },
                        "additionalProperties": False,
                    },
                }
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
SCHEMAS = {"ServiceMonitor": SERVICE_MONITOR, "PrometheusRule": PROMETHEUS_RULE}
ALL_ON = {
    "serviceMonitor": {"enabled": True, "relabelings": [{"action": "labeldrop", "regex": "pod"}]},
    "prometheusRule": {"enabled": True},
}


def monitoring_objects(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in render_objects(values) if o["apiVersion"].startswith("monitoring.")]


@pytest.mark.parametrize(
    "values",
    [
        *(pytest.param(scenario_values(s), id=scenario_id(s)) for s in SCENARIOS),
        pytest.param(ALL_ON, id="everything-enabled"),
    ],
)
def test_monitoring_objects_match_the_prometheus_operator_api(values: dict[str, Any]) -> None:
    for obj in monitoring_objects(values):
        jsonschema.validate(obj, SCHEMAS[obj["kind"]])


def test_a_misspelt_field_fails_the_structural_check() -> None:
    (monitor,) = [o for o in monitoring_objects(ALL_ON) if o["kind"] == "ServiceMonitor"]
    monitor["spec"]["endpoints"][0]["scrapeInterval"] = "30s"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, SERVICE_MONITOR)


def test_the_kube_prometheus_stack_scenario_labels_both_objects_for_its_release() -> None:
    values = scenario_values(CHART_DIR / "ci" / "kube-prometheus-stack-values.yaml")
    objects = monitoring_objects(values)
    assert {o["kind"] for o in objects} == {"ServiceMonitor", "PrometheusRule"}
    for obj in objects:
        assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_the_dashboard_config_map_carries_the_sidecar_label_and_valid_json() -> None:
    (config_map,) = [
        o
        for o in render_objects({"grafanaDashboard": {"enabled": True}})
        if o["kind"] == "ConfigMap"
    ]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    ((name, text),) = config_map["data"].items()
    assert re.fullmatch(r"[\w.-]+\.json", name)
    assert json.loads(text)["uid"] == "roofline-operator"
