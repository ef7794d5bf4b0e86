from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry
from tests.operator.unit.model_builders import plan, planned_node

from roofline_operator.decide.model_sources import ServedFormat
from roofline_operator.decide.records import NodeRecord, record_from_status, record_to_status
from roofline_operator.run.metrics import OperatorMetrics, snapshot_from_records
from roofline_operator.run.model_metrics import MODEL_LABELS, format_samples
from roofline_profiler.core.weight_formats import (
    FAMILIES,
    GROUP_SIZES,
    KV_CACHE_DTYPES,
    awq_int4,
    fp8_w8a8,
    gptq,
    int8_w8a8,
)
from roofline_profiler.wire.compact_loads import CompactLoad


def labels(gpu: str, model: str) -> dict[str, str]:
    return {
        "profile": "fleet",
        "node": "n1",
        "gpu": gpu,
        "product": "NVIDIA H200",
        "dtype": "bfloat16",
        "model": model,
    }


def fleet() -> dict[str, NodeRecord]:
    return {"n1": planned_node("n1", (plan("a"), plan("b")), (plan("a", min_batch=64),))}


def test_every_gpu_publishes_each_models_plan(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h", ("a", "b")))
    get = registry.get_sample_value
    assert get("roofline_model_recommended_min_batch", labels("0", "a")) == 32
    assert get("roofline_model_recommended_min_batch", labels("1", "a")) == 64
    assert get("roofline_model_max_batch", {**labels("0", "a"), "bound": "memory"}) == 512
    assert get("roofline_model_max_batch", {**labels("0", "a"), "bound": "latency"}) == 128
    assert get("roofline_model_tokens_per_second", {**labels("0", "b"), "range_end": "low"}) == (
        pytest.approx(3200)
    )
    assert get("roofline_model_tokens_per_second", {**labels("0", "b"), "range_end": "high"}) == (
        pytest.approx(3200)
    )
    step = get("roofline_model_step_seconds", {**labels("0", "a"), "batch": "256"})
    assert step == 0.04
    assert get("roofline_model_recommended_min_batch", labels("1", "b")) is None


def test_step_times_stop_at_the_memory_bound(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    records = {"n1": planned_node("n1", (plan("a", max_batch_by_memory=100, min_batch=None),))}
    metrics.collector.update(snapshot_from_records("fleet", records, "h", ("a",)))
    get = registry.get_sample_value
    assert get("roofline_model_step_seconds", {**labels("0", "a"), "batch": "1"}) == 0.008
    assert get("roofline_model_step_seconds", {**labels("0", "a"), "batch": "256"}) is None
    assert get("roofline_model_recommended_min_batch", labels("0", "a")) is None


def test_without_an_slo_there_is_no_latency_bound(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    records = {"n1": planned_node("n1", (plan("a", max_batch_by_latency=None),))}
    metrics.collector.update(snapshot_from_records("fleet", records, "h", ("a",)))
    latency = {**labels("0", "a"), "bound": "latency"}
    assert registry.get_sample_value("roofline_model_max_batch", latency) is None


def test_a_model_removed_from_the_spec_disappears_from_the_next_scrape(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h", ("a", "b")))
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h", ("a",)))
    names = {
        s.labels.get("model")
        for family in registry.collect()
        if family.name.startswith("roofline_model_")
        for s in family.samples
    }
    assert names == {"a"}


def test_after_a_restart_the_nodes_plan_is_published_under_its_worst_gpu(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    record = fleet()["n1"]
    restored = record_from_status(record_to_status(record))
    assert restored is not None
    metrics.collector.update(snapshot_from_records("fleet", {"n1": restored}, "h", ("a",)))
    assert registry.get_sample_value("roofline_model_recommended_min_batch", labels("0", "a")) == 64


def test_each_gpu_publishes_its_itl_model_and_no_rate_at_a_min_batch_it_lacks(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    itl = {
        "itl_intercept_seconds": 0.008,
        "itl_per_sequence_seconds": 2e-5,
        "itl_per_sequence_context_token_seconds": 3e-8,
        "itl_max_relative_error": 0.07,
    }
    records = {
        "n1": planned_node(
            "n1",
            (plan("a", min_batch=None, **itl),),
            (plan("a", **{**itl, "itl_intercept_seconds": 0.01}),),
        )
    }
    metrics.collector.update(snapshot_from_records("fleet", records, "h", ("a",)))
    get = registry.get_sample_value
    assert get("roofline_model_itl_intercept_seconds", labels("0", "a")) == 0.008
    assert get("roofline_model_itl_intercept_seconds", labels("1", "a")) == 0.01
    assert get("roofline_model_itl_per_sequence_seconds", labels("0", "a")) == 2e-5
    assert get("roofline_model_itl_per_sequence_context_token_seconds", labels("0", "a")) == 3e-8
    low = {**labels("0", "a"), "range_end": "low"}
    assert get("roofline_model_tokens_per_second", low) is None
    assert get("roofline_model_tokens_per_second", {**low, "gpu": "1"}) == pytest.approx(3200)


def _with_rates(record: NodeRecord) -> NodeRecord:
    assert record.result is not None
    loads = (CompactLoad("a", 7.25, "ttft", 1000, 200), CompactLoad("b", 3, "saturation", 9, 9))
    return replace(record, result=replace(record.result, loads=loads))


def test_a_nodes_request_rate_is_published_once_under_its_worst_gpu(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    records = {"n1": _with_rates(fleet()["n1"])}
    metrics.collector.update(snapshot_from_records("fleet", records, "h", ("a", "b")))
    get = registry.get_sample_value
    rate = "roofline_model_max_requests_per_second"
    assert get(rate, {**labels("0", "a"), "limited_by": "ttft"}) == 7.25
    assert get(rate, {**labels("0", "b"), "limited_by": "saturation"}) == 3
    samples = [s for f in registry.collect() if f.name == rate for s in f.samples]
    assert len(samples) == 2


def test_the_request_rate_is_published_after_a_restart_and_not_without_a_workload(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    restored = record_from_status(record_to_status(_with_rates(fleet()["n1"])))
    assert restored is not None
    metrics.collector.update(snapshot_from_records("fleet", {"n1": restored}, "h", ("a",)))
    rate = "roofline_model_max_requests_per_second"
    assert registry.get_sample_value(rate, {**labels("0", "a"), "limited_by": "ttft"}) == 7.25
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h", ("a",)))
    assert [s for f in registry.collect() if f.name == rate for s in f.samples] == []


def info(model: str, weight_format: str, kv_cache_dtype: str) -> dict[str, str]:
    return {
        "profile": "fleet",
        "model": model,
        "weight_format": weight_format,
        "kv_cache_dtype": kv_cache_dtype,
    }


def test_each_model_of_the_profile_says_how_it_is_served_in_one_info_series(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    formats = {"a": ServedFormat("gptq-int8-g64-asym", "fp8"), "b": ServedFormat()}
    metrics.collector.update(
        snapshot_from_records("fleet", fleet(), "h", ("a", "b"), None, formats)
    )
    get = registry.get_sample_value
    assert get("roofline_model_format_info", info("a", "gptq-int8", "fp8")) == 1
    assert get("roofline_model_format_info", info("b", "dtype", "auto")) == 1
    (family,) = (f for f in registry.collect() if f.name == "roofline_model_format_info")
    assert len(family.samples) == 2


def test_the_plan_gauges_keep_their_labels_whatever_the_format(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    """A label added to them would give every existing series a new identity."""
    formats = {"a": ServedFormat("awq-int4-g128", "fp8_e4m3")}
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h", ("a",), None, formats))
    extra = {"bound", "range_end", "batch", "limited_by"}
    plans = [f for f in registry.collect() if f.name.startswith("roofline_model_")]
    for family in plans:
        if family.name != "roofline_model_format_info":
            for sample in family.samples:
                assert set(sample.labels) - set(MODEL_LABELS) <= extra, family.name


def test_only_the_valid_models_have_an_info_series_in_their_dtype_without_a_format(
    registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    metrics.collector.update(snapshot_from_records("fleet", fleet(), "h", ("a",)))
    assert registry.get_sample_value("roofline_model_format_info", info("a", "dtype", "auto")) == 1
    assert not [
        s
        for f in registry.collect()
        if f.name == "roofline_model_format_info"
        for s in f.samples
        if s.labels["model"] == "b"
    ]


def test_the_info_labels_take_only_the_families_dtype_and_the_four_cache_dtypes() -> None:
    """Every format at every group size, symmetric or not, labels as its family: the label
    values are a fixed set, whatever the spec names."""
    names = {
        *(awq_int4(g).name for g in GROUP_SIZES),
        *(gptq(bits, g, symmetric).name for bits in (4, 8) for g in GROUP_SIZES
          for symmetric in (True, False)),
        int8_w8a8().name,
        fp8_w8a8().name,
        "",
    }  # fmt: skip
    formats = {
        f"m-{name}-{cache}": ServedFormat(name, cache)
        for name in names
        for cache in KV_CACHE_DTYPES
    }
    samples = format_samples(formats, formats)
    assert len(samples) == len(names) * len(KV_CACHE_DTYPES)
    assert {s.weight_format for s in samples} == {*FAMILIES, "dtype"}
    assert {s.kv_cache_dtype for s in samples} == set(KV_CACHE_DTYPES)
