"""Timing device work the way ``triton.testing.do_bench`` does, in interleaved rounds.

* Warm-up outside the timed region, sized from a first estimate of one run's time.
* Each run timed on its own: CUDA/ROCm with a pair of device events recorded on the stream (no
  host overhead inside the interval), MPS and CPU with a synchronize and ``perf_counter``.
* Workloads are timed in **rounds**: each round gives every workload a short slice, in a rotating
  order, so a burst of outside load lands on all of them alike (see ``stats.py``). After the
  minimum rounds, rounds continue for the workloads interference hit — their best run not yet
  reproduced by a second round, or a level shift between the first and second half of their
  rounds — until they are confirmed or the time budget is spent.
* When the host changes state during the rounds (the workloads one resource bounds, a ceiling
  kernel among them, at two levels in the same rounds, ``host_state_detection.py``), rounds
  continue for what the current state lacks, so that one state covers every workload and the
  roofline pairs ceilings and sweep from the same rounds.
* The caller defeats caches by rotating buffers; a timer never reuses one input in a way that
  lets the cache serve it (see ``workloads.py``). In-cache kernels (the peak matmuls) are the
  exception: each of their slices starts with an untimed run that brings the operands back.
* On a CPU, each slice also records how long the profiler's threads waited for a CPU another
  process held (:func:`cpu_wait_seconds`), so a number no quiet round set can be told apart.

The result is a frozen :class:`~roofline_profiler.core.stats.Measurement` per workload with every
raw sample and its round.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from roofline_profiler.core.stats import Measurement
from roofline_profiler.wire import host_state_detection

#: Fewest rounds a profile takes, budget or not: a best run needs a second round to confirm it,
#: and a third to tell which of two disagreeing rounds interference hit.
MIN_ROUNDS = 3


@dataclass(frozen=True)
class TimingPolicy:
    """How hard to try for one profile."""

    #: Rounds every workload gets unless the budget runs out first (never fewer than
    #: :data:`MIN_ROUNDS`); more are added only for what interference hit.
    min_rounds: int
    #: No workload gets more rounds than this.
    max_rounds: int
    #: Each workload's slice of a round: runs continue until it is spent (at least one run).
    slice_seconds: float
    #: Warm-up per workload before its first round.
    warmup_seconds: float
    #: Wall time from the start of a device's profile (peak search, allocation, warm-up) to the
    #: end of its rounds; a round starts only if it would end within it, judged by how long its
    #: workloads' last slices took (never fewer than :data:`MIN_ROUNDS`), so a machine slow to
    #: fill the buffers gets fewer rounds, not a longer profile.
    budget_seconds: float
    #: The adaptive peak search: seconds per candidate shape and the longest single run allowed.
    search_seconds: float
    max_run_seconds: float


#: ``--quick``: enough for tests and CI, a few seconds in all.
QUICK = TimingPolicy(
    min_rounds=3,
    max_rounds=5,
    slice_seconds=0.01,
    warmup_seconds=0.02,
    budget_seconds=6.0,
    search_seconds=0.05,
    max_run_seconds=0.12,
)
#: Default mode: rounds enough for a bootstrap interval, well under 30 s on a 2-core CPU.
DEFAULT = TimingPolicy(
    min_rounds=6,
    max_rounds=12,
    slice_seconds=0.03,
    warmup_seconds=0.1,
    budget_seconds=26.0,
    search_seconds=0.25,
    max_run_seconds=0.5,
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


def _timer(device: torch.device) -> _EventTimer | _SyncTimer:
    return _EventTimer(device) if device.type == "cuda" else _SyncTimer(device)


@dataclass
class Workload:
    """One thing to time: ``fn(run_index)`` does ``work`` bytes or FLOPs.

    ``fn`` receives the run index so it can rotate through input buffers.
    """

    label: str
    work: float
    fn: Callable[[int], object]
    #: Start every slice with one untimed run. For in-cache kernels (the peak matmuls): the
    #: workloads timed between two of its slices stream far more than the cache holds, so the
    #: first run of a slice would pay to bring the operands back, which is not the ceiling.
    rewarm: bool = False
    warmup_runs: int = 0
    estimate: float = 0.0
    next_index: int = 0
    times: list[float] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    cpu_waits: list[float] = field(default_factory=list)

    def measurement(self) -> Measurement:
        complete = len(self.cpu_waits) == len(set(self.rounds))
        return Measurement(
            label=self.label,
            times=tuple(self.times),
            work=self.work,
            warmup_runs=self.warmup_runs,
            rounds=tuple(self.rounds),
            cpu_waits=tuple(self.cpu_waits) if complete else (),
        )


def cpu_wait_seconds() -> float | None:
    """Seconds this process's threads have spent runnable but waiting for a CPU: the run delay
    of Linux's ``/proc/<pid>/task/<tid>/schedstat``, summed over threads; None elsewhere.

    A thread of a parallel CPU kernel that another process keeps off its CPU delays the whole
    kernel, and only waiting time says so: CPU time does not (the other threads spin meanwhile).
    """
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    total, found = 0, False
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
            found = True
        except (OSError, ValueError, IndexError):
            continue  # a thread that just exited, or no scheduler statistics
    return total / 1e9 if found else None


@dataclass
class WaitClock:
    """The wall clock and, on a CPU, the threads' CPU wait (:func:`cpu_wait_seconds`), read
    together: :meth:`lap` ends one interval and starts the next."""

    track_waits: bool
    threads: int
    at: float = 0.0
    waited: float | None = None

    @classmethod
    def start(cls, device: torch.device) -> WaitClock:
        track = device.type == "cpu" and cpu_wait_seconds() is not None
        clock = cls(track, torch.get_num_threads())
        clock.reset()
        return clock

    def reset(self) -> None:
        self.at, self.waited = time.perf_counter(), cpu_wait_seconds() if self.track_waits else None

    def lap(self) -> tuple[float, float | None]:
        """Seconds since the last reading, and the share of them the threads waited for a CPU
        another process held (None where unknown)."""
        at, waited = self.at, self.waited
        self.reset()
        seconds = self.at - at
        if waited is None or self.waited is None:
            return seconds, None
        return seconds, max(0.0, self.waited - waited) / (seconds * self.threads)


def _warm_up(w: Workload, device: torch.device, seconds: float) -> None:
    """A first call (allocations, kernel selection, lazy initialisation), timed as an estimate;
    then warm-up runs for ``seconds`` when one run is shorter than that."""
    timer = _timer(device)
    w.estimate = timer.run(w.fn, 0, 1)[0]
    runs = min(1000, int(seconds / max(w.estimate, 1e-7)))
    if runs:
        w.estimate = min(timer.run(w.fn, 1, runs))
    w.warmup_runs = 1 + runs
    w.next_index = 1 + runs


def _time_slice(w: Workload, device: torch.device, round_index: int, seconds: float) -> None:
    timer = _timer(device)
    # Runs go in chunks so event timers amortise their synchronize; chunks grow with speed.
    chunk = max(1, min(100, int(seconds / 4 / max(w.estimate, 1e-7))))
    if w.rewarm:
        timer.run(w.fn, w.next_index, 1)
        w.next_index += 1
        w.warmup_runs += 1
    spent = 0.0
    while True:
        times = timer.run(w.fn, w.next_index, chunk)
        w.next_index += chunk
        w.times.extend(times)
        w.rounds.extend([round_index] * len(times))
        spent += sum(times)
        if spent >= seconds:
            return


def needs_more_rounds(m: Measurement) -> bool:
    """Whether interference hit ``m``: its best run is unconfirmed, or its rounds shifted."""
    return not m.is_confirmed or m.step_change


def due_workloads(
    workloads: Sequence[Workload], last_round: int, roles: host_state_detection.Roles | None = None
) -> list[Workload]:
    """The workloads the next round times: those interference hit (:func:`needs_more_rounds`);
    after a change of host state, those the current state still lacks
    (``host_state_detection.py``; only with ``roles``, which say what each workload measures)."""
    measured = {w.label: w.measurement() for w in workloads}
    states = host_state_detection.detect(measured, roles) if roles is not None else None
    if states is None:
        return [w for w in workloads if needs_more_rounds(measured[w.label])]
    labels = host_state_detection.to_remeasure(measured, states, last_round, needs_more_rounds)
    return [w for w in workloads if w.label in labels]


def measure_rounds(
    workloads: Sequence[Workload],
    device: torch.device,
    policy: TimingPolicy,
    progress: Callable[[str], None],
    started: float | None = None,
    roles: host_state_detection.Roles | None = None,
) -> dict[str, Measurement]:
    """Time every workload in interleaved rounds (see the module docstring).

    ``started`` is the ``time.perf_counter()`` the budget counts from: the start of the device's
    profile; by default, the start of the warm-up. ``roles`` say which workloads are ceiling
    kernels and sweep points, so that rounds continue after a change of host state.
    """
    if started is None:
        started = time.perf_counter()
    for position, w in enumerate(workloads, start=1):
        progress(f"warm-up {w.label} ({position}/{len(workloads)})")
        _warm_up(w, device, policy.warmup_seconds)
    due = list(workloads)
    slice_wall: dict[str, float] = {}
    # On a CPU, how long the profiler's threads waited for a CPU during each slice (``sanity.py``
    # warns when the rounds behind a headline number waited).
    clock = WaitClock.start(device)
    round_index = 0
    while due and round_index < policy.max_rounds:
        progress(f"round {round_index + 1}: {len(due)} workload(s)")
        # Rotate the order so no workload always follows the same neighbour.
        shift = round_index % len(due)
        # One clock and wait reading between two slices ends the one and starts the next.
        clock.reset()
        for w in due[shift:] + due[:shift]:
            _time_slice(w, device, round_index, policy.slice_seconds)
            slice_wall[w.label], share = clock.lap()
            if share is not None:
                w.cpu_waits.append(share)
        round_index += 1
        if round_index >= policy.min_rounds:
            due = due_workloads(workloads, round_index - 1, roles)
        # The next round would take what its workloads' last slices took; it runs only if it
        # would end within the budget: a loaded device gets fewer rounds and wider intervals,
        # not a longer profile.
        upcoming = sum(slice_wall[w.label] for w in due)
        past_budget = time.perf_counter() - started + upcoming > policy.budget_seconds
        if past_budget and round_index >= MIN_ROUNDS:
            break
    return {w.label: w.measurement() for w in workloads}


def measure(
    fn: Callable[[int], object],
    *,
    label: str,
    work: float,
    device: torch.device,
    seconds: float,
    min_runs: int = 2,
) -> Measurement:
    """Time ``fn`` alone for about ``seconds`` (at least ``min_runs`` runs), after a warm-up call.

    For a first look (the adaptive peak search); a profile's numbers come from
    :func:`measure_rounds`.
    """
    timer = _timer(device)
    synchronize(device)
    fn(0)
    synchronize(device)
    times: list[float] = []
    spent_from = time.perf_counter()
    index = 1
    while len(times) < min_runs or time.perf_counter() - spent_from < seconds:
        times.extend(timer.run(fn, index, 1))
        index += 1
    return Measurement(label=label, times=tuple(times), work=work, warmup_runs=1)
