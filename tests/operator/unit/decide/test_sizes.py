"""Record annotation and status entry budgets, at the worst legitimate case: 8 GPUs × 8 models."""

from __future__ import annotations

from dataclasses import replace

from tests.operator.unit.model_builders import plan
from tests.operator.unit.operator_builders import device, profile
from tests.profiler.format_builders import largest_formats
from tests.profiler.headline_builders import BANDWIDTH, with_number_intervals, with_values

from roofline_operator.core.model_spec import parse_models
from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact, headline_of
from roofline_operator.decide.model_sources import ServedFormat
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.peers import Member, fleet_view
from roofline_operator.decide.records import (
    NodeRecord,
    record_from_annotation,
    record_to_annotation,
    record_to_status,
)
from roofline_operator.decide.sizes import (
    ANNOTATIONS_LIMIT_BYTES,
    MAX_RECORDS_PER_NODE,
    RECORD_ANNOTATION_BUDGET_BYTES,
    STATUS_ENTRY_BUDGET_BYTES,
    encoded_size,
    fit,
)
from roofline_operator.decide.status import DEFAULT_STATUS_MAX_NODES, build_status
from roofline_profiler.wire.compact import CompactDevice
from roofline_profiler.wire.fields import Estimate

WARNINGS = ("CpuContention", "InterferenceUnresolved", "SlopeFromDecode", "PeakFromDecode")
MODEL_NAMES = tuple(f"m{i}-" + "x" * 60 for i in range(8))
#: Every model served in the longest format name, with an FP8 cache.
FORMATS = {name: ServedFormat("gptq-int4-g128-asym", "fp8_e4m3") for name in MODEL_NAMES}


def _gpu(index: int) -> CompactDevice:
    base = device(index, bandwidth=4.3123e12 + index * 1e9, ridge=181.234 + index, min_batch=1024)
    bandwidth, peak = base.bandwidth_bytes_per_second, base.peak_flops_per_second
    gpu = replace(
        base,
        name="NVIDIA H200 NVL 141GB HBM3e " + "x" * 36,
        models=tuple(
            plan(
                name,
                context_tokens=131072,
                max_batch_by_memory=12345,
                step_seconds_at_min_batch=0.0123456,
                step_seconds_at_max_batch=0.0456789,
                itl_intercept_seconds=0.01234567,
                itl_per_sequence_seconds=1.234567e-5,
                itl_per_sequence_context_token_seconds=3.123456e-8,
                itl_max_relative_error=0.34,
            )
            for name in MODEL_NAMES
        ),
        warnings=WARNINGS,
    )
    return with_number_intervals(
        gpu,
        bandwidth_bytes_per_second=(bandwidth * 0.981, bandwidth * 1.021),
        peak_flops_per_second=(peak * 0.971, peak * 1.031),
        ridge_point=(base.ridge_point * 0.951, base.ridge_point * 1.051),
        recommended_min_batch=(512, 2048),
    )


def worst_case_record() -> NodeRecord:
    """8 GPUs, 8 models of 63-character names, every weight format a profile measures,
    intervals, warnings, a failure message, a material change and every optional block: the
    largest record the operator writes."""
    measured = profile(*(_gpu(i) for i in range(8)), created_at=1.7e9)
    result = from_compact(replace(measured, weight_formats=largest_formats(8)), "0123456789")
    headline = headline_of(result)
    return NodeRecord(
        name="n" * 253,
        gpus=8,
        state=NodeState.RETRYING,
        attempts=3,
        cycle_hash="0123456789",
        pod="p" * 63,
        pod_namespace="roofline-system",
        last_attempt_at=1.7e9,
        next_attempt_at=1.7e9 + 60,
        reason="InvalidResult",
        message="m" * 300,
        result=result,
        measured=with_values(headline, bandwidth_bytes_per_second=4.1e12),
        previous=headline,
        published_at=1.7e9,
        change="bandwidth 4.31→3.62 TB/s (−16%); peak 780→700 TFLOP/s (−10%); min batch 1024→2048",
        warnings=WARNINGS,
        held=True,
    )


def test_the_budgets_leave_room_for_every_record_and_status_entry_they_promise() -> None:
    assert RECORD_ANNOTATION_BUDGET_BYTES * MAX_RECORDS_PER_NODE <= ANNOTATIONS_LIMIT_BYTES // 2
    # A real API server stores at most about 1.5 MiB per object.
    assert STATUS_ENTRY_BUDGET_BYTES * DEFAULT_STATUS_MAX_NODES <= 1024 * 1024


def test_the_worst_case_record_annotation_is_fitted_to_its_budget_and_still_restores() -> None:
    record = worst_case_record()
    text = record_to_annotation(record)
    assert text is not None
    assert len(text.encode()) <= RECORD_ANNOTATION_BUDGET_BYTES
    restored = record_from_annotation(record.name, 8, text, 1.7e9 + 60)
    assert restored is not None
    assert restored.result is not None
    worst = restored.result.worst_gpu()
    assert (worst.recommended_min_batch, worst.ridge_point) == (1024, 181.234)
    assert len(restored.result.gpus) == 8, "the per-GPU numbers stay"
    assert {g.product for g in restored.result.gpus} == {"NVIDIA H200 NVL 141GB HBM3e " + "x" * 36}
    assert [p.name for p in restored.result.restored_models] == list(MODEL_NAMES)
    assert restored.result.weight_formats == (), "the formats go before the per-GPU numbers"


