"""The measurements a result document keeps behind its numbers, as JSON: every workload's timed
samples and their rounds (``Measurement``), the peak's candidate shapes and the sweep's points.

They let a reader re-derive or audit a result; the headline numbers themselves are written by
``result.py`` through the table of ``fields.py``.

Pure module: no torch, no Kubernetes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roofline_profiler.core.recommend import SweepPoint
from roofline_profiler.core.stats import Measurement


def measurement_to_dict(m: Measurement, work_key: str) -> dict[str, Any]:
    return {
        "label": m.label,
        work_key: m.work,
        "ratePerSecond": m.rate,
        "bestRatePerSecond": m.best_rate,
        "confirmedRatePerSecond": m.confirmed_rate,
        **m.summary(),
        "warmupRuns": m.warmup_runs,
        "samplesSeconds": list(m.times),
        "samplesRound": list(m.rounds),
        "hitRounds": m.hit_rounds,
        "stepChange": m.step_change,
        **({"roundsCpuWait": list(m.cpu_waits)} if m.cpu_waits else {}),
    }


def measurement_from_dict(d: dict[str, Any], work_key: str) -> Measurement:
    return Measurement(
        label=d["label"],
        times=tuple(d["samplesSeconds"]),
        work=d[work_key],
        warmup_runs=d["warmupRuns"],
        rounds=tuple(d.get("samplesRound", ())),
        cpu_waits=tuple(d.get("roundsCpuWait", ())),
    )


def interval_to_dict(interval: tuple[float, float]) -> dict[str, float]:
    return {"low": interval[0], "high": interval[1]}


def interval_from_dict(d: dict[str, Any] | None, value: float) -> tuple[float, float]:
    """An interval from the document; a document older than intervals gets the bare value."""
    if d is None:
        return (value, value)
    return (d["low"], d["high"])


@dataclass(frozen=True)
class PeakCandidate:
    m: int
    n: int
    k: int
    measurement: Measurement

    @property
    def flops_per_second(self) -> float:
        """The candidate's confirmed best rate (see ``Measurement.confirmed_rate``)."""
        return self.measurement.confirmed_rate

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": {"m": self.m, "n": self.n, "k": self.k},
            "measurement": measurement_to_dict(self.measurement, "flops"),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PeakCandidate:
        return cls(
            m=d["shape"]["m"],
            n=d["shape"]["n"],
            k=d["shape"]["k"],
            measurement=measurement_from_dict(d["measurement"], "flops"),
        )


@dataclass(frozen=True)
class SweepEntry:
    """One swept batch: its point on the roofline and the measurement behind it."""

    point: SweepPoint
    measurement: Measurement

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.point.batch,
            "stepSeconds": self.point.step_seconds,
            "flopsPerSecond": self.point.flops_per_second,
            "bytesPerSecond": self.point.bytes_per_second,
            "arithmeticIntensity": self.point.arithmetic_intensity,
            "rooflineFlopsPerSecond": self.point.roofline_flops_per_second,
            "rooflineFraction": self.point.roofline_fraction,
            "peakFraction": self.point.peak_fraction,
            "secondsPerToken": self.point.seconds_per_token,
            "measurement": measurement_to_dict(self.measurement, "flops"),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepEntry:
        return cls(
            point=SweepPoint(
                batch=d["batch"],
                step_seconds=d["stepSeconds"],
                flops_per_second=d["flopsPerSecond"],
                bytes_per_second=d["bytesPerSecond"],
                arithmetic_intensity=d["arithmeticIntensity"],
                roofline_flops_per_second=d["rooflineFlopsPerSecond"],
                roofline_fraction=d["rooflineFraction"],
                peak_fraction=d["peakFraction"],
                seconds_per_token=d["secondsPerToken"],
            ),
            measurement=measurement_from_dict(d["measurement"], "flops"),
        )
