"""The headline numbers of a device, each declared once: what it is called in every published form.

A GPU's headline numbers (memory bandwidth, peak FLOP/s, ridge point, recommended minimum batch)
travel from the profiler's result to the compact termination message, the operator's status
entry and record annotation, and its gauges. :data:`DEVICE_HEADLINE` names each one once: the
records' attribute, the camelCase key of the JSON document, the status and the record annotation,
the compact format's position, unit and digits, the plausibility quantity its readers check, and
its gauges. The JSON document (``result.py``), the compact encoder and reader (``compact.py``,
``compact_decode.py``) and the operator's status, record annotation, gauges and hysteresis
(``node_results.py``, ``metrics.py``, ``hysteresis.py``) walk the table instead of naming the
numbers, so a new published number is one more row (and its attribute on the records that carry
it; the compact GPU arrays grow with the table, which makes a new compact version).

A number and its 95% interval and source travel together as an :class:`Estimate`.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    """A measured number with its 95% interval ``(low, high)`` (``None`` when the result has
    none) and the kernel or workload that gave it (``None`` when the form does not say)."""

    value: float
    interval: tuple[float, float] | None = None
    source: str | None = None


@dataclass(frozen=True)
class HeadlineField:
    """One headline number of a device and its name in every published form."""

    #: The attribute of the records that hold the value (``DeviceResult``, ``CompactDevice``, the
    #: operator's ``GpuResult``, ``Headline`` and metric sample).
    attribute: str
    #: Its attribute in ``CompactIntervals``; the ``DeviceResult`` holds the interval as
    #: ``<interval_attribute>_interval``.
    interval_attribute: str
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
    #: The unit of the compact format (the value is divided by it, then rounded).
    wire_unit: float = 1.0
    #: Significant digits on the wire; ``None`` for a whole number, written exactly, whose
    #: interval travels as two whole numbers instead of relative widths.
    digits: int | None = SIGNIFICANT_DIGITS
    #: The ``DeviceResult``'s attribute and the JSON document's key of the kernel or workload
    #: that gave the number; ``None`` when the document names none.
    source_attribute: str | None = None
    source_key: str | None = None

    @property
    def is_whole(self) -> bool:
        return self.digits is None

    @property
    def interval_ends(self) -> tuple[str, str]:
        """The names of the interval's two positions on the wire, after the quantity's."""
        return ("low", "high") if self.is_whole else ("below", "above")

    def value_of(self, record: Any) -> Any:
        return getattr(record, self.attribute)

    def interval_of(self, intervals: Any) -> tuple[Any, Any]:
        """The number's interval in a ``CompactIntervals``."""
        low, high = getattr(intervals, self.interval_attribute)
        return (low, high)

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

    @property
    def result_interval_attribute(self) -> str:
        """The ``DeviceResult``'s attribute of the interval, a field of its own there."""
        return f"{self.interval_attribute}_interval"

    def result_interval_of(self, result: Any) -> tuple[Any, Any]:
        low, high = getattr(result, self.result_interval_attribute)
        return (low, high)

    def result_estimate(self, result: Any) -> Estimate:
        """The number of a ``DeviceResult`` with its interval and source."""
        source = None if self.source_attribute is None else getattr(result, self.source_attribute)
        return Estimate(self.value_of(result), self.result_interval_of(result), source)

    def to_json(self, number: Estimate) -> dict[str, Any]:
        """The number's entries of the JSON document: value, interval ``{low, high}``, source."""
        document: dict[str, Any] = {self.key: number.value}
        if number.interval is not None:
            document[self.interval_key] = {"low": number.interval[0], "high": number.interval[1]}
        if self.source_key is not None:
            document[self.source_key] = number.source
        return document

    def from_json(self, document: Mapping[str, Any], old_source: str | None) -> dict[str, Any]:
        """The ``DeviceResult``'s fields of the number, by attribute. A document older than
        intervals gets the bare value as its interval; one older than sources, ``old_source``."""
        value = document[self.key]
        interval = document.get(self.interval_key)
        entries = {
            self.attribute: value,
            self.result_interval_attribute: (
                (value, value) if interval is None else (interval["low"], interval["high"])
            ),
        }
        if self.source_attribute is not None and self.source_key is not None:
            source = document.get(self.source_key, old_source)
            if source is None:
                raise KeyError(self.source_key)
            entries[self.source_attribute] = source
        return entries

    def estimate_of(self, record: Any) -> Estimate:
        """The number of a record that holds its intervals as ``intervals`` (a
        ``CompactIntervals``, or ``None`` for none), with its interval."""
        intervals = record.intervals
        interval = None if intervals is None else self.interval_of(intervals)
        return Estimate(self.value_of(record), interval)

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
        interval_attribute="bandwidth",
        quantity="bandwidth",
        key="bandwidthBytesPerSecond",
        interval_key="bandwidthInterval",
        wire_unit=BANDWIDTH_UNIT,
        metric="roofline_memory_bandwidth_bytes_per_second",
        metric_help="Measured device memory bandwidth.",
        interval_metric="roofline_memory_bandwidth_interval_bytes_per_second",
        interval_help="95% interval of the published memory bandwidth.",
        source_attribute="bandwidth_kernel",
        source_key="bandwidthKernel",
    ),
    HeadlineField(
        attribute="peak_flops_per_second",
        interval_attribute="peak",
        quantity="peak",
        key="peakFlopsPerSecond",
        interval_key="peakInterval",
        wire_unit=PEAK_UNIT,
        metric="roofline_peak_flops_per_second",
        metric_help="Measured peak matrix FLOP/s.",
        interval_metric="roofline_peak_interval_flops_per_second",
        interval_help="95% interval of the published peak matrix FLOP/s.",
        source_attribute="peak_kernel",
        source_key="peakKernel",
    ),
    HeadlineField(
        attribute="ridge_point",
        interval_attribute="ridge_point",
        quantity="ridge point",
        key="ridgePoint",
        interval_key="ridgePointInterval",
        metric="roofline_ridge_point",
        metric_help="Arithmetic intensity (FLOP per byte) where compute and memory bounds meet.",
        interval_metric="roofline_ridge_point_interval",
        interval_help="95% interval of the published ridge point.",
    ),
    HeadlineField(
        attribute="recommended_min_batch",
        interval_attribute="recommended_min_batch",
        quantity="min batch",
        key="recommendedMinBatch",
        interval_key="recommendedMinBatchInterval",
        digits=None,
        metric="roofline_recommended_min_batch",
        metric_help="Smallest decode batch that reaches the efficiency threshold.",
        interval_metric="roofline_recommended_min_batch_interval",
        interval_help="95% interval of the published recommended min batch.",
        source_attribute="recommended_min_batch_source",
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


def values(record: Any) -> dict[str, Any]:
    """The headline numbers of ``record`` by attribute: the keyword arguments of another record
    that carries them."""
    return {f.attribute: f.value_of(record) for f in DEVICE_HEADLINE}
