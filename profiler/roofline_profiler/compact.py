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
models still fit; the models' predicted step times are what gets dropped first.

Each GPU's warning codes (``CpuContention``, ``InterferenceUnresolved``, ...: the profile's own
judgement that a number is less trustworthy than its interval) travel under ``w``, so the operator
can keep a suspect profile from moving published values.

Version 1 (which also carried backend, memory, knee, warnings and hostname) is still read, so the
results of pods that finish during an upgrade are not lost.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from roofline_profiler import plausibility
from roofline_profiler.errors import first_line
from roofline_profiler.limits import DTYPE_NAMES, MAX_MODELS
from roofline_profiler.units import round_significant

COMPACT_VERSION = 2
#: Older versions :func:`decode_compact` still reads.
READABLE_VERSIONS = (1, COMPACT_VERSION)
MAX_COMPACT_BYTES = 4096
#: Longest device name kept; GPU product strings are far shorter in practice.
MAX_NAME_CHARS = 64
#: Significant digits kept for every measured number.
SIGNIFICANT_DIGITS = 4
#: Units on the wire, so that four significant digits stay short: GB/s, TFLOP/s, microseconds.
BANDWIDTH_UNIT = 1e9
PEAK_UNIT = 1e12
STEP_UNIT = 1e-6
#: The positions of a GPU's array on the wire (version 2), named as error messages name them.
GPU_FIELDS = ("index", "name", "bandwidth", "peak", "ridge point", "min batch", "step times")
#: The positions of a GPU's interval array under ``u``: bandwidth, peak and ridge point as percent
#: of the value below and above it, then the min batch's interval as batches.
INTERVAL_FIELDS = (
    "bandwidth below",
    "bandwidth above",
    "peak below",
    "peak above",
    "ridge point below",
    "ridge point above",
    "min batch low",
    "min batch high",
)
#: Significant digits of an interval's relative width: enough to compare two profiles, short
#: enough that eight GPUs add about 300 bytes.
INTERVAL_WIDTH_SIGNIFICANT_DIGITS = 2
#: Longest warning code kept, and most codes per GPU (the profiler has fewer than ten).
MAX_WARNING_CHARS = 40
MAX_WARNINGS = 16
#: Longest model name kept: a model's name is a Kubernetes label value.
MAX_MODEL_NAME_CHARS = 63
#: The positions of a model's array under ``m`` and of a model plan's array under ``p``.
MODEL_FIELDS = ("name", "context", "tensor parallel")
PLAN_FIELDS = (
    "min batch",
    "max batch by memory",
    "max batch by latency",
    "step at min batch",
    "step at max batch",
    "step times",
)


#: The dtypes a result may name: those the profiler measures.
_DTYPE = re.compile(f"^({'|'.join(DTYPE_NAMES)})$")


class CompactDecodeError(ValueError):
    """A termination message that is not a valid compact result; ``str()`` is a one-line reason."""


@dataclass(frozen=True)
class CompactIntervals:
    """A GPU's 95% intervals ``(low, high)`` of its headline numbers, in the numbers' own units.

    On the wire the widths are rounded outward, so a decoded interval is never narrower than the
    measured one.
    """

    bandwidth: tuple[float, float]
    peak: tuple[float, float]
    ridge_point: tuple[float, float]
    recommended_min_batch: tuple[int, int]


@dataclass(frozen=True)
class CompactModelPlan:
    """One model's serving plan on one GPU: the numbers the operator publishes.

    The recommended range runs from :attr:`range_low` to :attr:`max_batch`; tokens/s at its ends
    are ``batch / step`` and so travel as the step times alone. ``step_seconds`` are the predicted
    decode steps at the profile's batches up to :attr:`max_batch_by_memory` (a prefix of
    ``batches``), or none when they were dropped to fit.
    """

    name: str
    context_tokens: int
    tensor_parallel: int
    #: ``None`` when no batch reaches the efficiency threshold.
    min_batch: int | None
    max_batch_by_memory: int
    #: ``None`` without an inter-token latency SLO.
    max_batch_by_latency: int | None
    #: Predicted steps at the recommended range's ends; ``None`` when the range is empty.
    step_seconds_at_min_batch: float | None
    step_seconds_at_max_batch: float | None
    step_seconds: tuple[float, ...] = ()

    @property
    def max_batch(self) -> int:
        """The recommended range's high end: the smaller of the two bounds."""
        if self.max_batch_by_latency is None:
            return self.max_batch_by_memory
        return min(self.max_batch_by_memory, self.max_batch_by_latency)

    @property
    def kv_cache_tokens(self) -> int:
        """Tokens of KV cache the memory bound holds: its sequences at the planned context."""
        return self.max_batch_by_memory * self.context_tokens

    @property
    def range_low(self) -> int:
        """The range's low end: the min batch, or the high end when no batch is efficient."""
        return self.max_batch if self.min_batch is None else self.min_batch

    @property
    def tokens_per_second_at_min_batch(self) -> float | None:
        step = self.step_seconds_at_min_batch
        return None if step is None else self.range_low / step

    @property
    def tokens_per_second_at_max_batch(self) -> float | None:
        step = self.step_seconds_at_max_batch
        return None if step is None else self.max_batch / step


