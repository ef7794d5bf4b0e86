"""Compact result encoding for the Kubernetes termination message.

The kubelet keeps at most 4096 bytes of a container's termination message, so the operator cannot
receive the full result document through it. This encoding carries only what the operator reads:
the headline numbers of each GPU and the sweep's step times, numbers rounded to four significant
digits, each GPU as a short positional array. Eight GPUs with the default sweep take well under half
of the limit, which leaves room for later per-GPU additions (docs/contracts.md has the layout).

Each GPU's 95% intervals travel under their own key, ``u`` (one entry per GPU, as short relative
widths), so a reader that does not know them reads the rest unchanged.
Model plans (``roofline profile --models-json``) travel under two top-level keys: ``m`` names each
model once, ``p`` holds each GPU's plan numbers by the model's position, so eight GPUs with eight
models still fit; the models' predicted step times are what gets dropped first
(``compact_models.py``).

Each GPU's warning codes (``CpuContention``, ``InterferenceUnresolved``, ...: the profile's own
judgement that a number is less trustworthy than its interval) travel under ``w``, so the operator
can keep a suspect profile from moving published values.

Each model's largest request rate per replica under a planned workload travels under ``l``
(``compact_loads.py``), beside ``m``, which it follows; a reader that does not know it ignores it.
Each weight format's roofline (peak, ridge point, minimum batch, with intervals), one entry per
format for the node, travels under ``f`` (``compact_formats.py``), likewise ignored by a reader
that does not know it; the formats are what goes first when nothing else is left to drop
(:func:`encode_compact`).

Version 4 names the backend the profile measured on (``be``: ``cuda``, ``rocm``, ``mps`` or
``cpu``), so the operator can refuse a CPU's numbers from a pod that was given a GPU (a missing
runtime class, device plugin or driver once made the profiler fall back to the CPU unnoticed).

This module holds the format's types and its encoder; ``compact_decode.py`` reads it back, and
still reads versions 3 and 2 (no backend) and 1 (which also carried backend, memory, knee,
warnings and hostname), so the results of pods that finish during an upgrade are not lost.
``compact_fields.py`` holds the units and digits of its numbers.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

from roofline_profiler.core.units import round_significant
from roofline_profiler.wire import fields
from roofline_profiler.wire.compact_fields import SIGNIFICANT_DIGITS, steps_to_wire
from roofline_profiler.wire.compact_formats import CompactFormat, formats_to_wire
from roofline_profiler.wire.compact_loads import CompactLoad, loads_to_wire
from roofline_profiler.wire.compact_models import (
    CompactModelPlan,
    itl_on_one_gpu,
    models_to_wire,
    plans_to_wire,
)

#: 3 adds each plan's ITL model to its array (``plan_fields.PLAN_ARRAY_VERSION``); 4 names the
#: backend the profile measured on (``be``).
COMPACT_VERSION = 4
#: Older versions :func:`decode_compact` still reads.
READABLE_VERSIONS = (1, 2, 3, COMPACT_VERSION)
MAX_COMPACT_BYTES = 4096
#: Longest device name kept; GPU product strings are far shorter in practice.
MAX_NAME_CHARS = 64
#: Significant digits of an interval's relative width: enough to compare two profiles, short
#: enough that eight GPUs add about 300 bytes.
INTERVAL_WIDTH_SIGNIFICANT_DIGITS = 2
#: Longest warning code kept, and most codes per GPU (the profiler has fewer than ten).
MAX_WARNING_CHARS = 40
MAX_WARNINGS = 16


@dataclass(frozen=True)
class CompactDevice(fields.HeadlineNumbers):
    """One GPU's headline numbers; ``step_seconds`` follow the profile's ``batches``, or none.

    The numbers' 95% intervals are ``None`` for a result without intervals (version 1, or a
    profiler before them); on the wire their widths are rounded outward, so a decoded interval
    is never narrower than the measured one.
    """

    index: int
    name: str
    #: The headline numbers (``fields.DEVICE_HEADLINE``) with their intervals, without sources.
    numbers: fields.Numbers
    step_seconds: tuple[float, ...]
    #: Plans of the profiled models, in the profile's model order; none without models.
    models: tuple[CompactModelPlan, ...] = ()
    #: The profile's warning codes for this GPU (``sanity.py``), each once.
    warnings: tuple[str, ...] = ()

    @property
    def has_intervals(self) -> bool:
        return fields.has_intervals(self.numbers)


@dataclass(frozen=True)
class CompactProfile:
    dtype: str
    shape_k: int
    shape_n: int
    #: Unix seconds.
    created_at: float
    duration_seconds: float
    #: The sweep's batch sizes, shared by every device.
    batches: tuple[int, ...]
    devices: tuple[CompactDevice, ...]
    #: What every device was measured on (``limits.BACKEND_NAMES``); ``None`` only in a decoded
    #: version 2 or 3 result, which did not say.
    backend: str | None = None
    version: int = COMPACT_VERSION
    #: Each model's largest request rate per replica (``l``); none without a planned workload.
    loads: tuple[CompactLoad, ...] = ()
    #: Each weight format's roofline on the node (``f``); none without ``--weight-format`` or
    #: quantized models.
    weight_formats: tuple[CompactFormat, ...] = ()


def _device_to_wire(device: CompactDevice, with_steps: bool) -> list[Any]:
    """The positions of :func:`fields.gpu_fields`."""
    return [
        device.index,
        device.name[:MAX_NAME_CHARS],
        *(f.to_wire(f.value_of(device)) for f in fields.DEVICE_HEADLINE),
        steps_to_wire(device.step_seconds) if with_steps else [],
    ]


def _width_up(value: float) -> float | int:
    """``value`` rounded up (toward +inf) to :data:`INTERVAL_WIDTH_SIGNIFICANT_DIGITS`
    significant digits."""
    if value == 0 or not math.isfinite(value):
        return 0
    exponent = math.floor(math.log10(abs(value))) - INTERVAL_WIDTH_SIGNIFICANT_DIGITS + 1
    scale = 10.0**exponent
    rounded = float(
        f"{math.ceil(value / scale - 1e-9) * scale:.{INTERVAL_WIDTH_SIGNIFICANT_DIGITS}g}"
    )
    return int(rounded) if rounded.is_integer() else rounded


def _relative_widths(value: float, interval: tuple[float, float]) -> list[float | int]:
    """Percent of ``value`` (as written on the wire) below and above it, rounded outward."""
    if value <= 0:
        return [0, 0]
    return [
        _width_up(100 * (value - interval[0]) / value),
        _width_up(100 * (interval[1] - value) / value),
    ]


def _intervals_to_wire(device: CompactDevice) -> list[Any] | None:
    """The positions of :func:`fields.interval_fields`: a measured number's interval as percent
    of its value on the wire below and above it, a whole number's as its two ends."""
    wire: list[Any] = []
    for f in fields.DEVICE_HEADLINE:
        number = f.estimate_of(device)
        if number.interval is None:
            return None
        if f.is_whole:
            wire.extend(number.interval)
        else:
            wire.extend(_relative_widths(f.wire_value(number.value), number.interval))
    return wire


