from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from tests.operator.unit.model_builders import plan
from tests.operator.unit.operator_builders import device, profile
from tests.operator.unit.round_builders import with_intervals
from tests.profiler.headline_builders import with_values

from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact, headline_of, to_status
from roofline_operator.core.nodes import NodeFacts
from roofline_operator.decide.records import (
    AnnotationMemo,
    NodeRecord,
    record_annotation_key,
    record_from_annotation,
    record_from_status,
    record_to_annotation,
    record_to_status,
    records_from_status,
    restore_records,
)


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


def published_record(name: str = "gpu-1") -> NodeRecord:
    devices = (device(0, min_batch=64), device(1, min_batch=256, ridge=200.0))
    result = from_compact(profile(*devices), "h")
    measured = with_values(headline_of(result), ridge_point=199.0)
    return NodeRecord(
        name=name,
        gpus=2,
        state=NodeState.PROFILED,
        attempts=1,
        cycle_hash="h",
        pod="roofline-pod",
        result=result,
        measured=measured,
        previous=headline_of(result),
        published_at=1_600_000_000.0,
        change="bandwidth 4.31→3.62 TB/s (−16%)",
    )


def test_a_publication_round_trips_through_its_node_annotation() -> None:
    record = published_record()
    text = record_to_annotation(record)
    assert text is not None
    restored = record_from_annotation("gpu-1", 2, text)
    assert restored is not None
    assert restored.result is not None
    assert record.result is not None
    assert to_status(restored.result) == to_status(record.result)
    assert (restored.measured, restored.previous) == (record.measured, record.previous)
    assert (restored.published_at, restored.change) == (record.published_at, record.change)
    assert (restored.state, restored.cycle_hash, restored.pod) == (NodeState.PROFILED, "h", None)


def test_an_attempts_fields_written_into_a_record_annotation_are_ignored() -> None:
    text = record_to_annotation(published_record())
    assert text is not None
    attempt = {
        "pod": "roofline-fleet-gpu-1-0badc0de",
        "podNamespace": "tenant-a",
        "attempts": 7,
        "reason": "PodFailed",
        "message": "forged",
        "nextAttemptTime": "2023-11-14T22:13:20Z",
    }
    restored = record_from_annotation("gpu-1", 2, json.dumps({**json.loads(text), **attempt}))
    assert restored is not None
    assert (restored.pod, restored.pod_namespace, restored.attempts) == (None, None, 0)
    assert (restored.reason, restored.message, restored.next_attempt_at) == (None, None, None)


def test_a_status_entry_names_its_pod_but_not_where_to_believe_pods() -> None:
    entry = {**record_to_status(published_record()), "pod": "p", "podNamespace": "tenant-a"}
    restored = record_from_status(entry)
    assert restored is not None
    assert (restored.pod, restored.pod_namespace) == ("p", None)


def test_a_record_without_a_result_has_no_annotation_and_a_damaged_one_is_ignored() -> None:
    assert record_to_annotation(NodeRecord(name="a", gpus=1)) is None
    assert record_from_annotation("a", 1, "{not json") is None
    assert record_from_annotation("a", 1, '{"specHash": "h"}') is None
    assert record_from_annotation("a", 1, "[1]") is None


def test_the_annotation_key_names_the_profile_within_the_key_syntax() -> None:
    assert record_annotation_key("fleet") == "record.roofline.dev/fleet"
    long_key = record_annotation_key("p" * 200)
    assert len(long_key.split("/", 1)[1]) <= 63


def test_restored_records_take_annotations_for_nodes_the_status_omits_and_newer_results() -> None:
    old = published_record("listed")
    assert old.result is not None
    newer = replace(old, result=replace(old.result, profiled_at=old.result.profiled_at + 60))
    key = record_annotation_key("fleet")
    nodes = [
        NodeFacts("listed", records={key: str(record_to_annotation(newer))}),
        NodeFacts("omitted", records={key: str(record_to_annotation(published_record("x")))}),
        NodeFacts("other-profile", records={record_annotation_key("other"): "{}"}),
    ]
    restored = restore_records({"listed": old}, nodes, "fleet")
    assert set(restored) == {"listed", "omitted"}
    assert restored["listed"].pod == "roofline-pod", "the status entry's attempt fields stay"
    listed = restored["listed"].result
    assert listed is not None
    assert listed.profiled_at == newer.result.profiled_at
    assert restored["omitted"].state is NodeState.PROFILED


def test_the_annotation_memo_encodes_a_publication_once() -> None:
    memo = AnnotationMemo()
    record = published_record()
    first = memo.text_of(record)
    assert memo.text_of(replace(record, attempts=2)) is first
    assert memo.text_of(replace(record, change=None)) != first


