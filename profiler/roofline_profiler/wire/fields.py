"""The headline numbers of a device, each declared once: what it is called in every published form.

A GPU's headline numbers (memory bandwidth, peak FLOP/s, ridge point, recommended minimum batch)
travel from the profiler's result to the compact termination message, the operator's status
entry and record annotation, and its gauges. :data:`DEVICE_HEADLINE` names each one once: how the
measured roofline gives it, the camelCase key of the JSON document, the status and the record
annotation, the compact format's position, unit and digits, the plausibility quantity its readers
check, and its gauges.

Every record that carries the numbers (the profiler's ``DeviceResult`` and ``CompactDevice``, the
operator's ``GpuResult``, ``Headline`` and metric sample, a host state's ``Headline``) holds them
as one mapping, :data:`Numbers`: each row's :class:`Estimate` by the row's ``attribute``. The
JSON document (``result.py``), the compact encoder and reader (``compact.py``,
``compact_decode.py``) and the operator's status, record annotation, gauges and hysteresis
(``node_results.py``, ``metrics.py``, ``hysteresis.py``) walk the table instead of naming the
numbers, so a new published number is one more row and its measurement (the compact GPU arrays
grow with the table, which makes a new compact version). :class:`HeadlineNumbers` reads the
numbers by name, for the code that needs one of them as such (labels, the report, the plot).

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from roofline_profiler.core import plausibility
from roofline_profiler.wire.compact_fields import (
    BANDWIDTH_UNIT,
    PEAK_UNIT,
    SIGNIFICANT_DIGITS,
    in_unit,
    measured,
    whole,
)


@dataclass(frozen=True)
class Estimate:
    """A measured number with its 95% interval ``(low, high)`` (``None`` when the record has
    none) and the kernel or workload that gave it (``None`` when the form does not say)."""

    value: float
    interval: tuple[float, float] | None = None
    source: str | None = None


#: A record's headline numbers: each row's estimate by the row's ``attribute``.
Numbers = dict[str, Estimate]


def _ceiling(ceiling: Any) -> Estimate:
    """A ceiling of the measured roofline (``ceilings.Ceiling``: value, interval, kernel)."""
    return Estimate(ceiling.value, ceiling.interval, ceiling.kernel)


@dataclass(frozen=True)
class HeadlineField:
    """One headline number of a device and its name in every published form."""

    #: The number's name in the records' :data:`Numbers`.
    attribute: str
    #: The plausibility table's quantity (``plausibility.py``), which is also its name in
    #: messages and in the compact format's list of positions.
    quantity: str
    #: The key of the value in the JSON document, the status entry and the record annotation.
    key: str
    #: The key of its interval ``{low, high}`` there.
    interval_key: str
    #: The gauge of the value and its help text.
    metric: str
    metric_help: str
    #: The gauge of its interval (label ``bound``: ``low``, ``high``) and its help text.
    interval_metric: str
    interval_help: str
    #: Its measurement: the number, its interval and source as the measured roofline
    #: (``ceilings.DeviceRoofline``, which the operator never imports) gives them.
    measure: Callable[[Any], Estimate]
    #: The unit of the compact format (the value is divided by it, then rounded).
    wire_unit: float = 1.0
    #: Significant digits on the wire; ``None`` for a whole number, written exactly, whose
    #: interval travels as two whole numbers instead of relative widths.
    digits: int | None = SIGNIFICANT_DIGITS
    #: The JSON document's key of the kernel or workload that gave the number; ``None`` when the
    #: document names none.
    source_key: str | None = None

    @property
    def is_whole(self) -> bool:
        return self.digits is None

    @property
    def interval_ends(self) -> tuple[str, str]:
        """The names of the interval's two positions on the wire, after the quantity's."""
        return ("low", "high") if self.is_whole else ("below", "above")

    def estimate_of(self, record: Any) -> Estimate:
        """The number of a record that carries :data:`Numbers` as ``numbers``."""
        estimate: Estimate = record.numbers[self.attribute]
        return estimate

    def value_of(self, record: Any) -> Any:
        return self.estimate_of(record).value

    def read(self, raw: Any, name: str) -> float:
        """The number as a status entry or record annotation holds it, in base units, checked
        against the plausibility table; ``name`` is the field in the message."""
        if self.is_whole:
            return plausibility.integer(raw, self.quantity, name)
        return plausibility.number(raw, self.quantity, name)

    def read_interval_end(self, raw: Any, name: str) -> float:
        """One end of the number's interval as a status entry holds it, checked likewise."""
        if self.is_whole:
            return plausibility.integer(raw, self.quantity, name)
        return plausibility.interval_end(raw, self.quantity, name)

    def to_json(self, number: Estimate) -> dict[str, Any]:
        """The number's entries of the JSON document: value, interval ``{low, high}``, source."""
        document: dict[str, Any] = {self.key: number.value}
        if number.interval is not None:
            document[self.interval_key] = {"low": number.interval[0], "high": number.interval[1]}
        if self.source_key is not None:
            document[self.source_key] = number.source
        return document

    def from_json(self, document: Mapping[str, Any], old_source: str | None) -> Estimate:
        """The number of a JSON document. A document older than intervals gets the bare value
        as its interval; one older than sources, ``old_source``."""
        value = document[self.key]
        interval = document.get(self.interval_key)
        source = None
        if self.source_key is not None:
            source = document.get(self.source_key, old_source)
            if source is None:
                raise KeyError(self.source_key)
        return Estimate(
            value,
            (value, value) if interval is None else (interval["low"], interval["high"]),
            source,
        )

    def to_wire(self, value: float) -> float | int:
        """The value as the compact format writes it."""
        if self.digits is None:
            return value
        return in_unit(value, self.wire_unit, self.digits)

    def wire_value(self, value: float) -> float:
        """The value as a reader of the compact format gets it back, in base units."""
        return float(self.to_wire(value)) * self.wire_unit

    def from_wire(self, raw: Any, where: str) -> float:
        """The value read from the compact format, checked against the plausibility table."""
        if self.is_whole:
            return whole(raw, self.quantity, self.quantity, where)
        return measured(raw, self.quantity, self.quantity, where, self.wire_unit)


