"""A measurement's rounds: each round's best as a rate, that rate against the confirmed rate,
and the measurement cut down to some of its rounds.

The timing loop interleaves every workload round by round (``timing.measure_rounds``), so a round
index names the same stretch of time for each of them. Host states are sets of rounds
(``host_state_detection``): their levels are read from these rates, and every number of a state
comes from its measurements restricted to its rounds. A round in which the profiler's threads
waited for a CPU at least ``stats.CPU_WAIT_SUSPECT`` of the time gives no rate: ``CpuContention``
explains it, not the host's state.

Pure module: no torch.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from roofline_profiler.core.stats import CPU_WAIT_SUSPECT, Measurement, confirmed_minimum


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


def relative_rates(m: Measurement) -> dict[int, float]:
    """Each round's rate (:func:`round_rates`) over the confirmed rate of those rounds: about 1
    in the state that set it, lower in a slower one."""
    rates = round_rates(m)
    if not rates:
        return {}
    confirmed = 1.0 / confirmed_minimum([1.0 / v for v in rates.values()])
    return {r: v / confirmed for r, v in rates.items()}


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
