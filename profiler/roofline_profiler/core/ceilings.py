"""The roofline numbers of one device, computed once from its measurements, with 95% intervals.

Ceilings are empirical maxima over a family of kernels (the Empirical Roofline Toolkit's
definition; Y. J. Lo et al., *Roofline Model Toolkit*, PMBS 2014):

* **read bandwidth**: the best confirmed rate of the read kernels (``read``, ``readMatvec``) and of
  every decode-GEMM sweep point, counting the bytes the decode step must move; the decode GEMM at
  the smallest batch is a read kernel in its own right, and usually the fastest one a BLAS has;
* **copy bandwidth**: the copy kernel (bytes read + written);
* the **slope** is the read bandwidth (or, with ``--bandwidth copy``, the copy kernel and the sweep
  points);
* the **peak**: the best confirmed rate of the matmuls the adaptive search kept and of every sweep
  point, so the peak is never below the sweep's own best point.

``kernel`` records which workload set each ceiling. By construction no sweep point lies above the
roof; when a ceiling comes from a sweep point rather than from a dedicated kernel by more than the
timing noise, ``sanity.py`` says which number is suspect. Rates are confirmed best rates
(``stats.py``): every workload was timed in the same interleaved rounds.

Every headline number carries a 95% interval from a bootstrap over the rounds: each resample
recomputes every ceiling, the ridge point and the recommendation from resampled rounds, so the
intervals follow the numbers through every max, ratio and threshold.

Pure module: no torch, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from roofline_profiler.core import recommend, roofline
from roofline_profiler.core.stats import (
    Bootstrap,
    Interval,
    Measurement,
    percentile_interval,
    quantile,
    widen_to_include,
)

READ_KERNELS = ("read", "readMatvec")
COPY_KERNEL = "copy"
#: The label of a decode-sweep point, before its batch.
SWEEP_KERNEL_PREFIX = "decode B="


def sweep_kernel(batch: int) -> str:
    return f"{SWEEP_KERNEL_PREFIX}{batch}"


@dataclass(frozen=True)
class Ceiling:
    """A ceiling: its value, 95% interval and the workload that set it."""

    value: float
    interval: Interval
    kernel: str


@dataclass(frozen=True)
class DeviceRoofline:
    read: Ceiling
    copy: Ceiling
    slope: Ceiling
    peak: Ceiling
    ridge_point: float
    ridge_point_interval: Interval
    points: tuple[recommend.SweepPoint, ...]
    knee_batch: int | None
    recommendation: recommend.Recommendation
    recommended_min_batch_interval: tuple[int, int]
    crossing_interval: Interval | None
    #: Rounds the bootstrap resampled (the most any workload got).
    rounds: int


def _best(candidates: Mapping[str, float]) -> tuple[str, float]:
    kernel = max(candidates, key=lambda name: candidates[name])
    return kernel, candidates[kernel]


def _integer_interval(values: Sequence[int]) -> tuple[int, int]:
    ordered = sorted(values)
    last = len(ordered) - 1
    return ordered[int(0.025 * last)], ordered[-1 - int(0.025 * last)]


@dataclass(frozen=True)
class _Draw:
    """The ceilings and sweep of one bootstrap resample, or of the measured rounds themselves."""

    read: tuple[str, float]
    copy: float
    slope: tuple[str, float]
    peak: tuple[str, float]
    steps: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class _Setup:
    """What every draw is derived for: the swept decode GEMM's weight shape, the bytes of one
    weight and of one activation, the bandwidth kind of the slope and the efficiency a
    recommended batch must reach."""

    k: int
    n: int
    element_bytes: float
    bandwidth_kind: str
    min_efficiency: float
    activation_bytes: float | None = None


def _draw(
    read_rates: Mapping[str, float],
    copy_rate: float,
    peak_rates: Mapping[str, float],
    steps: Sequence[tuple[int, float]],
    setup: _Setup,
) -> _Draw:
    k, n, element_bytes = setup.k, setup.n, setup.element_bytes
    decode_bytes = {
        sweep_kernel(b): roofline.decode_gemm_bytes(b, k, n, element_bytes, setup.activation_bytes)
        / t
        for b, t in steps
    }
    decode_flops = {sweep_kernel(b): roofline.decode_gemm_flops(b, k, n) / t for b, t in steps}
    read = _best({**read_rates, **decode_bytes})
    slope = (
        read if setup.bandwidth_kind == "read" else _best({COPY_KERNEL: copy_rate, **decode_bytes})
    )
    return _Draw(
        read=read,
        copy=copy_rate,
        slope=slope,
        peak=_best({**peak_rates, **decode_flops}),
        steps=tuple(steps),
    )


def _analyse(
    d: _Draw, setup: _Setup
) -> tuple[tuple[recommend.SweepPoint, ...], recommend.Recommendation]:
    """A draw's sweep points under its own ceilings, and the minimum batch they recommend."""
    k, n, element_bytes = setup.k, setup.n, setup.element_bytes
    points = recommend.analyse_sweep(
        d.steps, k, n, element_bytes, d.peak[1], d.slope[1], setup.activation_bytes
    )
    ridge = roofline.ridge_point(d.peak[1], d.slope[1])
    rec = recommend.recommended_min_batch(
        points, k, n, element_bytes, ridge, setup.min_efficiency, setup.activation_bytes
    )
    return points, rec


