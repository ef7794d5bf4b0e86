"""From a measured decode sweep to the numbers serving is sized on.

Definitions (documented in the README, tested exactly in ``tests/profiler/core/test_recommend.py``):

* **Achieved FLOP/s** at batch B: ``2·B·K·N / step time``; **achieved bytes/s**: the minimum
  traffic (weight + input + output) over the step time.
* **Roofline fraction**: achieved FLOP/s over ``min(peak, intensity·bandwidth)`` at B's intensity.
* **Knee** (observed): where the flat, bandwidth-bound part of the step-time curve meets the
  compute-bound line. The flat level is the step time at the smallest swept batch; the
  compute-bound line goes through the origin and the largest swept batch. Their intersection
  ``B_min_step · B_max / step(B_max)`` is the knee, reported rounded to an integer. When the largest
  batch costs less than :data:`KNEE_MIN_GROWTH` times the smallest, the sweep never left the flat
  region and the knee is unknown (None).
* **Recommended minimum batch.** The efficiency of batch B is its achieved FLOP/s over the peak.
  The **crossing** is where the efficiency rises through ``min_efficiency`` for the last time:
  scanning down from the largest swept batch while batches reach it, the first batch that does not
  (B_lo, efficiency e_lo) and the one above it (B_hi, e_hi) bracket it, and the crossing is
  interpolated linearly in log-batch, with ``m = min_efficiency``:
  ``log B* = log B_lo + (m - e_lo)/(e_hi - e_lo) · log(B_hi/B_lo)``.
  Requiring every larger batch to reach the threshold keeps one lucky
  small batch from lowering it. The recommended minimum batch is the swept batch nearest the
  crossing on a log scale (ties to the larger). Unlike "the first swept batch that reaches the
  threshold", which jumps a whole sweep step when a point near the threshold moves by a percent,
  the crossing moves continuously with the measurements; the published batch changes only when the
  crossing passes the geometric midpoint of two swept batches, where it depends on both bracketing
  points and so is least sensitive to noise in either. Its 95% interval (bootstrap over the
  measurement rounds, ``ceilings.py``) is reported with it. When every swept batch reaches the
  threshold, the crossing is the smallest swept batch. When none does (the largest is below it),
  the roofline model's estimate is used instead: the smallest B whose intensity reaches
  ``min_efficiency × ridge point``, i.e. where the bandwidth slope alone would allow that fraction
  of peak. The ``source`` says which one applied.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from roofline_profiler.core import roofline

#: Default fraction of the measured peak a batch must reach to be recommended.
DEFAULT_MIN_EFFICIENCY = 0.5
#: A sweep whose largest batch is not this much slower than its smallest has no visible knee.
KNEE_MIN_GROWTH = 1.5


@dataclass(frozen=True)
class SweepPoint:
    """One analysed batch of the decode sweep."""

    batch: int
    step_seconds: float
    flops_per_second: float
    bytes_per_second: float
    arithmetic_intensity: float
    roofline_flops_per_second: float
    roofline_fraction: float
    peak_fraction: float
    seconds_per_token: float


@dataclass(frozen=True)
class Recommendation:
    batch: int
    source: str  # "sweep" or "model"
    min_efficiency: float
    #: The interpolated batch where the efficiency crosses the threshold (None: from the model).
    crossing: float | None = None


def analyse_sweep(
    steps: Sequence[tuple[int, float]],
    k: int,
    n: int,
    element_bytes: float,
    peak_flops_per_second: float,
    bandwidth_bytes_per_second: float,
    activation_bytes: float | None = None,
) -> tuple[SweepPoint, ...]:
    """Derive achieved rates and roofline fractions for ``(batch, step_seconds)`` pairs
    (``activation_bytes``: see :func:`roofline.decode_gemm_bytes`)."""
    points = []
    for batch, step in sorted(steps):
        if batch <= 0 or step <= 0:
            raise ValueError("batches and step times must be positive")
        flops = roofline.decode_gemm_flops(batch, k, n) / step
        intensity = roofline.arithmetic_intensity(batch, k, n, element_bytes, activation_bytes)
        bound = roofline.roofline_bound(
            intensity, peak_flops_per_second, bandwidth_bytes_per_second
        )
        points.append(
            SweepPoint(
                batch=batch,
                step_seconds=step,
                flops_per_second=flops,
                bytes_per_second=roofline.decode_gemm_bytes(
                    batch, k, n, element_bytes, activation_bytes
                )
                / step,
                arithmetic_intensity=intensity,
                roofline_flops_per_second=bound,
                roofline_fraction=flops / bound,
                peak_fraction=flops / peak_flops_per_second,
                seconds_per_token=step / batch,
            )
        )
    return tuple(points)


def knee_batch(points: Sequence[SweepPoint]) -> int | None:
    """Observed knee of the step-time curve (see the module docstring), or None."""
    if len(points) < 2:
        return None
    first, last = points[0], points[-1]
    if last.step_seconds < KNEE_MIN_GROWTH * first.step_seconds:
        return None
    knee = first.step_seconds * last.batch / last.step_seconds
    return max(first.batch, min(last.batch, round(knee)))


def efficiency_crossing(points: Sequence[SweepPoint], min_efficiency: float) -> float | None:
    """The log-interpolated batch where the efficiency last rises through ``min_efficiency``.

    None when the largest swept batch stays below it (see the module docstring).
    """
    if not points or points[-1].peak_fraction < min_efficiency:
        return None
    upper = len(points) - 1
    while upper > 0 and points[upper - 1].peak_fraction >= min_efficiency:
        upper -= 1
    if upper == 0:
        return float(points[0].batch)
    low, high = points[upper - 1], points[upper]
    share = (min_efficiency - low.peak_fraction) / (high.peak_fraction - low.peak_fraction)
    return math.exp(math.log(low.batch) + share * (math.log(high.batch) - math.log(low.batch)))


def nearest_swept_batch(crossing: float, batches: Sequence[int]) -> int:
    """The swept batch nearest ``crossing`` on a log scale; a tie goes to the larger batch."""
    if not batches:
        raise ValueError("no swept batches")
    target = math.log(crossing)
    return min(batches, key=lambda b: (round(abs(math.log(b) - target), 9), -b))


def recommended_min_batch(
    points: Sequence[SweepPoint],
    k: int,
    n: int,
    element_bytes: float,
    ridge: float,
    min_efficiency: float = DEFAULT_MIN_EFFICIENCY,
    activation_bytes: float | None = None,
) -> Recommendation:
    """The recommended minimum batch (see the module docstring for the definition)."""
    if not 0 < min_efficiency <= 1:
        raise ValueError("min_efficiency must lie in (0, 1]")
    crossing = efficiency_crossing(points, min_efficiency)
    if crossing is not None:
        batch = nearest_swept_batch(crossing, [p.batch for p in points])
        return Recommendation(batch, "sweep", min_efficiency, crossing)
    modelled = roofline.batch_for_intensity(
        min_efficiency * ridge, k, n, element_bytes, activation_bytes
    )
    if modelled is None:
        # The shape cannot reach that intensity at any batch: the largest swept batch is the
        # best a server can do with it.
        modelled = max((p.batch for p in points), default=1)
    return Recommendation(batch=modelled, source="model", min_efficiency=min_efficiency)
