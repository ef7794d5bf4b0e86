"""Each weight format's roofline in the compact result: its peak, ridge point and recommended
minimum batch with their 95% intervals (``core/format_roofline.py``), per node.

They travel under their own top-level key, ``f``, one entry per format, as ``[weight format,
GPU index, peak TFLOP/s, peak low, peak high, ridge point, ridge point low, ridge point high,
min batch, min batch low, min batch high]``: a reader that does not know the key reads the rest
unchanged, and a result without it (a profile without ``--weight-format`` or quantized models,
or an older profiler) has no formats, so the compact version stays.

One entry per format, not per GPU: a node-wide number must hold on every GPU, as the node's own
``recommendedMinBatch`` does (its worst GPU's). So a format's entry is the numbers of the GPU
that needs the largest minimum batch of that format (ties: the smaller peak, then the lower
index), taken whole, so its peak, ridge point and minimum batch describe one GPU and the GPU
index says which. Nine formats then add about 650 bytes to the message, however many GPUs
the node has.

Numbers are rounded to the wire's significant digits like every other, the peak in TFLOP/s; an
interval's ends are rounded outward (its low end down, its high end up), so a decoded interval is
never narrower than the measured one and still holds its value. The minimum batch and its ends
are whole numbers, written exactly.

The format's name is its one canonical name (``weight_formats.WeightFormat.name``:
``awq-int4-g128``, ``gptq-int8-g64-asym``, ``int8-w8a8``), which the reader parses back and refuses
in any other spelling, so a label that carries it has a fixed, small set of values. The kernel
that ran the format's GEMMs, a free-form string, never travels.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

from roofline_profiler.core.limits import MAX_WEIGHT_FORMATS
from roofline_profiler.core.weight_formats import parse_weight_format
from roofline_profiler.wire.compact_fields import (
    PEAK_UNIT,
    SIGNIFICANT_DIGITS,
    CompactDecodeError,
    bounded_list,
    in_unit,
    measured,
    whole,
)

#: The positions of a format's entry under ``f``, as the reader's messages name them.
FORMAT_FIELDS = (
    "weight format",
    "device index",
    "peak",
    "peak low",
    "peak high",
    "ridge point",
    "ridge point low",
    "ridge point high",
    "min batch",
    "min batch low",
    "min batch high",
)
#: Longest format name read: the longest canonical one, ``gptq-int4-g128-asym``.
MAX_FORMAT_NAME_CHARS = 19


@dataclass(frozen=True)
class CompactFormat:
    """One weight format's roofline on a node: the numbers of the GPU ``gpu`` (see the module
    docstring). The intervals are ``None`` only where a reader's copy lost them (a status entry
    trimmed to its size budget); on the wire every entry has them."""

    #: The format's canonical name (``weight_formats.WeightFormat.name``).
    name: str
    gpu: int
    peak_flops_per_second: float
    peak_interval: tuple[float, float] | None
    #: FLOP per byte of the format's decode GEMM where its compute and memory bounds meet.
    ridge_point: float
    ridge_point_interval: tuple[float, float] | None
    recommended_min_batch: int
    recommended_min_batch_interval: tuple[int, int] | None


def compact_format(gpu: int, roofline: Any) -> CompactFormat:
    """A device's format roofline (``format_roofline.FormatRoofline``, which this module does not
    import: the operator reads this module and never imports the ceilings behind a roofline, as
    with ``fields.HeadlineField.measure``) as the compact result carries it."""
    return CompactFormat(
        name=roofline.weight_format,
        gpu=gpu,
        peak_flops_per_second=roofline.peak.value,
        peak_interval=roofline.peak.interval,
        ridge_point=roofline.ridge_point,
        ridge_point_interval=roofline.ridge_point_interval,
        recommended_min_batch=roofline.recommended_min_batch,
        recommended_min_batch_interval=roofline.recommended_min_batch_interval,
    )


def _need(entry: CompactFormat) -> tuple[float, float, int]:
    """Order of the GPUs a node's entry may come from: the largest minimum batch first, then
    the smaller peak, then the lower index."""
    return (-entry.recommended_min_batch, entry.peak_flops_per_second, entry.gpu)


def compact_formats(
    per_device: Iterable[tuple[int, Sequence[Any]]],
) -> tuple[CompactFormat, ...]:
    """The node's entries from each device's ``(index, weight_formats)``: per format, the GPU
    that needs the largest minimum batch of it, in order of first appearance; a device's first
    roofline of a format counts; at most :data:`MAX_WEIGHT_FORMATS`."""
    chosen: dict[str, CompactFormat] = {}
    for index, rooflines in per_device:
        seen: set[str] = set()
        for roofline in rooflines:
            if roofline.weight_format in seen:
                continue
            seen.add(roofline.weight_format)
            entry = compact_format(index, roofline)
            known = chosen.get(entry.name)
            if known is None or _need(entry) < _need(known):
                chosen[entry.name] = entry
    return tuple(chosen.values())[:MAX_WEIGHT_FORMATS]


def rounded_outward(value: float, upward: bool) -> float | int:
    """``value`` to the wire's significant digits, rounded up (``upward``) or down: an
    interval's high or low end. The nearest such number when it lies on the right side, so that
    an end rounded once reads back unchanged; else the exact decimal ceiling or floor (the float
    nearest a decimal at or beyond a float is at or beyond it too)."""
    if value == 0 or not math.isfinite(value):
        return value
    rounded = float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    if (rounded < value) if upward else (rounded > value):
        exact = Decimal(value)
        step = Decimal(1).scaleb(exact.adjusted() - SIGNIFICANT_DIGITS + 1)
        rounded = float(exact.quantize(step, rounding=ROUND_CEILING if upward else ROUND_FLOOR))
    return int(rounded) if rounded.is_integer() and abs(rounded) < 1e15 else rounded


def _measured_to_wire(
    value: float, interval: tuple[float, float] | None, unit: float
) -> list[float | int]:
    """A measured number and its interval's ends, in ``unit``; the ends widened to hold the
    value (as the profiler's own intervals do), an entry without an interval as exact."""
    low, high = interval or (value, value)
    return [
        in_unit(value, unit),
        rounded_outward(min(low, value) / unit, upward=False),
        rounded_outward(max(high, value) / unit, upward=True),
    ]


def format_to_wire(entry: CompactFormat) -> list[Any]:
    """One entry of ``f``, at the positions of :data:`FORMAT_FIELDS`."""
    batch = entry.recommended_min_batch
    low, high = entry.recommended_min_batch_interval or (batch, batch)
    return [
        entry.name,
        entry.gpu,
        *_measured_to_wire(entry.peak_flops_per_second, entry.peak_interval, PEAK_UNIT),
        *_measured_to_wire(entry.ridge_point, entry.ridge_point_interval, 1.0),
        batch,
        min(low, batch),
        max(high, batch),
    ]


def formats_to_wire(formats: Sequence[CompactFormat]) -> list[list[Any]] | None:
    """``f``: one entry per format; ``None`` (no key) without formats."""
    return [format_to_wire(f) for f in formats[:MAX_WEIGHT_FORMATS]] or None


def format_name(value: Any, where: str) -> str:
    """A weight format's canonical name (``weight_formats.parse_weight_format`` reads it back to
    itself), else :class:`CompactDecodeError`."""
    if not isinstance(value, str) or len(value) > MAX_FORMAT_NAME_CHARS:
        raise CompactDecodeError(f"{where}: field 'weight format' is not a weight format's name")
    try:
        canonical = parse_weight_format(value).name
    except ValueError:
        canonical = None
    if canonical != value:
        raise CompactDecodeError(f"{where}: field 'weight format' is not a weight format's name")
    return value


def _holds(
    ends: tuple[float, float], value: float, quantity: str, where: str
) -> tuple[float, float]:
    if not ends[0] <= value <= ends[1]:
        raise CompactDecodeError(
            f"{where}: the {quantity} interval [{ends[0]:.4g}, {ends[1]:.4g}] excludes its value "
            f"{value:.4g}"
        )
    return ends


def _decode_measured(
    raw: Sequence[Any], quantity: str, where: str, unit: float = 1.0
) -> tuple[float, tuple[float, float]]:
    value, low, high = (
        measured(number, quantity, name, where, unit)
        for number, name in zip(raw, (quantity, f"{quantity} low", f"{quantity} high"), strict=True)
    )
    return value, _holds((low, high), value, quantity, where)


def _decode_format(raw: Any, devices: Collection[int], where: str) -> CompactFormat:
    if not isinstance(raw, list) or len(raw) != len(FORMAT_FIELDS):
        raise CompactDecodeError(f"{where}: not an array of {len(FORMAT_FIELDS)} fields")
    name = format_name(raw[0], where)
    gpu = whole(raw[1], "device index", "device index", where)
    if gpu not in devices:
        raise CompactDecodeError(f"{where}: field 'device index' names no device of the result")
    peak, peak_interval = _decode_measured(raw[2:5], "peak", where, PEAK_UNIT)
    ridge, ridge_interval = _decode_measured(raw[5:8], "ridge point", where)
    batch, low, high = (
        whole(number, "min batch", label, where)
        for number, label in zip(raw[8:11], FORMAT_FIELDS[8:11], strict=True)
    )
    _holds((low, high), batch, "min batch", where)
    return CompactFormat(
        name=name,
        gpu=gpu,
        peak_flops_per_second=peak,
        peak_interval=peak_interval,
        ridge_point=ridge,
        ridge_point_interval=ridge_interval,
        recommended_min_batch=batch,
        recommended_min_batch_interval=(low, high),
    )


def decode_formats(raw: dict[str, Any], devices: Collection[int]) -> tuple[CompactFormat, ...]:
    """``f`` of a result whose GPUs have the indices ``devices``; none when the key is absent.
    Each format at most once, and only of a GPU the result lists."""
    if "f" not in raw:
        return ()
    entries = bounded_list(raw["f"], "f", "result", MAX_WEIGHT_FORMATS)
    formats = tuple(
        _decode_format(entry, devices, f"weight format #{i}") for i, entry in enumerate(entries)
    )
    if len({f.name for f in formats}) != len(formats):
        raise CompactDecodeError("result: field 'f' lists a weight format twice")
    return formats