def _resampled_draws(
    reads: Mapping[str, Measurement],
    copy: Measurement,
    peak: Mapping[str, Measurement],
    sweep: Sequence[tuple[int, Measurement]],
    setup: _Setup,
    boot: Bootstrap,
) -> list[_Draw]:
    """One draw per bootstrap resample: every workload's confirmed rate from its own resample of
    its rounds (``stats.Bootstrap``), the ceilings and steps recomputed from those rates."""
    resampled_reads = {name: boot.confirmed_rates(m) for name, m in reads.items()}
    resampled_copy = boot.confirmed_rates(copy)
    resampled_peak = {name: boot.confirmed_rates(m) for name, m in peak.items()}
    resampled_steps = {b: [m.work / r for r in boot.confirmed_rates(m)] for b, m in sweep}
    return [
        _draw(
            {name: rates[i] for name, rates in resampled_reads.items()},
            resampled_copy[i],
            {name: rates[i] for name, rates in resampled_peak.items()},
            [(b, resampled_steps[b][i]) for b, _ in sweep],
            setup,
        )
        for i in range(boot.resamples)
    ]


def _ceiling(point: tuple[str, float], values: Sequence[float]) -> Ceiling:
    """A ceiling at its measured ``(kernel, value)``, its interval the resamples' (widened to
    include the value)."""
    return Ceiling(point[1], widen_to_include(percentile_interval(values), point[1]), point[0])


def _crossing_interval(
    recommendation: recommend.Recommendation, analysed: Sequence[recommend.Recommendation]
) -> Interval | None:
    """The efficiency crossing's 95% interval, when the measured sweep crosses and at least half
    the resamples do too; fewer leave too few crossings for the interval's ends."""
    crossings = sorted(r.crossing for r in analysed if r.crossing is not None)
    if recommendation.crossing is None or len(crossings) < len(analysed) // 2:
        return None
    return widen_to_include(
        (quantile(crossings, 0.025), quantile(crossings, 0.975)), recommendation.crossing
    )


def derive(
    bandwidth: Mapping[str, Measurement],
    peak: Mapping[str, Measurement],
    sweep: Sequence[tuple[int, Measurement]],
    k: int,
    n: int,
    element_bytes: float,
    bandwidth_kind: str,
    min_efficiency: float,
    bootstrap: Bootstrap | None = None,
    activation_bytes: float | None = None,
) -> DeviceRoofline:
    """Every roofline number of a device from its measurements (see the module docstring).

    ``element_bytes`` are the bytes of one swept weight, ``activation_bytes`` those of an input
    or output element (the same unless given): a weight format's roofline (``format_roofline``)
    sweeps weights of a fraction of a byte with 16-bit activations."""
    if bandwidth_kind not in ("read", "copy"):
        raise ValueError(f"unknown bandwidth kind {bandwidth_kind!r}")
    if not sweep or not peak:
        raise ValueError("a roofline needs a sweep and at least one peak candidate")
    reads = {name: m for name, m in bandwidth.items() if name in READ_KERNELS}
    copy = bandwidth[COPY_KERNEL]
    setup = _Setup(k, n, element_bytes, bandwidth_kind, min_efficiency, activation_bytes)
    measured = _draw(
        {name: m.confirmed_rate for name, m in reads.items()},
        copy.confirmed_rate,
        {name: m.confirmed_rate for name, m in peak.items()},
        [(b, m.confirmed_time) for b, m in sweep],
        setup,
    )
    points, recommendation = _analyse(measured, setup)
    draws = _resampled_draws(reads, copy, peak, sweep, setup, bootstrap or Bootstrap())
    analysed = [_analyse(d, setup)[1] for d in draws]

    ridge = roofline.ridge_point(measured.peak[1], measured.slope[1])
    low, high = _integer_interval([r.batch for r in analysed])
    every = [*bandwidth.values(), *peak.values(), *(m for _, m in sweep)]
    return DeviceRoofline(
        read=_ceiling(measured.read, [d.read[1] for d in draws]),
        copy=_ceiling((COPY_KERNEL, measured.copy), [d.copy for d in draws]),
        slope=_ceiling(measured.slope, [d.slope[1] for d in draws]),
        peak=_ceiling(measured.peak, [d.peak[1] for d in draws]),
        ridge_point=ridge,
        ridge_point_interval=widen_to_include(
            percentile_interval([d.peak[1] / d.slope[1] for d in draws]), ridge
        ),
        points=points,
        knee_batch=recommend.knee_batch(points),
        recommendation=recommendation,
        recommended_min_batch_interval=(
            min(low, recommendation.batch),
            max(high, recommendation.batch),
        ),
        crossing_interval=_crossing_interval(recommendation, analysed),
        rounds=max(len(m.round_bests) for m in every),
    )
