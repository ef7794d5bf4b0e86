"""Model plans in the compact result: the numbers of a plan the operator publishes, how a planned
model becomes them, and how they travel.

Plans (``roofline profile --models-json``) travel under two top-level keys: ``m`` names each model
once, ``[name, context tokens, tensor parallel]``, and ``p`` holds each GPU's plan numbers by the
model's position (``null`` where the GPU has no plan), so eight GPUs with eight models of 63
characters still fit in the termination message. A plan's predicted step times are what the
encoder (``compact.py``) drops first; every plan number always stays. Which numbers travel, in
which order, unit and digits, is the table of ``plan_fields.py``.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from roofline_profiler.core import plausibility
from roofline_profiler.core.limits import MAX_MODELS
from roofline_profiler.core.planning import ModelPlan
from roofline_profiler.wire import plan_fields
from roofline_profiler.wire.compact_fields import (
    STEP_UNIT,
    CompactDecodeError,
    bounded_list,
    measured,
    steps_to_wire,
    string,
    whole,
)

#: Longest model name kept: a model's name is a Kubernetes label value.
MAX_MODEL_NAME_CHARS = 63
#: The positions of a model's array under ``m`` (a plan's under ``p``: ``plan_fields``).
MODEL_FIELDS = ("name", "context", "tensor parallel")


@dataclass(frozen=True)
class CompactModelPlan:
    """One model's serving plan on one GPU: the numbers the operator publishes
    (``plan_fields.MODEL_PLAN``: its fields travel, its properties are derived from them).

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
    #: The ITL model's terms and worst relative error (``itl_model.py``); ``None`` without one
    #: (a result of compact version 2 or older, or predictions that cannot determine it).
    itl_intercept_seconds: float | None = None
    itl_per_sequence_seconds: float | None = None
    itl_per_sequence_context_token_seconds: float | None = None
    itl_max_relative_error: float | None = None

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
        """``None`` without a min batch too: there is no min batch to give tokens/s at."""
        step = self.step_seconds_at_min_batch
        return None if step is None or self.min_batch is None else self.min_batch / step

    def itl_seconds(self, batch: float, context_tokens: float) -> float | None:
        """The ITL model's step at ``batch`` sequences of ``context_tokens``; ``None`` without
        one."""
        terms = (
            self.itl_intercept_seconds,
            self.itl_per_sequence_seconds,
            self.itl_per_sequence_context_token_seconds,
        )
        if any(t is None for t in terms):
            return None
        alpha, beta, gamma = (float(t) for t in terms if t is not None)
        return alpha + beta * batch + gamma * batch * context_tokens

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
    """The numbers of ``plan`` the operator publishes, as the table takes them from it."""
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
        **{f.attribute: f.from_plan(plan) for f in plan_fields.travelling()},
        step_seconds=tuple(steps),
    )


def itl_on_one_gpu(
    plans_by_device: Sequence[Sequence[CompactModelPlan]],
) -> tuple[tuple[CompactModelPlan, ...], ...]:
    """The devices' plans with each model's ITL model kept on its first GPU only, as the line at
    or above every GPU's (the largest of each term and of the error, the node's own fold), so
    that a node of many GPUs and models still fits the termination message."""
    itl = [f for f in plan_fields.travelling() if f.attribute.startswith("itl_")]
    envelope: dict[str, dict[str, Any]] = {}
    for plans in plans_by_device:
        for plan in plans:
            for f in itl:
                value, largest = f.value_of(plan), envelope.setdefault(plan.name, {})
                if value is not None:
                    largest[f.attribute] = max(value, largest.get(f.attribute, value))
    placed: set[str] = set()
    result = []
    for plans in plans_by_device:
        trimmed = []
        for plan in plans:
            first = plan.name not in placed
            placed.add(plan.name)
            values = envelope[plan.name] if first else {}
            kept: dict[str, Any] = {f.attribute: values.get(f.attribute) for f in itl}
            trimmed.append(replace(plan, **kept))
        result.append(tuple(trimmed))
    return tuple(result)


def models_to_wire(plans_by_device: Iterable[Sequence[CompactModelPlan]]) -> list[list[Any]]:
    """``m``: each model once, ``[name, context, tensor parallel]``, in order of appearance."""
    seen: dict[str, list[Any]] = {}
    for plans in plans_by_device:
        for plan in plans:
            name = plan.name[:MAX_MODEL_NAME_CHARS]
            seen.setdefault(name, [name, plan.context_tokens, plan.tensor_parallel])
    return list(seen.values())


def _layout(plan: CompactModelPlan) -> tuple[plan_fields.PlanField, ...]:
    """The rows a plan's array holds: all of them, or those of the layout before the newest
    when the plan has none of the newest rows' numbers (no ITL model), which spares the wire a
    ``null`` per missing number."""
    newest = plan_fields.newest()
    if newest and all(f.value_of(plan) is None for f in newest):
        return plan_fields.travelling(plan_fields.PLAN_ARRAY_VERSION - 1)
    return plan_fields.travelling()


def _plan_to_wire(plan: CompactModelPlan, with_steps: bool) -> list[Any]:
    wire: list[Any] = [f.to_wire(f.value_of(plan)) for f in _layout(plan)]
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


def _decode_plan(
    raw: Any, model: tuple[str, int, int], where: str, batches: Sequence[int], version: int
) -> CompactModelPlan:
    newest = version >= plan_fields.PLAN_ARRAY_VERSION
    layouts = [plan_fields.travelling(None if newest else version)]
    if newest:
        layouts.append(plan_fields.travelling(plan_fields.PLAN_ARRAY_VERSION - 1))
    names = plan_fields.plan_positions(None if newest else version)
    fitting = [rows for rows in layouts if isinstance(raw, list) and len(raw) - len(rows) in (0, 1)]
    if not fitting:
        raise CompactDecodeError(f"{where}: not an array of {len(names)} fields")
    numbers = fitting[0]
    values, rest = raw[: len(numbers)], raw[len(numbers) :]
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
        **{f.attribute: f.from_wire(v, where) for f, v in zip(numbers, values, strict=True)},
        step_seconds=steps,
    )


def decode_device_plans(
    raw: Any,
    models: Sequence[tuple[str, int, int]],
    where: str,
    batches: Sequence[int],
    version: int = plan_fields.PLAN_ARRAY_VERSION,
) -> tuple[CompactModelPlan, ...]:
    """One GPU's entry of ``p`` in a result of compact ``version``: its plans, in the order of
    ``m``, skipping the ``null`` ones; rows newer than ``version`` are unknown (``None``)."""
    if not isinstance(raw, list) or len(raw) != len(models):
        raise CompactDecodeError(f"{where}: not one entry per model")
    return tuple(
        _decode_plan(plan, model, f"{where}, model #{i}", batches, version)
        for i, (plan, model) in enumerate(zip(raw, models, strict=True))
        if plan is not None
    )
