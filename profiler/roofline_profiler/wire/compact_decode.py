"""Reading a compact result back: how the operator takes in a profiler pod's termination message.

Every field is checked (``compact_fields.py``) against one table of physical plausibility
(``plausibility.py``); anything else is a ``CompactDecodeError`` that names the field. Versions 1
(objects with short keys under ``d``), 2 and 3 (without the backend, ``be``) are read into the
same dataclasses as version 4 (``compact.py``), so the results of pods that finish during an
upgrade are not lost; a version 2 or 3 result decodes with ``backend`` ``None``, and whether that
is enough is the reader's decision (the operator's: ``roofline_operator.decide.asked``).
The top-level keys a version may lack or a reader may not know (the rates ``l``, the weight
formats ``f``: ``compact_loads.py``, ``compact_formats.py``) are read where present, in any version.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from roofline_profiler.core import plausibility
from roofline_profiler.core.errors import first_line
from roofline_profiler.core.limits import BACKEND_NAMES, DTYPE_NAMES
from roofline_profiler.wire import fields
from roofline_profiler.wire.compact import (
    MAX_COMPACT_BYTES,
    MAX_WARNINGS,
    READABLE_VERSIONS,
    CompactDevice,
    CompactProfile,
)
from roofline_profiler.wire.compact_fields import (
    STEP_UNIT,
    CompactDecodeError,
    bounded_list,
    field,
    measured,
    string,
    whole,
)
from roofline_profiler.wire.compact_formats import decode_formats
from roofline_profiler.wire.compact_loads import CompactLoad, decode_loads
from roofline_profiler.wire.compact_models import decode_device_plans, decode_models
from roofline_profiler.wire.fields import Estimate

#: The dtypes a result may name: those the profiler measures.
_DTYPE = re.compile("|".join(DTYPE_NAMES))


def _batches(raw: Any, name: str, where: str) -> tuple[int, ...]:
    batches = tuple(
        whole(b, "batch", name, where)
        for b in bounded_list(raw, name, where, plausibility.MAX_BATCHES)
    )
    if any(a >= b for a, b in itertools.pairwise(batches)):
        raise CompactDecodeError(f"{where}: field {name!r} is not strictly increasing")
    return batches


def _steps(
    raw: Any, name: str, where: str, batches: Sequence[int], unit: float
) -> tuple[float, ...]:
    steps = tuple(
        measured(s, "step", name, where, unit)
        for s in bounded_list(raw, name, where, plausibility.MAX_BATCHES)
    )
    if steps and len(steps) != len(batches):
        raise CompactDecodeError(f"{where}: sweep batches and step times differ in length")
    return steps


def _decode_device_v2(raw: Any, position: int, batches: Sequence[int]) -> CompactDevice:
    where = f"device #{position}"
    names = fields.gpu_fields()
    if not isinstance(raw, list) or len(raw) != len(names):
        raise CompactDecodeError(f"{where}: not an array of {len(names)} fields")
    index, name, *numbers, steps = raw
    return CompactDevice(
        index=whole(index, "device index", "index", where),
        name=string(name, plausibility.DEVICE_NAME, "name", where),
        numbers={
            f.attribute: Estimate(f.from_wire(value, where))
            for f, value in zip(fields.DEVICE_HEADLINE, numbers, strict=True)
        },
        step_seconds=_steps(steps, "step times", where, batches, STEP_UNIT),
    )


def _decode_device_v1(raw: Any, position: int, batches: Sequence[int]) -> CompactDevice:
    """A version 1 device (an object with short keys); its own sweep batches must match."""
    where = f"device #{position}"
    if not isinstance(raw, dict):
        raise CompactDecodeError(f"{where}: not an object")
    own_batches = _batches(field(raw, "b", list, where), "b", f"{where} sweep")
    steps = _steps(field(raw, "st", list, where), "st", f"{where} sweep", own_batches, 1.0)
    return CompactDevice(
        index=whole(field(raw, "i", object, where), "device index", "i", where),
        name=string(field(raw, "nm", object, where), plausibility.DEVICE_NAME, "nm", where),
        numbers={
            "bandwidth_bytes_per_second": Estimate(
                measured(field(raw, "bw", object, where), "bandwidth", "bw", where)
            ),
            "peak_flops_per_second": Estimate(
                measured(field(raw, "pk", object, where), "peak", "pk", where)
            ),
            "ridge_point": Estimate(
                measured(field(raw, "rp", object, where), "ridge point", "rp", where)
            ),
            "recommended_min_batch": Estimate(
                whole(field(raw, "mb", object, where), "min batch", "mb", where)
            ),
        },
        step_seconds=steps if own_batches == tuple(batches) else (),
    )


def _device_list(raw: dict[str, Any], key: str) -> list[Any]:
    devices = bounded_list(field(raw, key, list, "result"), key, "result", plausibility.MAX_DEVICES)
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
    batches = _batches(field(raw, "b", list, "result"), "b", "result")
    devices_raw = _device_list(raw, "g")
    return batches, tuple(_decode_device_v2(d, i, batches) for i, d in enumerate(devices_raw))


def _interval(value: float, below: Any, above: Any, name: str, where: str) -> tuple[float, float]:
    low_pct = measured(below, "width below", f"{name} below", where)
    high_pct = measured(above, "width above", f"{name} above", where)
    if low_pct + high_pct < 0:
        raise CompactDecodeError(f"{where}: the {name} interval ends below its start")
    return (value * (1 - low_pct / 100), value * (1 + high_pct / 100))


def _whole_interval(low: Any, high: Any, name: str, where: str) -> tuple[int, int]:
    ends = (whole(low, name, f"{name} low", where), whole(high, name, f"{name} high", where))
    if ends[0] > ends[1]:
        raise CompactDecodeError(f"{where}: the {name} interval ends below its start")
    return ends


def _decode_intervals(raw: Any, position: int, device: CompactDevice) -> CompactDevice:
    where = f"device #{position} intervals"
    if raw is None:
        return device
    names = fields.interval_fields()
    if not isinstance(raw, list) or len(raw) != len(names):
        raise CompactDecodeError(f"{where}: not an array of {len(names)} fields")
    numbers = dict(device.numbers)
    ends = zip(raw[::2], raw[1::2], strict=True)
    for f, (first, second) in zip(fields.DEVICE_HEADLINE, ends, strict=True):
        number = numbers[f.attribute]
        if f.is_whole:
            interval: tuple[float, float] = _whole_interval(first, second, f.quantity, where)
        else:
            interval = _interval(number.value, first, second, f.quantity, where)
        numbers[f.attribute] = replace(number, interval=interval)
    return replace(device, numbers=numbers)


def _attach_intervals(
    raw: dict[str, Any], devices: tuple[CompactDevice, ...]
) -> tuple[CompactDevice, ...]:
    """The devices with their intervals (``u``), when the result carries them."""
    if "u" not in raw:
        return devices
    per_device = field(raw, "u", list, "result")
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
    per_device = field(raw, "w", list, "result")
    if len(per_device) != len(devices):
        raise CompactDecodeError("result: warnings and devices differ in count")
    attached = []
    for position, (codes, device) in enumerate(zip(per_device, devices, strict=True)):
        where = f"device #{position} warnings"
        codes = bounded_list(codes, "warnings", where, MAX_WARNINGS)
        for code in codes:
            string(code, plausibility.WARNING_CODE, "warning", where)
        attached.append(replace(device, warnings=tuple(dict.fromkeys(codes))))
    return tuple(attached)


def _attach_plans(
    raw: dict[str, Any], batches: Sequence[int], devices: tuple[CompactDevice, ...], version: int
) -> tuple[CompactDevice, ...]:
    """The devices with their model plans (``m`` and ``p``), when the result carries any."""
    if "m" not in raw:
        return devices
    models = decode_models(raw["m"])
    per_device = field(raw, "p", list, "result")
    if len(per_device) != len(devices):
        raise CompactDecodeError("result: model plans and devices differ in count")
    return tuple(
        replace(
            device,
            models=decode_device_plans(plans, models, f"device #{i} plans", batches, version),
        )
        for i, (device, plans) in enumerate(zip(devices, per_device, strict=True))
    )


def _loads(raw: dict[str, Any]) -> tuple[CompactLoad, ...]:
    """Each model's request rate (``l``), which names the models by their place in ``m``."""
    if "m" not in raw:
        if "l" in raw:
            raise CompactDecodeError("result: request rates without models")
        return ()
    return decode_loads(raw, [name for name, _, _ in decode_models(raw["m"])])


