"""Changes of host state found in a profile's rounds, and the rounds a self-consistent roofline
uses.

A host can give a device one speed for a while and another after: a GPU that throttles for power
or heat, a MIG or time-sliced neighbour that comes and goes, a virtual machine whose host hands
it memory bandwidth at one level and then at another (a 2-vCPU AMD EPYC VM switched between about
32 and 55-60 GB/s of read bandwidth, an Intel Xeon VM between about 23 and 29 GB/s, on a time
scale of seconds). Interference (another process taking the device for a moment) slows the
workloads it hits, each by its own amount, and the confirmed best and its interval absorb it
(``stats.py``). A state is different: it moves every workload bound by the resource it changes
(memory bandwidth, or compute) to one other level for every round it lasts, and a roofline whose
ceiling came from one state and whose sweep from the other would describe neither.

**Detection**, per resource (:class:`Roles`): the workloads a state of memory moves are the
bandwidth kernels and the sweep points well below the ridge point; those a state of compute moves
are the peak matmuls and the sweep points well above it (:data:`BOUND_MARGIN`). Each workload's
round bests become rates relative to its confirmed rate (``measurement_rounds``; rounds in which
the profiler's threads waited for a CPU at least ``stats.CPU_WAIT_SUSPECT`` of the time left out:
``CpuContention`` explains those), and each round's **level** is the median over the resource's
workloads timed in it: a state moves them all, so the median follows it, while a burst that hits
some of a round's workloads leaves the median where the others are. The levels split into a faster
and a slower group of at least :data:`MIN_STATE_ROUNDS` rounds each, such that

* the two groups lie at least :data:`STATE_GAP` apart (the nearest levels of the two), and
* the slower level is reproduced: its two fastest rounds agree within :data:`LEVEL_AGREEMENT`.
  Rounds slowed by interference, each by its own amount, do not gather at a second level.

The widest such gap gives the two states. A round takes its group's state only when at least
:data:`STATE_SHARE` of the resource's workloads timed in it lie on that side of the midpoint
between the levels (a round the switch fell in, or a burst hit unevenly, has no known state), and
a workload **witnesses** the states when its own rounds follow them. The resource changed state
when at least :data:`MIN_WITNESSES` workloads witness it, one of them a ceiling kernel of the
resource: a state is the host's, so it moves the ceiling that measures the resource; sweep points
that move while the ceilings hold still (short GPU kernels whose clocks ramp up) are not a state
of the host. Each state must hold :data:`MIN_STATE_ROUNDS` rounds; a single outlier round is
never a state. Rounds no witness placed take the state of the rounds around them.

**Pairing.** Every workload ran in the same rounds, so a state is a set of rounds, and every number
(ceilings, sweep points, and the recommendation from them) is derived from the rounds of one state
(:func:`choose`): the state that gave every workload :data:`MIN_STATE_ROUNDS` rounds, the one with
more rounds if both did; when neither did within the time budget, the state with more rounds,
naming the workloads it lacks (those keep every round they have). The timing loop keeps measuring
the workloads the current state lacks while the budget allows (``timing.measure_rounds``).

Pure module: no torch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from roofline_profiler.core.stats import Measurement
from roofline_profiler.wire.host_state import FAST, SLOW, STATES, Levels
from roofline_profiler.wire.measurement_rounds import relative_rates, restrict, rounds_in
from roofline_profiler.wire.warning_codes import STATE_GAP

#: Fewest rounds a level must hold to count as a state: one slow round is an outlier, and a level
#: needs a second round to confirm it, as a best run does (``stats.confirmed_minimum``).
MIN_STATE_ROUNDS = 2
#: The slower level's two fastest rounds agree within this: half the gap that sets two states
#: apart, so those rounds lie nearer each other than either lies to the other state. Levels of
#: one state scatter by about the noise of a median (2-3%), while rounds slowed by interference
#: spread over the 10-40% a burst costs.
LEVEL_AGREEMENT = STATE_GAP / 2
#: A round takes a state when at least this share of the resource's workloads timed in it lie on
#: that side of the midpoint between the levels. The midpoint lies half the gap from each level
#: (10% at the gaps seen), two to three times the 3-5% noise of one workload, so a round of a
#: state keeps nearly every workload on its side; a burst (about a second, a round lasts one to
#: two) that reaches only part of a round's workloads leaves more than a quarter on the other.
STATE_SHARE = 0.75
#: Workloads that must witness the same states in the same rounds, one of them a ceiling kernel
#: of the resource: a state is the host's, so every workload bound by the resource moves with it;
#: one workload alone is that workload's noise, which the interference checks cover.
MIN_WITNESSES = 2
#: A sweep point witnesses a resource only when its arithmetic intensity lies this factor or
#: more from the ridge point, on that resource's side: nearer, both ceilings bound it (a real
#: device's knee is rounded), and a state that moves one ceiling by up to this factor (1.8 on the
#: AMD EPYC VM) moves the ridge point as far, so a point beyond the margin stays bound by one
#: resource in both states.
BOUND_MARGIN = 2.0
MEMORY, COMPUTE = "memory", "compute"


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


@dataclass(frozen=True)
class Resource:
    """A resource the host gives (memory bandwidth, compute): its ceiling kernels and the sweep
    points it bounds, the workloads a state of it moves."""

    name: str
    ceilings: tuple[str, ...]
    bound: tuple[str, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        return (*self.ceilings, *self.bound)


@dataclass(frozen=True)
class Roles:
    """Which workload measures what: the ceiling kernels of each resource, and each sweep
    point's arithmetic intensity (FLOP/byte), which tells the resource that bounds it."""

    bandwidth: tuple[str, ...]
    peak: tuple[str, ...]
    sweep: Mapping[str, float]

    def resources(self, measurements: Mapping[str, Measurement]) -> tuple[Resource, Resource]:
        """Memory and compute, each with the sweep points beyond :data:`BOUND_MARGIN` of the
        ridge point on its side (none while a ceiling is unmeasured)."""
        ridge = self.rough_ridge(measurements)
        memory: list[str] = []
        compute: list[str] = []
        if ridge is not None:
            memory = [x for x, i in self.sweep.items() if i * BOUND_MARGIN <= ridge]
            compute = [x for x, i in self.sweep.items() if i >= ridge * BOUND_MARGIN]
        return (
            Resource(MEMORY, self.bandwidth, tuple(memory)),
            Resource(COMPUTE, self.peak, tuple(compute)),
        )

    def rough_ridge(self, measurements: Mapping[str, Measurement]) -> float | None:
        """The ridge point of the best confirmed ceilings over every round, whatever their
        state: only to tell which resource bounds a sweep point, with a margin to spare."""
        bandwidth = [measurements[x].confirmed_rate for x in self.bandwidth if x in measurements]
        peak = [measurements[x].confirmed_rate for x in self.peak if x in measurements]
        if not bandwidth or not peak:
            return None
        return max(peak) / max(bandwidth)


