"""A saved result (``roofline profile --json``, ``roofline plan --json``) as an export source.

A result is one machine: its devices of one name are one GPU class, and the machine is one
measured class of nodes, labelled (once the operator profiles it) with its worst device's
product as its class (``roofline.dev/class``), as the operator labels a node. A model planned
at several contexts is exported at the first, as the operator publishes it; ``roofline plan
--context`` re-plans a saved result at another.

``roofline plan --from``'s reader (``saved_result.py``) has bounded the document's numbers and
checked its measurements; the names and flags the export writes are checked here, whole, like a
status's: a device name of printable ASCII, a model name that is a label value, each engine flag
``--name=value`` of plain characters, and each rate where the targets' arithmetic stays finite.
Pure module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from roofline_cli.export.from_status import MAX_TOKENS, MIN_RATE, SourceError
from roofline_cli.export.options import ENGINES
from roofline_cli.export.plans import ClassPlan, ExportSource, Itl, NodeClass
from roofline_operator.decide.labels import label_safe
from roofline_profiler.core import plausibility
from roofline_profiler.core.itl_model import stated_error
from roofline_profiler.core.planning import ModelPlan
from roofline_profiler.core.units import round_significant
from roofline_profiler.wire.compact_fields import SIGNIFICANT_DIGITS
from roofline_profiler.wire.result import DeviceResult, ProfileResult

#: An engine flag as ``serving_flags`` writes it: ``--max-num-seqs=96``.
ENGINE_FLAG = re.compile(r"--?[A-Za-z0-9][A-Za-z0-9_-]{0,63}(=[A-Za-z0-9._+-]{1,64})?")


def _checked_text(value: object, pattern: re.Pattern[str], what: str, where: str) -> str:
    try:
        return plausibility.text(value, pattern, what)
    except plausibility.ImplausibleValue as exc:
        raise SourceError(f"{where}: {exc}") from None


def _engine_flags(
    settings: Mapping[str, Sequence[str]], where: str
) -> dict[str, tuple[str, ...]] | None:
    """The plan's flags for every engine, each checked whole; ``None`` when the plan lacks an
    engine's (the flags then come from its bounds)."""
    if set(settings) != set(ENGINES.values()):
        return None
    return {
        engine: tuple(_checked_text(f, ENGINE_FLAG, "engineSettings", where) for f in flags)
        for engine, flags in settings.items()
    }


def _checked_rate(rate: float | None, where: str) -> float | None:
    if rate is not None and not MIN_RATE <= rate <= MAX_TOKENS:
        raise SourceError(
            f"{where}: tokens/s {rate!r} is not a positive rate from {MIN_RATE:g} to {MAX_TOKENS:g}"
        )
    return rate


def _check_plan(name: str, plan: ModelPlan, where: str) -> None:
    """A plan's model name and the counts the targets write, within the plausibility table."""
    _checked_text(name, plausibility.LABEL_VALUE, "model name", where)
    for count, quantity in (
        (plan.max_batch_by_memory, "batch bound"),
        (plan.max_batch_by_latency, "batch bound"),
        (plan.min_batch, "min batch"),
        (plan.context_tokens, "context"),
        (plan.tensor_parallel, "tensor parallel"),
    ):
        if count is not None:
            try:
                plausibility.integer(count, quantity, quantity)
            except plausibility.ImplausibleValue as exc:
                raise SourceError(f"{where}, model {name}: {exc}") from None


def _max_batch(plan: ModelPlan) -> int:
    by_latency = plan.max_batch_by_latency
    if by_latency is None:
        return plan.max_batch_by_memory
    return min(plan.max_batch_by_memory, by_latency)


def _high_rate(plan: ModelPlan) -> float | None:
    return None if plan.tokens_per_second_at_range is None else plan.tokens_per_second_at_range[1]


