"""Model plans in the compact result: the numbers of a plan the operator publishes, how a planned
model becomes them, and how they travel.

Plans (``roofline profile --models-json``) travel under two top-level keys: ``m`` names each model
once, ``[name, context tokens, tensor parallel]``, and ``p`` holds each GPU's plan numbers by the
model's position (``null`` where the GPU has no plan), so eight GPUs with eight models of 63
characters still fit in the termination message. A plan's predicted step times are what the
encoder (``compact.py``) drops first; every plan number always stays.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from roofline_profiler.core import plausibility
from roofline_profiler.core.limits import MAX_MODELS
from roofline_profiler.core.planning import ModelPlan
from roofline_profiler.wire.compact_fields import (
    STEP_UNIT,
    CompactDecodeError,
    bounded_list,
    in_unit,
    measured,
    steps_to_wire,
    string,
    whole,
)

#: Longest model name kept: a model's name is a Kubernetes label value.
MAX_MODEL_NAME_CHARS = 63
#: The positions of a model's array under ``m`` and of a model plan's array under ``p``.
MODEL_FIELDS = ("name", "context", "tensor parallel")
PLAN_FIELDS = (
    "min batch",
    "max batch by memory",
    "max batch by latency",
    "step at min batch",
    "step at max batch",
    "step times",
)


@dataclass(frozen=True)
class CompactModelPlan:
    """One model's serving plan on one GPU: the numbers the operator publishes.

    The recommended range runs from :attr:`range_low` to :attr:`max_batch`; tokens/s at its ends
    are ``batch / step`` and so travel as the step times alone. ``step_seconds`` are the predicted
    decode steps at the profile's batches up to :attr:`max_batch_by_memory` (a prefix of
    ``batches``), or none when they were dropped to fit.
    """

    name: str
    context_tokens: int
    tensor_parallel: int
    #: ``None`` when no batch reaches the efficiency threshold.
    min_batch: int | None
    max_batch_by_memory: int
    #: ``None`` without an inter-token latency SLO.
    max_batch_by_latency: int | None
    #: Predicted steps at the recommended range's ends; ``None`` when the range is empty.
    step_seconds_at_min_batch: float | None
    step_seconds_at_max_batch: float | None
    step_seconds: tuple[float, ...] = ()

    @property
    def max_batch(self) -> int:
        """The recommended range's high end: the smaller of the two bounds."""
        if self.max_batch_by_latency is None:
            return self.max_batch_by_memory
        return min(self.max_batch_by_memory, self.max_batch_by_latency)

    @property
    def kv_cache_tokens(self) -> int:
        """Tokens of KV cache the memory bound holds: its sequences at the planned context."""
        return self.max_batch_by_memory * self.context_tokens

    @property
    def range_low(self) -> int:
        """The range's low end: the min batch, or the high end when no batch is efficient."""
        return self.max_batch if self.min_batch is None else self.min_batch

    @property
    def tokens_per_second_at_min_batch(self) -> float | None:
        step = self.step_seconds_at_min_batch
        return None if step is None else self.range_low / step

    @property
    def tokens_per_second_at_max_batch(self) -> float | None:
        step = self.step_seconds_at_max_batch
        return None if step is None else self.max_batch / step


def compact_plans(
    plans: Sequence[ModelPlan], batches: Sequence[int]
) -> tuple[CompactModelPlan, ...]:
    """A device's plans as the compact result carries them: one per model name (the first
    context planned, when a model was planned at several), step times along ``batches`` up to the
    memory bound."""
    seen: set[str] = set()
    compact = []
    for plan in plans:
        if plan.name in seen:
            continue
        seen.add(plan.name)
        compact.append(compact_plan(plan, batches))
    return tuple(compact)


def compact_plan(plan: ModelPlan, batches: Sequence[int]) -> CompactModelPlan:
    """The numbers of ``plan`` the operator publishes; the range's step times are
    ``batch / tokens per second`` at its ends, as the plan computed them."""
    low_step = high_step = None
    if plan.recommended_range is not None and plan.tokens_per_second_at_range is not None:
        (low, high), (low_rate, high_rate) = plan.recommended_range, plan.tokens_per_second_at_range
        low_step, high_step = low / low_rate, high / high_rate
    predicted = {p.batch: p.step_seconds for p in plan.predictions}
    steps: list[float] = []
    for batch in batches:
        if batch > plan.max_batch_by_memory or batch not in predicted:
            break
        steps.append(predicted[batch])
    return CompactModelPlan(
        name=plan.name,
        context_tokens=plan.context_tokens,
        tensor_parallel=plan.tensor_parallel,
        min_batch=plan.min_batch,
        max_batch_by_memory=plan.max_batch_by_memory,
        max_batch_by_latency=plan.max_batch_by_latency,
        step_seconds_at_min_batch=low_step,
        step_seconds_at_max_batch=high_step,
        step_seconds=tuple(steps),
    )


