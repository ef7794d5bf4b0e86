from __future__ import annotations

import json
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry
from tests.operator.unit.operator_builders import device, profile
from tests.operator.unit.published_builders import (
    NODE,
    PROFILE,
    READ_AT,
    profiled_record,
    profiled_spec,
)
from tests.profiler.synthetic import add_headline_row

from roofline_operator.core.node_results import from_compact, from_status, to_status
from roofline_operator.decide.records import record_from_annotation, record_to_annotation
from roofline_operator.run.metrics import RooflineCollector, snapshot_from_records


def test_the_worst_gpu_is_the_one_needing_the_largest_batch() -> None:
    result = from_compact(
        profile(device(0), device(1, min_batch=512, bandwidth=1e12), device(2)), "h"
    )
    assert result.worst_gpu().index == 1


def test_ties_on_batch_go_to_the_lower_bandwidth_then_the_lower_index() -> None:
    slow = from_compact(profile(device(0), device(1, bandwidth=3e12), device(2)), "h")
    assert slow.worst_gpu().index == 1
    same = from_compact(profile(device(3), device(1), device(2)), "h")
    assert same.worst_gpu().index == 1


def test_a_pod_result_keeps_its_step_times_paired_with_the_sweep_batches() -> None:
    result = from_compact(profile(device(0, name="NVIDIA H100")), "abc")
    (gpu,) = result.gpus
    assert gpu.product == "NVIDIA H100"
    assert gpu.step_seconds == ((1, 3.2e-5), (256, 4.1e-5))
    assert (result.spec_hash, result.profiled_at, result.shape_k) == ("abc", 1_700_000_000.0, 4096)


def test_a_result_rebuilt_from_status_equals_the_original_but_for_its_step_times() -> None:
    original = from_compact(profile(device(0), device(1, min_batch=256)), "h")
    rebuilt = from_status({"name": "gpu-1", **to_status(original)})
    assert rebuilt is not None
    assert rebuilt.gpus == tuple(replace(g, step_seconds=()) for g in original.gpus)
    assert (rebuilt.dtype, rebuilt.shape_k, rebuilt.shape_n) == ("bfloat16", 4096, 14336)
    assert rebuilt.duration_seconds == original.duration_seconds


def test_a_status_entry_without_a_result_rebuilds_none() -> None:
    assert from_status({"name": "gpu-1", "state": "Queued"}) is None


def test_one_more_row_of_the_headline_table_reaches_the_status_the_record_and_the_gauges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The profiler's table names each published number once: one more row, and the operator's
    status entry, record annotation and gauges carry it, with no other change."""
    row = add_headline_row(monkeypatch)
    the_spec = profiled_spec()
    record = profiled_record(the_spec)
    assert record.result is not None
    (gpu,) = record.result.gpus
    number = row.estimate_of(gpu)
    assert number.interval is not None
    entry = to_status(record.result)
    assert entry[row.key] == number.value
    assert entry[row.interval_key] == {"low": number.interval[0], "high": number.interval[1]}
    annotation = record_to_annotation(record)
    assert annotation is not None
    assert json.loads(annotation)[row.key] == number.value
    restored = record_from_annotation(NODE, 1, annotation, now=READ_AT)
    assert restored is not None
    assert restored.result is not None
    (restored_gpu,) = restored.result.gpus
    assert restored_gpu.numbers == gpu.numbers
    registry = CollectorRegistry()
    collector = RooflineCollector()
    registry.register(collector)
    records = {record.name: record}
    collector.update(snapshot_from_records(PROFILE, records, the_spec.measurement_hash()))
    labels = {"profile": PROFILE, "node": NODE, "gpu": "0"}
    labels.update(product=gpu.product, dtype=record.result.dtype)
    assert registry.get_sample_value(row.metric, labels) == number.value
    low = registry.get_sample_value(row.interval_metric, {**labels, "bound": "low"})
    assert low == number.interval[0]


@pytest.mark.parametrize(
    ("backend", "asked", "kind"),
    [
        pytest.param("cuda", "cuda", "gpu", id="cuda"),
        pytest.param("rocm", "cuda", "gpu", id="rocm"),
        pytest.param("cpu", "cpu", "cpu", id="cpu"),
        pytest.param(None, "cpu", "cpu", id="no-backend-cpu-pod"),
        pytest.param(None, "cuda", "gpu", id="no-backend-gpu-pod"),
        pytest.param(None, None, "gpu", id="nothing-said"),
    ],
)
def test_the_device_kind_is_the_backend_the_result_names_else_what_its_pod_asked(
    backend: str | None, asked: str | None, kind: str
) -> None:
    result = from_compact(replace(profile(device()), backend=backend), "h", asked)
    assert result.device == kind
    assert to_status(result)["device"] == kind


def test_a_status_entry_without_a_device_kind_restores_none_and_a_bad_one_is_damage() -> None:
    entry = to_status(from_compact(profile(device()), "h"))
    now = 1_700_000_100.0
    restored = from_status(entry, now)
    assert restored is not None
    assert restored.device == "gpu"
    entry.pop("device")
    without = from_status(entry, now)
    assert without is not None
    assert without.device is None
    assert without.device_or("cpu") == "cpu"
    with pytest.raises(ValueError, match="field 'device'"):
        from_status({**entry, "device": "tpu\n"}, now)
