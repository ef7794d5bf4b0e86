"""The ``roofline_model_*`` gauges: each profiled GPU's plan for each model of the spec.

Labels ``profile``, ``node``, ``gpu``, ``product``, ``dtype``, ``model`` and at most one more
(``bound``, ``range_end``, ``batch``, or ``limited_by``: one of three). Bounded: at most 8 models
(the CRD's limit) × GPUs per node × (1 + 2 + 2 + 3 + sweep batches) series per node, plus one
request rate per model and node; only models still in the spec are published, so a removed
model's series vanish with the next scrape. Which numbers of a plan have a gauge, and its name,
help and extra label, is the table of ``plan_fields.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from roofline_operator.decide.records import NodeRecord
from roofline_profiler.wire import plan_fields
from roofline_profiler.wire.compact_loads import CompactLoad
from roofline_profiler.wire.compact_models import CompactModelPlan
from roofline_profiler.wire.plan_fields import PlanGauge

MODEL_LABELS = ["profile", "node", "gpu", "product", "dtype", "model"]
#: Requests per second in the name, as ``_bytes_per_second``: the base unit of a rate.
MAX_REQUEST_RATE_GAUGE = "roofline_model_max_requests_per_second"


@dataclass(frozen=True)
class ModelSample:
    node: str
    gpu: str
    product: str
    dtype: str
    plan: CompactModelPlan
    #: The sweep's batches the plan's predicted step times follow (a prefix of them).
    batches: tuple[int, ...] = ()
    #: The node's largest request rate per replica for the model: on the sample of the GPU its
    #: node-wide numbers name only, so that a node publishes it once.
    load: CompactLoad | None = None


def model_samples(
    records: Mapping[str, NodeRecord], model_names: Iterable[str]
) -> tuple[ModelSample, ...]:
    """Every GPU's plan of every model in ``model_names``.

    After a restart the GPUs' own plans are gone (the status keeps the node's); the node's plan is
    then published under the GPU its node-wide numbers name.
    """
    wanted = set(model_names)
    samples: list[ModelSample] = []
    for name in sorted(records):
        result = records[name].result
        if result is None or not wanted:
            continue
        worst = result.worst_gpu()
        rates = {load.name: load for load in result.loads}
        if any(g.models for g in result.gpus):
            for gpu in result.gpus:
                batches = tuple(b for b, _ in gpu.step_seconds)
                samples.extend(
                    ModelSample(
                        name,
                        str(gpu.index),
                        gpu.product,
                        result.dtype,
                        plan,
                        batches,
                        rates.get(plan.name) if gpu.index == worst.index else None,
                    )
                    for plan in gpu.models
                    if plan.name in wanted
                )
        else:
            samples.extend(
                ModelSample(
                    name,
                    str(worst.index),
                    worst.product,
                    result.dtype,
                    plan,
                    load=rates.get(plan.name),
                )
                for plan in result.restored_models
                if plan.name in wanted
            )
    return tuple(samples)


def _family(gauge: PlanGauge) -> GaugeMetricFamily:
    labels = MODEL_LABELS if gauge.label is None else [*MODEL_LABELS, gauge.label]
    return GaugeMetricFamily(gauge.name, gauge.help, labels=labels)


def model_families(
    snapshots: Iterable[tuple[str, tuple[ModelSample, ...]]],
) -> list[GaugeMetricFamily]:
    """The model gauge families from ``(profile, samples)`` pairs: those of the rows of
    ``plan_fields.MODEL_PLAN``, then the predicted step per batch."""
    families = {gauge: _family(gauge) for gauge in plan_fields.gauges()}
    step = GaugeMetricFamily(
        "roofline_model_step_seconds",
        "Predicted decode step of the model per batch of the sweep, up to the memory bound.",
        labels=[*MODEL_LABELS, "batch"],
    )
    rate = GaugeMetricFamily(
        MAX_REQUEST_RATE_GAUGE,
        "Largest request rate one replica of the model sustains with the median TTFT and ITL "
        "within the profile's SLOs at its workload (spec.workload), per node; limited_by: ttft, "
        "itl or saturation.",
        labels=[*MODEL_LABELS, "limited_by"],
    )
    for profile, samples in snapshots:
        for s in samples:
            labels = [profile, s.node, s.gpu, s.product, s.dtype, s.plan.name]
            if s.load is not None:
                rate.add_metric([*labels, s.load.limited_by], s.load.requests_per_second)
            plan = s.plan
            for f in plan_fields.MODEL_PLAN:
                value = f.value_of(plan)
                if f.gauge is not None and value is not None:
                    extra = [] if f.gauge_label is None else [f.gauge_label]
                    families[f.gauge].add_metric([*labels, *extra], value)
            for batch, seconds in zip(s.batches, plan.step_seconds, strict=False):
                if batch <= plan.max_batch_by_memory:
                    step.add_metric([*labels, str(batch)], seconds)
    return [*families.values(), step, rate]
