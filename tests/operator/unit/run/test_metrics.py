from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from tests.operator.unit.operator_builders import device, profile

from roofline_operator.core.names import FailureReason, NodeState
from roofline_operator.core.node_results import from_compact
from roofline_operator.decide.records import NodeRecord
from roofline_operator.run.metrics import OperatorMetrics, snapshot_from_records


def fleet() -> dict[str, NodeRecord]:
    two_gpus = profile(device(0, ridge=180.0, min_batch=128), device(1, ridge=200.0, min_batch=256))
    return {
        "gpu-a": NodeRecord(
            name="gpu-a", gpus=2, state=NodeState.PROFILED, result=from_compact(two_gpus, "h")
        ),
        "gpu-b": NodeRecord(name="gpu-b", gpus=1, state=NodeState.RETRYING, reason="Timeout"),
        "gpu-c": NodeRecord(name="gpu-c", gpus=1, state=NodeState.QUEUED),
        "gpu-d": NodeRecord(name="gpu-d", gpus=1, state=NodeState.UNSCHEDULABLE),
    }


def gpu_labels(node: str, gpu: str) -> dict[str, str]:
    return {
        "profile": "fleet",
        "node": node,
        "gpu": gpu,
        "product": "NVIDIA H200",
        "dtype": "bfloat16",
    }


def test_per_gpu_gauges_come_from_the_latest_snapshot(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h"))
    labels = gpu_labels("gpu-a", "1")
    assert registry.get_sample_value("roofline_ridge_point", labels) == 200.0
    assert registry.get_sample_value("roofline_recommended_min_batch", labels) == 256
    assert registry.get_sample_value("roofline_memory_bandwidth_bytes_per_second", labels) == 4.3e12
    assert registry.get_sample_value("roofline_peak_flops_per_second", labels) == 200.0 * 4.3e12
    step = registry.get_sample_value("roofline_decode_step_seconds", {**labels, "batch": "256"})
    assert step == 4.1e-5
    assert registry.get_sample_value("roofline_ridge_point", gpu_labels("gpu-b", "0")) is None


def test_per_node_gauges_mark_failures_and_profile_times(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h"))
    node_a = {"profile": "fleet", "node": "gpu-a"}
    node_b = {"profile": "fleet", "node": "gpu-b"}
    assert registry.get_sample_value("roofline_profile_timestamp_seconds", node_a) == 1.7e9
    assert registry.get_sample_value("roofline_profile_duration_seconds", node_a) == 12.5
    assert registry.get_sample_value("roofline_node_profile_failed", node_a) == 0
    assert registry.get_sample_value("roofline_node_profile_failed", node_b) == 1
    counts = {
        state: registry.get_sample_value(
            "roofline_profile_nodes", {"profile": "fleet", "state": state}
        )
        for state in ("matched", "profiled", "failed", "pending", "unschedulable", "unavailable")
    }
    assert counts == {
        "matched": 4,
        "profiled": 1,
        "failed": 1,
        "pending": 1,
        "unschedulable": 1,
        "unavailable": 0,
    }


def test_a_node_whose_pod_cannot_be_scheduled_is_unschedulable_and_not_failed(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h"))
    node_b = {"profile": "fleet", "node": "gpu-b"}
    node_d = {"profile": "fleet", "node": "gpu-d"}
    assert registry.get_sample_value("roofline_node_profile_failed", node_d) == 0
    assert registry.get_sample_value("roofline_node_profile_unschedulable", node_d) == 1
    assert registry.get_sample_value("roofline_node_profile_unschedulable", node_b) == 0


def test_a_node_that_leaves_disappears_from_the_next_scrape(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    records = fleet()
    metrics.collector.update(snapshot_from_records("fleet", records, "h"))
    del records["gpu-a"]
    metrics.collector.update(snapshot_from_records("fleet", records, "h"))
    assert registry.get_sample_value("roofline_ridge_point", gpu_labels("gpu-a", "1")) is None


def test_counters_count_pods_failures_and_errors_and_vanish_with_the_profile(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.pods_launched.labels("fleet").inc(3)
    metrics.failures.labels("fleet", "OOMKilled").inc()
    metrics.reconcile_errors.labels("fleet").inc()
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h"))
    assert (
        registry.get_sample_value("roofline_profiler_pods_launched_total", {"profile": "fleet"})
        == 3
    )
    assert (
        registry.get_sample_value(
            "roofline_profile_failures_total", {"profile": "fleet", "reason": "OOMKilled"}
        )
        == 1
    )
    assert registry.get_sample_value("roofline_reconcile_errors_total", {"profile": "fleet"}) == 1
    metrics.forget("fleet")
    text = generate_latest(registry).decode()
    assert 'profile="fleet"' not in text


def test_counters_of_a_started_profile_read_zero_for_every_reason_until_forgotten(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.start_profile("fleet")
    profile = {"profile": "fleet"}
    assert registry.get_sample_value("roofline_reconcile_errors_total", profile) == 0
    assert registry.get_sample_value("roofline_profiler_pods_launched_total", profile) == 0
    for reason in FailureReason:
        labels = {**profile, "reason": reason.value}
        assert registry.get_sample_value("roofline_profile_failures_total", labels) == 0
    metrics.failures.labels("fleet", "Timeout").inc()
    metrics.start_profile("fleet")  # a restarted loop must not reset what was counted
    timeouts = {**profile, "reason": "Timeout"}
    assert registry.get_sample_value("roofline_profile_failures_total", timeouts) == 1
    metrics.forget("fleet")
    assert 'profile="fleet"' not in generate_latest(registry).decode()


def test_the_exposition_names_follow_the_contract(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h"))
    metrics.pods_launched.labels("fleet").inc()
    metrics.failures.labels("fleet", "Timeout").inc()
    metrics.reconcile_errors.labels("fleet").inc()
    names = {m.name for m in registry.collect()}
    assert names >= {
        "roofline_memory_bandwidth_bytes_per_second",
        "roofline_peak_flops_per_second",
        "roofline_ridge_point",
        "roofline_recommended_min_batch",
        "roofline_decode_step_seconds",
        "roofline_profile_timestamp_seconds",
        "roofline_profile_duration_seconds",
        "roofline_node_profile_failed",
        "roofline_profile_nodes",
        "roofline_profiler_pods_launched",
        "roofline_profile_failures",
        "roofline_reconcile_errors",
    }
