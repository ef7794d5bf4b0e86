"""The operator's result of one node: built from a pod's compact result or from the status.

The compact result is the wire format between the profiler pod and the operator; this is what the
operator keeps, publishes in ``status.nodes[]``, in node labels and in metrics. A restarted operator
rebuilds it from the status entry, which holds everything but the sweep's step times (those are for
metrics, and ``status`` must stay small for a thousand nodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from roofline_operator.core import model_loads, model_plans, node_formats
from roofline_operator.core.names import format_time, parse_time
from roofline_profiler.core import plausibility
from roofline_profiler.core.units import round_significant
from roofline_profiler.wire import fields
from roofline_profiler.wire.compact import CompactProfile
from roofline_profiler.wire.compact_formats import CompactFormat
from roofline_profiler.wire.compact_loads import CompactLoad
from roofline_profiler.wire.compact_models import CompactModelPlan
from roofline_profiler.wire.fields import Estimate


@dataclass(frozen=True)
class GpuResult(fields.HeadlineNumbers):
    index: int
    product: str
    #: The headline numbers (``fields.DEVICE_HEADLINE``) with their 95% intervals as the status
    #: keeps them; without intervals when the profiler sent none (version 1).
    numbers: fields.Numbers
    #: ``(batch, seconds)`` of the sweep; empty when rebuilt from the status.
    step_seconds: tuple[tuple[int, float], ...] = ()
    #: The GPU's model plans; empty when rebuilt from the status (the node keeps its own).
    models: tuple[CompactModelPlan, ...] = ()
    #: The profile's warning codes for this GPU; empty when rebuilt from the status (the record
    #: keeps the latest profile's).
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeResult:
    """One successful profile of a node, under one spec digest."""

    spec_hash: str
    #: Unix seconds when the profiler finished measuring.
    profiled_at: float
    duration_seconds: float
    dtype: str
    shape_k: int
    shape_n: int
    gpus: tuple[GpuResult, ...]
    #: The node's model plans as rebuilt from the status; :meth:`node_models` prefers the GPUs'.
    restored_models: tuple[CompactModelPlan, ...] = ()
    #: The kind of device measured (:data:`DEVICE_KINDS`), by the backend the result names
    #: (``cpu``, else a GPU's), which ``asked.py`` checked is the one its pod was given; ``None``
    #: for a result restored from a status written before the operator kept it (the profile's
    #: ``spec.device`` stands for it: see :meth:`device_or`).
    device: str | None = None
    #: Each model's largest request rate per replica on the node (``model_loads``); none
    #: without a planned workload.
    loads: tuple[CompactLoad, ...] = ()
    #: Each weight format's roofline on the node (``node_formats``), the latest profile's; none
    #: without formats.
    weight_formats: tuple[CompactFormat, ...] = ()

    def device_or(self, spec_device: str) -> str:
        """The device kind the numbers describe: the result's own, else ``spec_device``."""
        return self.device or spec_device

    def node_models(self) -> tuple[CompactModelPlan, ...]:
        """Each model's plan for the node as a whole (see :func:`model_plans.node_plans`)."""
        if any(g.models for g in self.gpus):
            return model_plans.node_plans(g.models for g in self.gpus)
        return self.restored_models

    def warnings(self) -> tuple[str, ...]:
        """Every GPU's warning codes, each once, in order of appearance."""
        return tuple(dict.fromkeys(code for g in self.gpus for code in g.warnings))

    def worst_gpu(self) -> GpuResult:
        """The GPU a node-wide label must describe: the one needing the largest batch.

        Ties go to the lower bandwidth, then the lower index, so the choice is stable.
        """
        return min(
            self.gpus,
            key=lambda g: (-g.recommended_min_batch, g.bandwidth_bytes_per_second, g.index),
        )


#: The kinds of device a result describes: ``spec.device``'s values.
DEVICE_KINDS = ("gpu", "cpu")


def device_kind(backend: str | None, asked_device: str | None = None) -> str:
    """``cpu`` for a result measured on the CPU backend, else ``gpu``; a result that names no
    backend (compact versions 2 and 3) was measured on the device its pod asked for (``cpu``
    or ``cuda``, on which the profiler refuses to start anywhere else)."""
    if backend is None:
        return "cpu" if asked_device == "cpu" else "gpu"
    return "cpu" if backend == "cpu" else "gpu"


