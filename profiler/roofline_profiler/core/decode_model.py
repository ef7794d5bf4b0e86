"""Compose measured parts of a decode step into the step time at any batch and context.

``model_measure`` times the parts of one decoder layer on the device; one decode step of the
whole model, per GPU of a tensor-parallel group, is then

    step(B, C) = Σ_kind layers_kind · body_kind(B)      the decoder layers without attention
               + layers · attention(B, C)               attention over each sequence's KV cache
               + layers · 2 · all_reduce(B)             tensor parallel: after o and after down
               + head(B)                                embedding, final norm, lm_head

where ``kind`` is dense or mixture-of-experts (Qwen-MoE can mix both). Attention is the only part
that depends on the context. At a context that was measured for that batch the measurement is
used as is; between measured contexts it is interpolated linearly in the context (decode
attention reads ``C`` tokens of KV per sequence, so its time is affine in C), beyond them
extrapolated along the line through the two nearest measured contexts, or in proportion to the
context from a single measured one. Those cases are reported, never silent.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any

from roofline_profiler.core.itl_model import fit_plan
from roofline_profiler.core.model_config import ModelArch
from roofline_profiler.core.models import attended_tokens
from roofline_profiler.core.planning import ModelPlan, PlanOptions, StepPrediction, plan_model
from roofline_profiler.core.stats import CPU_WAIT_SUSPECT, Measurement

#: The two all-reduces per layer of a tensor-parallel decoder (Megatron-LM; vLLM's
#: RowParallelLinear after o_proj and after down_proj).
ALL_REDUCES_PER_LAYER = 2


class MissingMeasurement(LookupError):
    """The measurements do not cover what was asked (a batch, a model, a TP degree)."""


@dataclass(frozen=True)
class ComponentTime:
    """Seconds of one part of a step at one batch (the median of its measurement, scaled where
    only a slice was timed)."""

    batch: int
    seconds: float
    measurement: Measurement | None = None


@dataclass(frozen=True)
class AttentionTime:
    """Seconds of one layer's decode attention at one batch and context."""

    batch: int
    context_tokens: int
    seconds: float
    extrapolated: bool
    measurement: Measurement | None = None


@dataclass(frozen=True)
class ModelMeasurements:
    """Everything measured for one model, dtype and tensor-parallel degree on one device."""

    arch: ModelArch
    dtype: str
    tensor_parallel: int
    layer_bodies: Mapping[str, tuple[ComponentTime, ...]]
    head: tuple[ComponentTime, ...]
    head_scale: float
    attention: tuple[AttentionTime, ...]
    all_reduce: tuple[ComponentTime, ...] = ()
    all_reduce_measured: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def batches(self) -> tuple[int, ...]:
        return tuple(t.batch for t in self.head)

    @property
    def contexts(self) -> tuple[int, ...]:
        return tuple(sorted({a.context_tokens for a in self.attention}))


def layer_kinds(arch: ModelArch) -> tuple[str, ...]:
    """The kinds of decoder layer the model has: ``dense``, ``moe`` or both."""
    kinds = []
    if arch.num_layers - (arch.moe_layers if arch.is_moe else 0) > 0:
        kinds.append("dense")
    if arch.is_moe:
        kinds.append("moe")
    return tuple(kinds)


def layers_of_kind(arch: ModelArch, kind: str) -> int:
    moe = arch.moe_layers if arch.is_moe else 0
    return moe if kind == "moe" else arch.num_layers - moe


def _at_batch(times: Sequence[ComponentTime], batch: int, what: str) -> float:
    for t in times:
        if t.batch == batch:
            return t.seconds
    raise MissingMeasurement(f"{what} was not measured at batch {batch}")


def attention_seconds(m: ModelMeasurements, batch: int, context_tokens: int) -> tuple[float, str]:
    """One layer's attention at ``batch`` and ``context_tokens``; the second value says how it
    was obtained: ``measured``, ``extrapolated-batch``, ``interpolated`` or ``extrapolated``."""
    points = sorted((a for a in m.attention if a.batch == batch), key=lambda a: a.context_tokens)
    if not points:
        raise MissingMeasurement(f"attention was not measured at batch {batch}")
    # Attention reads what the sliding window lets it (if any); measured contexts beyond the
    # window read the same tokens, so compare attended tokens.
    wanted = attended_tokens(m.arch, context_tokens)
    by_tokens = {attended_tokens(m.arch, a.context_tokens): a for a in points}
    if wanted in by_tokens:
        hit = by_tokens[wanted]
        return hit.seconds, "extrapolated-batch" if hit.extrapolated else "measured"
    xs = sorted(by_tokens)
    if len(xs) == 1:
        only = by_tokens[xs[0]]
        return only.seconds * wanted / xs[0], "extrapolated"
    below = [x for x in xs if x < wanted]
    above = [x for x in xs if x > wanted]
    if below and above:
        lo, hi, how = below[-1], above[0], "interpolated"
    elif above:
        lo, hi, how = xs[0], xs[1], "extrapolated"
    else:
        lo, hi, how = xs[-2], xs[-1], "extrapolated"
    t_lo, t_hi = by_tokens[lo].seconds, by_tokens[hi].seconds
    seconds = t_lo + (t_hi - t_lo) * (wanted - lo) / (hi - lo)
    # A line through two noisy points can dip below zero far from them; attention never is.
    return max(seconds, min(t_lo, t_hi) * min(1.0, wanted / lo)), how