def _backend_name(value: Any, name: str, where: str) -> str:
    if not isinstance(value, str) or value not in BACKEND_NAMES:
        raise CompactDecodeError(
            f"{where}: field {name!r} is not one of {', '.join(BACKEND_NAMES)}"
        )
    return value


def _backend(raw: dict[str, Any], version: int) -> str | None:
    """The backend of every device: required from version 4 on, absent from versions 2 and 3,
    and per device in version 1 (where the devices must agree)."""
    if version >= 4:
        return _backend_name(field(raw, "be", object, "result"), "be", "result")
    if version in (2, 3):
        return None
    named = {
        _backend_name(device["be"], "be", f"device #{i}")
        for i, device in enumerate(raw["d"])
        if isinstance(device, dict) and "be" in device
    }
    if len(named) > 1:
        raise CompactDecodeError("result: the devices name different backends")
    return named.pop() if named else None


def _created_at(raw: dict[str, Any], now: float | None) -> float:
    try:
        return plausibility.timestamp(
            field(raw, "t", object, "result"), "t", now, plausibility.MAX_RESULT_AGE_SECONDS
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
    version = field(raw, "v", int, "result")
    if version not in READABLE_VERSIONS:
        raise CompactDecodeError(
            f"unsupported result version {version} (expected one of {READABLE_VERSIONS})"
        )
    batches, devices = _decode_devices(raw, version)
    _check_devices(devices, gpus)
    if version >= 2:
        devices = _attach_intervals(raw, devices)
        devices = _attach_warnings(raw, devices)
    devices = _attach_plans(raw, batches, devices, version)
    return CompactProfile(
        dtype=string(field(raw, "dt", object, "result"), _DTYPE, "dt", "result"),
        shape_k=whole(field(raw, "k", object, "result"), "dimension", "k", "result"),
        shape_n=whole(field(raw, "n", object, "result"), "dimension", "n", "result"),
        created_at=_created_at(raw, now),
        duration_seconds=measured(field(raw, "s", object, "result"), "duration", "s", "result"),
        batches=batches,
        devices=devices,
        backend=_backend(raw, version),
        version=version,
        loads=_loads(raw),
        weight_formats=decode_formats(raw, {d.index for d in devices}),
    )