def _published_annotation() -> dict[str, Any]:
    """A sound record annotation of a one-GPU node with one model plan."""
    result = from_compact(profile(replace(device(), models=(plan("llama"),))), "h")
    record = NodeRecord(name="a", gpus=1, state=NodeState.PROFILED, result=result)
    text = record_to_annotation(record)
    assert text is not None
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _edited(path: tuple[Any, ...], value: Any) -> str:
    raw = _published_annotation()
    target = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(raw)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[" * 5000, id="deep-nesting"),
        pytest.param('{"a":' * 3000 + "1" + "}" * 3000, id="deep-objects"),
        pytest.param(_edited(("ridgePoint",), math.nan), id="ridge-nan"),
        pytest.param(_edited(("ridgePoint",), math.inf), id="ridge-inf"),
        pytest.param(_edited(("ridgePoint",), -180.0), id="ridge-negative"),
        pytest.param(_edited(("ridgePoint",), 1e100), id="ridge-1e100"),
        pytest.param(_edited(("recommendedMinBatch",), -3), id="min-batch-negative"),
        pytest.param(_edited(("recommendedMinBatch",), 10**63), id="min-batch-64-digits"),
        pytest.param(_edited(("bandwidthBytesPerSecond",), 10**400), id="bandwidth-huge-int"),
        pytest.param(_edited(("profiledTime",), "9999-12-31T00:00:00Z"), id="time-far-future"),
        pytest.param(_edited(("publishedTime",), "9999-12-31T00:00:00Z"), id="published-future"),
        pytest.param(_edited(("product",), "x" * 5000), id="product-too-long"),
        pytest.param(_edited(("warnings",), ["not a code!"]), id="warning-not-a-code"),
        pytest.param(_edited(("shape",), "9" * 40 + "x1"), id="shape-huge"),
        pytest.param(_edited(("devices",), [{}] * 200), id="too-many-devices"),
    ],
)
def test_a_corrupted_record_annotation_restores_as_no_record_without_raising(text: str) -> None:
    now = 1_700_000_100.0
    assert record_from_annotation("a", 1, text, now) is None
    node = NodeFacts(name="a", records={record_annotation_key("fleet"): text})
    assert restore_records({}, [node], "fleet", now) == {}


def test_a_model_step_of_zero_drops_that_plan_and_keeps_the_record() -> None:
    raw = _published_annotation()
    raw["models"] = [{**raw["models"][0], "stepSecondsAtMinBatch": 0}]
    restored = record_from_annotation("a", 1, json.dumps(raw), 1_700_000_100.0)
    assert restored is not None
    assert restored.result is not None
    assert restored.result.restored_models == ()
    assert "models" not in record_to_status(restored), "no tokens per second from a zero step"


def test_a_sound_record_annotation_restores_with_the_plausibility_checks_on() -> None:
    restored = record_from_annotation("a", 1, json.dumps(_published_annotation()), 1.8e9)
    assert restored is not None
    assert restored.result is not None
    assert restored.result.worst_gpu().ridge_point == 180.0


def _with_intervals(entry: dict[str, Any], **intervals: tuple[float, float]) -> dict[str, Any]:
    return {**entry, **{key: {"low": lo, "high": hi} for key, (lo, hi) in intervals.items()}}


def test_a_record_whose_interval_excludes_its_value_restores_as_none() -> None:
    record = replace(
        published_record(), result=from_compact(profile(with_intervals(device())), "h")
    )
    text = record_to_annotation(record)
    assert text is not None
    sound = json.loads(text)
    assert record_from_annotation("gpu-1", 1, json.dumps(sound)) is not None
    for forged in (
        _with_intervals(sound, bandwidthInterval=(0.0, 2.15e12)),
        _with_intervals(sound, recommendedMinBatchInterval=(1, 2)),
    ):
        assert record_from_annotation("gpu-1", 1, json.dumps(forged)) is None


def test_every_warning_list_the_writer_keeps_restores_from_both_copies() -> None:
    """2 GPUs × 12 codes: the record kept 24, both restores refused more than 16, and the node
    lost its labels after a restart."""
    devices = tuple(
        replace(device(i), warnings=tuple(f"Code{i}x{n}" for n in range(12))) for i in range(2)
    )
    result = from_compact(profile(*devices), "h")
    record = replace(published_record(), result=result, warnings=result.warnings())
    assert len(record.warnings) == 24
    restored = record_from_status(record_to_status(record))
    assert restored is not None
    assert restored.warnings == record.warnings
    text = record_to_annotation(record)
    assert text is not None
    annotated = record_from_annotation("gpu-1", 2, text)
    assert annotated is not None
    assert annotated.result is not None


@pytest.mark.parametrize(
    "profiled", [pytest.param("yesterday", id="garbage"), pytest.param(None, id="missing")]
)
def test_a_record_annotation_without_a_real_profiled_time_is_dropped(profiled: Any) -> None:
    """It restored as measured in 1970: never due again without ``reprofileInterval``, and
    the stale alert fired for good."""
    text = record_to_annotation(published_record())
    assert text is not None
    damaged = {**json.loads(text), "profiledTime": profiled}
    assert record_from_annotation("gpu-1", 2, json.dumps(damaged)) is None
    entry = {**record_to_status(published_record()), "profiledTime": profiled}
    assert record_from_status(entry) is None
    previous = {
        **json.loads(text),
        "previous": {**json.loads(text)["previous"], "profiledTime": "x"},
    }
    assert record_from_annotation("gpu-1", 2, json.dumps(previous)) is None


def test_a_node_with_more_than_64_gpu_units_restores() -> None:
    """Time-slicing advertises each GPU several times over: 8 GPUs × 10 replicas wrote a status
    entry whose restore refused ``gpus: 80``."""
    record = replace(published_record(), gpus=80)
    restored = record_from_status(record_to_status(record))
    assert restored is not None
    assert restored.gpus == 80