def from_compact(
    profile: CompactProfile, spec_hash: str, asked_device: str | None = None
) -> NodeResult:
    """The result a profiler pod reported, measured under ``spec_hash``; ``asked_device`` is
    the ``--device`` of its pod's command."""
    return NodeResult(
        spec_hash=spec_hash,
        profiled_at=profile.created_at,
        duration_seconds=profile.duration_seconds,
        dtype=profile.dtype,
        shape_k=profile.shape_k,
        shape_n=profile.shape_n,
        gpus=tuple(
            GpuResult(
                index=d.index,
                product=d.name,
                numbers=rounded_intervals(d.numbers),
                step_seconds=tuple(zip(profile.batches, d.step_seconds, strict=False)),
                models=d.models,
                warnings=d.warnings,
            )
            for d in profile.devices
        ),
        device=device_kind(profile.backend, asked_device),
        loads=profile.loads,
        weight_formats=tuple(node_formats.rounded(f) for f in profile.weight_formats),
    )


def _gpu_numbers(gpu: GpuResult) -> dict[str, Any]:
    return {**_numbers_to_status(gpu), **intervals_to_status(gpu.numbers)}


def _numbers_to_status(record: Any) -> dict[str, Any]:
    """The headline numbers of a ``GpuResult`` or ``Headline`` under their status keys."""
    return {f.key: f.value_of(record) for f in fields.DEVICE_HEADLINE}


def _digits(value: float) -> float:
    """An interval's end as the status keeps it: a float (``5.0``, never ``5``) of
    :data:`model_plans.STATUS_SIGNIFICANT_DIGITS` significant digits."""
    return float(round_significant(value, digits=model_plans.STATUS_SIGNIFICANT_DIGITS))


def _status_interval(f: fields.HeadlineField, interval: tuple[Any, Any]) -> tuple[Any, Any]:
    """A measured number's interval rounded as the status keeps it; a whole number's as it is."""
    return interval if f.is_whole else (_digits(interval[0]), _digits(interval[1]))


def rounded_intervals(numbers: fields.Numbers) -> fields.Numbers:
    """``numbers`` with their intervals as the status keeps them, so a restarted operator
    compares the same ones."""
    rounded = dict(numbers)
    for f in fields.DEVICE_HEADLINE:
        number = numbers[f.attribute]
        if number.interval is not None:
            rounded[f.attribute] = replace(number, interval=_status_interval(f, number.interval))
    return rounded


def intervals_to_status(numbers: fields.Numbers) -> dict[str, Any]:
    """Each headline number's interval ``{low, high}`` under its status key
    (``bandwidthInterval``, ...); nothing without intervals."""
    status = {}
    for f in fields.DEVICE_HEADLINE:
        interval = numbers[f.attribute].interval
        if interval is None:
            return {}  # the forms carry every interval or none
        low, high = _status_interval(f, interval)
        status[f.interval_key] = {"low": low, "high": high}
    return status


def numbers_from_status(raw: Mapping[str, Any]) -> fields.Numbers:
    """The headline numbers of a status entry (or device entry) under their status keys, each
    checked, with their intervals when the entry holds every one of them."""
    values = _values_from_status(raw)
    if not all(isinstance(raw.get(f.interval_key), Mapping) for f in fields.DEVICE_HEADLINE):
        return values
    numbers = {
        f.attribute: replace(values[f.attribute], interval=_interval_from_status(f, raw))
        for f in fields.DEVICE_HEADLINE
    }
    _check_intervals_hold_values(numbers)
    return numbers


#: How far a value may lie outside its interval as the status keeps both: each rounded to
#: :data:`model_plans.STATUS_SIGNIFICANT_DIGITS` digits (half a unit in the last, twice).
_STATUS_ROUNDING = 10.0 ** (1 - model_plans.STATUS_SIGNIFICANT_DIGITS)


def _check_intervals_hold_values(numbers: fields.Numbers) -> None:
    """Every interval holds its value, as every interval the operator writes does (a number
    that holds keeps the latest profile's half-widths around it, ``hysteresis.py``)."""
    for f in fields.DEVICE_HEADLINE:
        number = numbers[f.attribute]
        low, high = number.interval or (number.value, number.value)
        slack = 0.0 if f.is_whole else _STATUS_ROUNDING * number.value
        if not low - slack <= number.value <= high + slack:
            raise plausibility.ImplausibleValue(f"field {f.interval_key!r} excludes its value")


