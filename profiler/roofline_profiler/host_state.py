"""Changes of host state within a profile, and the rounds a self-consistent roofline uses.

A host can give a device one speed for a while and another after: a GPU that throttles for power
or heat, a MIG or time-sliced neighbour that comes and goes, a virtual machine whose host hands
it memory bandwidth at one level and then at another (a 2-vCPU AMD EPYC VM switched between about
32 and 55-60 GB/s of read bandwidth on a time scale of seconds, with or without load). Interference
(another process taking the device for a moment) slows the rounds it hits, each by its own amount,
and the confirmed best and its interval absorb it (``stats.py``). A state is different: it moves
every round it lasts to one other level, and a roofline whose ceiling came from one state and whose
sweep from the other would describe neither.

**Detection.** For each workload, its round bests as rates (rounds in which the profiler's threads
waited for a CPU at least ``stats.CPU_WAIT_SUSPECT`` of the time left out: ``CpuContention``
explains those), sorted, split into a faster and a slower group of at least
:data:`MIN_STATE_ROUNDS` rounds each, such that

* the two groups lie at least :data:`STATE_GAP` apart (the nearest rounds of the two), beyond the
  noise between rounds of one state, and
* the slower group's level is reproduced: its two fastest rounds agree within
  ``stats.AGREEMENT``, as a confirmed best needs. Scattered interference slows each round it hits
  by its own amount and does not gather rounds at a second level.

The widest such gap gives the workload's two levels. Each round then takes the state that most of
these workloads put it in (rounds none of them ran in take the state of the rounds around them), and
the profile changed state when at least :data:`MIN_WITNESSES` workloads show two levels in the same
rounds and each state holds :data:`MIN_STATE_ROUNDS` rounds. A single outlier round is never a
state.

**Pairing.** Every workload ran in the same rounds, so a state is a set of rounds, and every number
(ceilings, sweep points, and the recommendation from them) is derived from the rounds of one state
(:func:`choose`): the state that gave every workload :data:`MIN_STATE_ROUNDS` rounds, the one with
more rounds if both did; when neither did within the time budget, the state with more rounds,
naming the workloads it lacks (those keep every round they have). The timing loop keeps measuring
the workloads the current state lacks while the budget allows (``timing.measure_rounds``).

Pure module: no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from roofline_profiler.stats import AGREEMENT, CPU_WAIT_SUSPECT, INTERFERENCE, Measurement

FAST, SLOW = "fast", "slow"
STATES = (FAST, SLOW)
#: Fewest rounds a level must hold to count as a state: one slow round is an outlier, and a level
#: needs a second round to confirm it, as a best run does (``stats.confirmed_minimum``).
MIN_STATE_ROUNDS = 2
#: Two levels lie at least this far apart (the nearest rounds of the two groups): more than three
#: times the noise between rounds of one state (``stats.AGREEMENT``, 3%), and the slowdown beyond
#: which a round counts as hit by interference (``stats.INTERFERENCE``). The levels of a state
#: change seen so far lie far wider apart: 32 against 55-60 GB/s on an AMD EPYC VM.
STATE_GAP = INTERFERENCE
#: Workloads that must show the same two levels in the same rounds: a state is the host's, so
#: every workload bound by the same resource moves with it (the read kernels and the small-batch
#: sweep points with memory, the matmuls and large batches with the clocks); one workload alone
#: is that workload's noise, which the interference checks cover.
MIN_WITNESSES = 2


@dataclass(frozen=True)
class Levels:
    """One workload's two levels: the confirmed rate (work/s) of each group and its rounds."""

    label: str
    fast: float
    slow: float
    fast_rounds: tuple[int, ...]
    slow_rounds: tuple[int, ...]


def round_rates(m: Measurement) -> dict[int, float]:
    """Each round's best as a rate, by round index, without the rounds that waited for a CPU."""
    if not m.rounds or m.work <= 0:
        return {}
    ids = sorted(set(m.rounds))
    waits = m.cpu_waits or (0.0,) * len(ids)
    return {
        r: m.work / t
        for r, t, wait in zip(ids, m.round_bests, waits, strict=True)
        if wait < CPU_WAIT_SUSPECT
    }


