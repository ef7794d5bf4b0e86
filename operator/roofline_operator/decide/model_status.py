"""The model side of a profile's status: ``nodes[].models``, ``models``, ``ModelsReady``.

Entries follow ``spec.models``: a model removed from the spec leaves both lists at once, a model
that cannot be planned (unknown preset, bad config, missing ConfigMap) shows its reason on every
node and in its summary, and the other models and nodes are planned as usual. Each entry of a
valid model says how it is served (``weightFormat``, ``kvCacheDtype``, where not the defaults).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from roofline_operator.core.model_loads import with_rates
from roofline_operator.core.model_plans import (
    STATUS_SIGNIFICANT_DIGITS,
    is_planned,
    plan_to_status,
    range_is_empty,
)
from roofline_operator.core.model_spec import DEFAULT_KV_CACHE_DTYPE, ModelSpec
from roofline_operator.core.node_results import NodeResult
from roofline_operator.decide.model_sources import ModelFailure, ServedFormat
from roofline_profiler.core.units import SECONDS_PER_HOUR, round_significant
from roofline_profiler.wire import plan_fields
from roofline_profiler.wire.compact_models import CompactModelPlan
from roofline_profiler.wire.warning_codes import MODEL_FAILED

#: A node's entry reason when the bounds leave no efficient batch (the numbers are kept).
RANGE_EMPTY = "RangeEmpty"
#: A node's entry reason when its profile came back without a plan for the model.
NOT_PLANNED = "NotPlanned"
#: The status key of the cost of a million tokens at the range's high end: a number of the
#: spec's price as much as of the plan, so the status adds it to the table's.
COST_KEY = "costPerMillionTokensAtMaxBatch"
#: The status key that says why a planned model has no ``minBatch`` (the JSON result's key).
MIN_BATCH_REASON_KEY = "minBatchReason"


def summarized() -> tuple[str, ...]:
    """The numbers ``status.models[]`` summarizes across nodes, each as ``{min, median, max}``:
    the table's summarized rows, then the cost."""
    return (*(f.key for f in plan_fields.MODEL_PLAN if f.summarized), COST_KEY)


@dataclass(frozen=True)
class ModelsView:
    """What the status needs of the spec's models: the list, their failures, the price, how
    each valid one is served."""

    models: tuple[ModelSpec, ...] = ()
    failures: Mapping[str, ModelFailure] = field(default_factory=dict)
    gpu_hour_cost: Decimal | None = None
    #: Each valid model's name to how it is served (a model missing here shows no format).
    formats: Mapping[str, ServedFormat] = field(default_factory=dict)

    def served(self, name: str) -> dict[str, str]:
        """``weightFormat`` (omitted for a model in its dtype) and ``kvCacheDtype`` (omitted
        for ``auto``) of a model, as resolved from its config and spec entry; none for a model
        that failed before it was resolved."""
        served = self.formats.get(name)
        if served is None:
            return {}
        keys = {}
        if served.weight_format:
            keys["weightFormat"] = served.weight_format
        if served.kv_cache_dtype != DEFAULT_KV_CACHE_DTYPE:
            keys["kvCacheDtype"] = served.kv_cache_dtype
        return keys


def cost_per_million_tokens(
    gpu_hour_cost: Decimal, tensor_parallel: int, tokens_per_second: float
) -> float:
    """``gpuHourCost × tensorParallel / (3600 × tokens/s) × 10^6``: one replica's GPUs' price
    of a million output tokens at that rate."""
    return float(gpu_hour_cost) * tensor_parallel / (SECONDS_PER_HOUR * tokens_per_second) * 1e6


def range_empty_message(plan: CompactModelPlan) -> str:
    """Which limit leaves no efficient batch."""
    context = plan.context_tokens
    if plan.max_batch_by_memory < 1:
        return f"no sequence of {context} tokens fits in memory beside the weights"
    if plan.max_batch_by_latency is not None and plan.max_batch_by_latency < 1:
        return "no batch meets the inter-token latency SLO"
    bound = (
        "latency"
        if plan.max_batch_by_latency is not None
        and plan.max_batch_by_latency < plan.max_batch_by_memory
        else "memory"
    )
    return (
        f"maxBatch {plan.max_batch} (bound by {bound}) is below minBatch {plan.min_batch} "
        f"at {context} tokens of context"
    )


def min_batch_reason(plan: CompactModelPlan) -> str:
    """Why a plan has no min batch: no predicted batch reached the efficiency threshold."""
    return (
        f"no predicted batch of this model reaches the efficiency threshold at "
        f"{plan.context_tokens} tokens of context on this node, so it has no minBatch (decode "
        f"stays memory-bound); run it as close to maxBatch ({plan.max_batch}) as the load allows"
    )