def _values_from_status(raw: Mapping[str, Any]) -> fields.Numbers:
    """The headline numbers under their status keys, each checked, without intervals."""
    return {f.attribute: Estimate(f.read(raw[f.key], f.key)) for f in fields.DEVICE_HEADLINE}


def _interval_from_status(f: fields.HeadlineField, raw: Mapping[str, Any]) -> tuple[float, float]:
    key = f.interval_key
    low = f.read_interval_end(raw[key]["low"], f"{key}.low")
    high = f.read_interval_end(raw[key]["high"], f"{key}.high")
    if low > high:
        raise plausibility.ImplausibleValue(f"field {key!r} ends below its start")
    return (low, high)


@dataclass(frozen=True)
class Headline(fields.HeadlineNumbers):
    """A node's headline numbers as one profile measured them: those of its worst GPU.

    For reading (``measured``, ``previous`` in the status), not for deciding, so without
    intervals: a thousand-node status stays small.
    """

    profiled_at: float
    #: The headline numbers (``fields.DEVICE_HEADLINE``), without intervals.
    numbers: fields.Numbers


def headline_of(result: NodeResult) -> Headline:
    return Headline(result.profiled_at, fields.without_intervals(result.worst_gpu().numbers))


def headline_to_status(headline: Headline) -> dict[str, Any]:
    """A ``measured`` or ``previous`` block of a status entry."""
    return {
        "profiledTime": format_time(headline.profiled_at),
        **_numbers_to_status(headline),
    }


def restored_time(raw: Any, field: str, now: float | None) -> float | None:
    """A status or record time (RFC 3339) as unix seconds inside the plausibility window of
    ``now``; ``None`` when absent. A time in the future would postpone a re-profile forever;
    one that is not a time at all is damage, not absence."""
    if raw is None:
        return None
    seconds = parse_time(raw)
    if seconds is None:
        raise plausibility.ImplausibleValue(f"field {field!r} is not an RFC 3339 time")
    return plausibility.timestamp(seconds, field, now)


def profiled_time(raw: Any, now: float | None) -> float:
    """When a result was measured: required, since a result without a time would read as
    measured in 1970 (never due again without ``reprofileInterval``, stale for good)."""
    seconds = restored_time(raw, "profiledTime", now)
    if seconds is None:
        raise plausibility.ImplausibleValue("field 'profiledTime' is missing")
    return seconds


def headline_from_status(raw: Any, now: float | None = None) -> Headline | None:
    """The block written by :func:`headline_to_status`; ``None`` when absent.

    Raises ``KeyError``, ``TypeError`` or ``ValueError`` for a block too damaged to trust: every
    number is read through the plausibility table, as the profiler's own results are.
    """
    if not isinstance(raw, Mapping):
        return None
    return Headline(
        profiled_at=profiled_time(raw.get("profiledTime"), now),
        numbers=_values_from_status(raw),
    )


def to_status(result: NodeResult) -> dict[str, Any]:
    """The result's fields of a ``status.nodes[]`` entry: the worst GPU at the top level, and
    every GPU under ``devices`` when the node has more than one."""
    worst = result.worst_gpu()
    fields: dict[str, Any] = {
        "specHash": result.spec_hash,
        "profiledTime": format_time(result.profiled_at),
        "durationSeconds": result.duration_seconds,
        "dtype": result.dtype,
        "shape": f"{result.shape_k}x{result.shape_n}",
        "product": worst.product,
        "gpu": str(worst.index),
        **_gpu_numbers(worst),
    }
    if result.device is not None:
        fields["device"] = result.device
    models = result.node_models()
    if models:
        planned = [model_plans.plan_to_status(m) for m in models]
        fields["models"] = model_loads.with_rates(planned, result.loads)
    if len(result.gpus) > 1:
        fields["devices"] = [
            {"index": g.index, "product": g.product, **_gpu_numbers(g)} for g in result.gpus
        ]
    fields.update(node_formats.formats_to_status(result.weight_formats))
    return fields


