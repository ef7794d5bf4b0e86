"""A node's roofline per weight format in the status: ``status.nodes[].weightFormats[]``.

The profiler measures each weight format's roofline beside the dtype's (``format_roofline.py``:
the peak of the format's GEMM, its ridge point and the minimum batch it recommends, each with its
95% interval) and sends it per node under the compact result's ``f`` (``compact_formats.py``):
per format, the numbers of the GPU that needs the largest minimum batch of it. The status keeps
each as ``{weightFormat, gpu, peakFlopsPerSecond, peakInterval, ridgePoint, ridgePointInterval,
recommendedMinBatch, recommendedMinBatchInterval}``, decimals to the status's significant digits.
They are the latest profile's, as the model plans are: no hysteresis holds them, and no node
label carries them.

Anyone who may patch a Node may edit its record annotation, so a restarted operator reads them
back through the wire's checks: a format's one canonical name (which bounds the gauges'
``weight_format`` label), plausible numbers, intervals that hold their values, each format once,
at most :data:`~roofline_profiler.core.limits.MAX_WEIGHT_FORMATS`. A damaged entry is skipped; the
node's other numbers are read on their own.

Pure module: no Kopf, no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roofline_operator.core.model_plans import STATUS_SIGNIFICANT_DIGITS
from roofline_profiler.core import limits, plausibility
from roofline_profiler.core.units import round_significant
from roofline_profiler.wire.compact_formats import CompactFormat, format_name

#: The key of a ``status.nodes[]`` entry (and of a record annotation) that holds the formats.
WEIGHT_FORMATS_KEY = "weightFormats"
#: How far a value may lie outside its interval as the status keeps both: each rounded to
#: :data:`STATUS_SIGNIFICANT_DIGITS` digits (half a unit in the last, twice).
_STATUS_ROUNDING = 10.0 ** (1 - STATUS_SIGNIFICANT_DIGITS)


def _digits(value: float) -> float:
    """A decimal as the status keeps it: a float of the status's significant digits."""
    return float(round_significant(value, digits=STATUS_SIGNIFICANT_DIGITS))


