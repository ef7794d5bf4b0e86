"""Timing device work the way ``triton.testing.do_bench`` does.

* Warm-up outside the timed region, sized from a first estimate of one run's time.
* Each run timed on its own: CUDA/ROCm with a pair of device events recorded on the stream (no
  host overhead inside the interval), MPS and CPU with a synchronize and ``perf_counter``.
* Repetition adapts: runs continue until the mean is pinned to a relative standard error target
  (:func:`roofline_profiler.stats.precise_enough`), or until a time budget or a run cap is hit.
* The caller defeats caches by rotating buffers; a timer never reuses one input in a way that
  lets the cache serve it (see ``measure.py``).

The result is a frozen :class:`~roofline_profiler.stats.Measurement` with every raw sample.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from roofline_profiler.stats import Measurement, precise_enough


@dataclass(frozen=True)
class TimingPolicy:
    """How hard to try for one measurement."""

    min_runs: int
    max_runs: int
    budget_seconds: float
    warmup_seconds: float
    precision_target: float


#: ``--quick``: enough for tests and CI, a few seconds in all.
QUICK = TimingPolicy(
    min_runs=3, max_runs=50, budget_seconds=0.25, warmup_seconds=0.05, precision_target=0.03
)
#: Default mode: tighter statistics, still well under a minute on a laptop CPU.
DEFAULT = TimingPolicy(
    min_runs=10, max_runs=500, budget_seconds=1.0, warmup_seconds=0.2, precision_target=0.005
)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


class _EventTimer:
    """Per-run CUDA events; host-side launch overhead stays outside each interval."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def run(self, fn: Callable[[int], object], first: int, count: int) -> list[float]:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
        for i in range(count):
            starts[i].record()
            fn(first + i)
            ends[i].record()
        torch.cuda.synchronize(self.device)
        return [s.elapsed_time(e) / 1000.0 for s, e in zip(starts, ends, strict=True)]


class _SyncTimer:
    """Synchronize, then wall-clock each run; right for CPU, adequate for MPS."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def run(self, fn: Callable[[int], object], first: int, count: int) -> list[float]:
        times = []
        for i in range(count):
            synchronize(self.device)
            start = time.perf_counter()
            fn(first + i)
            synchronize(self.device)
            times.append(time.perf_counter() - start)
        return times


def measure(
    fn: Callable[[int], object],
    *,
    label: str,
    work: float,
    device: torch.device,
    policy: TimingPolicy,
) -> Measurement:
    """Time ``fn(run_index)`` repeatedly; ``work`` is the bytes or FLOPs of one call.

    ``fn`` receives the run index so it can rotate through input buffers.
    """
    timer = _EventTimer(device) if device.type == "cuda" else _SyncTimer(device)
    # First call outside everything: allocations, kernel selection, lazy initialisation.
    synchronize(device)
    fn(0)
    synchronize(device)
    estimate = min(timer.run(fn, 1, 1))
    warmup_runs = 1 + min(1000, int(policy.warmup_seconds / max(estimate, 1e-7)))
    timer.run(fn, 2, warmup_runs)
    index = 2 + warmup_runs

    times: list[float] = []
    # Runs go in chunks so event timers amortise their synchronize; chunks grow with speed.
    chunk = max(1, min(policy.max_runs, int(0.02 / max(estimate, 1e-7))))
    spent_from = time.perf_counter()
    while len(times) < policy.max_runs:
        count = min(chunk, policy.max_runs - len(times))
        times.extend(timer.run(fn, index, count))
        index += count
        if precise_enough(times, policy.min_runs, policy.precision_target):
            break
        if (
            len(times) >= policy.min_runs
            and time.perf_counter() - spent_from > policy.budget_seconds
        ):
            break
    return Measurement(label=label, times=tuple(times), work=work, warmup_runs=warmup_runs + 2)