@dataclass(frozen=True)
class CompactDevice:
    """One GPU's headline numbers; ``step_seconds`` follow the profile's ``batches``, or none."""

    index: int
    name: str
    bandwidth_bytes_per_second: float
    peak_flops_per_second: float
    ridge_point: float
    recommended_min_batch: int
    step_seconds: tuple[float, ...]
    #: ``None`` for a result without intervals (version 1, or a profiler before them).
    intervals: CompactIntervals | None = None
    #: Plans of the profiled models, in the profile's model order; none without models.
    models: tuple[CompactModelPlan, ...] = ()
    #: The profile's warning codes for this GPU (``sanity.py``), each once.
    warnings: tuple[str, ...] = ()


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
    version: int = COMPACT_VERSION


def _device_to_wire(device: CompactDevice, with_steps: bool) -> list[Any]:
    return [
        device.index,
        device.name[:MAX_NAME_CHARS],
        round_significant(
            device.bandwidth_bytes_per_second / BANDWIDTH_UNIT, digits=SIGNIFICANT_DIGITS
        ),
        round_significant(device.peak_flops_per_second / PEAK_UNIT, digits=SIGNIFICANT_DIGITS),
        round_significant(device.ridge_point, digits=SIGNIFICANT_DIGITS),
        device.recommended_min_batch,
        [round_significant(s / STEP_UNIT, digits=SIGNIFICANT_DIGITS) for s in device.step_seconds]
        if with_steps
        else [],
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
    iv = device.intervals
    if iv is None:
        return None
    bandwidth = (
        float(
            round_significant(
                device.bandwidth_bytes_per_second / BANDWIDTH_UNIT, digits=SIGNIFICANT_DIGITS
            )
        )
        * BANDWIDTH_UNIT
    )
    peak = (
        float(
            round_significant(device.peak_flops_per_second / PEAK_UNIT, digits=SIGNIFICANT_DIGITS)
        )
        * PEAK_UNIT
    )
    return [
        *_relative_widths(bandwidth, iv.bandwidth),
        *_relative_widths(peak, iv.peak),
        *_relative_widths(
            float(round_significant(device.ridge_point, digits=SIGNIFICANT_DIGITS)), iv.ridge_point
        ),
        *iv.recommended_min_batch,
    ]


def _models_to_wire(profile: CompactProfile) -> list[list[Any]]:
    """``m``: each model once, ``[name, context, tensor parallel]``, in order of appearance."""
    seen: dict[str, list[Any]] = {}
    for device in profile.devices:
        for plan in device.models:
            name = plan.name[:MAX_MODEL_NAME_CHARS]
            seen.setdefault(name, [name, plan.context_tokens, plan.tensor_parallel])
    return list(seen.values())


def _optional_step(seconds: float | None) -> float | int | None:
    return (
        None
        if seconds is None
        else round_significant(seconds / STEP_UNIT, digits=SIGNIFICANT_DIGITS)
    )


def _plan_to_wire(plan: CompactModelPlan, with_steps: bool) -> list[Any]:
    wire: list[Any] = [
        plan.min_batch,
        plan.max_batch_by_memory,
        plan.max_batch_by_latency,
        _optional_step(plan.step_seconds_at_min_batch),
        _optional_step(plan.step_seconds_at_max_batch),
    ]
    if with_steps and plan.step_seconds:
        wire.append(
            [round_significant(s / STEP_UNIT, digits=SIGNIFICANT_DIGITS) for s in plan.step_seconds]
        )
    return wire


def _plans_to_wire(
    device: CompactDevice, models: list[list[Any]], with_steps: bool
) -> list[list[Any] | None]:
    """``p``'s entry of one GPU: one plan array per model of ``m``, ``null`` where it has none."""
    by_name = {plan.name[:MAX_MODEL_NAME_CHARS]: plan for plan in device.models}
    plans = (by_name.get(model[0]) for model in models)
    return [None if plan is None else _plan_to_wire(plan, with_steps) for plan in plans]


#: What is dropped, in order, when a result would not fit: first the models' predicted step
#: times per batch, then the sweep's measured ones. The headline numbers and every model's plan
#: numbers always stay.
TRIM_LEVELS = ((True, True), (True, False), (False, False))


def encode_compact(profile: CompactProfile) -> str:
    """Encode ``profile`` as compact JSON text of at most :data:`MAX_COMPACT_BYTES` bytes.

    Step times are dropped (:data:`TRIM_LEVELS`) when a large profile would not fit; the headline
    numbers and the model plans always survive. Model names are written once, under ``m``; each
    GPU's plans under ``p`` refer to them by position, so eight GPUs with eight models of 63
    characters still fit (tested).
    """
    models = _models_to_wire(profile)
    for with_steps, with_model_steps in TRIM_LEVELS:
        doc: dict[str, Any] = {
            "v": COMPACT_VERSION,
            "dt": profile.dtype,
            "k": profile.shape_k,
            "n": profile.shape_n,
            "t": round(profile.created_at, 1),
            "s": round_significant(profile.duration_seconds, digits=SIGNIFICANT_DIGITS),
            "b": list(profile.batches) if with_steps else [],
            "g": [_device_to_wire(d, with_steps) for d in profile.devices],
        }
        if any(d.intervals is not None for d in profile.devices):
            doc["u"] = [_intervals_to_wire(d) for d in profile.devices]
        if any(d.warnings for d in profile.devices):
            doc["w"] = [
                [code[:MAX_WARNING_CHARS] for code in d.warnings[:MAX_WARNINGS]]
                for d in profile.devices
            ]
        if models:
            doc["m"] = models
            doc["p"] = [_plans_to_wire(d, models, with_model_steps) for d in profile.devices]
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=True)
        if len(text.encode()) <= MAX_COMPACT_BYTES:
            return text
    # Then the warnings, and the intervals last: without warnings the operator takes a suspect
    # profile as sound; without intervals it takes every number as exact.
    if any(d.warnings for d in profile.devices):
        quiet = tuple(replace(d, warnings=()) for d in profile.devices)
        return encode_compact(replace(profile, devices=quiet))
    if any(d.intervals is not None for d in profile.devices):
        bare = tuple(replace(d, intervals=None) for d in profile.devices)
        return encode_compact(replace(profile, devices=bare))
    raise ValueError(f"compact result is {len(text)} bytes even without step times")


