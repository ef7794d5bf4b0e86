"""Compact result encoding for the Kubernetes termination message.

The kubelet keeps at most 4096 bytes of a container's termination message, so the operator cannot
receive the full result document through it. This encoding keeps what the operator publishes (the
headline numbers and the sweep's step times) in short keys with numbers rounded to four significant
digits, which fits eight GPUs with the default ten-point sweep in well under the limit.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

COMPACT_VERSION = 1
MAX_COMPACT_BYTES = 4096
#: Longest device name kept; GPU product strings are far shorter in practice.
MAX_NAME_CHARS = 64
#: Significant digits kept for every measured number.
SIGNIFICANT_DIGITS = 4


class CompactDecodeError(ValueError):
    """A termination message that is not a valid compact result; ``str()`` is a one-line reason."""


@dataclass(frozen=True)
class CompactSweepPoint:
    batch: int
    step_seconds: float


@dataclass(frozen=True)
class CompactDevice:
    index: int
    name: str
    backend: str
    memory_bytes: int | None
    bandwidth_bytes_per_second: float
    peak_flops_per_second: float
    ridge_point: float
    recommended_min_batch: int
    knee_batch: int | None
    sweep: tuple[CompactSweepPoint, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class CompactProfile:
    version: int
    dtype: str
    shape_k: int
    shape_n: int
    created_at: float
    duration_seconds: float
    hostname: str
    devices: tuple[CompactDevice, ...]

    def worst_device(self) -> CompactDevice:
        """The device a node-wide label must describe: the one needing the largest batch.

        Ties go to the lower bandwidth, then the lower index, so the choice is stable.
        """
        if not self.devices:
            raise CompactDecodeError("the profile has no devices")
        return min(
            self.devices,
            key=lambda d: (-d.recommended_min_batch, d.bandwidth_bytes_per_second, d.index),
        )


def _round(value: float) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def _device_to_dict(device: CompactDevice) -> dict[str, Any]:
    return {
        "i": device.index,
        "nm": device.name[:MAX_NAME_CHARS],
        "be": device.backend,
        "mem": device.memory_bytes,
        "bw": _round(device.bandwidth_bytes_per_second),
        "pk": _round(device.peak_flops_per_second),
        "rp": _round(device.ridge_point),
        "mb": device.recommended_min_batch,
        "kn": device.knee_batch,
        "b": [p.batch for p in device.sweep],
        "st": [_round(p.step_seconds) for p in device.sweep],
        "w": list(device.warnings),
    }


def encode_compact(profile: CompactProfile) -> str:
    """Encode ``profile`` as compact JSON text of at most :data:`MAX_COMPACT_BYTES` bytes.

    Warnings are dropped first, then the sweep, when a pathological profile would not fit; the
    headline numbers always survive.
    """
    doc: dict[str, Any] = {
        "v": profile.version,
        "dt": profile.dtype,
        "k": profile.shape_k,
        "n": profile.shape_n,
        "t": round(profile.created_at, 1),
        "s": _round(profile.duration_seconds),
        "h": profile.hostname[:MAX_NAME_CHARS],
        "d": [_device_to_dict(d) for d in profile.devices],
    }
    for trim in ("w", "st"):
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=True)
        if len(text.encode()) <= MAX_COMPACT_BYTES:
            return text
        for device in doc["d"]:
            device[trim] = []
            if trim == "st":
                device["b"] = []
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=True)
    if len(text.encode()) > MAX_COMPACT_BYTES:
        raise ValueError(f"compact result is {len(text)} bytes even without sweeps")
    return text


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise CompactDecodeError(f"{where}: missing field {key!r}")
    value = obj[key]
    # bool is an int subclass; a boolean is never a valid number here.
    if isinstance(value, bool) or not isinstance(value, kind):
        raise CompactDecodeError(f"{where}: field {key!r} has the wrong type")
    return value


def _positive(obj: dict[str, Any], key: str, where: str) -> float:
    value = float(_field(obj, key, (int, float), where))
    if not math.isfinite(value) or value <= 0:
        raise CompactDecodeError(f"{where}: field {key!r} must be a positive number")
    return value


def _positive_int(obj: dict[str, Any], key: str, where: str) -> int:
    value = int(_field(obj, key, int, where))
    if value <= 0:
        raise CompactDecodeError(f"{where}: field {key!r} must be a positive integer")
    return value


def _optional_int(obj: dict[str, Any], key: str, where: str) -> int | None:
    if obj.get(key) is None:
        return None
    return int(_field(obj, key, int, where))


def _decode_device(raw: Any, position: int) -> CompactDevice:
    where = f"device #{position}"
    if not isinstance(raw, dict):
        raise CompactDecodeError(f"{where}: not an object")
    batches = _field(raw, "b", list, where)
    steps = _field(raw, "st", list, where)
    if len(batches) != len(steps):
        raise CompactDecodeError(f"{where}: sweep batches and step times differ in length")
    sweep = []
    for batch, step in zip(batches, steps, strict=True):
        point = {"b": batch, "st": step}
        sweep.append(
            CompactSweepPoint(
                batch=_positive_int(point, "b", f"{where} sweep"),
                step_seconds=_positive(point, "st", f"{where} sweep"),
            )
        )
    min_batch = _positive_int(raw, "mb", where)
    warnings = _field(raw, "w", list, where)
    if not all(isinstance(w, str) for w in warnings):
        raise CompactDecodeError(f"{where}: warnings must be strings")
    return CompactDevice(
        index=int(_field(raw, "i", int, where)),
        name=str(_field(raw, "nm", str, where)),
        backend=str(_field(raw, "be", str, where)),
        memory_bytes=_optional_int(raw, "mem", where),
        bandwidth_bytes_per_second=_positive(raw, "bw", where),
        peak_flops_per_second=_positive(raw, "pk", where),
        ridge_point=_positive(raw, "rp", where),
        recommended_min_batch=min_batch,
        knee_batch=_optional_int(raw, "kn", where),
        sweep=tuple(sweep),
        warnings=tuple(warnings),
    )


def decode_compact(text: str) -> CompactProfile:
    """Parse and validate a compact result; raise :class:`CompactDecodeError` on any defect.

    A truncated message (the kubelet cuts at 4096 bytes) fails as invalid JSON.
    """
    if not text or not text.strip():
        raise CompactDecodeError("empty result")
    if len(text.encode("utf-8", errors="replace")) > MAX_COMPACT_BYTES:
        raise CompactDecodeError(f"result longer than {MAX_COMPACT_BYTES} bytes")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        snippet = text.strip().splitlines()[0][:120] if text.strip() else ""
        raise CompactDecodeError(f"not a JSON result ({exc.msg}): {snippet!r}") from None
    if not isinstance(raw, dict):
        raise CompactDecodeError("result is not a JSON object")
    version = _field(raw, "v", int, "result")
    if version != COMPACT_VERSION:
        raise CompactDecodeError(
            f"unsupported result version {version} (expected {COMPACT_VERSION})"
        )
    devices_raw = _field(raw, "d", list, "result")
    if not devices_raw:
        raise CompactDecodeError("result has no devices")
    return CompactProfile(
        version=version,
        dtype=str(_field(raw, "dt", str, "result")),
        shape_k=_positive_int(raw, "k", "result"),
        shape_n=_positive_int(raw, "n", "result"),
        created_at=float(_field(raw, "t", (int, float), "result")),
        duration_seconds=float(_field(raw, "s", (int, float), "result")),
        hostname=str(_field(raw, "h", str, "result")),
        devices=tuple(_decode_device(d, i) for i, d in enumerate(devices_raw)),
    )
