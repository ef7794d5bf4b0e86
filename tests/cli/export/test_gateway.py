"""The inference gateway's ``inferencepool`` chart values: the endpoint picker's configuration
where the chart mounts it, the pool the chart creates, its failure mode and flow control."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from roofline_cli.export import gateway
from roofline_cli.export.commented import plain
from roofline_cli.export.engine_args import OneModelOnly
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import ExportOptions
from tests.cli.export_sources import class_plan, status_profile


def _values(**options: Any) -> dict[str, Any]:
    source = source_of_profile(status_profile(), "p")
    ((_, document),) = gateway.build(source, ExportOptions(**options))
    values: dict[str, Any] = plain(document)
    return values


def _config(values: dict[str, Any]) -> dict[str, Any]:
    extension = values["inferenceExtension"]
    assert extension["pluginsConfigFile"] == gateway.CONFIG_KEY
    config: dict[str, Any] = yaml.safe_load(
        extension["pluginsCustomConfig"][extension["pluginsConfigFile"]]
    )
    return config


def test_the_thresholds_go_where_the_chart_mounts_the_pickers_file() -> None:
    """The chart merges pluginsCustomConfig into its own <release>-epp ConfigMap and starts the
    picker with --config-file /config/<pluginsConfigFile>; nothing else is a ConfigMap."""
    values = _values()
    assert "kind" not in values
    config = _config(values)
    assert config["kind"] == "EndpointPickerConfig"
    detector = next(p for p in config["plugins"] if p["type"] == "utilization-detector")
    # The L40S class: maxBatch 24 of 40 sequences = 0.6 of the KV cache; ⌈2.4⌉ = 3 queued.
    assert detector["parameters"] == {"queueDepthThreshold": 3, "kvCacheUtilThreshold": 0.6}
    assert config["saturationDetector"] == {"pluginRef": "utilization-detector"}
    profiles = config["schedulingProfiles"][0]["plugins"]
    assert [p["pluginRef"] for p in profiles] == [name for name, _ in gateway.SCORERS]


def test_the_chart_creates_the_pool_with_an_explicit_failure_mode() -> None:
    values = _values(pool_selector={"app": "vllm", "model": "llama"}, target_port=8080)
    pool = values["inferencePool"]
    assert pool["modelServers"] == {"matchLabels": {"app": "vllm", "model": "llama"}}
    assert pool["targetPorts"] == [{"number": 8080}]
    assert pool["modelServerType"] == "vllm"
    assert values["inferenceExtension"]["failureMode"] == "FailOpen"
    assert values["inferenceExtension"]["extProcPort"] == 9002
    assert _values(failure_mode="FailClose")["inferenceExtension"]["failureMode"] == "FailClose"


def test_flow_control_is_off_unless_asked_and_the_comment_says_what_that_means() -> None:
    source = source_of_profile(status_profile(), "p")
    ((header, document),) = gateway.build(source, ExportOptions())
    assert "featureGates" not in _config(plain(document))
    note = document["inferenceExtension"]["pluginsCustomConfig"].comment
    assert "rejects only negative-priority requests" in note
    assert _config(_values(flow_control=True))["featureGates"] == ["flowControl"]
    assert "named as the release" in header


def test_the_metrics_extractor_reads_the_engines_own_series() -> None:
    config = _config(_values(engine="sglang"))
    extractor = next(p for p in config["plugins"] if p["type"] == "core-metrics-extractor")
    assert extractor["parameters"] == {"defaultEngine": "sglang"}
    assert _values(engine="sglang")["inferencePool"]["modelServerType"] == "sglang"
    vllm = _config(_values())
    assert {"type": "core-metrics-extractor"} in vllm["plugins"]
    assert {"type": "metrics-data-source"} in vllm["plugins"]


def test_one_release_serves_one_model() -> None:
    source = source_of_profile(status_profile(), "p")
    two = replace(source, plans=(*source.plans, class_plan(model="other")))
    with pytest.raises(OneModelOnly, match="--model"):
        gateway.build(two, ExportOptions())


def test_a_long_model_names_a_release_helm_accepts_and_whose_picker_fits_a_service_name() -> None:
    """Helm refuses release names over 53 characters, and the chart names the picker's Service
    ``<release>-epp``: a long model's release is shortened with a digest of the whole name."""
    long_model = "a-very-long-model-name-" + "x" * 40 + "-instruct"
    source = source_of_profile(status_profile(), "p")
    one = replace(source, plans=(class_plan(model=long_model),))
    ((header, _),) = gateway.build(one, ExportOptions())
    release = header.split("helm install ", 1)[1].split()[0]
    assert len(release) <= gateway.HELM_RELEASE_CHARS
    assert len(f"{release}-epp") <= 63
    assert release.startswith("a-very-long-model-name-")
