"""Published values through the operator's own path: planner, records in status, conditions,
metrics (the rules themselves are in ``test_hysteresis.py``)."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry
from tests.operator.unit.operator_builders import device, profile
from tests.operator.unit.round_builders import (
    NOW,
    message,
    profile_once,
    reprofile,
    with_intervals,
)

from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import NodeResult, from_compact
from roofline_operator.decide.hysteresis import record_profile
from roofline_operator.decide.records import NodeRecord, record_from_status, record_to_status
from roofline_operator.decide.status import build_status, device_changed_condition
from roofline_operator.run.metrics import OperatorMetrics, snapshot_from_records
from roofline_profiler.wire import fields


def test_a_reprofile_within_noise_keeps_the_labels_and_raises_nothing() -> None:
    first = profile_once({}, message(4.30e12, NOW), NOW)
    assert first.label_patches["a"]["roofline.dev/bandwidth-gbps"] == "4300"
    later = NOW + 3700
    second = reprofile(first, message(4.26e12, later), later)  # -0.9%, inside 1% intervals
    record = second.records["a"]
    assert second.profiled == ["a"]
    assert "a" not in second.label_patches
    assert second.changes == []
    assert record.result is not None
    assert record.result.worst_gpu().bandwidth_bytes_per_second == 4.30e12
    assert record.measured is not None
    assert record.measured.bandwidth_bytes_per_second == 4.26e12
    assert record.result.profiled_at == later  # the node counts as freshly profiled


def test_a_reprofile_beyond_the_threshold_relabels_and_reports_the_change() -> None:
    first = profile_once({}, message(4.31e12, NOW), NOW)
    later = NOW + 3700
    second = reprofile(first, message(3.62e12, later), later)
    assert second.label_patches["a"]["roofline.dev/bandwidth-gbps"] == "3620"
    ((name, publication),) = second.changes
    assert name == "a"
    assert publication.describe().startswith("bandwidth 4.31\u21923.62 TB/s (\u221216%)")
    assert second.records["a"].change == publication.describe()


def published_record() -> NodeRecord:
    """A node whose second profile stayed within noise and whose third degraded."""
    record = NodeRecord(name="gpu-7", gpus=2, state=NodeState.PROFILED)
    results = [
        from_compact(
            profile(
                with_intervals(device(0)), with_intervals(device(1, min_batch=256)), created_at=t
            ),
            "h",
        )
        for t in (1000.0, 2000.0)
    ]
    for result in results:
        record, _ = record_profile(record, result, 10)
    degraded = from_compact(
        profile(
            with_intervals(device(0)),
            with_intervals(device(1, min_batch=256, bandwidth=3.5e12), batches=(128, 256)),
            created_at=3000.0,
        ),
        "h",
    )
    record, _ = record_profile(record, degraded, 10)
    return record


def strip_steps(result: NodeResult | None) -> NodeResult | None:
    if result is None:
        return None
    return replace(result, gpus=tuple(replace(g, step_seconds=()) for g in result.gpus))


def test_published_measured_and_previous_numbers_survive_a_restart() -> None:
    record = published_record()
    entry = record_to_status(record)
    rebuilt = record_from_status(entry)
    assert rebuilt is not None
    assert strip_steps(rebuilt.result) == strip_steps(record.result)
    assert (rebuilt.previous, rebuilt.published_at, rebuilt.change) == (
        record.previous,
        record.published_at,
        record.change,
    )
    assert rebuilt.measured == record.measured
    assert entry["bandwidthInterval"]["low"] < entry["bandwidthBytesPerSecond"]
    # GPU 1's min batch held at 256 with the latest profile's interval around it (128..256);
    # its bandwidth moved with its own.
    assert entry["recommendedMinBatchInterval"] == {"low": 128, "high": 256}
    assert entry["bandwidthInterval"] == {"low": 3.465e12, "high": 3.535e12}
    assert entry["previous"]["profiledTime"] == "1970-01-01T00:33:20Z"
    assert "bandwidthInterval" not in entry["previous"]
    assert entry["materialChange"].startswith("GPU 1 bandwidth 4.3\u21923.5 TB/s")
    assert [d.get("bandwidthInterval") is not None for d in entry["devices"]] == [True, True]


def test_measured_numbers_appear_in_status_only_when_held_back() -> None:
    record = NodeRecord(name="a", gpus=1, state=NodeState.PROFILED)
    first = from_compact(profile(with_intervals(device(bandwidth=4.30e12)), created_at=1.0), "h")
    record, _ = record_profile(record, first, 10)
    assert "measured" not in record_to_status(record)
    noisy = from_compact(profile(with_intervals(device(bandwidth=4.28e12)), created_at=2.0), "h")
    record, _ = record_profile(record, noisy, 10)
    entry = record_to_status(record)
    assert entry["bandwidthBytesPerSecond"] == 4.30e12
    assert entry["measured"]["bandwidthBytesPerSecond"] == 4.28e12
    assert "bandwidthInterval" not in entry["measured"]  # for reading; the status stays small
    assert entry["publishedTime"] == "1970-01-01T00:00:01Z"
    assert entry["profiledTime"] == "1970-01-01T00:00:02Z"


def test_a_status_entry_from_before_intervals_still_restores_a_record() -> None:
    old_entry = {
        "name": "a",
        "state": "Profiled",
        "specHash": "h",
        "profiledTime": "2026-12-01T00:00:00Z",
        "dtype": "bfloat16",
        "shape": "4096x14336",
        "bandwidthBytesPerSecond": 4.3e12,
        "peakFlopsPerSecond": 7.9e14,
        "ridgePoint": 183.7,
        "recommendedMinBatch": 128,
    }
    record = record_from_status(old_entry)
    assert record is not None
    assert record.result is not None
    assert not fields.has_intervals(record.result.gpus[0].numbers)
    assert record.measured is not None
    assert record.measured.ridge_point == 183.7
    assert (record.previous, record.change) == (None, None)


def test_the_device_changed_condition_names_each_changed_node() -> None:
    quiet = NodeRecord(name="gpu-1", gpus=1)
    changed = replace(quiet, name="gpu-3", change="bandwidth 4.31\u21923.62 TB/s (\u221216%)")
    condition = device_changed_condition({"gpu-1": quiet, "gpu-3": changed})
    assert (condition.type, condition.status, condition.reason) == (
        "DeviceChanged",
        True,
        "MaterialChange",
    )
    assert condition.message == "node gpu-3: bandwidth 4.31\u21923.62 TB/s (\u221216%)"
    assert device_changed_condition({"gpu-1": quiet}).status is False


def test_the_device_changed_condition_sums_up_many_nodes() -> None:
    records = {
        f"n{i}": NodeRecord(name=f"n{i}", gpus=1, change="peak 1\u21922 TFLOP/s (+100%)")
        for i in range(7)
    }
    assert device_changed_condition(records).message.endswith("; and 2 more node(s)")


def test_the_status_carries_the_condition_beside_the_others() -> None:
    record = published_record()
    status = build_status(
        records={"gpu-7": record},
        spec_hash="h",
        conflicts={},
        spec_error=None,
        previous_conditions=[],
        generation=1,
        now=5000.0,
    )
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["DeviceChanged"]["status"] == "True"
    assert by_type["DeviceChanged"]["message"].startswith("node gpu-7: GPU 1 bandwidth")


def test_interval_gauges_and_the_change_counter_are_exposed() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry)
    metrics.start_profile("fleet")
    record = published_record()
    metrics.collector.update(snapshot_from_records("fleet", {"gpu-7": record}, "h"))
    labels = {
        "profile": "fleet",
        "node": "gpu-7",
        "gpu": "1",
        "product": "NVIDIA H200",
        "dtype": "bfloat16",
    }
    low = registry.get_sample_value(
        "roofline_memory_bandwidth_interval_bytes_per_second", {**labels, "bound": "low"}
    )
    high = registry.get_sample_value(
        "roofline_memory_bandwidth_interval_bytes_per_second", {**labels, "bound": "high"}
    )
    assert low is not None
    assert high is not None
    assert low < 3.5e12 < high
    batches = registry.get_sample_value(
        "roofline_recommended_min_batch_interval", {**labels, "bound": "low"}
    )
    assert batches == 128
    counter = {"profile": "fleet", "quantity": "bandwidth"}
    assert registry.get_sample_value("roofline_device_changes_total", counter) == 0
    metrics.device_changes.labels("fleet", "bandwidth").inc()
    assert registry.get_sample_value("roofline_device_changes_total", counter) == 1
    metrics.forget("fleet")
    assert registry.get_sample_value("roofline_device_changes_total", counter) is None


def test_a_profile_that_warned_of_interference_keeps_the_labels_and_is_named() -> None:
    first = profile_once({}, message(4.31e12, NOW), NOW)
    later = NOW + 3700
    second = reprofile(first, message(2.9e12, later, warnings=("CpuContention",)), later)
    assert "a" not in second.label_patches  # no label moved
    assert second.changes == []
    ((name, publication),) = second.held
    assert (name, publication.held) == ("a", ("CpuContention",))
    entry = record_to_status(second.records["a"])
    assert entry["bandwidthBytesPerSecond"] == 4.31e12
    assert entry["measured"]["bandwidthBytesPerSecond"] == 2.9e12
    assert (entry["warnings"], entry["heldBack"]) == (["CpuContention"], True)
    rebuilt = record_from_status(entry)
    assert rebuilt is not None
    assert (rebuilt.warnings, rebuilt.held) == (("CpuContention",), True)


def test_a_profile_without_warnings_writes_neither_field() -> None:
    first = profile_once({}, message(4.31e12, NOW), NOW)
    entry = record_to_status(first.records["a"])
    assert "warnings" not in entry
    assert "heldBack" not in entry


def test_the_held_back_counter_starts_at_zero_and_goes_with_the_profile() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry)
    metrics.start_profile("fleet")
    sample = {"profile": "fleet"}
    assert registry.get_sample_value("roofline_profiles_held_back_total", sample) == 0
    metrics.forget("fleet")
    assert registry.get_sample_value("roofline_profiles_held_back_total", sample) is None
