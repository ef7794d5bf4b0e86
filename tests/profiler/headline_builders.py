"""Headline numbers for records built by hand: the ``numbers`` of a ``CompactDevice``,
``GpuResult`` or ``DeviceResult`` by name, and copies of a record with some of them changed.
Torch-free, so the emulated cluster's profiler imports it too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from roofline_profiler.wire import fields

#: The headline numbers' names in the records' ``numbers`` (``fields.DEVICE_HEADLINE``).
BANDWIDTH, PEAK, RIDGE, MIN_BATCH = (
    "bandwidth_bytes_per_second",
    "peak_flops_per_second",
    "ridge_point",
    "recommended_min_batch",
)


def headline_numbers(
    bandwidth: float,
    peak: float,
    ridge: float,
    min_batch: int,
    intervals: Sequence[tuple[float, float]] | None = None,
) -> fields.Numbers:
    """A record's headline numbers, with their intervals in the same order (or none)."""
    values = {BANDWIDTH: bandwidth, PEAK: peak, RIDGE: ridge, MIN_BATCH: min_batch}
    ends: Sequence[tuple[float, float] | None] = intervals or (None,) * len(values)
    return {
        name: fields.Estimate(value, interval)
        for (name, value), interval in zip(values.items(), ends, strict=True)
    }


def with_values(record: Any, **values: float) -> Any:
    """``record`` with the named headline numbers' values replaced, their intervals kept."""
    numbers = {name: replace(record.numbers[name], value=v) for name, v in values.items()}
    return replace(record, numbers={**record.numbers, **numbers})


def with_number_intervals(record: Any, **intervals: tuple[float, float] | None) -> Any:
    """``record`` with the named headline numbers' intervals replaced (``None``: none)."""
    numbers = {name: replace(record.numbers[name], interval=iv) for name, iv in intervals.items()}
    return replace(record, numbers={**record.numbers, **numbers})


def without_intervals(record: Any) -> Any:
    """``record`` with none of its headline numbers' intervals."""
    return replace(record, numbers=fields.without_intervals(record.numbers))


def interval_of(record: Any, name: str) -> tuple[float, float] | None:
    """The interval of one headline number of ``record``."""
    interval: tuple[float, float] | None = record.numbers[name].interval
    return interval


def with_all_intervals(record: Any, intervals: Sequence[tuple[float, float]] | None) -> Any:
    """``record`` with the intervals of bandwidth, peak, ridge point and min batch, in that
    order (``None``: none)."""
    if intervals is None:
        return without_intervals(record)
    return with_number_intervals(
        record, **dict(zip((BANDWIDTH, PEAK, RIDGE, MIN_BATCH), intervals, strict=True))
    )


#: Intervals as wide as the compact format can carry: bandwidth, peak, ridge point, min batch.
WIDE = ((1.0, 9.9e15), (1.0, 9.9e18), (1e-3, 9.9e5), (1, 65536))
