"""The endpoint picker's configuration and the InferencePool."""

from __future__ import annotations

from typing import Any

import yaml

from roofline_cli.export import gateway
from roofline_cli.export.commented import plain
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import ExportOptions
from tests.cli.export_sources import status_profile


def _documents(**options: Any) -> list[dict[str, Any]]:
    source = source_of_profile(status_profile(), "p")
    return [plain(d) for _, d in gateway.build(source, ExportOptions(**options))]


def test_the_utilization_detector_gets_the_plans_thresholds() -> None:
    config_map, _ = _documents()
    config = yaml.safe_load(config_map["data"][gateway.CONFIG_KEY])
    assert config["kind"] == "EndpointPickerConfig"
    detector = next(p for p in config["plugins"] if p["type"] == "utilization-detector")
    # The L40S class: maxBatch 24 of 40 sequences = 0.6 of the KV cache; ⌈2.4⌉ = 3 queued.
    assert detector["parameters"] == {"queueDepthThreshold": 3, "kvCacheUtilThreshold": 0.6}
    assert config["saturationDetector"] == {"pluginRef": "utilization-detector"}
    profiles = config["schedulingProfiles"][0]["plugins"]
    assert [p["pluginRef"] for p in profiles] == [name for name, _ in gateway.SCORERS]


def test_the_pool_selects_the_serving_pods_and_names_the_picker() -> None:
    _, pool = _documents(pool_selector={"app": "vllm", "model": "llama"}, target_port=8080)
    assert pool["spec"]["selector"] == {"matchLabels": {"app": "vllm", "model": "llama"}}
    assert pool["spec"]["targetPorts"] == [{"number": 8080}]
    assert pool["spec"]["endpointPickerRef"] == {
        "name": "llama-3-1-8b-epp",
        "port": {"number": 9002},
    }
