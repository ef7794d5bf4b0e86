"""The ScaledObject: triggers below the plan's batch by the HPA's tolerance and at its queue, the
engine's series, the Prometheus credentials."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from roofline_cli.export import keda, thresholds
from roofline_cli.export.commented import plain
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import ExportOptions
from tests.cli.export_sources import MODEL, class_plan, status_profile


def _scaled(**options: Any) -> dict[str, Any]:
    source = source_of_profile(status_profile(), "p")
    ((_, document),) = keda.build(source, ExportOptions(**options))
    scaled: dict[str, Any] = plain(document)
    return scaled


def test_replicas_are_added_before_the_smallest_slo_batch_fills_and_a_tenth_of_it_queued() -> None:
    scaled = _scaled(namespace="serving", deployment="llama", max_replicas=40)
    requests, queue = scaled["spec"]["triggers"]
    # The L40S class's SLO batch is 24: ⌊24 ÷ 1.1⌋ = 21, and the HPA acts above 21 × 1.1 = 23.1.
    assert requests["metadata"]["threshold"] == "21"
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


@pytest.mark.parametrize("batch", [1, 2, 10, 11, 24, 96, 104, 129, 1000])
def test_the_hpa_adds_a_replica_before_a_request_waits(batch: int) -> None:
    """The HPA scales up when requests per replica exceed target × (1 + tolerance): with the
    exported target that happens by the time each replica holds its SLO batch (the engine's
    --max-num-seqs, beyond which requests wait), and not before it holds most of it."""
    target, how = thresholds.scale_up_target(class_plan(max_batch=batch))
    tolerance = 1 + Fraction(str(thresholds.HPA_TOLERANCE))
    assert 1 <= target <= batch
    if batch > 1:
        assert batch / Fraction(target) > tolerance  # a full replica is beyond the tolerance
        assert batch / Fraction(target + 1) <= tolerance  # and no larger target would be
    assert f"maxBatch {batch}" in how


def test_a_prometheus_that_needs_credentials_is_reached_through_an_authentication_ref() -> None:
    scaled = _scaled(
        authentication_ref=("ClusterTriggerAuthentication", "prometheus"), auth_modes="bearer"
    )
    for trigger in scaled["spec"]["triggers"]:
        assert trigger["authenticationRef"] == {
            "name": "prometheus",
            "kind": "ClusterTriggerAuthentication",
        }
        assert trigger["metadata"]["authModes"] == "bearer"


def test_without_credentials_no_trigger_names_any() -> None:
    for trigger in _scaled()["spec"]["triggers"]:
        assert "authenticationRef" not in trigger
        assert "authModes" not in trigger["metadata"]
