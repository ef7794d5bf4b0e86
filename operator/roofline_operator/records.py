"""Per-node records: the operator's memory of each node, stored in ``status.nodes``.

The status is the durable copy: a restarted operator rebuilds its records from it, so results
survive restarts without re-profiling. Only the sweep's step times live in memory alone (they are
for metrics, and ``status`` must stay small for a thousand nodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from roofline_operator.names import NodeState
from roofline_operator.pods import parse_time
from roofline_profiler.compact import CompactDevice, CompactProfile


@dataclass(frozen=True)
class NodeResult:
    """One successful profile of a node, under one spec digest."""

    profile: CompactProfile
    spec_hash: str

    @property
    def worst(self) -> CompactDevice:
        return self.profile.worst_device()


@dataclass(frozen=True)
class NodeRecord:
    name: str
    gpus: int
    state: NodeState = NodeState.QUEUED
    #: Attempts in the current cycle (since the last success, spec change or re-profile).
    attempts: int = 0
    #: Spec digest the current cycle's attempts measure.
    cycle_hash: str = ""
    pod: str | None = None
    pod_namespace: str | None = None
    last_attempt_at: float | None = None
    next_attempt_at: float | None = None
    reason: str | None = None
    message: str | None = None
    result: NodeResult | None = None


def format_time(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc).replace(microsecond=0)
    return moment.isoformat().replace("+00:00", "Z")


def _device_numbers(device: CompactDevice) -> dict[str, Any]:
    return {
        "bandwidthBytesPerSecond": device.bandwidth_bytes_per_second,
        "peakFlopsPerSecond": device.peak_flops_per_second,
        "ridgePoint": device.ridge_point,
        "recommendedMinBatch": device.recommended_min_batch,
    }


def record_to_status(record: NodeRecord) -> dict[str, Any]:
    """The ``status.nodes[]`` entry of a record (camelCase, no ``None`` values)."""
    entry: dict[str, Any] = {
        "name": record.name,
        "state": record.state.value,
        "gpus": record.gpus,
        "attempts": record.attempts,
        "cycleHash": record.cycle_hash,
        "pod": record.pod,
        "podNamespace": record.pod_namespace,
        "reason": record.reason,
        "message": record.message,
        "lastAttemptTime": format_time(record.last_attempt_at),
        "nextAttemptTime": format_time(record.next_attempt_at),
    }
    if record.result is not None:
        profile, worst = record.result.profile, record.result.worst
        entry.update(
            specHash=record.result.spec_hash,
            profiledTime=format_time(profile.created_at),
            durationSeconds=profile.duration_seconds,
            dtype=profile.dtype,
            shape=f"{profile.shape_k}x{profile.shape_n}",
            product=worst.name,
            gpu=str(worst.index),
            **_device_numbers(worst),
        )
        if len(profile.devices) > 1:
            entry["devices"] = [
                {"index": d.index, "product": d.name, **_device_numbers(d)} for d in profile.devices
            ]
    return {k: v for k, v in entry.items() if v is not None}


def _device_from_status(raw: Mapping[str, Any], index: int, name: str) -> CompactDevice:
    return CompactDevice(
        index=index,
        name=name,
        backend="",
        memory_bytes=None,
        bandwidth_bytes_per_second=float(raw["bandwidthBytesPerSecond"]),
        peak_flops_per_second=float(raw["peakFlopsPerSecond"]),
        ridge_point=float(raw["ridgePoint"]),
        recommended_min_batch=int(raw["recommendedMinBatch"]),
        knee_batch=None,
        sweep=(),
        warnings=(),
    )


def _result_from_status(raw: Mapping[str, Any]) -> NodeResult | None:
    if "specHash" not in raw or "ridgePoint" not in raw:
        return None
    devices = raw.get("devices") or [
        {**raw, "index": int(raw.get("gpu", "0")), "product": raw.get("product", "")}
    ]
    shape_k, _, shape_n = str(raw.get("shape", "1x1")).partition("x")
    profile = CompactProfile(
        version=1,
        dtype=str(raw.get("dtype", "")),
        shape_k=int(shape_k or 1),
        shape_n=int(shape_n or 1),
        created_at=parse_time(raw.get("profiledTime")) or 0.0,
        duration_seconds=float(raw.get("durationSeconds", 0.0)),
        hostname=str(raw["name"]),
        devices=tuple(
            _device_from_status(d, int(d["index"]), str(d.get("product", ""))) for d in devices
        ),
    )
    return NodeResult(profile=profile, spec_hash=str(raw["specHash"]))


def record_from_status(raw: Mapping[str, Any]) -> NodeRecord | None:
    """Rebuild a record from its status entry; ``None`` for an entry too damaged to trust."""
    try:
        return NodeRecord(
            name=str(raw["name"]),
            gpus=int(raw.get("gpus", 1)),
            state=NodeState(raw.get("state", NodeState.QUEUED.value)),
            attempts=int(raw.get("attempts", 0)),
            cycle_hash=str(raw.get("cycleHash", "")),
            pod=raw.get("pod"),
            pod_namespace=raw.get("podNamespace"),
            last_attempt_at=parse_time(raw.get("lastAttemptTime")),
            next_attempt_at=parse_time(raw.get("nextAttemptTime")),
            reason=raw.get("reason"),
            message=raw.get("message"),
            result=_result_from_status(raw),
        )
    except (KeyError, TypeError, ValueError):
        return None


def records_from_status(status: Mapping[str, Any] | None) -> dict[str, NodeRecord]:
    entries = (status or {}).get("nodes") or []
    records = (record_from_status(e) for e in entries if isinstance(e, Mapping))
    return {r.name: r for r in records if r is not None}
