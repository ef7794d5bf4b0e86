"""A node's model plans: the GPUs' plans folded into one per model, and their status form.

A node-wide number must hold on every GPU of the node, as the node's own ``recommendedMinBatch``
does (the worst GPU's): so a model's node plan takes the largest min batch, the smallest maxima
and the slowest predicted steps of its GPUs. A serving pod on that node then never runs below an
efficient batch or above the latency bound on whichever GPU it lands.

The status entry keeps everything but the per-batch step times, and a restarted operator rebuilds
the node's plans from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from roofline_profiler.core import limits, plausibility
from roofline_profiler.core.units import round_significant
from roofline_profiler.wire.compact_fields import SIGNIFICANT_DIGITS
from roofline_profiler.wire.compact_models import CompactModelPlan

#: Significant digits of the decimals in the status (model plans, intervals' ends): the
#: precision of the compact result, and no float noise in ``kubectl get -o yaml``.
STATUS_SIGNIFICANT_DIGITS = SIGNIFICANT_DIGITS


def _largest_or_none(values: Sequence[int | None]) -> int | None:
    return None if any(v is None for v in values) else max(v for v in values if v is not None)


def _smallest_known(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _slowest(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else max(v for v in values if v is not None)


def _fold(plans: Sequence[CompactModelPlan]) -> CompactModelPlan:
    """One model's plans on several GPUs as the plan that holds on all of them."""
    first = plans[0]
    length = min(len(p.step_seconds) for p in plans)
    return CompactModelPlan(
        name=first.name,
        context_tokens=first.context_tokens,
        tensor_parallel=first.tensor_parallel,
        min_batch=_largest_or_none([p.min_batch for p in plans]),
        max_batch_by_memory=min(p.max_batch_by_memory for p in plans),
        max_batch_by_latency=_smallest_known([p.max_batch_by_latency for p in plans]),
        step_seconds_at_min_batch=_slowest([p.step_seconds_at_min_batch for p in plans]),
        step_seconds_at_max_batch=_slowest([p.step_seconds_at_max_batch for p in plans]),
        step_seconds=tuple(max(p.step_seconds[i] for p in plans) for i in range(length)),
    )


def node_plans(per_gpu: Iterable[Sequence[CompactModelPlan]]) -> tuple[CompactModelPlan, ...]:
    """Each model's node plan, in the order the models first appear on the GPUs."""
    by_name: dict[str, list[CompactModelPlan]] = {}
    for plans in per_gpu:
        for plan in plans:
            by_name.setdefault(plan.name, []).append(plan)
    return tuple(_fold(plans) for plans in by_name.values())


def range_is_empty(plan: CompactModelPlan) -> bool:
    """The bounds leave no batch at or above the min batch (or no batch at all)."""
    return plan.max_batch < 1 or (plan.min_batch is not None and plan.max_batch < plan.min_batch)


def plan_to_status(plan: CompactModelPlan) -> dict[str, Any]:
    """A plan's numbers as a ``status.nodes[].models[]`` entry (no ``None`` values)."""
    fields: dict[str, Any] = {
        "name": plan.name,
        "contextTokens": plan.context_tokens,
        "tensorParallel": plan.tensor_parallel,
        "minBatch": plan.min_batch,
        "maxBatchByMemory": plan.max_batch_by_memory,
        "maxBatchByLatency": plan.max_batch_by_latency,
        "maxBatch": plan.max_batch,
        "kvCacheTokens": plan.kv_cache_tokens,
    }
    decimals = {
        "tokensPerSecondAtMinBatch": plan.tokens_per_second_at_min_batch,
        "tokensPerSecondAtMaxBatch": plan.tokens_per_second_at_max_batch,
        "stepSecondsAtMinBatch": plan.step_seconds_at_min_batch,
        "stepSecondsAtMaxBatch": plan.step_seconds_at_max_batch,
    }
    fields.update(
        {
            k: round_significant(v, digits=STATUS_SIGNIFICANT_DIGITS)
            for k, v in decimals.items()
            if v is not None
        }
    )
    return {k: v for k, v in fields.items() if v is not None}


def _optional(entry: Mapping[str, Any], key: str, quantity: str) -> Any:
    value = entry.get(key)
    if value is None:
        return None
    if quantity == "step":
        return plausibility.number(value, quantity, key)
    return plausibility.integer(value, quantity, key)


def plan_from_status(entry: Mapping[str, Any]) -> CompactModelPlan | None:
    """The plan kept in a status entry; ``None`` for an entry without numbers (a failure).

    Raises ``ValueError`` for a number outside the plausibility table (a step of 0 would divide
    by zero in tokens per second, a negative batch is no label value).
    """
    if "maxBatchByMemory" not in entry or "name" not in entry:
        return None
    return CompactModelPlan(
        name=plausibility.text(entry["name"], plausibility.LABEL_VALUE, "name"),
        context_tokens=plausibility.integer(entry.get("contextTokens", 1), "context", "context"),
        tensor_parallel=plausibility.integer(
            entry.get("tensorParallel", 1), "tensor parallel", "tensorParallel"
        ),
        min_batch=_optional(entry, "minBatch", "min batch"),
        max_batch_by_memory=plausibility.integer(
            entry["maxBatchByMemory"], "batch bound", "maxBatchByMemory"
        ),
        max_batch_by_latency=_optional(entry, "maxBatchByLatency", "batch bound"),
        step_seconds_at_min_batch=_optional(entry, "stepSecondsAtMinBatch", "step"),
        step_seconds_at_max_batch=_optional(entry, "stepSecondsAtMaxBatch", "step"),
    )


def plans_from_status(raw: Any) -> tuple[CompactModelPlan, ...]:
    """The plans of a ``status.nodes[].models`` list; damaged or failed entries are skipped."""
    if not isinstance(raw, list):
        return ()
    plans = []
    for entry in raw[: limits.MAX_MODELS]:
        if not isinstance(entry, Mapping):
            continue
        try:
            plan = plan_from_status(entry)
        except (TypeError, ValueError):
            continue
        if plan is not None:
            plans.append(plan)
    return tuple(plans)