def two_levels(m: Measurement) -> Levels | None:
    """``m``'s two levels, or None when its rounds show one (see the module docstring)."""
    rates = round_rates(m)
    order = sorted(rates, key=lambda r: rates[r], reverse=True)
    values = [rates[r] for r in order]
    widest: tuple[float, int] | None = None
    for split in range(MIN_STATE_ROUNDS, len(values) - MIN_STATE_ROUNDS + 1):
        gap = values[split - 1] / values[split] - 1
        reproduced = values[split] <= values[split + 1] * (1 + AGREEMENT)
        if gap >= STATE_GAP and reproduced and (widest is None or gap > widest[0]):
            widest = (gap, split)
    if widest is None:
        return None
    split = widest[1]
    return Levels(
        m.label,
        fast=values[1],
        slow=values[split + 1],
        fast_rounds=tuple(sorted(order[:split])),
        slow_rounds=tuple(sorted(order[split:])),
    )


@dataclass(frozen=True)
class HostStates:
    """The two states of a profile: the workloads that show them and each round's state."""

    levels: tuple[Levels, ...]
    #: Round index to :data:`FAST` or :data:`SLOW`; rounds of no known state are absent.
    states: Mapping[int, str]

    def rounds(self, state: str) -> tuple[int, ...]:
        return tuple(sorted(r for r, s in self.states.items() if s == state))

    def state_of(self, round_index: int) -> str | None:
        return self.states.get(round_index)


def _vote(levels: Collection[Levels]) -> dict[int, str]:
    """Each round's state by majority of the workloads that show two levels; ties have none."""
    votes: dict[int, int] = {}
    for lv in levels:
        for r in lv.fast_rounds:
            votes[r] = votes.get(r, 0) + 1
        for r in lv.slow_rounds:
            votes[r] = votes.get(r, 0) - 1
    return {r: FAST if v > 0 else SLOW for r, v in votes.items() if v}


def _fill(every_round: Collection[int], voted: Mapping[int, str]) -> dict[int, str]:
    """``voted``, plus each other round whose nearest voted rounds on both sides agree (or that
    has voted rounds on one side only): a state lasts seconds, several rounds."""
    states = dict(voted)
    known = sorted(voted)
    for r in every_round:
        if r in states or not known:
            continue
        before = [voted[k] for k in known if k < r][-1:]
        after = [voted[k] for k in known if k > r][:1]
        sides = set(before + after)
        if len(sides) == 1:
            states[r] = sides.pop()
    return states


def detect(measurements: Mapping[str, Measurement]) -> HostStates | None:
    """The profile's two states, or None when it stayed in one (see the module docstring)."""
    levels = [lv for m in measurements.values() if (lv := two_levels(m)) is not None]
    voted = _vote(levels)
    # Only workloads whose slow rounds the vote confirms witness the state.
    witnesses = tuple(
        lv
        for lv in levels
        if sum(voted.get(r) == SLOW for r in lv.slow_rounds) >= MIN_STATE_ROUNDS
        and sum(voted.get(r) == FAST for r in lv.fast_rounds) >= MIN_STATE_ROUNDS
    )
    if len(witnesses) < MIN_WITNESSES:
        return None
    every_round = {r for m in measurements.values() for r in m.rounds}
    states = HostStates(witnesses, _fill(every_round, voted))
    if any(len(states.rounds(s)) < MIN_STATE_ROUNDS for s in STATES):
        return None
    return states


def rounds_in(m: Measurement, rounds: Collection[int]) -> int:
    """How many of ``m``'s rounds are among ``rounds``."""
    return len(set(m.rounds) & set(rounds))


def restrict(m: Measurement, rounds: Collection[int]) -> Measurement:
    """``m`` with only the samples of ``rounds`` (``m`` itself when it ran in none of them)."""
    keep = set(rounds)
    picked = [i for i, r in enumerate(m.rounds) if r in keep]
    if not picked:
        return m
    ids = sorted(set(m.rounds))
    waits = zip(ids, m.cpu_waits, strict=True) if m.cpu_waits else ()
    return replace(
        m,
        times=tuple(m.times[i] for i in picked),
        rounds=tuple(m.rounds[i] for i in picked),
        cpu_waits=tuple(w for r, w in waits if r in keep),
    )


@dataclass(frozen=True)
class StateChoice:
    """The state every number comes from."""

    state: str
    rounds: tuple[int, ...]
    #: Workloads with fewer than :data:`MIN_STATE_ROUNDS` rounds in the state (empty: it covers
    #: every workload).
    missing: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def other(self) -> str:
        return SLOW if self.state == FAST else FAST