def _rounded_interval(interval: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if interval is None else (_digits(interval[0]), _digits(interval[1]))


def rounded(entry: CompactFormat) -> CompactFormat:
    """``entry`` with its decimals as the status keeps them, so that the gauges show the same
    numbers before and after a restart."""
    return CompactFormat(
        name=entry.name,
        gpu=entry.gpu,
        peak_flops_per_second=_digits(entry.peak_flops_per_second),
        peak_interval=_rounded_interval(entry.peak_interval),
        ridge_point=_digits(entry.ridge_point),
        ridge_point_interval=_rounded_interval(entry.ridge_point_interval),
        recommended_min_batch=entry.recommended_min_batch,
        recommended_min_batch_interval=entry.recommended_min_batch_interval,
    )


def _interval_to_status(interval: tuple[Any, Any] | None) -> dict[str, Any]:
    return {} if interval is None else {"low": interval[0], "high": interval[1]}


def format_to_status(entry: CompactFormat) -> dict[str, Any]:
    """One ``status.nodes[].weightFormats[]`` entry; the intervals only where the entry has them."""
    status: dict[str, Any] = {
        "weightFormat": entry.name,
        "gpu": str(entry.gpu),
        "peakFlopsPerSecond": _digits(entry.peak_flops_per_second),
        "ridgePoint": _digits(entry.ridge_point),
        "recommendedMinBatch": entry.recommended_min_batch,
    }
    intervals: dict[str, tuple[Any, Any] | None] = {
        "peakInterval": _rounded_interval(entry.peak_interval),
        "ridgePointInterval": _rounded_interval(entry.ridge_point_interval),
        "recommendedMinBatchInterval": entry.recommended_min_batch_interval,
    }
    for key, interval in intervals.items():
        if interval is not None:
            status[key] = _interval_to_status(interval)
    return status


def formats_to_status(formats: tuple[CompactFormat, ...]) -> dict[str, Any]:
    """``{weightFormats: [...]}``, or nothing for a node without formats."""
    if not formats:
        return {}
    return {WEIGHT_FORMATS_KEY: [format_to_status(f) for f in formats]}


def _gpu(raw: Any) -> int:
    if not isinstance(raw, str) or not raw.isdigit() or len(raw) > 2:
        raise plausibility.ImplausibleValue(f"field 'gpu' = {str(raw)[:20]!r} is not an index")
    return plausibility.integer(int(raw), "device index", "gpu")


def _measured_interval(
    raw: Mapping[str, Any], key: str, quantity: str, value: float
) -> tuple[float, float] | None:
    """The interval under ``key`` of a decimal, holding its value give or take the status's
    rounding; ``None`` where the entry has none (a status trimmed to its size budget)."""
    if key not in raw:
        return None
    block = raw[key]
    if not isinstance(block, Mapping):
        raise TypeError(f"field {key!r} is not an object")
    low = plausibility.interval_end(block.get("low"), quantity, f"{key}.low")
    high = plausibility.interval_end(block.get("high"), quantity, f"{key}.high")
    slack = _STATUS_ROUNDING * value
    if not low - slack <= value <= high + slack:
        raise plausibility.ImplausibleValue(f"field {key!r} excludes its value")
    return (low, high)


def _batch_interval(raw: Mapping[str, Any], value: int) -> tuple[int, int] | None:
    key = "recommendedMinBatchInterval"
    if key not in raw:
        return None
    block = raw[key]
    if not isinstance(block, Mapping):
        raise TypeError(f"field {key!r} is not an object")
    low = plausibility.integer(block.get("low"), "min batch", f"{key}.low")
    high = plausibility.integer(block.get("high"), "min batch", f"{key}.high")
    if not low <= value <= high:
        raise plausibility.ImplausibleValue(f"field {key!r} excludes its value")
    return (low, high)


def format_from_status(raw: Any) -> CompactFormat:
    """One entry read back; ``ValueError`` (``ImplausibleValue``, ``CompactDecodeError``) or
    ``TypeError`` when it is damaged."""
    if not isinstance(raw, Mapping):
        raise TypeError(f"an entry of {WEIGHT_FORMATS_KEY} is not an object")
    peak = plausibility.number(raw.get("peakFlopsPerSecond"), "peak", "peakFlopsPerSecond")
    ridge = plausibility.number(raw.get("ridgePoint"), "ridge point", "ridgePoint")
    batch = plausibility.integer(raw.get("recommendedMinBatch"), "min batch", "recommendedMinBatch")
    return CompactFormat(
        name=format_name(raw.get("weightFormat"), WEIGHT_FORMATS_KEY),
        gpu=_gpu(raw.get("gpu")),
        peak_flops_per_second=peak,
        peak_interval=_measured_interval(raw, "peakInterval", "peak", peak),
        ridge_point=ridge,
        ridge_point_interval=_measured_interval(raw, "ridgePointInterval", "ridge point", ridge),
        recommended_min_batch=batch,
        recommended_min_batch_interval=_batch_interval(raw, batch),
    )


def formats_from_status(raw: Any) -> tuple[CompactFormat, ...]:
    """The formats of a ``status.nodes[].weightFormats`` list: each damaged entry skipped, each
    format once (its first entry), at most :data:`~roofline_profiler.core.limits.
    MAX_WEIGHT_FORMATS` entries read."""
    if not isinstance(raw, list):
        return ()
    found: dict[str, CompactFormat] = {}
    for entry in raw[: limits.MAX_WEIGHT_FORMATS]:
        try:
            read = format_from_status(entry)
        except (TypeError, ValueError):
            continue
        found.setdefault(read.name, read)
    return tuple(found.values())