#: The headline numbers of a device, in the order of every published form.
DEVICE_HEADLINE: tuple[HeadlineField, ...] = (
    HeadlineField(
        attribute="bandwidth_bytes_per_second",
        quantity="bandwidth",
        key="bandwidthBytesPerSecond",
        interval_key="bandwidthInterval",
        wire_unit=BANDWIDTH_UNIT,
        metric="roofline_memory_bandwidth_bytes_per_second",
        metric_help="Measured device memory bandwidth.",
        interval_metric="roofline_memory_bandwidth_interval_bytes_per_second",
        interval_help="95% interval of the published memory bandwidth.",
        measure=lambda roofline: _ceiling(roofline.slope),
        source_key="bandwidthKernel",
    ),
    HeadlineField(
        attribute="peak_flops_per_second",
        quantity="peak",
        key="peakFlopsPerSecond",
        interval_key="peakInterval",
        wire_unit=PEAK_UNIT,
        metric="roofline_peak_flops_per_second",
        metric_help="Measured peak matrix FLOP/s.",
        interval_metric="roofline_peak_interval_flops_per_second",
        interval_help="95% interval of the published peak matrix FLOP/s.",
        measure=lambda roofline: _ceiling(roofline.peak),
        source_key="peakKernel",
    ),
    HeadlineField(
        attribute="ridge_point",
        quantity="ridge point",
        key="ridgePoint",
        interval_key="ridgePointInterval",
        metric="roofline_ridge_point",
        metric_help="Arithmetic intensity (FLOP per byte) where compute and memory bounds meet.",
        interval_metric="roofline_ridge_point_interval",
        interval_help="95% interval of the published ridge point.",
        measure=lambda roofline: Estimate(roofline.ridge_point, roofline.ridge_point_interval),
    ),
    HeadlineField(
        attribute="recommended_min_batch",
        quantity="min batch",
        key="recommendedMinBatch",
        interval_key="recommendedMinBatchInterval",
        digits=None,
        metric="roofline_recommended_min_batch",
        metric_help="Smallest decode batch that reaches the efficiency threshold.",
        interval_metric="roofline_recommended_min_batch_interval",
        interval_help="95% interval of the published recommended min batch.",
        measure=lambda roofline: Estimate(
            roofline.recommendation.batch,
            roofline.recommended_min_batch_interval,
            roofline.recommendation.source,
        ),
        source_key="recommendedMinBatchSource",
    ),
)


def gpu_fields() -> tuple[str, ...]:
    """The positions of a GPU's array in the compact format (version 2), named as error messages
    name them: index, name, the headline numbers, the sweep's step times."""
    return ("index", "name", *(f.quantity for f in DEVICE_HEADLINE), "step times")


def interval_fields() -> tuple[str, ...]:
    """The positions of a GPU's interval array under ``u``: each headline number's two ends."""
    return tuple(f"{f.quantity} {end}" for f in DEVICE_HEADLINE for end in f.interval_ends)


def measured_numbers(roofline: Any) -> Numbers:
    """Every headline number as the measured roofline (``ceilings.DeviceRoofline``) gives it."""
    return {f.attribute: f.measure(roofline) for f in DEVICE_HEADLINE}


def without_sources(numbers: Mapping[str, Estimate]) -> Numbers:
    """The numbers with their intervals, without the sources (the compact format has none)."""
    return {name: Estimate(e.value, e.interval) for name, e in numbers.items()}


def without_intervals(numbers: Mapping[str, Estimate]) -> Numbers:
    """The bare numbers."""
    return {name: Estimate(e.value) for name, e in numbers.items()}


def has_intervals(numbers: Mapping[str, Estimate]) -> bool:
    """Whether every number has its interval (the forms carry all of them or none)."""
    return all(e.interval is not None for e in numbers.values())


class HeadlineNumbers:
    """The headline numbers of a record that holds them as ``numbers``, by name: for the code
    that reads one of them as such (labels, the report, the plot). A new number needs no
    property here unless such code reads it."""

    numbers: Numbers

    @property
    def bandwidth_bytes_per_second(self) -> float:
        return self.numbers["bandwidth_bytes_per_second"].value

    @property
    def peak_flops_per_second(self) -> float:
        return self.numbers["peak_flops_per_second"].value

    @property
    def ridge_point(self) -> float:
        return self.numbers["ridge_point"].value

    @property
    def recommended_min_batch(self) -> int:
        return int(self.numbers["recommended_min_batch"].value)