def _itl(plans: Sequence[tuple[DeviceResult, ModelPlan]], batch: int, where: str) -> Itl | None:
    """The slowest device's ITL model at ``batch`` sequences of the planned context."""
    fitted = [(d, p, p.itl_model) for d, p in plans if p.itl_model is not None]
    if not fitted:
        return None
    device, _, model = max(
        fitted, key=lambda f: (f[2].step_seconds(max(batch, 1), f[1].context_tokens), -f[0].index)
    )
    return Itl(
        float(round_significant(model.intercept_seconds, digits=SIGNIFICANT_DIGITS)),
        float(round_significant(model.per_sequence_seconds, digits=SIGNIFICANT_DIGITS)),
        float(
            round_significant(model.per_sequence_context_token_seconds, digits=SIGNIFICANT_DIGITS)
        ),
        stated_error(model.max_relative_error),
        f"{where} device {device.index}",
    )


def _class_plan(
    name: str, gpu_class: str, plans: Sequence[tuple[DeviceResult, ModelPlan]], where: str
) -> ClassPlan:
    """One model on one class of devices: the numbers that hold on each of them."""
    first = plans[0][1]
    mins = [p.min_batch for _, p in plans]
    by_memory = min(p.max_batch_by_memory for _, p in plans)
    latencies = [p.max_batch_by_latency for _, p in plans if p.max_batch_by_latency is not None]
    by_latency = min(latencies) if latencies else None
    worst = min(plans, key=lambda dp: (_max_batch(dp[1]), dp[0].index))
    rates = [_checked_rate(_high_rate(p), f"{where}, model {name}") for _, p in plans]
    max_batch = by_memory if by_latency is None else min(by_memory, by_latency)
    devices = ", ".join(str(d.index) for d, _ in plans)
    return ClassPlan(
        model=name,
        gpu_class=gpu_class,
        context_tokens=first.context_tokens,
        tensor_parallel=first.tensor_parallel,
        min_batch=None if any(m is None for m in mins) else max(m for m in mins if m is not None),
        max_batch=max_batch,
        max_batch_by_memory=by_memory,
        max_batch_by_latency=by_latency,
        kv_cache_tokens=by_memory * first.context_tokens,
        tokens_per_second_at_max_batch=(
            None if any(r is None for r in rates) else min(r for r in rates if r is not None)
        ),
        nodes=1,
        source=f"{where}, {gpu_class} (device {devices}), plan at {first.context_tokens} tokens",
        itl=_itl(plans, max_batch, where),
        engine_flags=_engine_flags(worst[1].engine_settings, f"{where}, model {name}"),
    )


def _first_plans(device: DeviceResult) -> dict[str, ModelPlan]:
    """Each model's first plan on a device (its first context)."""
    plans: dict[str, ModelPlan] = {}
    for plan in device.models:
        plans.setdefault(plan.name, plan)
    return plans


def source_of_result(result: ProfileResult, where: str) -> ExportSource:
    """The export source of a saved result read from ``where``."""
    by_class: dict[str, dict[str, list[tuple[DeviceResult, ModelPlan]]]] = {}
    for device in result.devices:
        device_where = f"{where}, device {device.index}"
        _checked_text(device.name, plausibility.DEVICE_NAME, "name", device_where)
        for name, plan in _first_plans(device).items():
            _check_plan(name, plan, device_where)
            by_class.setdefault(device.name, {}).setdefault(name, []).append((device, plan))
    plans = tuple(
        _class_plan(name, gpu_class, found, where)
        for gpu_class, models in by_class.items()
        for name, found in models.items()
    )
    rates: dict[str, float] = {}
    for class_plan in plans:
        rate = class_plan.tokens_per_second_at_max_batch
        if rate is not None:
            rates[class_plan.model] = min(rate, rates.get(class_plan.model, rate))
    # The operator labels a node with the device a node-wide label must describe: the one that
    # needs the largest batch (``NodeResult.worst_gpu``).
    worst = min(result.devices, key=lambda d: (-d.recommended_min_batch, d.index))
    node = NodeClass(
        label=label_safe(worst.name),
        product=worst.name,
        nodes=(where,),
        gpus=len(result.devices),
        tokens_per_second=rates,
        accelerated=worst.backend != "cpu",
    )
    return ExportSource(description=where, plans=plans, node_classes=(node,))
