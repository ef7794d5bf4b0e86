"""The versioned result document: what ``roofline profile --json`` writes.

The document is camelCase JSON, described by ``schema/roofline-result.schema.json`` (bump
:data:`SCHEMA_VERSION` with any incompatible change, as pyperf does with ``_JSON_VERSION``). The
dataclasses here round-trip through it exactly, so readers can load old results.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline_profiler.core.decode_model import ModelMeasurements
from roofline_profiler.core.decode_model_json import measurements_from_dict, measurements_to_dict
from roofline_profiler.core.format_roofline import FormatRoofline
from roofline_profiler.core.load_plan import LoadPlan
from roofline_profiler.core.planning import ModelPlan
from roofline_profiler.core.stats import Measurement
from roofline_profiler.wire import fields
from roofline_profiler.wire.compact import CompactDevice, CompactProfile
from roofline_profiler.wire.compact_formats import compact_formats
from roofline_profiler.wire.compact_loads import compact_loads
from roofline_profiler.wire.compact_models import compact_plans
from roofline_profiler.wire.host_state import HostStateReport
from roofline_profiler.wire.measurement_records import (
    PeakCandidate,
    SweepEntry,
    interval_from_dict,
    interval_to_dict,
    measurement_from_dict,
    measurement_to_dict,
)

SCHEMA_VERSION = 6
#: Versions :meth:`ProfileResult.from_dict` reads (version 1 has no model plans, 2 no ITL model,
#: 3 no engine, 4 no layer glue, 5 no prefill parts and no plans under load).
READABLE_SCHEMA_VERSIONS = (1, 2, 3, 4, 5, 6)
SCHEMA_RESOURCE = "roofline-result.schema.json"


@dataclass(frozen=True)
class ResultWarning:
    """A problem attached to a result: noise, an implausible number, a fallback taken."""

    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class DeviceResult(fields.HeadlineNumbers):
    """One device's profile. Every headline number has a 95% interval ``(low, high)`` from a
    bootstrap over the measurement rounds and, for ceilings, the kernel that set it
    (``ceilings.py``)."""

    index: int
    name: str
    backend: str
    device: str
    dtype: str
    memory_bytes: int | None
    bandwidth_kind: str
    #: Every bandwidth kernel's measurement: ``read``, ``readMatvec``, ``copy``.
    bandwidth: dict[str, Measurement]
    peak_candidates: tuple[PeakCandidate, ...]
    #: The headline numbers (``fields.DEVICE_HEADLINE``): the roofline slope (bytes/s), peak
    #: FLOP/s, ridge point and recommended min batch, each with its interval and, but for the
    #: ridge point, the kernel or workload that set it.
    numbers: fields.Numbers
    read_bandwidth_bytes_per_second: float
    read_bandwidth_interval: tuple[float, float]
    read_bandwidth_kernel: str
    copy_bandwidth_bytes_per_second: float
    copy_bandwidth_interval: tuple[float, float]
    knee_batch: int | None
    #: The interpolated batch where the efficiency crosses the threshold, with its interval.
    min_batch_crossing: float | None
    min_batch_crossing_interval: tuple[float, float] | None
    #: Interleaved measurement rounds (the most any workload got).
    rounds: int
    sweep: tuple[SweepEntry, ...]
    warnings: tuple[ResultWarning, ...] = ()
    telemetry: dict[str, Any] = field(default_factory=dict)
    #: Serving plans, one per model and context (``roofline profile --model``).
    models: tuple[ModelPlan, ...] = ()
    #: The measured decode-step parts the plans come from, one per model.
    model_measurements: tuple[ModelMeasurements, ...] = ()
    #: The roofline of each weight format profiled beside the dtype (``format_roofline.py``).
    weight_formats: tuple[FormatRoofline, ...] = ()
    #: Each model's plan under load (``load_plan``): its TTFT ladder and, for a workload, the
    #: TTFT and ITL at request rates and the maximum rate per replica.
    loads: tuple[LoadPlan, ...] = ()
    #: When the host changed state during the profile (``host_state.py``): each state's rounds,
    #: the state the numbers come from, the other state's numbers. The measurements above keep
    #: every round's samples; the headline numbers and the sweep use the chosen state's rounds.
    host_states: HostStateReport | None = None

    def interval(self, number: str) -> tuple[float, float]:
        """The 95% interval of a headline number (by its ``fields.DEVICE_HEADLINE`` attribute);
        a result has one for each."""
        interval = self.numbers[number].interval
        if interval is None:
            raise ValueError(f"the result holds no interval of {number}")
        return interval

    def source(self, number: str) -> str:
        """The kernel or workload that set a headline number; ``""`` when the document names
        none (the ridge point, which the ceilings set)."""
        return self.numbers[number].source or ""

    @property
    def best_peak(self) -> PeakCandidate:
        """The fastest matmul candidate (the peak itself may come from a sweep point)."""
        return max(self.peak_candidates, key=lambda c: c.flops_per_second)

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "index": self.index,
            "name": self.name,
            "backend": self.backend,
            "device": self.device,
            "dtype": self.dtype,
            "memoryBytes": self.memory_bytes,
        }
        details = self._headline_details()
        for f in fields.DEVICE_HEADLINE:
            document.update(f.to_json(f.estimate_of(self)))
            document.update(details.get(f.quantity, {}))
        return {
            **document,
            "minBatchCrossing": self.min_batch_crossing,
            "minBatchCrossingInterval": (
                interval_to_dict(self.min_batch_crossing_interval)
                if self.min_batch_crossing_interval is not None
                else None
            ),
            "rounds": self.rounds,
            "sweep": [e.to_dict() for e in self.sweep],
            "warnings": [w.to_dict() for w in self.warnings],
            "telemetry": self.telemetry,
            **(
                {"weightFormats": [f.to_dict() for f in self.weight_formats]}
                if self.weight_formats
                else {}
            ),
            "models": [p.to_dict() for p in self.models],
            "modelMeasurements": [measurements_to_dict(m) for m in self.model_measurements],
            "loads": [p.to_dict() for p in self.loads],
            **({"hostStates": self.host_states.to_dict()} if self.host_states else {}),
        }

    def _headline_details(self) -> dict[str, dict[str, Any]]:
        """What the document writes after a headline number (``fields.DEVICE_HEADLINE``), by its
        quantity: the measurements behind it and the numbers of the other bandwidth kernels."""
        best = self.best_peak
        return {
            "bandwidth": {
                "bandwidthKind": self.bandwidth_kind,
                "readBandwidthBytesPerSecond": self.read_bandwidth_bytes_per_second,
                "readBandwidthInterval": interval_to_dict(self.read_bandwidth_interval),
                "readBandwidthKernel": self.read_bandwidth_kernel,
                "copyBandwidthBytesPerSecond": self.copy_bandwidth_bytes_per_second,
                "copyBandwidthInterval": interval_to_dict(self.copy_bandwidth_interval),
                "bandwidth": {
                    kind: measurement_to_dict(m, "bytes") for kind, m in self.bandwidth.items()
                },
            },
            "peak": {
                "peak": {
                    "shape": {"m": best.m, "n": best.n, "k": best.k},
                    "candidates": [c.to_dict() for c in self.peak_candidates],
                },
            },
            "ridge point": {"kneeBatch": self.knee_batch},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceResult:
        read = d.get("readBandwidthBytesPerSecond", d["bandwidth"]["read"]["bestRatePerSecond"])
        copy = d.get("copyBandwidthBytesPerSecond", d["bandwidth"]["copy"]["bestRatePerSecond"])
        crossing_interval = d.get("minBatchCrossingInterval")
        #: The sources a document older than them gets.
        old_sources = {
            "bandwidthKernel": d["bandwidthKind"],
            "peakKernel": "mm {m}x{n}x{k}".format(**d["peak"]["shape"]),
        }
        numbers = {
            f.attribute: f.from_json(d, old_sources.get(f.source_key or ""))
            for f in fields.DEVICE_HEADLINE
        }
        return cls(
            index=d["index"],
            name=d["name"],
            backend=d["backend"],
            device=d["device"],
            dtype=d["dtype"],
            memory_bytes=d["memoryBytes"],
            bandwidth_kind=d["bandwidthKind"],
            bandwidth={
                kind: measurement_from_dict(m, "bytes") for kind, m in d["bandwidth"].items()
            },
            peak_candidates=tuple(PeakCandidate.from_dict(c) for c in d["peak"]["candidates"]),
            numbers=numbers,
            read_bandwidth_bytes_per_second=read,
            read_bandwidth_interval=interval_from_dict(d.get("readBandwidthInterval"), read),
            read_bandwidth_kernel=d.get("readBandwidthKernel", "read"),
            copy_bandwidth_bytes_per_second=copy,
            copy_bandwidth_interval=interval_from_dict(d.get("copyBandwidthInterval"), copy),
            knee_batch=d["kneeBatch"],
            min_batch_crossing=d.get("minBatchCrossing"),
            min_batch_crossing_interval=(
                (crossing_interval["low"], crossing_interval["high"]) if crossing_interval else None
            ),
            rounds=d.get("rounds", 1),
            sweep=tuple(SweepEntry.from_dict(e) for e in d["sweep"]),
            warnings=tuple(ResultWarning(w["code"], w["message"]) for w in d["warnings"]),
            telemetry=d["telemetry"],
            models=tuple(ModelPlan.from_dict(p) for p in d.get("models", ())),
            model_measurements=tuple(
                measurements_from_dict(m) for m in d.get("modelMeasurements", ())
            ),
            loads=tuple(LoadPlan.from_dict(p) for p in d.get("loads", ())),
            weight_formats=tuple(FormatRoofline.from_dict(f) for f in d.get("weightFormats", ())),
            host_states=(HostStateReport.from_dict(d["hostStates"]) if "hostStates" in d else None),
        )


@dataclass(frozen=True)
class ProfileResult:
    created_at: str  # RFC 3339, UTC
    created_at_unix: float
    duration_seconds: float
    mode: str
    dtype: str
    shape_k: int
    shape_n: int
    batches: tuple[int, ...]
    min_batch_efficiency_percent: int
    environment: dict[str, Any]
    devices: tuple[DeviceResult, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schemaVersion": SCHEMA_VERSION,
            "kind": "RooflineResult",
            "createdAt": self.created_at,
            "createdAtUnix": self.created_at_unix,
            "durationSeconds": self.duration_seconds,
            "mode": self.mode,
            "config": {
                "dtype": self.dtype,
                "shape": {"k": self.shape_k, "n": self.shape_n},
                "batches": list(self.batches),
                "minBatchEfficiencyPercent": self.min_batch_efficiency_percent,
            },
            "environment": self.environment,
            "devices": [d.to_dict() for d in self.devices],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProfileResult:
        if d.get("schemaVersion") not in READABLE_SCHEMA_VERSIONS:
            raise ValueError(f"unsupported result schemaVersion {d.get('schemaVersion')!r}")
        config = d["config"]
        return cls(
            created_at=d["createdAt"],
            created_at_unix=d["createdAtUnix"],
            duration_seconds=d["durationSeconds"],
            mode=d["mode"],
            dtype=config["dtype"],
            shape_k=config["shape"]["k"],
            shape_n=config["shape"]["n"],
            batches=tuple(config["batches"]),
            min_batch_efficiency_percent=config["minBatchEfficiencyPercent"],
            environment=d["environment"],
            devices=tuple(DeviceResult.from_dict(x) for x in d["devices"]),
        )

    def to_compact(self) -> CompactProfile:
        """The subset the operator publishes, for the termination message: the backend, the
        headline numbers with their 95% intervals and warning codes, the sweep's step times, and
        each weight format's roofline for the node (``compact_formats``).

        One ``--device`` resolves to devices of one backend, so the profile names one.
        """
        backends = {d.backend for d in self.devices}
        if len(backends) != 1:
            raise ValueError(f"a profile measures on one backend, not {sorted(backends)}")
        return CompactProfile(
            dtype=self.dtype,
            shape_k=self.shape_k,
            shape_n=self.shape_n,
            created_at=self.created_at_unix,
            duration_seconds=self.duration_seconds,
            batches=self.batches,
            devices=tuple(
                CompactDevice(
                    index=d.index,
                    name=d.name,
                    numbers=fields.without_sources(d.numbers),
                    step_seconds=_steps_along(d.sweep, self.batches),
                    models=compact_plans(d.models, self.batches),
                    warnings=tuple(dict.fromkeys(w.code for w in d.warnings)),
                )
                for d in self.devices
            ),
            backend=backends.pop(),
            loads=compact_loads(d.loads for d in self.devices),
            weight_formats=compact_formats((d.index, d.weight_formats) for d in self.devices),
        )


def _steps_along(sweep: tuple[SweepEntry, ...], batches: tuple[int, ...]) -> tuple[float, ...]:
    """The sweep's step times in the order of ``batches``; none when the sweep measured others."""
    steps = {e.point.batch: e.point.step_seconds for e in sweep}
    return tuple(steps[b] for b in batches) if set(steps) == set(batches) else ()


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the result document, shipped inside the package."""
    text = (Path(__file__).parent / "schema" / SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_document(document: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` when ``document`` breaks the published schema."""
    import jsonschema

    jsonschema.validate(document, load_schema())
