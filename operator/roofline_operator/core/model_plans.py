"""A node's model plans: the GPUs' plans folded into one per model, and their status form.

A node-wide number must hold on every GPU of the node, as the node's own ``recommendedMinBatch``
does (the worst GPU's): so a model's node plan takes the largest min batch, the smallest maxima
and the slowest predicted steps of its GPUs (each number's fold is its row of
``plan_fields.MODEL_PLAN``). A serving pod on that node then never runs below an
efficient batch or above the latency bound on whichever GPU it lands.

The status entry keeps everything but the per-batch step times, and a restarted operator rebuilds
the node's plans from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from roofline_profiler.core import limits, plausibility
from roofline_profiler.core.units import round_significant
from roofline_profiler.wire import plan_fields
from roofline_profiler.wire.compact_fields import SIGNIFICANT_DIGITS
from roofline_profiler.wire.compact_models import CompactModelPlan

#: Significant digits of the decimals in the status (model plans, intervals' ends): the
#: precision of the compact result, and no float noise in ``kubectl get -o yaml``.
STATUS_SIGNIFICANT_DIGITS = SIGNIFICANT_DIGITS


def _fold(plans: Sequence[CompactModelPlan]) -> CompactModelPlan:
    """One model's plans on several GPUs as the plan that holds on all of them: each travelling
    number folded as its row of ``plan_fields.MODEL_PLAN`` says, the slowest step per batch."""
    first = plans[0]
    length = min(len(p.step_seconds) for p in plans)
    return CompactModelPlan(
        name=first.name,
        context_tokens=first.context_tokens,
        tensor_parallel=first.tensor_parallel,
        **{f.attribute: f.fold([f.value_of(p) for p in plans]) for f in plan_fields.travelling()},
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
    """A plan's numbers as a ``status.nodes[].models[]`` entry (no ``None`` values): every row
    of ``plan_fields.MODEL_PLAN``, decimals to their digits."""
    entry: dict[str, Any] = {
        "name": plan.name,
        "contextTokens": plan.context_tokens,
        "tensorParallel": plan.tensor_parallel,
    }
    for f in plan_fields.MODEL_PLAN:
        value = f.value_of(plan)
        if value is not None:
            entry[f.key] = value if f.digits is None else round_significant(value, digits=f.digits)
    return entry


def is_planned(entry: Mapping[str, Any]) -> bool:
    """The entry holds a plan's numbers (a failed model's holds a reason instead)."""
    return all(key in entry for key in plan_fields.required_keys())


def plan_from_status(entry: Mapping[str, Any]) -> CompactModelPlan | None:
    """The plan kept in a status entry; ``None`` for an entry without numbers (a failure).

    Only the numbers that travel are read: the others are derived from them again. Raises
    ``ValueError`` for a number outside the plausibility table (a step of 0 would divide by zero
    in tokens per second, a negative batch is no label value).
    """
    if not is_planned(entry) or "name" not in entry:
        return None
    return CompactModelPlan(
        name=plausibility.text(entry["name"], plausibility.LABEL_VALUE, "name"),
        context_tokens=plausibility.integer(entry.get("contextTokens", 1), "context", "context"),
        tensor_parallel=plausibility.integer(
            entry.get("tensorParallel", 1), "tensor parallel", "tensorParallel"
        ),
        **{f.attribute: f.from_status(entry) for f in plan_fields.travelling()},
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