def _check(value: Any, kind: type | tuple[type, ...], name: str, where: str) -> Any:
    # bool is an int subclass; a boolean is never a valid number here.
    if isinstance(value, bool) or not isinstance(value, kind):
        raise CompactDecodeError(f"{where}: field {name!r} has the wrong type")
    return value


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise CompactDecodeError(f"{where}: missing field {key!r}")
    return _check(obj[key], kind, key, where)


def _measured(value: Any, quantity: str, name: str, where: str, unit: float = 1.0) -> float:
    """A measured number in base units, inside the plausibility table's range of ``quantity``."""
    try:
        return plausibility.number(value, quantity, name, unit)
    except plausibility.ImplausibleValue as exc:
        raise CompactDecodeError(f"{where}: {exc}") from None


def _whole(value: Any, quantity: str, name: str, where: str) -> int:
    """An integer inside the plausibility table's range of ``quantity``."""
    try:
        return plausibility.integer(value, quantity, name)
    except plausibility.ImplausibleValue as exc:
        raise CompactDecodeError(f"{where}: {exc}") from None


def _string(value: Any, pattern: re.Pattern[str], name: str, where: str) -> str:
    try:
        return plausibility.text(value, pattern, name)
    except plausibility.ImplausibleValue as exc:
        raise CompactDecodeError(f"{where}: {exc}") from None


def _list(value: Any, name: str, where: str, most: int) -> list[Any]:
    items: list[Any] = _check(value, list, name, where)
    if len(items) > most:
        raise CompactDecodeError(f"{where}: field {name!r} has more than {most} entries")
    return items


