from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from tests.operator.unit.model_builders import plan, planned_node
from tests.operator.unit.operator_builders import status_of
from tests.profiler.synthetic import add_plan_row

from roofline_operator.core.model_plans import (
    node_plans,
    plan_from_status,
    plan_to_status,
    plans_from_status,
    range_is_empty,
)
from roofline_operator.core.model_spec import ModelSpec
from roofline_operator.decide.model_status import ModelsView
from roofline_operator.decide.records import record_from_status, record_to_status
from roofline_operator.decide.sizes import encoded_size, fit
from roofline_operator.run.metrics import OperatorMetrics, snapshot_from_records


def test_a_node_plan_holds_on_every_gpu_largest_min_smallest_maxima_slowest_steps() -> None:
    fast = plan(min_batch=16, max_batch_by_memory=600, max_batch_by_latency=200)
    slow = plan(
        min_batch=32,
        max_batch_by_memory=500,
        max_batch_by_latency=100,
        step_seconds_at_max_batch=0.05,
        step_seconds=(0.009, 0.03),
    )
    (node,) = node_plans([(fast,), (slow,)])
    assert (node.min_batch, node.max_batch_by_memory, node.max_batch_by_latency) == (32, 500, 100)
    assert node.step_seconds_at_max_batch == 0.05
    assert node.step_seconds == (0.009, 0.04)


def test_a_gpu_without_an_efficient_batch_makes_the_node_have_none() -> None:
    (node,) = node_plans([(plan(min_batch=None),), (plan(),)])
    assert node.min_batch is None


def test_the_status_entry_has_the_contracts_fields_rounded() -> None:
    entry = plan_to_status(plan(step_seconds_at_min_batch=0.0123456789))
    assert entry == {
        "name": "llama",
        "contextTokens": 4096,
        "tensorParallel": 1,
        "minBatch": 32,
        "maxBatchByMemory": 512,
        "maxBatchByLatency": 128,
        "maxBatch": 128,
        "kvCacheTokens": 512 * 4096,
        "tokensPerSecondAtMinBatch": 2592,
        "tokensPerSecondAtMaxBatch": 3200,
        "stepSecondsAtMinBatch": 0.01235,
        "stepSecondsAtMaxBatch": 0.04,
    }


def test_a_plan_survives_the_status_round_trip_but_for_its_step_times() -> None:
    original = plan(max_batch_by_latency=None)
    restored = plan_from_status(plan_to_status(original))
    assert restored is not None
    assert restored.max_batch_by_latency is None
    assert restored.step_seconds == ()
    assert (restored.min_batch, restored.max_batch_by_memory) == (32, 512)


def test_failed_and_damaged_entries_are_skipped() -> None:
    raw = [{"name": "x", "reason": "InvalidModel"}, {"name": "y", "maxBatchByMemory": "?"}, 3]
    assert plans_from_status(raw) == ()


def test_an_operator_restart_keeps_the_nodes_plans() -> None:
    record = planned_node("n1", (plan("a"), plan("b")), (plan("a", min_batch=64), plan("b")))
    restored = record_from_status(record_to_status(record))
    assert restored is not None
    assert restored.result is not None
    plans = {p.name: p for p in restored.result.node_models()}
    assert set(plans) == {"a", "b"}
    assert plans["a"].min_batch == 64


def test_the_range_is_empty_when_a_bound_caps_below_the_min_batch() -> None:
    assert range_is_empty(plan(min_batch=256))
    assert range_is_empty(plan(max_batch_by_memory=0, min_batch=None))
    assert not range_is_empty(plan())


def test_one_more_row_of_the_plan_table_reaches_the_status_its_summary_trimming_and_gauges(
    monkeypatch: pytest.MonkeyPatch, registry: CollectorRegistry, metrics: OperatorMetrics
) -> None:
    """The profiler's table names each number of a model plan once: one more row, and the node's
    fold, its status entry and the plan read back from it, the models' summary, the entry
    trimmed to its batch bounds and the gauges carry it, with no other change."""
    row = add_plan_row(monkeypatch)
    assert row.gauge is not None
    records = {"n1": planned_node("n1", (plan("a", min_batch=16),), (plan("a", min_batch=64),))}
    status = status_of(records, models=ModelsView((ModelSpec("a", preset="qwen3-8b"),)))
    (entry,) = status["nodes"][0]["models"]
    assert entry[row.key] == 64, "folded as the row says: the largest of the GPUs'"
    restored = plan_from_status({k: v for k, v in entry.items() if k != "minBatch"})
    assert restored is not None
    assert restored.min_batch == 64
    (summary,) = status["models"]
    assert summary[row.key] == {"min": 64, "median": 64, "max": 64}
    node = {"models": [entry]}
    (trimmed,) = fit(node, encoded_size(node) - 1)["models"]
    assert "tokensPerSecondAtMaxBatch" not in trimmed
    assert trimmed[row.key] == 64
    metrics.collector.update(snapshot_from_records("fleet", records, "h", ("a",)))
    labels = {"profile": "fleet", "node": "n1", "gpu": "1", "model": "a"}
    labels.update(product="NVIDIA H200", dtype="bfloat16")
    assert registry.get_sample_value(row.gauge.name, labels) == 64
