"""Warnings attached to a device result: noisy timings and physically implausible numbers.

A number that breaks the roofline itself is the strongest sign of a measuring error: no decode
step can beat the measured peak or move its bytes faster than the measured bandwidth, so when the
sweep does, one of the ceilings was under-measured (or a cache served the weight).

Pure module: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from roofline_profiler.recommend import Recommendation
from roofline_profiler.result import PeakCandidate, SweepEntry, Warning_
from roofline_profiler.stats import NOISY_COV, Measurement

#: Tolerances before a sweep point counts as beating a ceiling.
PEAK_TOLERANCE = 1.05
BANDWIDTH_TOLERANCE = 1.10
#: Bounds no current device gets near; outside them a number is a measuring error.
MAX_PLAUSIBLE_BANDWIDTH = 30e12  # bytes/s
MIN_PLAUSIBLE_BANDWIDTH = 1e9
MAX_PLAUSIBLE_PEAK = 20e15  # FLOP/s, dense
MIN_PLAUSIBLE_PEAK = 1e9
#: Read and copy bandwidth of one memory rarely differ by more than this factor.
MAX_READ_COPY_RATIO = 2.5


def _noise(measurements: Sequence[Measurement], precision_target: float) -> list[Warning_]:
    noisy = [m for m in measurements if m.cov > NOISY_COV]
    imprecise = [m for m in measurements if m.relative_standard_error > precision_target]
    out = []
    if noisy:
        worst = max(noisy, key=lambda m: m.cov)
        out.append(
            Warning_(
                "NoisyMeasurement",
                f"{len(noisy)} measurement(s) vary by more than {NOISY_COV:.0%} "
                f"(worst: {worst.label}, CoV {worst.cov:.1%}); something else may be using the "
                "device",
            )
        )
    if imprecise:
        labels = ", ".join(m.label for m in imprecise[:4])
        out.append(
            Warning_(
                "PrecisionNotReached",
                f"time budget ran out before the precision target "
                f"({precision_target:.1%} relative standard error) for: {labels}",
            )
        )
    return out


def plausibility_warnings(
    bandwidth: Mapping[str, Measurement],
    peak_candidates: Sequence[PeakCandidate],
    sweep: Sequence[SweepEntry],
    ridge: float,
    recommendation: Recommendation,
    precision_target: float,
    bandwidth_kind: str,
) -> tuple[Warning_, ...]:
    timed = (
        list(bandwidth.values())
        + [c.measurement for c in peak_candidates]
        + [e.measurement for e in sweep]
    )
    warnings = _noise(timed, precision_target)
    bandwidth_bps = bandwidth[bandwidth_kind].best_rate
    peak = max(c.flops_per_second for c in peak_candidates)

    fast = [e.point for e in sweep if e.point.flops_per_second > PEAK_TOLERANCE * peak]
    if fast:
        warnings.append(
            Warning_(
                "SweepAbovePeak",
                f"the decode GEMM at B={fast[0].batch} ran at "
                f"{fast[0].flops_per_second / peak:.2f}x the measured peak: peak under-measured",
            )
        )
    streaming = [
        e.point for e in sweep if e.point.bytes_per_second > BANDWIDTH_TOLERANCE * bandwidth_bps
    ]
    if streaming:
        warnings.append(
            Warning_(
                "SweepAboveBandwidth",
                f"the decode GEMM at B={streaming[0].batch} moved "
                f"{streaming[0].bytes_per_second / bandwidth_bps:.2f}x the measured bandwidth: "
                "a cache served the weight or the bandwidth was under-measured",
            )
        )
    if not MIN_PLAUSIBLE_BANDWIDTH <= bandwidth_bps <= MAX_PLAUSIBLE_BANDWIDTH:
        warnings.append(
            Warning_("ImplausibleBandwidth", f"bandwidth {bandwidth_bps:.3g} B/s is implausible")
        )
    if not MIN_PLAUSIBLE_PEAK <= peak <= MAX_PLAUSIBLE_PEAK:
        warnings.append(Warning_("ImplausiblePeak", f"peak {peak:.3g} FLOP/s is implausible"))
    read, copy = bandwidth["read"].best_rate, bandwidth["copy"].best_rate
    if max(read, copy) > MAX_READ_COPY_RATIO * min(read, copy):
        warnings.append(
            Warning_(
                "BandwidthMismatch",
                f"read ({read:.3g} B/s) and copy ({copy:.3g} B/s) bandwidth disagree by more "
                f"than {MAX_READ_COPY_RATIO}x",
            )
        )
    if recommendation.source == "model":
        warnings.append(
            Warning_(
                "MinBatchFromModel",
                f"no swept batch reached {recommendation.min_efficiency:.0%} of peak; the minimum "
                f"batch {recommendation.batch} is the roofline model's estimate "
                f"(ridge point {ridge:.1f}); sweep larger batches to measure it",
            )
        )
    return tuple(warnings)
