"""Measurements that keep their raw samples, and the statistics derived from them.

Following ``torch.utils.benchmark.Measurement`` and pyperf: the raw per-run times are the truth;
median, interquartile range and coefficient of variation are computed from them on demand, and
noise is reported as a warning attached to the result rather than printed.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Above this coefficient of variation a measurement is flagged as noisy.
NOISY_COV = 0.05
#: Adaptive repetition stops once the median is known this precisely (relative standard error).
PRECISION_TARGET = 0.01


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method) of an already sorted sequence."""
    if not sorted_values:
        raise ValueError("quantile of an empty sequence")
    if not 0.0 <= q <= 1.0:
        raise ValueError("q must lie in [0, 1]")
    position = (len(sorted_values) - 1) * q
    low = math.floor(position)
    high = math.ceil(position)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


@dataclass(frozen=True)
class Measurement:
    """Repeated timings of one workload.

    ``times`` are seconds per run; ``work`` is what one run does (bytes moved or FLOPs), so rates
    derive from the median time.
    """

    label: str
    times: tuple[float, ...]
    work: float = 0.0
    warmup_runs: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.times:
            raise ValueError(f"{self.label}: a measurement needs at least one sample")
        if any(not math.isfinite(t) or t <= 0 for t in self.times):
            raise ValueError(f"{self.label}: run times must be positive and finite")

    @property
    def repeats(self) -> int:
        return len(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def minimum(self) -> float:
        return min(self.times)

    @property
    def iqr(self) -> float:
        ordered = sorted(self.times)
        return quantile(ordered, 0.75) - quantile(ordered, 0.25)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def cov(self) -> float:
        """Coefficient of variation (sample standard deviation over mean); 0 for one sample."""
        if len(self.times) < 2:
            return 0.0
        return statistics.stdev(self.times) / self.mean

    @property
    def relative_standard_error(self) -> float:
        """Standard error of the mean over the mean: how well more runs have pinned it down."""
        if len(self.times) < 2:
            return math.inf
        return self.cov / math.sqrt(len(self.times))

    @property
    def rate(self) -> float:
        """Work per second at the median time."""
        return self.work / self.median

    @property
    def best_rate(self) -> float:
        """Work per second of the fastest run: what a ceiling is (STREAM reports its best trial).

        Interference from other processes only ever slows a run down, so on a shared machine the
        fastest runs are also the most repeatable estimate of what the hardware can do.
        """
        return self.work / self.minimum

    @property
    def is_noisy(self) -> bool:
        return self.cov > NOISY_COV

    def summary(self) -> dict[str, float | int]:
        return {
            "medianSeconds": self.median,
            "minSeconds": self.minimum,
            "iqrSeconds": self.iqr,
            "cov": self.cov,
            "repeats": self.repeats,
        }


def precise_enough(times: Sequence[float], minimum_runs: int, target: float) -> bool:
    """Whether adaptive repetition may stop: enough runs and the mean pinned to ``target``."""
    if len(times) < max(minimum_runs, 2):
        return False
    mean = statistics.fmean(times)
    return statistics.stdev(times) / mean / math.sqrt(len(times)) <= target
