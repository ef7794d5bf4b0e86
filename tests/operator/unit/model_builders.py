"""Builders of model plans and tiny model configs for the operator's unit tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.operator.unit.operator_builders import device, profile

from roofline_operator.core.names import NodeState
from roofline_operator.core.node_results import from_compact
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.wire.compact_models import CompactModelPlan


def plan(name: str = "llama", **changes: Any) -> CompactModelPlan:
    base = CompactModelPlan(
        name=name,
        context_tokens=4096,
        tensor_parallel=1,
        min_batch=32,
        max_batch_by_memory=512,
        max_batch_by_latency=128,
        step_seconds_at_min_batch=0.01,
        step_seconds_at_max_batch=0.04,
        step_seconds=(0.008, 0.04),
    )
    return replace(base, **changes)


def planned_node(
    node: str, *gpu_plans: tuple[CompactModelPlan, ...], spec_hash: str = "h"
) -> NodeRecord:
    """A profiled node whose GPU ``i`` has the plans ``gpu_plans[i]``."""
    devices = tuple(replace(device(i), models=plans) for i, plans in enumerate(gpu_plans))
    result = from_compact(profile(*devices), spec_hash)
    return NodeRecord(name=node, gpus=len(devices), state=NodeState.PROFILED, result=result)
