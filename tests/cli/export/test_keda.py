"""The ScaledObject: triggers below the plan's batch by the HPA's tolerance and at its queue, the
engine's series, the Prometheus credentials."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from roofline_cli.export import keda, thresholds
from roofline_cli.export.commented import plain
from roofline_cli.export.from_status import source_of_profile
from roofline_cli.export.options import ExportOptions
from roofline_cli.export.plans import RequestRate
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


def _with_rates(*rates: float) -> dict[str, Any]:
    document = status_profile()
    classes = document["status"]["models"][0]["classes"]
    assert len(classes) == len(rates)
    for item, rps in zip(classes, rates, strict=True):
        item["maxRequestRate"] = {
            "requestsPerSecond": rps,
            "limitedBy": "ttft",
            "promptTokens": 4000,
            "outputTokens": 200,
        }
    return document


def _triggers(document: dict[str, Any], **options: Any) -> list[dict[str, Any]]:
    source = source_of_profile(document, "p")
    ((_, scaled),) = keda.build(source, ExportOptions(**options))
    triggers: list[dict[str, Any]] = plain(scaled)["spec"]["triggers"]
    return triggers


def test_a_profile_with_a_max_request_rate_adds_a_rate_trigger_below_the_slowest_class() -> None:
    classes = len(status_profile()["status"]["models"][0]["classes"])
    rates = [7.5 + i for i in range(classes)]
    *_, rate = _triggers(_with_rates(*rates), namespace="serving")
    assert rate["name"] == "request-rate-per-replica"
    assert rate["metricType"] == "AverageValue"
    # 7.5 / 1.1 = 6.818...: the largest three-digit target below it is 6.81.
    assert rate["metadata"]["threshold"] == "6.81"
    assert rate["metadata"]["query"] == (
        f'sum(rate(vllm:request_success_total{{model_name="{MODEL}",namespace="serving"}}[1m]))'
    )


def test_without_a_rate_on_every_class_or_for_sglang_the_triggers_are_as_before() -> None:
    classes = status_profile()["status"]["models"][0]["classes"]
    assert len(_triggers(status_profile())) == 2
    assert len(_triggers(_with_rates(*[5.0] * len(classes)), engine="sglang")) == 2
    if len(classes) > 1:
        document = _with_rates(*[5.0] * len(classes))
        del document["status"]["models"][0]["classes"][0]["maxRequestRate"]
        assert len(_triggers(document)) == 2


@example(1.1)
@given(st.floats(min_value=1e-3, max_value=1e5, allow_nan=False))
def test_the_rate_target_is_the_largest_whose_tolerance_stays_below_the_rate(rps: float) -> None:
    rate = RequestRate(rps, "itl", 100, 100)
    target, how = thresholds.request_rate_target(rate)
    tolerance = 1 + Fraction(str(thresholds.HPA_TOLERANCE))
    assert target > 0
    assert Fraction(target) * tolerance < Fraction(rps)
    limit = Fraction(rps) / tolerance
    step = Fraction(10) ** (math.floor(math.log10(limit)) - thresholds.RATE_TARGET_DIGITS + 1)
    # The next target of as many digits would not: float rounding aside (a part in 10^12).
    assert (Fraction(target) + step) * tolerance >= Fraction(rps) * (1 - Fraction(1, 10**12))
    assert "limited by itl" in how