def _split(levels: Mapping[int, float]) -> tuple[list[int], list[int]] | None:
    """The rounds of ``levels`` as a faster and a slower group (see the module docstring)."""
    order = sorted(levels, key=lambda r: levels[r], reverse=True)
    values = [levels[r] for r in order]
    widest: tuple[float, int] | None = None
    for split in range(MIN_STATE_ROUNDS, len(values) - MIN_STATE_ROUNDS + 1):
        gap = values[split - 1] / values[split] - 1
        reproduced = values[split] <= values[split + 1] * (1 + LEVEL_AGREEMENT)
        if gap >= STATE_GAP and reproduced and (widest is None or gap > widest[0]):
            widest = (gap, split)
    if widest is None:
        return None
    return order[: widest[1]], order[widest[1] :]


@dataclass(frozen=True)
class _Sides:
    """The midpoint between two levels: a relative rate at or above it lies on the fast side."""

    midpoint: float

    def of(self, value: float) -> str:
        return FAST if value >= self.midpoint else SLOW


def _round_states(
    groups: tuple[list[int], list[int]], by_round: Mapping[int, list[float]], sides: _Sides
) -> dict[int, str]:
    """Each round of a group takes its state when :data:`STATE_SHARE` of the resource's
    workloads timed in it lie on that side."""
    states = {}
    for state, rounds in zip(STATES, groups, strict=True):
        for r in rounds:
            on_side = sum(sides.of(v) == state for v in by_round[r])
            if on_side >= STATE_SHARE * len(by_round[r]):
                states[r] = state
    return states