def step_seconds(m: ModelMeasurements, batch: int, context_tokens: int) -> float:
    """Predicted decode step time, per GPU of the tensor-parallel group."""
    total = _at_batch(m.head, batch, "the lm_head")
    for kind, times in m.layer_bodies.items():
        total += layers_of_kind(m.arch, kind) * _at_batch(times, batch, f"the {kind} layer")
    attention, _ = attention_seconds(m, batch, context_tokens)
    total += m.arch.num_layers * attention
    if m.tensor_parallel > 1:
        all_reduce = _at_batch(m.all_reduce, batch, "the all-reduce")
        total += m.arch.num_layers * ALL_REDUCES_PER_LAYER * all_reduce
    return total


def attention_notes(m: ModelMeasurements, context_tokens: int) -> tuple[str, ...]:
    """Plain-language notes on attention times that were not measured as such."""
    extrapolated_batches = []
    other: dict[str, list[int]] = {}
    for batch in m.batches:
        _, how = attention_seconds(m, batch, context_tokens)
        if how == "extrapolated-batch":
            extrapolated_batches.append(batch)
        elif how != "measured":
            other.setdefault(how, []).append(batch)
    notes = []
    if extrapolated_batches:
        notes.append(
            f"attention at {context_tokens} tokens of context for batch "
            f"{_batches(extrapolated_batches)} is extrapolated in proportion to the batch "
            "(the KV cache did not fit the measuring buffer)"
        )
    measured = ", ".join(str(c) for c in m.contexts)
    for how, batches in other.items():
        notes.append(
            f"attention at {context_tokens} tokens of context is {how} from the measured contexts "
            f"({measured}) for batch {_batches(batches)}"
        )
    return tuple(notes)


def contention_notes(m: ModelMeasurements, context_tokens: int) -> tuple[str, ...]:
    """A note when parts of the step at ``context_tokens`` were measured while another process
    held the CPUs in every pass (``Measurement.confirmed_cpu_wait``, as the roofline's
    ``CpuContention`` warning judges its rounds): their times are too slow, so the plan is
    pessimistic by more than the timing noise."""
    parts: dict[str, list[int]] = {}
    worst = 0.0

    def check(name: str, batch: int, measurement: Measurement | None) -> None:
        nonlocal worst
        wait = measurement.confirmed_cpu_wait if measurement is not None else None
        if wait is not None and wait >= CPU_WAIT_SUSPECT:
            parts.setdefault(name, []).append(batch)
            worst = max(worst, wait)

    for kind, times in m.layer_bodies.items():
        for t in times:
            check(f"the {kind} layer", t.batch, t.measurement)
    for a in m.attention:
        if a.context_tokens == context_tokens:
            check(f"attention at {context_tokens} tokens", a.batch, a.measurement)
    for t in m.head:
        check("the lm_head", t.batch, t.measurement)
    if not parts:
        return ()
    which = "; ".join(f"{name} at batch {_batches(sorted(b))}" for name, b in parts.items())
    return (
        f"CpuContention: {which} ran while another process held the CPUs in every pass (the "
        f"profiler's threads waited for a CPU up to {worst:.0%} of the time), so these step "
        "times are too slow and the plan understates the device; re-run when the CPUs are idle, "
        "or give the profiler whole CPUs of its own",
    )


def _batches(batches: Sequence[int]) -> str:
    return ", ".join(str(b) for b in batches)


# --- the JSON form (camelCase), kept in the result so ``roofline plan`` can re-plan ---------------


def _measurement_to_dict(m: Measurement | None) -> dict[str, Any] | None:
    if m is None:
        return None
    return {
        "label": m.label,
        "samplesSeconds": list(m.times),
        "warmupRuns": m.warmup_runs,
        **({"samplesRound": list(m.rounds)} if m.rounds else {}),
        **({"roundsCpuWait": list(m.cpu_waits)} if m.cpu_waits else {}),
    }