def lacking(states: HostStates, state: str, measurements: Mapping[str, Measurement]) -> list[str]:
    """The workloads with fewer than :data:`MIN_STATE_ROUNDS` rounds in ``state``."""
    rounds = states.rounds(state)
    return [label for label, m in measurements.items() if rounds_in(m, rounds) < MIN_STATE_ROUNDS]


def choose(states: HostStates, measurements: Mapping[str, Measurement]) -> StateChoice:
    """The state that covers every workload, the one with more rounds if both do; otherwise the
    one with more rounds. Ties go to the later state: the host's state now."""

    def rank(state: str) -> tuple[bool, int, int]:
        rounds = states.rounds(state)
        return (not lacking(states, state, measurements), len(rounds), max(rounds))

    state = max(STATES, key=rank)
    return StateChoice(state, states.rounds(state), tuple(lacking(states, state, measurements)))


def in_state(
    measurements: Mapping[str, Measurement], states: HostStates, state: str
) -> dict[str, Measurement]:
    """Every measurement restricted to ``state``'s rounds (see :func:`restrict`)."""
    rounds = states.rounds(state)
    return {label: restrict(m, rounds) for label, m in measurements.items()}


@dataclass(frozen=True)
class Headline:
    """The headline numbers of a device in one state."""

    bandwidth_bytes_per_second: float
    peak_flops_per_second: float
    ridge_point: float
    recommended_min_batch: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "bandwidthBytesPerSecond": self.bandwidth_bytes_per_second,
            "peakFlopsPerSecond": self.peak_flops_per_second,
            "ridgePoint": self.ridge_point,
            "recommendedMinBatch": self.recommended_min_batch,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Headline:
        return cls(
            d["bandwidthBytesPerSecond"],
            d["peakFlopsPerSecond"],
            d["ridgePoint"],
            d["recommendedMinBatch"],
        )


@dataclass(frozen=True)
class HostStateReport:
    """What a result says about a state change: the rounds of each state, the levels of the
    workloads that showed it, the state the numbers come from and the other state's numbers."""

    state: str
    fast_rounds: tuple[int, ...]
    slow_rounds: tuple[int, ...]
    levels: tuple[Levels, ...]
    missing: tuple[str, ...]
    #: The headline numbers the other state's rounds give.
    other: Headline

    @property
    def complete(self) -> bool:
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "complete": self.complete,
            "fastRounds": list(self.fast_rounds),
            "slowRounds": list(self.slow_rounds),
            "levels": [
                {
                    "label": lv.label,
                    "fastRatePerSecond": lv.fast,
                    "slowRatePerSecond": lv.slow,
                    "fastRounds": list(lv.fast_rounds),
                    "slowRounds": list(lv.slow_rounds),
                }
                for lv in self.levels
            ],
            "missing": list(self.missing),
            "other": self.other.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HostStateReport:
        return cls(
            state=d["state"],
            fast_rounds=tuple(d["fastRounds"]),
            slow_rounds=tuple(d["slowRounds"]),
            levels=tuple(
                Levels(
                    lv["label"],
                    lv["fastRatePerSecond"],
                    lv["slowRatePerSecond"],
                    tuple(lv["fastRounds"]),
                    tuple(lv["slowRounds"]),
                )
                for lv in d["levels"]
            ),
            missing=tuple(d["missing"]),
            other=Headline.from_dict(d["other"]),
        )


def to_remeasure(
    measurements: Mapping[str, Measurement],
    states: HostStates,
    last_round: int,
    unsettled: Callable[[Measurement], bool],
) -> set[str]:
    """After a change of state, the workloads the next round times: those with fewer than
    :data:`MIN_STATE_ROUNDS` rounds in the current state (the state of ``last_round``; the state
    :func:`choose` prefers when that round's is unknown) or ``unsettled`` on its rounds, and then
    also the workloads that show the states, so that every new round's state is known."""
    current = states.state_of(last_round) or choose(states, measurements).state
    rounds = states.rounds(current)
    labels = {
        label
        for label, m in measurements.items()
        if rounds_in(m, rounds) < MIN_STATE_ROUNDS or unsettled(restrict(m, rounds))
    }
    if labels:
        labels |= {lv.label for lv in states.levels}
    return labels