def _witness(
    m: Measurement, relative: Mapping[int, float], states: Mapping[int, str], sides: _Sides
) -> Levels | None:
    """``m``'s levels when its rounds follow ``states``: :data:`MIN_STATE_ROUNDS` in each,
    :data:`STATE_SHARE` of its rounds of a known state on that state's side."""
    following = {
        state: [r for r, v in relative.items() if states.get(r) == state == sides.of(v)]
        for state in STATES
    }
    placed = sum(r in states for r in relative)
    if any(len(following[s]) < MIN_STATE_ROUNDS for s in STATES):
        return None
    if len(following[FAST]) + len(following[SLOW]) < STATE_SHARE * placed:
        return None
    return Levels(
        m.label,
        fast=restrict(m, following[FAST]).confirmed_rate,
        slow=restrict(m, following[SLOW]).confirmed_rate,
        fast_rounds=tuple(sorted(following[FAST])),
        slow_rounds=tuple(sorted(following[SLOW])),
    )


def resource_states(
    resource: Resource, measurements: Mapping[str, Measurement]
) -> HostStates | None:
    """The two states of one resource, or None when its workloads show one (see the module
    docstring). The levels come from every workload of the resource, else from those timed in
    every round any of them was: a workload that settled before the switch has rounds of one
    state only, and its own best sets it at 1 in them, where the workloads timed on (the ceiling
    kernels that witness a state are) show the change."""
    labels = [x for x in resource.labels if x in measurements]
    every_round = {r for x in labels for r in measurements[x].rounds}
    covering = [x for x in labels if set(measurements[x].rounds) == every_round]
    for panel in (labels, covering) if len(covering) < len(labels) else (labels,):
        states = _panel_states(resource, panel, measurements)
        if states is not None:
            return states
    return None


def _by_round(relative: Mapping[str, Mapping[int, float]]) -> dict[int, list[float]]:
    by_round: dict[int, list[float]] = {}
    for rates in relative.values():
        for r, v in rates.items():
            by_round.setdefault(r, []).append(v)
    return by_round


def round_levels(
    labels: Collection[str], measurements: Mapping[str, Measurement]
) -> dict[int, float]:
    """Each round's level: the median rate relative to the confirmed rate over ``labels`` timed
    in it (rounds with fewer than :data:`MIN_WITNESSES` of them have none)."""
    relative = {x: relative_rates(measurements[x]) for x in labels if x in measurements}
    return {
        r: statistics.median(v)
        for r, v in sorted(_by_round(relative).items())
        if len(v) >= MIN_WITNESSES
    }


def _panel_states(
    resource: Resource, panel: Collection[str], measurements: Mapping[str, Measurement]
) -> HostStates | None:
    relative = {x: relative_rates(measurements[x]) for x in panel if x in measurements}
    by_round = _by_round(relative)
    levels = round_levels(panel, measurements)
    groups = _split(levels)
    if groups is None:
        return None
    fast, slow = (statistics.median(levels[r] for r in group) for group in groups)
    sides = _Sides(math.sqrt(fast * slow))
    states = _round_states(groups, by_round, sides)
    witnesses = tuple(
        lv
        for label, rates in relative.items()
        if (lv := _witness(measurements[label], rates, states, sides)) is not None
    )
    if len(witnesses) < MIN_WITNESSES or not {lv.label for lv in witnesses} & set(
        resource.ceilings
    ):
        return None
    if any(sum(s == state for s in states.values()) < MIN_STATE_ROUNDS for state in STATES):
        return None
    return HostStates(witnesses, states)


def detect(measurements: Mapping[str, Measurement], roles: Roles) -> HostStates | None:
    """The profile's two states, or None when it stayed in one (see the module docstring)."""
    found = [
        states
        for resource in roles.resources(measurements)
        if (states := resource_states(resource, measurements)) is not None
    ]
    if not found:
        return None
    # Both resources changed: the one more workloads witness gives the rounds' states.
    best = max(found, key=lambda s: len(s.levels))
    every_round = {r for m in measurements.values() for r in m.rounds}
    return HostStates(best.levels, _fill(every_round, best.states))


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
    """Every measurement restricted to ``state``'s rounds (see ``measurement_rounds.restrict``)."""
    rounds = states.rounds(state)
    return {label: restrict(m, rounds) for label, m in measurements.items()}


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
