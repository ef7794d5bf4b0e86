"""The ``roofline_format_*`` gauges: each node's roofline per weight format under the labels of
the GPU it is of plus the format's canonical name, gone with the node or the format."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry, generate_latest
from tests.operator.unit.operator_builders import device, profile
from tests.profiler.format_builders import compact_format

from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact, from_status, to_status
from roofline_operator.decide.records import NodeRecord
from roofline_operator.run.format_metrics import (
    FORMAT_ROOFLINE_LABELS,
    format_roofline_families,
    format_roofline_samples,
)
from roofline_operator.run.metrics import OperatorMetrics, snapshot_from_records
from roofline_profiler.core.weight_formats import FAMILIES, GROUP_SIZES, parse_weight_format
from roofline_profiler.wire.compact_formats import MAX_FORMAT_NAME_CHARS, CompactFormat


def _record(name: str, *formats: CompactFormat, gpus: int = 2) -> NodeRecord:
    devices = [device(i, name=f"GPU {i}") for i in range(gpus)]
    measured = replace(profile(*devices), weight_formats=formats)
    return NodeRecord(
        name=name, gpus=gpus, state=NodeState.PROFILED, result=from_compact(measured, "h")
    )


def _labels(node: str, gpu: str, weight_format: str) -> dict[str, str]:
    return {
        "profile": "fleet",
        "node": node,
        "gpu": gpu,
        "product": f"GPU {gpu}",
        "dtype": "bfloat16",
        "weight_format": weight_format,
    }


def test_each_format_is_published_under_its_gpu_and_its_name(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    records = {
        "gpu-a": _record(
            "gpu-a",
            compact_format("awq-int4-g128", 1),
            compact_format("int8-w8a8", 0, peak=9.87e13, ridge=40.5, min_batch=64),
        )
    }
    metrics.collector.update(snapshot_from_records("fleet", records, "h"))
    awq, int8 = _labels("gpu-a", "1", "awq-int4-g128"), _labels("gpu-a", "0", "int8-w8a8")
    value = registry.get_sample_value
    assert value("roofline_format_peak_flops_per_second", awq) == 5.123e13
    assert value("roofline_format_ridge_point", awq) == 12.35
    assert value("roofline_format_recommended_min_batch", awq) == 16
    assert value("roofline_format_peak_flops_per_second", int8) == 9.87e13
    assert value("roofline_format_ridge_point", int8) == 40.5
    assert value("roofline_format_recommended_min_batch", int8) == 64
    assert value("roofline_format_peak_flops_per_second", _labels("gpu-a", "0", "awq")) is None


def test_each_interval_is_its_low_and_high_bound(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    records = {"gpu-a": _record("gpu-a", compact_format())}
    metrics.collector.update(snapshot_from_records("fleet", records, "h"))
    labels = _labels("gpu-a", "0", "awq-int4-g128")
    for name, ends in (
        ("roofline_format_peak_interval_flops_per_second", (5.01e13, 5.2e13)),
        ("roofline_format_ridge_point_interval", (11.9, 12.71)),
        ("roofline_format_recommended_min_batch_interval", (8, 32)),
    ):
        low = registry.get_sample_value(name, {**labels, "bound": "low"})
        high = registry.get_sample_value(name, {**labels, "bound": "high"})
        assert (low, high) == ends, name


def test_a_format_without_intervals_has_no_interval_series() -> None:
    bare = compact_format(peak_interval=None, ridge_interval=None, min_batch_interval=None)
    samples = format_roofline_samples({"gpu-a": _record("gpu-a", bare)})
    families = format_roofline_families([("fleet", samples)])
    assert [len(f.samples) for f in families] == [1, 1, 1, 0, 0, 0]


def test_a_format_no_longer_measured_and_a_node_that_left_vanish_from_the_next_scrape(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    both = {
        "gpu-a": _record("gpu-a", compact_format("awq-int4-g128"), compact_format("fp8-w8a8")),
        "gpu-b": _record("gpu-b", compact_format("fp8-w8a8")),
    }
    metrics.collector.update(snapshot_from_records("fleet", both, "h"))
    assert 'weight_format="awq-int4-g128"' in generate_latest(registry).decode()
    later = {"gpu-a": _record("gpu-a", compact_format("fp8-w8a8"))}
    metrics.collector.update(snapshot_from_records("fleet", later, "h"))
    text = generate_latest(registry).decode()
    assert 'weight_format="awq-int4-g128"' not in text
    assert 'node="gpu-b"' not in text
    peak = "roofline_format_peak_flops_per_second"
    assert registry.get_sample_value(peak, _labels("gpu-a", "0", "fp8-w8a8")) == 5.123e13


def test_a_node_without_formats_publishes_no_format_series() -> None:
    assert format_roofline_samples({"gpu-a": _record("gpu-a")}) == ()
    idle = NodeRecord(name="gpu-b", gpus=1, state=NodeState.QUEUED)
    assert format_roofline_samples({"gpu-b": idle}) == ()


def test_a_restored_node_that_lost_its_gpu_entries_names_its_worst_gpus_product() -> None:
    record = _record("gpu-a", compact_format(gpu=1), gpus=2)
    assert record.result is not None
    entry = {k: v for k, v in to_status(record.result).items() if k != "devices"}
    restored = from_status(entry, now=1.7e9 + 60)
    assert restored is not None
    (sample,) = format_roofline_samples({"gpu-a": replace(record, result=restored)})
    worst = record.result.worst_gpu()
    assert (sample.gpu, sample.product) == ("1", worst.product)


def test_the_canonical_names_a_format_label_may_take_are_twenty_two() -> None:
    """The names the parser reads back to themselves, which every reader of a format requires:
    five families, four group sizes, ``-asym`` on GPTQ only (docs/contracts.md counts them)."""
    names = {
        parse_weight_format(f"{family}-g{group}{asym}").name
        for family in FAMILIES[:3]
        for group in GROUP_SIZES
        for asym in ("", "-asym")
        if not (asym and family == "awq-int4")
    } | {"int8-w8a8", "fp8-w8a8"}
    assert len(names) == 22
    assert max(len(name) for name in names) == MAX_FORMAT_NAME_CHARS
    assert FORMAT_ROOFLINE_LABELS[-1] == "weight_format"
