"""The ``roofline_model_*`` gauges: each profiled GPU's plan for each model of the spec.

Labels ``profile``, ``node``, ``gpu``, ``product``, ``dtype``, ``model`` and at most one more
(``bound``, ``range_end``, ``batch``, or ``limited_by``: one of three). Bounded: at most 8 models
(the CRD's limit) × GPUs per node × (1 + 2 + 2 + 3 + sweep batches) series per node, plus one
request rate per model and node; only models still in the spec are published, so a removed
model's series vanish with the next scrape. Which numbers of a plan have a gauge, and its name,
help and extra label, is the table of ``plan_fields.py``.

Beside them, one ``roofline_model_format_info`` series per valid model of a profile says how it
is served: labels ``profile``, ``model``, ``weight_format`` (the format's family, one of
``weight_formats.FAMILIES``, or ``dtype``) and ``kv_cache_dtype`` (one of
``weight_formats.KV_CACHE_DTYPES``), value 1. Both value sets are fixed, so the family adds at
most 8 series a profile; the gauges above keep their labels (a new label would change every
series' identity), and a query joins the info series on ``profile`` and ``model``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from roofline_operator.decide.model_sources import ServedFormat
from roofline_operator.decide.records import NodeRecord
from roofline_profiler.core.weight_formats import parse_weight_format
from roofline_profiler.wire import plan_fields
from roofline_profiler.wire.compact_loads import CompactLoad
from roofline_profiler.wire.compact_models import CompactModelPlan
from roofline_profiler.wire.plan_fields import PlanGauge

MODEL_LABELS = ["profile", "node", "gpu", "product", "dtype", "model"]
#: Requests per second in the name, as ``_bytes_per_second``: the base unit of a rate.
MAX_REQUEST_RATE_GAUGE = "roofline_model_max_requests_per_second"
FORMAT_INFO_GAUGE = "roofline_model_format_info"
FORMAT_LABELS = ["profile", "model", "weight_format", "kv_cache_dtype"]
#: ``weight_format`` of a model whose weights are in its dtype.
DTYPE_WEIGHTS = "dtype"


@dataclass(frozen=True)
class FormatSample:
    """How one model of a profile is served, as bounded label values."""

    model: str
    #: The format's family (``awq-int4``, ``gptq-int8``, ...) or :data:`DTYPE_WEIGHTS`.
    weight_format: str
    kv_cache_dtype: str


def format_samples(
    model_names: Iterable[str], formats: Mapping[str, ServedFormat]
) -> tuple[FormatSample, ...]:
    """One sample per model in ``model_names``, served as ``formats`` says (a model it lacks:
    in its dtype, its cache ``auto``). The family, not the format's full name, labels it: the
    group size and zero points would multiply the values for no query that needs them."""
    samples = []
    for name in model_names:
        served = formats.get(name, ServedFormat())
        family = (
            parse_weight_format(served.weight_format).family
            if served.weight_format
            else DTYPE_WEIGHTS
        )
        samples.append(FormatSample(name, family, served.kv_cache_dtype))
    return tuple(samples)


def format_family(snapshots: Iterable[tuple[str, tuple[FormatSample, ...]]]) -> GaugeMetricFamily:
    """``roofline_model_format_info`` from ``(profile, samples)`` pairs."""
    info = GaugeMetricFamily(
        FORMAT_INFO_GAUGE,
        "1 per model of the profile, how it is served: weight_format the family of its weights' "
        "quantized format (dtype: unquantized), kv_cache_dtype its KV cache's (auto: the dtype).",
        labels=FORMAT_LABELS,
    )
    for profile, samples in snapshots:
        for s in samples:
            info.add_metric([profile, s.model, s.weight_format, s.kv_cache_dtype], 1)
    return info


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