def _batches(raw: Any, name: str, where: str) -> tuple[int, ...]:
    batches = tuple(
        _whole(b, "batch", name, where) for b in _list(raw, name, where, plausibility.MAX_BATCHES)
    )
    if any(a >= b for a, b in itertools.pairwise(batches)):
        raise CompactDecodeError(f"{where}: field {name!r} is not strictly increasing")
    return batches


def _steps(
    raw: Any, name: str, where: str, batches: Sequence[int], unit: float
) -> tuple[float, ...]:
    steps = tuple(
        _measured(s, "step", name, where, unit)
        for s in _list(raw, name, where, plausibility.MAX_BATCHES)
    )
    if steps and len(steps) != len(batches):
        raise CompactDecodeError(f"{where}: sweep batches and step times differ in length")
    return steps


def _decode_device_v2(raw: Any, position: int, batches: Sequence[int]) -> CompactDevice:
    where = f"device #{position}"
    if not isinstance(raw, list) or len(raw) != len(GPU_FIELDS):
        raise CompactDecodeError(f"{where}: not an array of {len(GPU_FIELDS)} fields")
    index, name, bandwidth, peak, ridge, min_batch, steps = raw
    return CompactDevice(
        index=_whole(index, "device index", "index", where),
        name=_string(name, plausibility.DEVICE_NAME, "name", where),
        bandwidth_bytes_per_second=_measured(
            bandwidth, "bandwidth", "bandwidth", where, BANDWIDTH_UNIT
        ),
        peak_flops_per_second=_measured(peak, "peak", "peak", where, PEAK_UNIT),
        ridge_point=_measured(ridge, "ridge point", "ridge point", where),
        recommended_min_batch=_whole(min_batch, "min batch", "min batch", where),
        step_seconds=_steps(steps, "step times", where, batches, STEP_UNIT),
    )


def _decode_device_v1(raw: Any, position: int, batches: Sequence[int]) -> CompactDevice:
    """A version 1 device (an object with short keys); its own sweep batches must match."""
    where = f"device #{position}"
    if not isinstance(raw, dict):
        raise CompactDecodeError(f"{where}: not an object")
    own_batches = _batches(_field(raw, "b", list, where), "b", f"{where} sweep")
    steps = _steps(_field(raw, "st", list, where), "st", f"{where} sweep", own_batches, 1.0)
    return CompactDevice(
        index=_whole(_field(raw, "i", object, where), "device index", "i", where),
        name=_string(_field(raw, "nm", object, where), plausibility.DEVICE_NAME, "nm", where),
        bandwidth_bytes_per_second=_measured(
            _field(raw, "bw", object, where), "bandwidth", "bw", where
        ),
        peak_flops_per_second=_measured(_field(raw, "pk", object, where), "peak", "pk", where),
        ridge_point=_measured(_field(raw, "rp", object, where), "ridge point", "rp", where),
        recommended_min_batch=_whole(_field(raw, "mb", object, where), "min batch", "mb", where),
        step_seconds=steps if own_batches == tuple(batches) else (),
    )


def _device_list(raw: dict[str, Any], key: str) -> list[Any]:
    devices = _list(_field(raw, key, list, "result"), key, "result", plausibility.MAX_DEVICES)
    if not devices:
        raise CompactDecodeError("result has no devices")
    return devices


def _decode_devices(
    raw: dict[str, Any], version: int
) -> tuple[tuple[int, ...], tuple[CompactDevice, ...]]:
    if version == 1:
        devices_raw = _device_list(raw, "d")
        first = devices_raw[0] if isinstance(devices_raw[0], dict) else {}
        batches = tuple(b for b in first.get("b") or [] if isinstance(b, int))
        devices = tuple(_decode_device_v1(d, i, batches) for i, d in enumerate(devices_raw))
        return (batches if any(d.step_seconds for d in devices) else ()), devices
    batches = _batches(_field(raw, "b", list, "result"), "b", "result")
    devices_raw = _device_list(raw, "g")
    return batches, tuple(_decode_device_v2(d, i, batches) for i, d in enumerate(devices_raw))


def _interval(value: float, below: Any, above: Any, name: str, where: str) -> tuple[float, float]:
    low_pct = _measured(below, "width below", f"{name} below", where)
    high_pct = _measured(above, "width above", f"{name} above", where)
    if low_pct + high_pct < 0:
        raise CompactDecodeError(f"{where}: the {name} interval ends below its start")
    return (value * (1 - low_pct / 100), value * (1 + high_pct / 100))