def test_the_worst_case_status_entry_is_fitted_to_its_budget() -> None:
    record = worst_case_record()
    models = parse_models([{"name": name, "preset": "llama-3.1-8b"} for name in MODEL_NAMES])
    status = build_status(
        records={record.name: record},
        spec_hash="0123456789",
        conflicts={},
        spec_error=None,
        previous_conditions=[],
        generation=1,
        now=1.7e9 + 60,
        models=ModelsView(models, {}, None, FORMATS),
    )
    (entry,) = status["nodes"]
    assert encoded_size(entry) <= STATUS_ENTRY_BUDGET_BYTES
    assert entry["message"] == "m" * 300
    assert entry["recommendedMinBatch"] == 1024
    assert len(entry["models"]) == 8
    assert all("maxBatchByMemory" in m for m in entry["models"])
    assert all(m["weightFormat"] == "gptq-int4-g128-asym" for m in entry["models"])
    assert "weightFormats" not in entry, "the formats go before the per-GPU entries"
    assert len(entry["devices"]) == 8


def test_an_entry_loses_intervals_then_warnings_then_model_detail() -> None:
    full = {
        "bandwidthInterval": {"low": 1, "high": 2},
        "warnings": ["CpuContention"],
        "models": [{"name": "m", "maxBatchByMemory": 4, "tokensPerSecondAtMaxBatch": 9.5}],
        "ridgePoint": 1.0,
    }
    sizes = [encoded_size(full)]
    no_intervals = fit(full, sizes[0] - 1)
    assert "bandwidthInterval" not in no_intervals
    assert "warnings" in no_intervals
    no_warnings = fit(full, encoded_size(no_intervals) - 1)
    assert "warnings" not in no_warnings
    assert "tokensPerSecondAtMaxBatch" in no_warnings["models"][0]
    core = fit(full, encoded_size(no_warnings) - 1)
    assert core["models"] == [{"name": "m", "maxBatchByMemory": 4}]
    assert fit(full, 10)["ridgePoint"] == 1.0, "the headline numbers always stay"


def test_the_worst_case_whole_exceeds_both_budgets_so_their_trimming_is_what_fits_it() -> None:
    whole = record_to_status(worst_case_record())
    assert encoded_size(whole) > STATUS_ENTRY_BUDGET_BYTES
    assert encoded_size(whole) > RECORD_ANNOTATION_BUDGET_BYTES


def test_the_worst_case_status_entry_with_its_standing_among_peers_still_fits() -> None:
    """The fleet view adds a class name of 64 characters, three ratios and a condition whose
    message names the class: the worst case still fits, keeping them, its models' bounds and
    its per-GPU numbers."""
    record = worst_case_record()
    assert record.result is not None
    found = [Member(record.name, "c" * 64, record.result.worst_gpu().numbers)]
    for peer in ("a", "b"):
        numbers = dict(record.result.worst_gpu().numbers)
        numbers[BANDWIDTH] = Estimate(9e12, (8.9e12, 9.1e12))
        found.append(Member(peer, "c" * 64, numbers))
    view = fleet_view(found, 10)
    assert view.standings[record.name].slower
    models = parse_models([{"name": name, "preset": "llama-3.1-8b"} for name in MODEL_NAMES])
    status = build_status(
        records={record.name: record},
        spec_hash="0123456789",
        conflicts={},
        spec_error=None,
        previous_conditions=[],
        generation=1,
        now=1.7e9 + 60,
        models=ModelsView(models, {}, None, FORMATS),
        peers=view,
    )
    (entry,) = status["nodes"]
    assert encoded_size(entry) <= STATUS_ENTRY_BUDGET_BYTES
    assert entry["gpuClass"] == "c" * 64
    assert entry["conditions"][0]["status"] == "True"
    assert set(entry["relativePerformance"]) == {"bandwidth", "peak", "ridgePoint"}
    assert all("maxBatchByMemory" in m for m in entry["models"])
    assert len(entry["devices"]) == 8


def test_an_entry_loses_format_intervals_first_and_its_formats_before_its_gpus() -> None:
    full = {
        "ridgePoint": 1.0,
        "devices": [{"index": 0, "product": "p", "ridgePoint": 1.0}],
        "weightFormats": [
            {"weightFormat": "int8-w8a8", "ridgePoint": 2.0, "ridgePointInterval": {"low": 1}}
        ],
    }
    no_intervals = fit(full, encoded_size(full) - 1)
    assert no_intervals["weightFormats"] == [{"weightFormat": "int8-w8a8", "ridgePoint": 2.0}]
    no_products = fit(full, encoded_size(no_intervals) - 1)
    assert no_products["devices"] == [{"index": 0, "ridgePoint": 1.0}]
    assert "weightFormats" in no_products
    no_formats = fit(full, encoded_size(no_products) - 1)
    assert "weightFormats" not in no_formats
    assert no_formats["devices"] == [{"index": 0, "ridgePoint": 1.0}], "the GPUs outlast them"


def test_a_one_gpu_node_keeps_every_format_and_its_intervals_in_both_copies() -> None:
    measured = replace(profile(device(0), created_at=1.7e9), weight_formats=largest_formats(1))
    result = from_compact(measured, "h")
    record = NodeRecord(
        name="gpu-1", gpus=1, state=NodeState.PROFILED, cycle_hash="h", result=result
    )
    text = record_to_annotation(record)
    assert text is not None
    restored = record_from_annotation("gpu-1", 1, text, 1.7e9 + 60)
    assert restored is not None
    assert restored.result is not None
    assert restored.result.weight_formats == result.weight_formats
    entry = fit(record_to_status(record), STATUS_ENTRY_BUDGET_BYTES)
    assert len(entry["weightFormats"]) == 9
    assert all("peakInterval" in f for f in entry["weightFormats"])
