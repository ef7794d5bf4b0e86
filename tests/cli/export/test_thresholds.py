"""The thresholds' arithmetic, exactly, and the plans that give none."""

from __future__ import annotations

import pytest

from roofline_cli.export import thresholds
from tests.cli.export_sources import class_plan


def test_the_kv_threshold_is_the_slo_batchs_share_of_the_cache_rounded_down() -> None:
    value, how = thresholds.kv_cache_threshold(class_plan(max_batch=164, max_batch_by_memory=218))
    assert value == 0.75  # 164 / 218 = 0.7523
    assert "0.7523" in how
    assert "bound by latency" in how


def test_a_memory_bound_batch_fills_the_cache() -> None:
    plan = class_plan(max_batch=200, max_batch_by_latency=None)
    assert thresholds.kv_cache_threshold(plan)[0] == 1.0
    tiny = class_plan(max_batch=1, max_batch_by_memory=500, max_batch_by_latency=1)
    assert thresholds.kv_cache_threshold(tiny)[0] == 0.01


@pytest.mark.parametrize(("batch", "depth"), [(1, 1), (9, 1), (10, 1), (11, 2), (164, 17)])
def test_the_queue_depth_is_a_tenth_of_the_batch_at_least_one(batch: int, depth: int) -> None:
    plan = class_plan(max_batch=batch, max_batch_by_latency=batch)
    assert thresholds.queue_depth(plan)[0] == depth


def test_the_spare_triggers_keep_the_upstream_defaults_proportion() -> None:
    plan = class_plan(max_batch=164, max_batch_by_memory=218)
    assert thresholds.kv_spare_trigger(plan)[0] == 0.09  # 0.75 × 0.1 / 0.8 = 0.09375
    assert thresholds.queue_spare_trigger(plan)[0] == 10  # 17 × 3 / 5 = 10.2
    low = class_plan(max_batch=2, max_batch_by_latency=2)
    assert thresholds.queue_spare_trigger(low)[0] == 1
    assert thresholds.kv_spare_trigger(low)[0] == 0.01


def test_the_upstream_defaults_reproduce_themselves() -> None:
    """At the defaults' own thresholds the proportions give the defaults' triggers."""
    assert round(thresholds.WVA_DEFAULT_QUEUE_THRESHOLD * 3 / 5) == 3
    assert pytest.approx(0.1) == thresholds.WVA_DEFAULT_KV_THRESHOLD * (0.1 / 0.8)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"max_batch": 0, "max_batch_by_memory": 0}, "no sequence of 4096 tokens fits"),
        ({"max_batch": 0, "max_batch_by_latency": 0}, "no batch meets the ITL SLO"),
    ],
)
def test_a_plan_without_a_replica_gives_no_threshold(changes: dict[str, int], reason: str) -> None:
    with pytest.raises(thresholds.NoThreshold, match=reason):
        thresholds.kv_cache_threshold(class_plan(**changes))


def test_requests_per_replica_is_the_plans_batch_with_its_itl_step() -> None:
    from roofline_cli.export.plans import Itl

    plan = class_plan(itl=Itl(0.01, 1e-4, 1e-8, 0.1, "n"))
    value, how = thresholds.requests_per_replica(plan)
    assert value == 96
    assert "23.5 ms" in how  # 0.01 + 96e-4 + 96 × 4096e-8


@pytest.mark.parametrize(
    ("rate", "demand", "utilization", "replicas"),
    [(4050, 40000, 1.0, 10), (5400, 40000, 0.75, 10), (3900, 40000, 0.75, 14), (100, 1, 1, 1)],
)
def test_replicas_cover_the_demand_at_the_planned_utilization(
    rate: float, demand: float, utilization: float, replicas: int
) -> None:
    assert thresholds.replicas_for(rate, demand, utilization) == replicas