def _decode_intervals(raw: Any, position: int, device: CompactDevice) -> CompactDevice:
    where = f"device #{position} intervals"
    if raw is None:
        return device
    if not isinstance(raw, list) or len(raw) != len(INTERVAL_FIELDS):
        raise CompactDecodeError(f"{where}: not an array of {len(INTERVAL_FIELDS)} fields")
    bw_below, bw_above, pk_below, pk_above, rp_below, rp_above, mb_low, mb_high = raw
    batches = (
        _whole(mb_low, "min batch", "min batch low", where),
        _whole(mb_high, "min batch", "min batch high", where),
    )
    if batches[0] > batches[1]:
        raise CompactDecodeError(f"{where}: the min batch interval ends below its start")
    intervals = CompactIntervals(
        bandwidth=_interval(
            device.bandwidth_bytes_per_second, bw_below, bw_above, "bandwidth", where
        ),
        peak=_interval(device.peak_flops_per_second, pk_below, pk_above, "peak", where),
        ridge_point=_interval(device.ridge_point, rp_below, rp_above, "ridge point", where),
        recommended_min_batch=batches,
    )
    return replace(device, intervals=intervals)


def _attach_intervals(
    raw: dict[str, Any], devices: tuple[CompactDevice, ...]
) -> tuple[CompactDevice, ...]:
    """The devices with their intervals (``u``), when the result carries them."""
    if "u" not in raw:
        return devices
    per_device = _field(raw, "u", list, "result")
    if len(per_device) != len(devices):
        raise CompactDecodeError("result: intervals and devices differ in count")
    return tuple(
        _decode_intervals(iv, i, d)
        for i, (iv, d) in enumerate(zip(per_device, devices, strict=True))
    )


def _attach_warnings(
    raw: dict[str, Any], devices: tuple[CompactDevice, ...]
) -> tuple[CompactDevice, ...]:
    """The devices with their warning codes (``w``), when the result carries them."""
    if "w" not in raw:
        return devices
    per_device = _field(raw, "w", list, "result")
    if len(per_device) != len(devices):
        raise CompactDecodeError("result: warnings and devices differ in count")
    attached = []
    for position, (codes, device) in enumerate(zip(per_device, devices, strict=True)):
        where = f"device #{position} warnings"
        codes = _list(codes, "warnings", where, MAX_WARNINGS)
        for code in codes:
            _string(code, plausibility.WARNING_CODE, "warning", where)
        attached.append(replace(device, warnings=tuple(dict.fromkeys(codes))))
    return tuple(attached)


def _decode_models(raw: Any) -> list[tuple[str, int, int]]:
    models = []
    for position, model in enumerate(_list(raw, "m", "result", MAX_MODELS)):
        where = f"model #{position}"
        if not isinstance(model, list) or len(model) != len(MODEL_FIELDS):
            raise CompactDecodeError(f"{where}: not an array of {len(MODEL_FIELDS)} fields")
        name, context, tp = model
        models.append(
            (
                _string(name, plausibility.LABEL_VALUE, "name", where),
                _whole(context, "context", "context", where),
                _whole(tp, "tensor parallel", "tensor parallel", where),
            )
        )
    if len({name for name, _, _ in models}) != len(models):
        raise CompactDecodeError("result: a model is named twice")
    return models


def _decoded_step(value: Any, name: str, where: str) -> float | None:
    return None if value is None else _measured(value, "step", name, where, STEP_UNIT)


def _decode_plan(
    raw: Any, model: tuple[str, int, int], where: str, batches: Sequence[int]
) -> CompactModelPlan:
    if not isinstance(raw, list) or len(raw) not in (len(PLAN_FIELDS) - 1, len(PLAN_FIELDS)):
        raise CompactDecodeError(f"{where}: not an array of {len(PLAN_FIELDS)} fields")
    min_batch, by_memory, by_latency, step_low, step_high, *rest = raw
    steps = rest[0] if rest else []
    step_times = tuple(
        _measured(s, "step", "step times", where, STEP_UNIT)
        for s in _list(steps, "steps", where, plausibility.MAX_BATCHES)
    )
    if len(step_times) > len(batches):
        raise CompactDecodeError(f"{where}: more step times than sweep batches")
    return CompactModelPlan(
        name=model[0],
        context_tokens=model[1],
        tensor_parallel=model[2],
        min_batch=None if min_batch is None else _whole(min_batch, "min batch", "min batch", where),
        max_batch_by_memory=_whole(by_memory, "batch bound", "max batch by memory", where),
        max_batch_by_latency=(
            None
            if by_latency is None
            else _whole(by_latency, "batch bound", "max batch by latency", where)
        ),
        step_seconds_at_min_batch=_decoded_step(step_low, "step at min", where),
        step_seconds_at_max_batch=_decoded_step(step_high, "step at max", where),
        step_seconds=step_times,
    )