def models_to_wire(plans_by_device: Iterable[Sequence[CompactModelPlan]]) -> list[list[Any]]:
    """``m``: each model once, ``[name, context, tensor parallel]``, in order of appearance."""
    seen: dict[str, list[Any]] = {}
    for plans in plans_by_device:
        for plan in plans:
            name = plan.name[:MAX_MODEL_NAME_CHARS]
            seen.setdefault(name, [name, plan.context_tokens, plan.tensor_parallel])
    return list(seen.values())


def _optional_step_to_wire(seconds: float | None) -> float | int | None:
    return None if seconds is None else in_unit(seconds, STEP_UNIT)


def _plan_to_wire(plan: CompactModelPlan, with_steps: bool) -> list[Any]:
    wire: list[Any] = [
        plan.min_batch,
        plan.max_batch_by_memory,
        plan.max_batch_by_latency,
        _optional_step_to_wire(plan.step_seconds_at_min_batch),
        _optional_step_to_wire(plan.step_seconds_at_max_batch),
    ]
    if with_steps and plan.step_seconds:
        wire.append(steps_to_wire(plan.step_seconds))
    return wire


def plans_to_wire(
    plans: Sequence[CompactModelPlan], models: list[list[Any]], with_steps: bool
) -> list[list[Any] | None]:
    """``p``'s entry of one GPU: one plan array per model of ``m``, ``null`` where it has none."""
    by_name = {plan.name[:MAX_MODEL_NAME_CHARS]: plan for plan in plans}
    ordered = (by_name.get(model[0]) for model in models)
    return [None if plan is None else _plan_to_wire(plan, with_steps) for plan in ordered]


def decode_models(raw: Any) -> list[tuple[str, int, int]]:
    """``m``: each model's name, context and tensor-parallel degree; no name twice."""
    models = []
    for position, model in enumerate(bounded_list(raw, "m", "result", MAX_MODELS)):
        where = f"model #{position}"
        if not isinstance(model, list) or len(model) != len(MODEL_FIELDS):
            raise CompactDecodeError(f"{where}: not an array of {len(MODEL_FIELDS)} fields")
        name, context, tp = model
        models.append(
            (
                string(name, plausibility.LABEL_VALUE, "name", where),
                whole(context, "context", "context", where),
                whole(tp, "tensor parallel", "tensor parallel", where),
            )
        )
    if len({name for name, _, _ in models}) != len(models):
        raise CompactDecodeError("result: a model is named twice")
    return models


def _optional_step(value: Any, name: str, where: str) -> float | None:
    return None if value is None else measured(value, "step", name, where, STEP_UNIT)


def _decode_plan(
    raw: Any, model: tuple[str, int, int], where: str, batches: Sequence[int]
) -> CompactModelPlan:
    if not isinstance(raw, list) or len(raw) not in (len(PLAN_FIELDS) - 1, len(PLAN_FIELDS)):
        raise CompactDecodeError(f"{where}: not an array of {len(PLAN_FIELDS)} fields")
    min_batch, by_memory, by_latency, step_low, step_high, *rest = raw
    steps = tuple(
        measured(s, "step", "step times", where, STEP_UNIT)
        for s in bounded_list(rest[0] if rest else [], "steps", where, plausibility.MAX_BATCHES)
    )
    if len(steps) > len(batches):
        raise CompactDecodeError(f"{where}: more step times than sweep batches")
    return CompactModelPlan(
        name=model[0],
        context_tokens=model[1],
        tensor_parallel=model[2],
        min_batch=None if min_batch is None else whole(min_batch, "min batch", "min batch", where),
        max_batch_by_memory=whole(by_memory, "batch bound", "max batch by memory", where),
        max_batch_by_latency=(
            None
            if by_latency is None
            else whole(by_latency, "batch bound", "max batch by latency", where)
        ),
        step_seconds_at_min_batch=_optional_step(step_low, "step at min", where),
        step_seconds_at_max_batch=_optional_step(step_high, "step at max", where),
        step_seconds=steps,
    )


def decode_device_plans(
    raw: Any, models: Sequence[tuple[str, int, int]], where: str, batches: Sequence[int]
) -> tuple[CompactModelPlan, ...]:
    """One GPU's entry of ``p``: its plans, in the order of ``m``, skipping the ``null`` ones."""
    if not isinstance(raw, list) or len(raw) != len(models):
        raise CompactDecodeError(f"{where}: not one entry per model")
    return tuple(
        _decode_plan(plan, model, f"{where}, model #{i}", batches)
        for i, (plan, model) in enumerate(zip(raw, models, strict=True))
        if plan is not None
    )
