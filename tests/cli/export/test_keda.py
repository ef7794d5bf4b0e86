"""The ScaledObject: triggers at the plan's batch and queue, the engine's series."""

from __future__ import annotations

from typing import Any

from roofline_cli.export import keda
from roofline_cli.export.commented import plain
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import ExportOptions
from tests.cli.export_sources import MODEL, status_profile


def _scaled(**options: Any) -> dict[str, Any]:
    source = source_of_profile(status_profile(), "p")
    ((_, document),) = keda.build(source, ExportOptions(**options))
    scaled: dict[str, Any] = plain(document)
    return scaled


def test_each_replica_holds_the_smallest_slo_batch_and_a_tenth_of_it_queued() -> None:
    scaled = _scaled(namespace="serving", deployment="llama", max_replicas=40)
    requests, queue = scaled["spec"]["triggers"]
    assert requests["metadata"]["threshold"] == "24"
    assert queue["metadata"]["threshold"] == "3"
    assert queue["metadata"]["activationThreshold"] == "0"
    assert requests["metricType"] == queue["metricType"] == "AverageValue"
    assert scaled["spec"]["scaleTargetRef"] == {"name": "llama"}
    assert scaled["spec"]["maxReplicaCount"] == 40
    query = requests["metadata"]["query"]
    assert query == (
        f'sum(vllm:num_requests_running{{model_name="{MODEL}",namespace="serving"}}) + '
        f'sum(vllm:num_requests_waiting{{model_name="{MODEL}",namespace="serving"}})'
    )


def test_sglang_and_a_served_name_change_the_series() -> None:
    scaled = _scaled(engine="sglang", model_id="meta-llama/Llama-3.1-8B-Instruct")
    _, queue = scaled["spec"]["triggers"]
    assert queue["metadata"]["query"] == (
        'sum(sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct",'
        'namespace="default"})'
    )


def test_every_metadata_value_is_a_string_as_the_crd_requires() -> None:
    for trigger in _scaled()["spec"]["triggers"]:
        assert all(isinstance(v, str) for v in trigger["metadata"].values())