def _attach_plans(
    raw: dict[str, Any], batches: Sequence[int], devices: tuple[CompactDevice, ...]
) -> tuple[CompactDevice, ...]:
    """The devices with their model plans (``m`` and ``p``), when the result carries any."""
    if "m" not in raw:
        return devices
    models = _decode_models(raw["m"])
    per_device = _field(raw, "p", list, "result")
    if len(per_device) != len(devices):
        raise CompactDecodeError("result: model plans and devices differ in count")
    attached = []
    for position, (device, plans) in enumerate(zip(devices, per_device, strict=True)):
        where = f"device #{position} plans"
        if not isinstance(plans, list) or len(plans) != len(models):
            raise CompactDecodeError(f"{where}: not one entry per model")
        decoded = tuple(
            _decode_plan(plan, model, f"{where}, model #{i}", batches)
            for i, (plan, model) in enumerate(zip(plans, models, strict=True))
            if plan is not None
        )
        attached.append(replace(device, models=decoded))
    return tuple(attached)


def _created_at(raw: dict[str, Any], now: float | None) -> float:
    try:
        return plausibility.timestamp(
            _field(raw, "t", object, "result"), "t", now, plausibility.MAX_RESULT_AGE_SECONDS
        )
    except plausibility.ImplausibleValue as exc:
        raise CompactDecodeError(f"result: {exc}") from None


def _check_devices(devices: tuple[CompactDevice, ...], expected: int | None) -> None:
    """No more devices than the GPUs the pod requested: more is a forged or foreign result. Fewer
    happen legitimately (CUDA shows a process one MIG slice however many it holds)."""
    if expected is not None and len(devices) > expected:
        raise CompactDecodeError(
            f"result: field 'g' lists {len(devices)} devices, the pod requested {expected} GPU(s)"
        )
    if len({d.index for d in devices}) != len(devices):
        raise CompactDecodeError("result: field 'g' lists a device index twice")


def decode_compact(
    text: str, *, now: float | None = None, gpus: int | None = None
) -> CompactProfile:
    """Parse and validate a compact result; raise :class:`CompactDecodeError` on any defect.

    Every number must be finite and physically plausible (``plausibility.py``); given ``now``,
    the result's time must lie within a window of it, and given ``gpus`` (the GPUs the pod
    requested) the result may list no more devices than that. A truncated message (the kubelet
    cuts at 4096 bytes) fails as invalid JSON; so does one nested too deep for a recursive parser.
    """
    if not text or not text.strip():
        raise CompactDecodeError("empty result")
    try:
        raw = plausibility.load_json(text, MAX_COMPACT_BYTES, "result")
    except plausibility.ImplausibleValue as exc:
        snippet = first_line(text, max_chars=60)
        raise CompactDecodeError(f"{exc}: {snippet!r}") from None
    if not isinstance(raw, dict):
        raise CompactDecodeError("result is not a JSON object")
    version = _field(raw, "v", int, "result")
    if version not in READABLE_VERSIONS:
        raise CompactDecodeError(
            f"unsupported result version {version} (expected one of {READABLE_VERSIONS})"
        )
    batches, devices = _decode_devices(raw, version)
    _check_devices(devices, gpus)
    if version >= 2:
        devices = _attach_intervals(raw, devices)
        devices = _attach_warnings(raw, devices)
    devices = _attach_plans(raw, batches, devices)
    return CompactProfile(
        dtype=_string(_field(raw, "dt", object, "result"), _DTYPE, "dt", "result"),
        shape_k=_whole(_field(raw, "k", object, "result"), "dimension", "k", "result"),
        shape_n=_whole(_field(raw, "n", object, "result"), "dimension", "n", "result"),
        created_at=_created_at(raw, now),
        duration_seconds=_measured(_field(raw, "s", object, "result"), "duration", "s", "result"),
        batches=batches,
        devices=devices,
        version=version,
    )