#: What is dropped, in order, when a result would not fit: first the models' predicted step
#: times per batch, then every GPU's ITL model but the node's envelope on its first GPU
#: (``compact_models.itl_on_one_gpu``), then the sweep's measured step times. The headline
#: numbers and every model's plan numbers always stay.
TRIM_LEVELS = (
    (True, True, False),
    (True, False, False),
    (True, False, True),
    (False, False, True),
)


def encode_compact(profile: CompactProfile) -> str:
    """Encode ``profile`` as compact JSON text of at most :data:`MAX_COMPACT_BYTES` bytes.

    Step times are dropped (:data:`TRIM_LEVELS`) when a large profile would not fit; the headline
    numbers and the model plans always survive. Model names are written once, under ``m``; each
    GPU's plans under ``p`` refer to them by position, so eight GPUs with eight models of 63
    characters still fit (tested). When no trim level fits, the weight formats (``f``) go one at a
    time from the last, each time from the first trim level again: a format outranks every step
    time, but not the warnings and intervals of the headline numbers.
    """
    if profile.backend is None:
        raise ValueError("a compact result names the backend it measured on")
    models = models_to_wire(d.models for d in profile.devices)
    formats = formats_to_wire(profile.weight_formats)
    for with_steps, with_model_steps, one_itl in TRIM_LEVELS:
        plans = [d.models for d in profile.devices]
        if one_itl:
            plans = list(itl_on_one_gpu(plans))
        doc: dict[str, Any] = {
            "v": COMPACT_VERSION,
            "be": profile.backend,
            "dt": profile.dtype,
            "k": profile.shape_k,
            "n": profile.shape_n,
            "t": round(profile.created_at, 1),
            "s": round_significant(profile.duration_seconds, digits=SIGNIFICANT_DIGITS),
            "b": list(profile.batches) if with_steps else [],
            "g": [_device_to_wire(d, with_steps) for d in profile.devices],
        }
        if any(d.has_intervals for d in profile.devices):
            doc["u"] = [_intervals_to_wire(d) for d in profile.devices]
        if any(d.warnings for d in profile.devices):
            doc["w"] = [
                [code[:MAX_WARNING_CHARS] for code in d.warnings[:MAX_WARNINGS]]
                for d in profile.devices
            ]
        if models:
            doc["m"] = models
            doc["p"] = [plans_to_wire(p, models, with_model_steps) for p in plans]
            rates = loads_to_wire(profile.loads, models)
            if rates is not None:
                doc["l"] = rates
        if formats is not None:
            doc["f"] = formats
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=True)
        if len(text.encode()) <= MAX_COMPACT_BYTES:
            return text
    if profile.weight_formats:
        return encode_compact(replace(profile, weight_formats=profile.weight_formats[:-1]))
    # Then the warnings, and the intervals last: without warnings the operator takes a suspect
    # profile as sound; without intervals it takes every number as exact.
    if any(d.warnings for d in profile.devices):
        quiet = tuple(replace(d, warnings=()) for d in profile.devices)
        return encode_compact(replace(profile, devices=quiet))
    if any(d.has_intervals for d in profile.devices):
        bare = tuple(
            replace(d, numbers=fields.without_intervals(d.numbers)) for d in profile.devices
        )
        return encode_compact(replace(profile, devices=bare))
    raise ValueError(f"compact result is {len(text)} bytes even without step times")