def _measurement_from_dict(d: Mapping[str, Any] | None) -> Measurement | None:
    if d is None:
        return None
    return Measurement(
        label=d["label"],
        times=tuple(d["samplesSeconds"]),
        warmup_runs=d["warmupRuns"],
        rounds=tuple(d.get("samplesRound", ())),
        cpu_waits=tuple(d.get("roundsCpuWait", ())),
    )


def _components_to_list(times: Sequence[ComponentTime]) -> list[dict[str, Any]]:
    return [
        {
            "batch": t.batch,
            "seconds": t.seconds,
            "measurement": _measurement_to_dict(t.measurement),
        }
        for t in times
    ]


def _components_from_list(items: Sequence[Mapping[str, Any]]) -> tuple[ComponentTime, ...]:
    return tuple(
        ComponentTime(
            batch=i["batch"],
            seconds=i["seconds"],
            measurement=_measurement_from_dict(i.get("measurement")),
        )
        for i in items
    )


_ARCH_KEYS = {
    f.name: "".join(
        part if n == 0 else part.capitalize() for n, part in enumerate(f.name.split("_"))
    )
    for f in fields(ModelArch)
}


def arch_to_dict(arch: ModelArch) -> dict[str, Any]:
    return {key: getattr(arch, name) for name, key in _ARCH_KEYS.items()}


def arch_from_dict(d: Mapping[str, Any]) -> ModelArch:
    return ModelArch(**{name: d[key] for name, key in _ARCH_KEYS.items() if key in d})


def same_shapes(a: ModelArch, b: ModelArch) -> bool:
    """Whether two architectures have the same decode step (names aside)."""
    return arch_to_dict(a) | {"name": ""} == arch_to_dict(b) | {"name": ""}


def measurements_to_dict(m: ModelMeasurements) -> dict[str, Any]:
    return {
        "architecture": arch_to_dict(m.arch),
        "dtype": m.dtype,
        "tensorParallel": m.tensor_parallel,
        "layerBodies": {kind: _components_to_list(t) for kind, t in m.layer_bodies.items()},
        "head": _components_to_list(m.head),
        "headScale": m.head_scale,
        "attention": [
            {
                "batch": a.batch,
                "contextTokens": a.context_tokens,
                "seconds": a.seconds,
                "extrapolated": a.extrapolated,
                "measurement": _measurement_to_dict(a.measurement),
            }
            for a in m.attention
        ],
        "allReduce": _components_to_list(m.all_reduce),
        "allReduceMeasured": m.all_reduce_measured,
        "notes": list(m.notes),
    }


def measurements_from_dict(d: Mapping[str, Any]) -> ModelMeasurements:
    return ModelMeasurements(
        arch=arch_from_dict(d["architecture"]),
        dtype=d["dtype"],
        tensor_parallel=d["tensorParallel"],
        layer_bodies={kind: _components_from_list(t) for kind, t in d["layerBodies"].items()},
        head=_components_from_list(d["head"]),
        head_scale=d["headScale"],
        attention=tuple(
            AttentionTime(
                batch=a["batch"],
                context_tokens=a["contextTokens"],
                seconds=a["seconds"],
                extrapolated=a["extrapolated"],
                measurement=_measurement_from_dict(a.get("measurement")),
            )
            for a in d["attention"]
        ),
        all_reduce=_components_from_list(d["allReduce"]),
        all_reduce_measured=d["allReduceMeasured"],
        notes=tuple(d.get("notes", ())),
    )


# --- from measurements to plans -----------------------------------------------------------------


def predictions(m: ModelMeasurements, context_tokens: int) -> tuple[StepPrediction, ...]:
    """The predicted step at every measured batch, at one context."""
    return tuple(
        StepPrediction(batch, context_tokens, step_seconds(m, batch, context_tokens))
        for batch in m.batches
    )


def plan_models(
    m: ModelMeasurements,
    contexts: Sequence[int],
    device_memory_bytes: int,
    peak_flops_per_second: float,
    options: PlanOptions,
) -> tuple[ModelPlan, ...]:
    """One serving plan per context, with notes on any part not measured as such."""
    plans = []
    for context in contexts:
        plan = plan_model(
            m.arch,
            m.dtype,
            context,
            m.tensor_parallel,
            m.all_reduce_measured,
            predictions(m, context),
            device_memory_bytes,
            peak_flops_per_second,
            options,
        )
        extra = (*m.notes, *attention_notes(m, context), *contention_notes(m, context))
        itl = fit_plan(partial(step_seconds, m), m.batches, context, plan.max_batch_by_memory)
        plans.append(replace(plan, warnings=(*plan.warnings, *extra), itl_model=itl))
    return tuple(plans)
