"""Warnings attached to a device result, each saying what to do; their codes are named in
``warning_codes.py``.

A warning appears only when a number is less trustworthy than its stated 95% interval, or
physically implausible. Ordinary timing noise is not a warning: it is in the intervals.

* ``InterferenceUnresolved``: a workload that sets a headline number (a ceiling, or a sweep point
  that brackets the minimum-batch crossing) shifted level between its first and second half of
  rounds, and re-measuring within the time budget did not settle it; or it got a single round.
  The bootstrap interval assumes the rounds are alike (and needs two of them), so it understates
  the error then. A best run that a second round did not reproduce is no warning: the bootstrap
  draws that round sometimes and sometimes not, so the interval already spans the disagreement.
* ``SlopeFromDecode``: a decode step streamed its weight :data:`DECODE_SLOPE_SUSPECT` times
  faster than every dedicated read kernel (even at the low end of the slope's interval): more
  than another kernel path explains, so a cache probably served the weight and the slope is
  suspect. A smaller margin is no warning: the decode step is then simply the fastest read
  kernel, and ``bandwidthKernel`` says so.
* ``PeakFromDecode``: a decode step beat every matmul of the peak search by more than the timing
  noise (``stats.AGREEMENT``), even at the low end of the peak's interval: the search missed a
  faster shape, so the true peak may be higher still.
* ``CpuContention``: on a CPU, both rounds behind the confirmed best of a headline workload (its
  two fastest) ran while the profiler's threads waited for a CPU at least
  ``stats.CPU_WAIT_SUSPECT`` of the time (``timing.cpu_wait_seconds``): another process held
  the CPUs in the rounds that set the number, so it may understate the device by more than its
  interval says. Bursts that leave a quiet round among the two are no warning: a quiet round
  that the other does not reproduce is already in the interval (as for
  ``InterferenceUnresolved``).
* ``HostStateChanged``: the host changed state during the profile (``host_state_detection.py``): the
  workloads one resource bounds, a ceiling kernel among them, ran at one level in some rounds and
  at another, at least ``warning_codes.STATE_GAP`` apart, in others (a GPU that throttles, a
  neighbour that comes and goes, a VM's memory bandwidth).
  The message names those workloads with both levels, the rounds of each state, the state every
  number comes from (ceilings, sweep and recommendation from the same rounds) and the headline
  numbers the other state gives where they differ; when no state covered every workload within the
  time budget, it says which workloads keep rounds of the other state.
* ``ImplausibleBandwidth`` / ``ImplausiblePeak`` / ``BandwidthMismatch``: numbers no current
  device produces.
* ``MinBatchFromModel``: no swept batch reached the threshold, so the minimum batch is the
  roofline model's estimate.

Pure module: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from roofline_profiler.core.ceilings import READ_KERNELS, DeviceRoofline, sweep_kernel
from roofline_profiler.core.stats import AGREEMENT, CPU_WAIT_SUSPECT, Measurement
from roofline_profiler.wire.host_state import HostStateReport
from roofline_profiler.wire.result import ResultWarning
from roofline_profiler.wire.warning_codes import (
    BANDWIDTH_MISMATCH,
    CPU_CONTENTION,
    HOST_STATE_CODE,
    IMPLAUSIBLE_BANDWIDTH,
    IMPLAUSIBLE_PEAK,
    INTERFERENCE_UNRESOLVED,
    MIN_BATCH_FROM_MODEL,
    PEAK_FROM_DECODE,
    SLOPE_FROM_DECODE,
)

#: Bounds no current device gets near; outside them a number is a measuring error.
MAX_PLAUSIBLE_BANDWIDTH = 30e12  # bytes/s
MIN_PLAUSIBLE_BANDWIDTH = 1e9
MAX_PLAUSIBLE_PEAK = 20e15  # FLOP/s, dense
MIN_PLAUSIBLE_PEAK = 1e9
#: A decode step may stream faster than the dedicated read kernels (another BLAS path) but not
#: by this factor on the same memory: beyond it a cache must have served the weight.
DECODE_SLOPE_SUSPECT = 1.25
#: Read and copy bandwidth of one memory rarely differ by more than this factor.
MAX_READ_COPY_RATIO = 2.5

IDLE_ADVICE = "re-run when nothing else uses the device (check other processes and GPU tenants)"


def _headline_workloads(
    derived: DeviceRoofline,
    bandwidth: Mapping[str, Measurement],
    peak: Mapping[str, Measurement],
    sweep: Sequence[tuple[int, Measurement]],
) -> list[tuple[str, Measurement]]:
    """The workloads whose measurement a headline number rests on."""
    by_kernel = {
        **bandwidth,
        **peak,
        **{sweep_kernel(b): m for b, m in sweep},
    }
    chosen = [
        ("bandwidth slope", derived.slope.kernel),
        ("copy bandwidth", "copy"),
        ("peak", derived.peak.kernel),
    ]
    crossing = derived.recommendation.crossing
    if crossing is not None:
        below = [b for b, _ in sweep if b <= crossing]
        above = [b for b, _ in sweep if b >= crossing]
        for b in {max(below, default=0), min(above, default=0)} - {0}:
            chosen.append(("minimum-batch crossing", sweep_kernel(b)))
    seen: set[str] = set()
    out = []
    for role, kernel in chosen:
        if kernel in by_kernel and kernel not in seen:
            seen.add(kernel)
            out.append((role, by_kernel[kernel]))
    return out


def _interference(
    derived: DeviceRoofline,
    bandwidth: Mapping[str, Measurement],
    peak: Mapping[str, Measurement],
    sweep: Sequence[tuple[int, Measurement]],
) -> list[ResultWarning]:
    shifted, single = [], []
    for role, m in _headline_workloads(derived, bandwidth, peak, sweep):
        if m.step_change:
            shifted.append(f"{m.label} ({role})")
        elif len(m.round_bests) < 2:
            single.append(f"{m.label} ({role})")
    problems = []
    if shifted:
        problems.append(
            "the speed of " + ", ".join(shifted) + " shifted between the first and last rounds"
        )
    if single:
        problems.append(", ".join(single) + " got a single round")
    if not problems:
        return []
    return [
        ResultWarning(
            INTERFERENCE_UNRESOLVED,
            "; ".join(problems)
            + f" and re-measuring did not settle it, so the intervals understate the error: "
            f"{IDLE_ADVICE}",
        )
    ]


def _contention(
    derived: DeviceRoofline,
    bandwidth: Mapping[str, Measurement],
    peak: Mapping[str, Measurement],
    sweep: Sequence[tuple[int, Measurement]],
) -> list[ResultWarning]:
    waited = []
    for role, m in _headline_workloads(derived, bandwidth, peak, sweep):
        wait = m.confirmed_cpu_wait
        if wait is not None and wait >= CPU_WAIT_SUSPECT:
            waited.append((wait, f"{m.label} ({role})"))
    if not waited:
        return []
    worst = max(wait for wait, _ in waited)
    return [
        ResultWarning(
            CPU_CONTENTION,
            "the best rounds of " + ", ".join(label for _, label in waited) + " ran while the "
            f"profiler's threads waited for a CPU up to {worst:.0%} of the time: another process "
            "held the CPUs throughout, so these numbers understate what the device does alone (one "
            "waiting thread holds up a whole parallel kernel); re-run when the CPUs are idle, or "
            "give the profiler whole CPUs of its own",
        )
    ]


def _from_decode(
    derived: DeviceRoofline,
    bandwidth: Mapping[str, Measurement],
    peak: Mapping[str, Measurement],
    bandwidth_kind: str,
) -> list[ResultWarning]:
    out = []
    kernels = READ_KERNELS if bandwidth_kind == "read" else ("copy",)
    dedicated = max((bandwidth[k].confirmed_rate for k in kernels if k in bandwidth), default=0.0)
    # The weight rotation already keeps the cache out (``measure.weight_copies``), so a decode
    # step that streams a little faster than the dedicated kernels is just the faster kernel
    # (``bandwidthKernel`` records it); only a margin no kernel choice explains is suspect.
    if dedicated and derived.slope.interval[0] > dedicated * DECODE_SLOPE_SUSPECT:
        out.append(
            ResultWarning(
                SLOPE_FROM_DECODE,
                f"the {derived.slope.kernel} step moved its weight "
                f"{derived.slope.value / dedicated:.2f}x faster than the best {bandwidth_kind} "
                "kernel, more than another kernel path explains: a cache probably held the "
                "weight, so the slope may be too high; sweep a larger --shape to check",
            )
        )
    best_mm = max((m.confirmed_rate for m in peak.values()), default=0.0)
    if best_mm and derived.peak.interval[0] > best_mm * (1 + AGREEMENT):
        out.append(
            ResultWarning(
                PEAK_FROM_DECODE,
                f"the {derived.peak.kernel} step ran {derived.peak.value / best_mm:.2f}x faster "
                "than the best matmul the peak search found, so the peak is set by the sweep; the "
                "true peak may be higher still: sweep larger batches to see where it levels off",
            )
        )
    return out


def plausibility_warnings(
    derived: DeviceRoofline,
    bandwidth: Mapping[str, Measurement],
    peak: Mapping[str, Measurement],
    sweep: Sequence[tuple[int, Measurement]],
    bandwidth_kind: str,
) -> tuple[ResultWarning, ...]:
    """Every warning of one device (see the module docstring)."""
    warnings = _interference(derived, bandwidth, peak, sweep)
    warnings += _contention(derived, bandwidth, peak, sweep)
    warnings += _from_decode(derived, bandwidth, peak, bandwidth_kind)
    slope, top = derived.slope.value, derived.peak.value
    if not MIN_PLAUSIBLE_BANDWIDTH <= slope <= MAX_PLAUSIBLE_BANDWIDTH:
        warnings.append(
            ResultWarning(
                IMPLAUSIBLE_BANDWIDTH,
                f"bandwidth {slope:.3g} B/s is outside what any memory delivers "
                f"({MIN_PLAUSIBLE_BANDWIDTH:.0e}-{MAX_PLAUSIBLE_BANDWIDTH:.0e} B/s): the timer "
                "or the device is misreporting; check the device and driver, then re-run",
            )
        )
    if not MIN_PLAUSIBLE_PEAK <= top <= MAX_PLAUSIBLE_PEAK:
        warnings.append(
            ResultWarning(
                IMPLAUSIBLE_PEAK,
                f"peak {top:.3g} FLOP/s is outside what any device delivers "
                f"({MIN_PLAUSIBLE_PEAK:.0e}-{MAX_PLAUSIBLE_PEAK:.0e} FLOP/s): the timer or the "
                "device is misreporting; check the device and driver, then re-run",
            )
        )
    read, copy = derived.read.value, derived.copy.value
    if max(read, copy) > MAX_READ_COPY_RATIO * min(read, copy):
        warnings.append(
            ResultWarning(
                BANDWIDTH_MISMATCH,
                f"read ({read:.3g} B/s) and copy ({copy:.3g} B/s) bandwidth disagree by more "
                f"than {MAX_READ_COPY_RATIO}x, which one memory does not do: one kernel hit a "
                "cache or a slow path; compare with --bandwidth copy and report the device",
            )
        )
    rec = derived.recommendation
    if rec.source == "model":
        warnings.append(
            ResultWarning(
                MIN_BATCH_FROM_MODEL,
                f"no swept batch reached {rec.min_efficiency:.0%} of peak; the minimum "
                f"batch {rec.batch} is the roofline model's estimate "
                f"(ridge point {derived.ridge_point:.1f}); sweep larger batches to measure it",
            )
        )
    return tuple(warnings)


def _rate(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _spans(rounds: Sequence[int]) -> str:
    """``0-3, 7, 9-10``: round indices as runs."""
    spans: list[list[int]] = []
    for r in sorted(rounds):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _differing(report: HostStateReport, derived: DeviceRoofline) -> list[str]:
    """The headline numbers the other state gives beyond this one's interval, both values."""
    other, there = report.other, f"in the {report.state} state"
    out = []
    for name, value, interval, alternative, unit in (
        (
            "bandwidth slope",
            derived.slope.value,
            derived.slope.interval,
            other.bandwidth_bytes_per_second,
            "B/s",
        ),
        ("peak", derived.peak.value, derived.peak.interval, other.peak_flops_per_second, "FLOP/s"),
    ):
        if not interval[0] <= alternative <= interval[1]:
            out.append(
                f"{name} {_rate(value, unit)} {there}, {_rate(alternative, unit)} in the other"
            )
    low, high = derived.ridge_point_interval
    if not low <= other.ridge_point <= high:
        out.append(
            f"ridge point {derived.ridge_point:.3g} {there}, {other.ridge_point:.3g} in the other"
        )
    batch_low, batch_high = derived.recommended_min_batch_interval
    if not batch_low <= other.recommended_min_batch <= batch_high:
        out.append(
            f"min batch {derived.recommendation.batch} {there}, "
            f"{other.recommended_min_batch} in the other"
        )
    return out


