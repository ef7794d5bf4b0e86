"""Measurements that keep their raw samples, and the statistics derived from them.

Following ``torch.utils.benchmark.Measurement`` and pyperf: the raw per-run times are the truth;
every estimate and its uncertainty is computed from them on demand.

Samples are taken in **rounds**: every workload of a profile (bandwidth kernels, matmuls, sweep
points) is timed for a short slice in each round, and the rounds follow one another, so a burst
of outside load hits all workloads alike instead of one of them wholesale. Interference from
other processes only ever slows a run down, so a ceiling is a best run (as STREAM reports its
best trial); to keep one lucky run from deciding a number, the estimate is the **confirmed
best**: the fastest time that at least two rounds reach (the second-fastest round best). Its 95%
interval comes from a bootstrap over rounds (resampling whole rounds with replacement, seeded, so
the same samples always give the same interval).

Pure module: no torch, no numpy.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Two rounds agree when their best times differ by at most this much: the timing noise a quiet
#: device shows between rounds. A best run not reproduced within it is unconfirmed.
AGREEMENT = 0.03
#: Rounds at least this much slower than the confirmed best were hit by interference.
INTERFERENCE = 0.10
#: A parallel CPU kernel whose threads waited this share of a round for a CPU another process
#: held ran that much slower, several times the timing noise of a round (:data:`AGREEMENT`).
CPU_WAIT_SUSPECT = 0.10
#: Which quantile of the rounds' medians stands for a part's typical run (``quiet_median``).
QUIET_QUANTILE = 0.25
#: Fewest rounds in which a level shift can be told from chance (see ``Measurement.step_change``).
STEP_CHANGE_ROUNDS = 8
#: Coverage of every interval the profiler reports.
CONFIDENCE = 0.95
#: Bootstrap resamples per interval: enough that the 2.5% and 97.5% points are stable.
RESAMPLES = 400
#: Seed of the bootstrap, fixed so that identical samples give identical intervals.
SEED = 20091

Interval = tuple[float, float]


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


def confirmed_minimum(values: Sequence[float]) -> float:
    """The smallest value that a second value also reaches: the second smallest (or the only)."""
    if not values:
        raise ValueError("confirmed minimum of an empty sequence")
    ordered = sorted(values)
    return ordered[1] if len(ordered) > 1 else ordered[0]


@dataclass(frozen=True)
class Measurement:
    """Repeated timings of one workload.

    ``times`` are seconds per run; ``rounds[i]`` is the interleaved round run ``i`` belongs to
    (empty: all in one round); ``work`` is what one run does (bytes moved or FLOPs).
    """

    label: str
    times: tuple[float, ...]
    work: float = 0.0
    warmup_runs: int = 0
    rounds: tuple[int, ...] = ()
    #: Per round, in round order: the share of the round's slice that this process's compute
    #: threads spent runnable but waiting for a CPU another process held (CPU devices on Linux;
    #: empty where the kernel does not say).
    cpu_waits: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not self.times:
            raise ValueError(f"{self.label}: a measurement needs at least one sample")
        if any(not math.isfinite(t) or t <= 0 for t in self.times):
            raise ValueError(f"{self.label}: run times must be positive and finite")
        if self.rounds and len(self.rounds) != len(self.times):
            raise ValueError(f"{self.label}: one round index per sample")
        if self.cpu_waits and len(self.cpu_waits) != len(self.round_bests):
            raise ValueError(f"{self.label}: one CPU wait share per round")

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
    def rate(self) -> float:
        """Work per second at the median time."""
        return self.work / self.median

    @property
    def best_rate(self) -> float:
        """Work per second of the fastest run."""
        return self.work / self.minimum

    def _round_runs(self) -> list[list[float]]:
        """The runs of each round, in round order (no rounds: one round of every run)."""
        if not self.rounds:
            return [list(self.times)]
        runs: dict[int, list[float]] = {}
        for r, t in zip(self.rounds, self.times, strict=True):
            runs.setdefault(r, []).append(t)
        return [runs[r] for r in sorted(runs)]

    @property
    def round_bests(self) -> tuple[float, ...]:
        """The fastest run of each round, in round order."""
        return tuple(min(runs) for runs in self._round_runs())

    @property
    def round_medians(self) -> tuple[float, ...]:
        """The median run of each round, in round order."""
        return tuple(statistics.median(runs) for runs in self._round_runs())

    @property
    def quiet_median(self) -> float:
        """The typical run of the quieter rounds: the lower quartile of the rounds' medians.

        A part of a decode step is predicted by its typical run, not its luckiest one, but
        interference from other processes only slows rounds down, and a burst that covers a whole
        round would otherwise move the median of every sample. Of five rounds this is the
        second-fastest round's median, so one unusually fast round does not decide it and three
        disturbed rounds do not move it (one round: its median).
        """
        return quantile(sorted(self.round_medians), QUIET_QUANTILE)

    @property
    def confirmed_time(self) -> float:
        """The fastest time two rounds reach (see the module docstring)."""
        return confirmed_minimum(self.round_bests)

    @property
    def confirmed_rate(self) -> float:
        return self.work / self.confirmed_time

    @property
    def confirmed_cpu_wait(self) -> float | None:
        """The CPU wait share of the quieter of the two fastest rounds (the rounds behind the
        confirmed best); None unknown. High only when no quiet round came near the number."""
        if not self.cpu_waits:
            return None
        bests = self.round_bests
        fastest = sorted(range(len(bests)), key=lambda i: bests[i])[:2]
        return min(self.cpu_waits[i] for i in fastest)

    @property
    def is_confirmed(self) -> bool:
        """Whether two rounds agree on the best time within :data:`AGREEMENT`."""
        bests = sorted(self.round_bests)
        return len(bests) >= 2 and bests[1] <= bests[0] * (1 + AGREEMENT)

    @property
    def hit_rounds(self) -> int:
        """Rounds whose best is :data:`INTERFERENCE` slower than the confirmed best."""
        limit = self.confirmed_time * (1 + INTERFERENCE)
        return sum(1 for t in self.round_bests if t > limit)

    @property
    def step_change(self) -> bool:
        """A level shift: every round of one half slower than every round of the other, and
        their medians :data:`INTERFERENCE` apart.

        A job that starts or stops beside the profile, or a device that throttles, moves every
        later round together; bursts that come and go leave fast rounds in both halves. Complete
        separation of two halves of four rounds happens by chance with probability 2/70 (the exact
        two-sided Mann-Whitney test), so fewer rounds cannot show a shift at the 5% level.
        """
        bests = self.round_bests
        if len(bests) < STEP_CHANGE_ROUNDS:
            return False
        half = len(bests) // 2
        first, second = bests[:half], bests[-half:]
        slow, fast = (first, second) if min(first) > max(second) else (second, first)
        return min(slow) > max(fast) and statistics.median(slow) > statistics.median(fast) * (
            1 + INTERFERENCE
        )

    def summary(self) -> dict[str, float | int]:
        return {
            "medianSeconds": self.median,
            "minSeconds": self.minimum,
            "iqrSeconds": self.iqr,
            "cov": self.cov,
            "repeats": self.repeats,
        }


class Bootstrap:
    """Resamples of a measurement's rounds, drawn with a fixed seed.

    ``draws(m)`` gives :data:`RESAMPLES` lists of round bests, each as many rounds as ``m`` has,
    drawn with replacement. Measurements are resampled independently (they were interleaved, so
    a burst that hit one round is shared; treating them as independent widens a ratio's interval
    a little, never narrows it).
    """

    def __init__(self, resamples: int = RESAMPLES, seed: int = SEED) -> None:
        self.resamples = resamples
        self._random = random.Random(seed)

    def draws(self, m: Measurement) -> list[list[float]]:
        bests = m.round_bests
        return [self._random.choices(bests, k=len(bests)) for _ in range(self.resamples)]

    def confirmed_rates(self, m: Measurement) -> list[float]:
        """The confirmed rate of every resample of ``m``."""
        return [m.work / confirmed_minimum(draw) for draw in self.draws(m)]


def percentile_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """The central ``confidence`` interval of bootstrap ``values`` (percentile method)."""
    ordered = sorted(values)
    tail = (1.0 - confidence) / 2.0
    return (quantile(ordered, tail), quantile(ordered, 1.0 - tail))


def widen_to_include(interval: Interval, value: float) -> Interval:
    """The interval, stretched if needed so it contains the point estimate it describes."""
    return (min(interval[0], value), max(interval[1], value))