def _plan_entry(plan: CompactModelPlan, view: ModelsView) -> dict[str, Any]:
    entry = plan_to_status(plan)
    high = plan.tokens_per_second_at_max_batch
    if view.gpu_hour_cost is not None and high:
        cost = cost_per_million_tokens(view.gpu_hour_cost, plan.tensor_parallel, high)
        entry[COST_KEY] = round_significant(cost, digits=STATUS_SIGNIFICANT_DIGITS)
    if plan.min_batch is None:
        entry[MIN_BATCH_REASON_KEY] = min_batch_reason(plan)
    if range_is_empty(plan):
        entry.update(reason=RANGE_EMPTY, message=range_empty_message(plan))
    return entry


def _identity(model: ModelSpec, view: ModelsView) -> dict[str, Any]:
    return {
        "name": model.name,
        "contextTokens": model.context_tokens,
        "tensorParallel": model.tensor_parallel,
        **view.served(model.name),
    }


def node_model_entries(
    result: NodeResult | None, current: bool, view: ModelsView
) -> list[dict[str, Any]]:
    """``status.nodes[].models`` of one node, in spec order.

    ``current``: the result was measured under the current spec, so a model it lacks was not
    planned (rather than not yet asked for).
    """
    plans = {p.name: p for p in result.node_models()} if result is not None else {}
    loads = result.loads if result is not None else ()
    entries = []
    for model in view.models:
        failure = view.failures.get(model.name)
        plan = plans.get(model.name)
        if failure is not None:
            if result is not None:
                entries.append(
                    {**_identity(model, view), "reason": failure.reason, "message": failure.message}
                )
        elif plan is not None:
            entry = {**_plan_entry(plan, view), **view.served(model.name)}
            entries.extend(with_rates([entry], loads))
        elif current and result is not None and MODEL_FAILED in result.warnings():
            message = (
                "the profiler could not measure this model on the node (out of GPU memory or a "
                "device error; the profiler pod's log names it); the roofline and the other "
                "models are published"
            )
            entries.append({**_identity(model, view), "reason": MODEL_FAILED, "message": message})
        elif current:
            message = "the profiler returned no plan for this model"
            entries.append({**_identity(model, view), "reason": NOT_PLANNED, "message": message})
    return entries


def _spread(values: Sequence[float]) -> dict[str, float | int]:
    return {
        "min": min(values),
        "median": round_significant(statistics.median(values), digits=STATUS_SIGNIFICANT_DIGITS),
        "max": max(values),
    }


def models_summary(
    node_entries: Iterable[Sequence[Mapping[str, Any]]], view: ModelsView
) -> list[dict[str, Any]]:
    """``status.models``: each model across the nodes that have a plan for it."""
    by_name: dict[str, list[Mapping[str, Any]]] = {m.name: [] for m in view.models}
    for entries in node_entries:
        for entry in entries:
            if entry.get("name") in by_name:
                by_name[entry["name"]].append(entry)
    summary = []
    for model in view.models:
        entries = by_name[model.name]
        planned = [e for e in entries if is_planned(e)]
        item: dict[str, Any] = {
            **_identity(model, view),
            "nodes": len(planned),
            "failedNodes": sum(1 for e in entries if not is_planned(e)),
        }
        failure = view.failures.get(model.name)
        if failure is not None:
            item.update(reason=failure.reason, message=failure.message)
        for key in summarized():
            values = [e[key] for e in planned if key in e]
            if values:
                item[key] = _spread(values)
        summary.append(item)
    return summary


def models_condition(view: ModelsView, summary: Sequence[Mapping[str, Any]]) -> Any:
    """``ModelsReady`` as ``(status, reason, message)``; ``None`` without ``spec.models``."""
    if not view.models:
        return None
    failed = [m for m in view.models if m.name in view.failures]
    if failed:
        first = view.failures[failed[0].name]
        more = f" (and {len(failed) - 1} more model(s))" if len(failed) > 1 else ""
        return False, first.reason, f"{first.message}{more}"
    planned = sum(1 for item in summary if item.get("nodes"))
    return True, "Planned", f"{planned} of {len(view.models)} model(s) planned on some node"


def planned_models(summary: Sequence[Mapping[str, Any]]) -> int:
    """``status.summary.models``: models planned on at least one node."""
    return sum(1 for item in summary if item.get("nodes"))