def _gpu_from_status(raw: Mapping[str, Any], node_product: Any) -> GpuResult:
    """One GPU's entry; without a product of its own (``sizes.py`` may drop it), the node's."""
    if not isinstance(raw, Mapping):
        raise plausibility.ImplausibleValue("field 'devices' holds an entry that is no object")
    product = raw.get("product") or node_product or "unknown"
    return GpuResult(
        index=plausibility.integer(raw["index"], "device index", "index"),
        product=plausibility.text(product, plausibility.DEVICE_NAME, "product"),
        numbers=numbers_from_status(raw),
    )


def _shape(text: Any) -> tuple[int, int]:
    k, _, n = str(text).partition("x")
    if not (k.isdigit() and n.isdigit() and len(k) + len(n) <= 16):
        raise plausibility.ImplausibleValue(f"field 'shape' = {str(text)[:20]!r} is not KxN")
    return (
        plausibility.integer(int(k), "dimension", "shape"),
        plausibility.integer(int(n), "dimension", "shape"),
    )


def from_status(entry: Mapping[str, Any], now: float | None = None) -> NodeResult | None:
    """The result kept in a ``status.nodes[]`` entry or a record annotation; ``None`` when the
    entry holds none.

    Raises ``KeyError``, ``TypeError`` or ``ValueError`` for an entry too damaged to trust:
    anyone who may patch a Node may edit its record annotation, so every field is read through
    the plausibility table, with times no later than ``now`` (plus clock skew).
    """
    if "specHash" not in entry or "ridgePoint" not in entry:
        return None
    devices = entry.get("devices")
    if devices is not None and not (
        isinstance(devices, list) and 0 < len(devices) <= plausibility.MAX_DEVICES
    ):
        raise plausibility.ImplausibleValue("field 'devices' is not a list of devices")
    gpus = devices or [{**entry, "index": _index(entry.get("gpu", "0"))}]
    shape_k, shape_n = _shape(entry.get("shape", "1x1"))
    return NodeResult(
        spec_hash=plausibility.text(entry["specHash"], plausibility.TOKEN, "specHash"),
        profiled_at=profiled_time(entry.get("profiledTime"), now),
        duration_seconds=plausibility.number(
            entry.get("durationSeconds", 0.0), "duration", "durationSeconds"
        ),
        dtype=plausibility.dtype(entry.get("dtype", "bfloat16")),
        shape_k=shape_k,
        shape_n=shape_n,
        gpus=tuple(_gpu_from_status(g, entry.get("product")) for g in gpus),
        restored_models=model_plans.plans_from_status(entry.get("models")),
        loads=model_loads.loads_from_status(entry.get("models")),
        weight_formats=node_formats.formats_from_status(entry.get(node_formats.WEIGHT_FORMATS_KEY)),
        device=_device_from_status(entry.get("device")),
    )


def _device_from_status(raw: Any) -> str | None:
    if raw is None:
        return None
    if raw not in DEVICE_KINDS:
        raise plausibility.ImplausibleValue(
            f"field 'device' = {str(raw)[:20]!r} is not one of {', '.join(DEVICE_KINDS)}"
        )
    return str(raw)


def _index(text: Any) -> int:
    if not isinstance(text, str) or not text.isdigit() or len(text) > 2:
        raise plausibility.ImplausibleValue(f"field 'gpu' = {str(text)[:20]!r} is not an index")
    return int(text)


#: A published bandwidth, peak or ridge point is provisional while its 95% interval reaches
#: further than this share of its value on either side (``hysteresis.py``): a first profile that
#: noisy is replaced by the first tighter one instead of being held against it.
PROVISIONAL_HALF_WIDTH = 0.10


def is_wide(value: float, interval: tuple[float, float] | None) -> bool:
    """Whether ``interval`` reaches further than :data:`PROVISIONAL_HALF_WIDTH` of ``value``."""
    if interval is None or value <= 0:
        return False
    return max(value - interval[0], interval[1] - value) > PROVISIONAL_HALF_WIDTH * value


def provisional_quantities(gpu: GpuResult) -> tuple[str, ...]:
    """The headline numbers of ``gpu`` that are provisional (intervals too wide to hold on to)."""
    wide = []
    for f in fields.DEVICE_HEADLINE:
        number = f.estimate_of(gpu)
        if not f.is_whole and is_wide(number.value, number.interval):
            wide.append(f.quantity)
    return tuple(wide)