def host_state_warning(
    report: HostStateReport, derived: DeviceRoofline, bandwidth_labels: frozenset[str]
) -> ResultWarning:
    """``HostStateChanged`` (see the module docstring)."""
    levels = ", ".join(
        f"{lv.label} {_rate(lv.fast, 'B/s' if lv.label in bandwidth_labels else 'FLOP/s')} or "
        f"{_rate(lv.slow, 'B/s' if lv.label in bandwidth_labels else 'FLOP/s')}"
        for lv in report.levels
    )
    rounds = report.slow_rounds if report.state == "slow" else report.fast_rounds
    chosen = (
        f"every number comes from the {report.state} state's {len(rounds)} rounds, so ceilings, "
        "sweep and minimum batch come from the same rounds"
    )
    if not report.complete:
        chosen += (
            f"; no state covered every workload within the time budget: the {report.state} state "
            f"has the most rounds, and {', '.join(report.missing)} (fewer than two rounds in it) "
            "keep the rounds they have"
        )
    differing = _differing(report, derived)
    numbers = (
        "; " + "; ".join(differing)
        if differing
        else "; the other state's headline numbers lie within these intervals"
    )
    return ResultWarning(
        HOST_STATE_CODE,
        f"the host changed state during the profile: {levels} (fast in rounds "
        f"{_spans(report.fast_rounds)}, slow in rounds {_spans(report.slow_rounds)}); {chosen}"
        f"{numbers}. A GPU that throttles, a neighbour that comes and goes or a host that changes "
        "the memory bandwidth it gives does this: re-profile to see which state persists",
    )
