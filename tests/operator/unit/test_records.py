from __future__ import annotations

from tests.operator.unit.operator_builders import device, profile

from roofline_operator.names import NodeState
from roofline_operator.records import (
    NodeRecord,
    record_from_status,
    record_to_status,
    records_from_status,
)
from roofline_operator.results import from_compact


def test_a_single_gpu_node_round_trips_through_status_without_a_device_list() -> None:
    record = NodeRecord(
        name="gpu-1",
        gpus=1,
        state=NodeState.PROFILED,
        attempts=1,
        cycle_hash="h",
        result=from_compact(profile(device(ridge=181.5, min_batch=128)), "h"),
    )
    entry = record_to_status(record)
    assert "devices" not in entry
    assert entry["ridgePoint"] == 181.5
    assert entry["recommendedMinBatch"] == 128
    assert entry["profiledTime"] == "2023-11-14T22:13:20Z"
    restored = record_from_status(entry)
    assert restored is not None
    assert restored.state is NodeState.PROFILED
    assert restored.result is not None
    assert restored.result.spec_hash == "h"
    assert restored.result.worst_gpu().ridge_point == 181.5
    assert restored.result.profiled_at == 1_700_000_000.0


def test_a_multi_gpu_node_keeps_per_gpu_numbers_and_reports_its_worst_gpu() -> None:
    devices = (device(0, min_batch=64), device(1, min_batch=256, ridge=200.0), device(2))
    record = NodeRecord(
        name="gpu-8", gpus=3, state=NodeState.PROFILED, result=from_compact(profile(*devices), "h")
    )
    entry = record_to_status(record)
    assert [d["index"] for d in entry["devices"]] == [0, 1, 2]
    assert (entry["gpu"], entry["recommendedMinBatch"], entry["ridgePoint"]) == ("1", 256, 200.0)
    restored = record_from_status(entry)
    assert restored is not None
    assert restored.result is not None
    assert [d.recommended_min_batch for d in restored.result.gpus] == [64, 256, 128]


def test_a_failure_entry_keeps_reason_attempts_and_next_attempt_time() -> None:
    record = NodeRecord(
        name="gpu-2",
        gpus=1,
        state=NodeState.RETRYING,
        attempts=2,
        reason="OOMKilled",
        message="oom",
        next_attempt_at=1_700_000_060.0,
    )
    entry = record_to_status(record)
    assert "ridgePoint" not in entry
    restored = record_from_status(entry)
    assert restored == record


def test_damaged_entries_are_dropped_instead_of_crashing() -> None:
    status = {
        "nodes": [
            {"name": "ok", "state": "Queued"},
            {"state": "Profiled"},
            {"name": "bad-state", "state": "Sleeping"},
            "junk",
        ]
    }
    assert list(records_from_status(status)) == ["ok"]
    assert records_from_status(None) == {}
