"""Changes of host state within a profile: detection on synthetic per-round samples, and which
workloads the rounds after a change time again."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence

import pytest

from roofline_profiler.core.limits import DEFAULT_BATCHES, DEFAULT_SHAPE
from roofline_profiler.core.roofline import arithmetic_intensity
from roofline_profiler.core.stats import Measurement
from roofline_profiler.wire import host_state_detection
from roofline_profiler.wire.host_state import FAST, SLOW
from roofline_profiler.wire.host_state_detection import Roles
from roofline_profiler.wire.warning_codes import STATE_GAP
from tests.profiler.synthetic import H200_LIKE, QUIET_JITTER

ROUNDS = 8
#: A host that gives memory 1.7 times less bandwidth in its slow state (32 against 55 GB/s).
SLOW_FACTOR = 1.7


def rates(
    label: str, per_round: Sequence[float], rounds: Sequence[int] | None = None
) -> Measurement:
    """A measurement whose round r runs at ``per_round[r]`` work/s (two runs a round)."""
    indices = list(rounds if rounds is not None else range(len(per_round)))
    times: list[float] = []
    samples: list[int] = []
    for r, rate in zip(indices, per_round, strict=True):
        times += [1.0 / rate, 1.01 / rate]
        samples += [r, r]
    return Measurement(label, tuple(times), work=1.0, rounds=tuple(samples))


def jittered(level: float, rounds: int = ROUNDS) -> list[float]:
    return [level / (1 + QUIET_JITTER[r % len(QUIET_JITTER)]) for r in range(rounds)]


#: The roles of :func:`states_profile`'s workloads (ridge point 200/55, B=1 at 0.5 FLOP/byte).
PROFILE_ROLES = Roles(
    bandwidth=("read", "readMatvec", "copy"), peak=("mm",), sweep={"decode B=1": 0.5}
)


def detect(measurements: Mapping[str, Measurement]) -> host_state_detection.HostStates | None:
    return host_state_detection.detect(measurements, PROFILE_ROLES)


def states_profile(slow_rounds: Sequence[int]) -> dict[str, Measurement]:
    """Three memory-bound workloads and a compute-bound one; the first slow in ``slow_rounds``."""
    out = {}
    for label, level in (("read", 55.0), ("copy", 50.0), ("decode B=1", 54.0)):
        per_round = jittered(level)
        out[label] = rates(
            label,
            [v / SLOW_FACTOR if r in slow_rounds else v for r, v in enumerate(per_round)],
        )
    out["mm"] = rates("mm", jittered(200.0))
    return out


# --- Detection ---------------------------------------------------------------------------------


def test_a_steady_profile_has_one_state() -> None:
    assert detect(states_profile(slow_rounds=())) is None


def test_one_switch_mid_profile_is_two_states_with_their_rounds_and_levels() -> None:
    states = detect(states_profile(slow_rounds=(4, 5, 6, 7)))
    assert states is not None
    assert states.rounds(FAST) == (0, 1, 2, 3)
    assert states.rounds(SLOW) == (4, 5, 6, 7)
    assert {lv.label for lv in states.levels} == {"read", "copy", "decode B=1"}
    read = next(lv for lv in states.levels if lv.label == "read")
    assert read.fast == pytest.approx(55.0, rel=0.01)
    assert read.slow == pytest.approx(55.0 / SLOW_FACTOR, rel=0.01)


def test_alternating_states_are_two_states() -> None:
    states = detect(states_profile(slow_rounds=(1, 2, 5, 6)))
    assert states is not None
    assert states.rounds(SLOW) == (1, 2, 5, 6)
    assert states.rounds(FAST) == (0, 3, 4, 7)


def test_a_noisy_fast_state_against_a_steady_slow_one_is_two_states() -> None:
    # As the AMD EPYC VM's read bandwidth went: 46-61 GB/s while fast, a steady 32 while slow.
    fast, slow = {0: 58.0, 1: 47.0, 2: 46.0, 6: 48.0, 7: 61.0}, {3: 33.0, 4: 32.5, 5: 32.0}
    per_round = [fast.get(r) or slow[r] for r in range(ROUNDS)]
    profile = {
        label: rates(label, [v * scale for v in per_round])
        for label, scale in (("read", 1.0), ("readMatvec", 0.97), ("decode B=1", 1.02))
    }
    states = detect(profile)
    assert states is not None
    assert states.rounds(SLOW) == (3, 4, 5)
    read = next(lv for lv in states.levels if lv.label == "read")
    assert (read.fast, read.slow) == pytest.approx((58.0, 32.5))


def test_a_single_outlier_round_is_not_a_state_change() -> None:
    assert detect(states_profile(slow_rounds=(5,))) is None


def test_interference_that_slows_rounds_by_varied_amounts_is_not_a_state() -> None:
    # Bursts hit three rounds by 50%, 30% and 40%: no second level that two rounds reproduce.
    hits = {0: 1.5, 2: 1.3, 4: 1.4}
    profile = {
        label: rates(label, [v / hits.get(r, 1.0) for r, v in enumerate(jittered(level))])
        for label, level in (("read", 55.0), ("copy", 50.0), ("decode B=1", 54.0))
    }
    assert detect(profile) is None


def test_one_workload_at_two_levels_is_its_own_noise_not_the_hosts_state() -> None:
    profile = states_profile(slow_rounds=())
    profile["read"] = rates("read", [55.0] * 4 + [32.0] * 4)
    assert detect(profile) is None


def test_levels_closer_than_the_state_gap_are_noise() -> None:
    close = 1 + STATE_GAP * 0.8
    profile = {
        label: rates(label, [level] * 4 + [level / close] * 4)
        for label, level in (("read", 55.0), ("copy", 50.0))
    }
    assert detect(profile) is None


def test_rounds_that_waited_for_a_cpu_are_contention_not_a_state() -> None:
    waits = (0.0, 0.0, 0.0, 0.0, 0.4, 0.4, 0.4, 0.4)
    profile = {
        label: Measurement(m.label, m.times, work=m.work, rounds=m.rounds, cpu_waits=waits)
        for label, m in states_profile(slow_rounds=(4, 5, 6, 7)).items()
    }
    assert detect(profile) is None


def test_a_round_no_witness_ran_in_takes_the_state_around_it() -> None:
    profile = states_profile(slow_rounds=(4, 5, 6, 7))
    profile["late"] = rates("late", [10.0, 10.0], rounds=[8, 9])
    profile["gap"] = rates("gap", [10.0], rounds=[10])
    states = detect({**profile, "read": rates("read", [55.0] * 4 + [32.0] * 6, rounds=range(10))})
    assert states is not None
    assert states.state_of(8) == SLOW  # slow on its one side
    assert states.state_of(10) is None or states.state_of(10) == SLOW


# --- Whole profiles whose rounds scatter by 3-5% ------------------------------------------------

#: A CPU-like device (ridge point ~12 FLOP/byte) and an H200-like one (~184).
CPU_LIKE = {"bandwidth": 25e9, "peak": 300e9, "element_bytes": 4}
GPU_LIKE = {"bandwidth": H200_LIKE["bandwidth"], "peak": H200_LIKE["peak"], "element_bytes": 2}
SEEDS = range(5)
PerRound = Callable[[int], float]
#: (round, position in the round's order, label) -> how many times slower a burst made it.
Hit = Callable[[int, int, str], float]


def steady(_: int) -> float:
    return 1.0


def unhit(_r: int, _position: int, _label: str) -> float:
    return 1.0


def noisy_profile(
    device: Mapping[str, float],
    rounds: int,
    seed: int,
    bandwidth: PerRound = steady,
    peak: PerRound = steady,
    small_batches: PerRound = steady,
    hit: Hit = unhit,
) -> tuple[dict[str, Measurement], Roles]:
    """Read, copy, two matmuls and the default sweep timed in ``rounds`` rounds of rotating
    order, each round best 3-5% noisy (a best run only ever loses time). In round r the device
    gives ``bandwidth(r)`` and ``peak(r)`` times less; the sweep points well below the ridge run
    ``small_batches(r)`` times slower on top; a burst makes a workload ``hit(...)`` times slower."""
    rng = random.Random(seed)
    noise = rng.uniform(0.03, 0.05)
    ridge = device["peak"] / device["bandwidth"]
    intensity = {
        f"decode B={b}": arithmetic_intensity(b, *DEFAULT_SHAPE, int(device["element_bytes"]))
        for b in DEFAULT_BATCHES
    }

    def rate(label: str, r: int) -> float:
        bw, pk = device["bandwidth"] / bandwidth(r), device["peak"] / peak(r)
        if label in ("read", "copy"):
            return bw * (1.0 if label == "read" else 0.9)
        if label.startswith("mm"):
            return pk * (1.0 if label == "mm big" else 0.95)
        i = intensity[label]
        return 0.9 * min(pk, i * bw) / (small_batches(r) if 2 * i <= ridge else 1.0)

    labels = ["read", "copy", "mm big", "mm small", *intensity]
    samples: dict[str, tuple[list[float], list[int]]] = {x: ([], []) for x in labels}
    for r in range(rounds):
        order = labels[r % len(labels) :] + labels[: r % len(labels)]
        for position, label in enumerate(order):
            seconds = hit(r, position, label) / rate(label, r)
            for _ in range(2):
                samples[label][0].append(seconds * (1 + abs(rng.gauss(0, noise))))
                samples[label][1].append(r)
    measurements = {
        x: Measurement(x, tuple(t), work=1.0, rounds=tuple(i)) for x, (t, i) in samples.items()
    }
    return measurements, Roles(("read", "copy"), ("mm big", "mm small"), intensity)


def in_rounds(factor: float, rounds: Collection[int]) -> PerRound:
    return lambda r: factor if r in rounds else 1.0


def bursts(seed: int, rounds: int, workloads: int) -> Hit:
    """A third of the rounds each hit by a burst that reaches 30-60% of the round's workloads
    in a row (a burst of about a second against a round of one to two), each by 10-40%."""
    rng = random.Random(seed + 1000)
    spans = {
        r: (rng.random(), rng.uniform(0.3, 0.6)) for r in rng.sample(range(rounds), rounds // 3)
    }
    amounts: dict[tuple[int, int], float] = {}

    def hit(r: int, position: int, _label: str) -> float:
        if r not in spans:
            return 1.0
        start, width = spans[r]
        x = position / workloads
        if start <= x < start + width or x < start + width - 1:
            return amounts.setdefault((r, position), 1 + rng.uniform(0.1, 0.4))
        return 1.0

    return hit


def test_sweep_points_twice_the_ridge_away_witness_the_resource_on_their_side() -> None:
    measurements, roles = noisy_profile(CPU_LIKE, 3, seed=0)  # ridge point ~12 FLOP/byte
    memory, compute = roles.resources(measurements)
    assert memory.ceilings == ("read", "copy")
    assert memory.bound == tuple(f"decode B={b}" for b in (1, 2, 4, 8))  # up to 4 FLOP/byte
    assert compute.ceilings == ("mm big", "mm small")
    assert compute.bound == tuple(f"decode B={b}" for b in (64, 128, 256, 512))  # from 31


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("device", [CPU_LIKE, GPU_LIKE], ids=["cpu", "gpu"])
def test_a_steady_noisy_profile_has_one_state(device: Mapping[str, float], seed: int) -> None:
    assert host_state_detection.detect(*noisy_profile(device, 8, seed)) is None


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    ("device", "switch"),
    [
        pytest.param(CPU_LIKE, 3, id="cpu-after-round-3-of-6"),
        pytest.param(CPU_LIKE, 4, id="cpu-after-round-4-of-6"),
        pytest.param(GPU_LIKE, 2, id="gpu-after-round-2-of-6"),
    ],
)
def test_bandwidth_a_fifth_lower_from_mid_profile_is_two_states_with_their_rounds(
    device: Mapping[str, float], switch: int, seed: int
) -> None:
    # As the Intel Xeon VM went: about 29 GB/s, then 23 (levels 20-25% apart).
    slow = set(range(switch, 6))
    states = host_state_detection.detect(
        *noisy_profile(device, 6, seed, bandwidth=in_rounds(1.25, slow))
    )
    assert states is not None
    assert set(states.rounds(SLOW)) == slow
    assert {"read", "copy"} & {lv.label for lv in states.levels}


@pytest.mark.parametrize("seed", SEEDS)
def test_the_amd_hosts_32_against_57_gbs_is_two_states(seed: int) -> None:
    slow = {0, 1, 2}
    states = host_state_detection.detect(
        *noisy_profile(CPU_LIKE, 6, seed, bandwidth=in_rounds(57 / 32, slow))
    )
    assert states is not None
    assert set(states.rounds(SLOW)) == slow


@pytest.mark.parametrize("seed", SEEDS)
def test_alternating_noisy_states_are_two_states(seed: int) -> None:
    slow = {1, 2, 5, 6}
    states = host_state_detection.detect(
        *noisy_profile(CPU_LIKE, 8, seed, bandwidth=in_rounds(1.2, slow))
    )
    assert states is not None
    assert set(states.rounds(SLOW)) == slow


@pytest.mark.parametrize("seed", SEEDS)
def test_clocks_a_seventh_lower_move_peak_and_large_batches_into_a_compute_state(
    seed: int,
) -> None:
    slow = {4, 5, 6, 7}
    states = host_state_detection.detect(
        *noisy_profile(CPU_LIKE, 8, seed, peak=in_rounds(1.15, slow))
    )
    assert states is not None
    assert set(states.rounds(SLOW)) == slow
    assert {"mm big", "mm small"} & {lv.label for lv in states.levels}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("device", [CPU_LIKE, GPU_LIKE], ids=["cpu", "gpu"])
def test_bursts_that_hit_part_of_scattered_rounds_by_10_to_40_percent_are_not_a_state(
    device: Mapping[str, float], seed: int
) -> None:
    workloads = 4 + len(DEFAULT_BATCHES)
    profile = noisy_profile(device, 12, seed, hit=bursts(seed, 12, workloads))
    assert host_state_detection.detect(*profile) is None


@pytest.mark.parametrize("seed", SEEDS)
def test_one_noisy_round_slower_for_every_workload_is_an_outlier_not_a_state(seed: int) -> None:
    profile = noisy_profile(
        CPU_LIKE, 8, seed, bandwidth=in_rounds(1.3, {5}), peak=in_rounds(1.3, {5})
    )
    assert host_state_detection.detect(*profile) is None


@pytest.mark.parametrize("seed", SEEDS)
def test_sweep_points_that_split_while_the_bandwidth_kernels_hold_still_are_not_a_state(
    seed: int,
) -> None:
    # As an H200 showed: short decode kernels 17-28% slower in the first three rounds (clocks
    # still ramping), read, copy and the matmuls the same in every round.
    factor = random.Random(seed).uniform(1.17, 1.28)
    profile = noisy_profile(GPU_LIKE, 6, seed, small_batches=in_rounds(factor, {0, 1, 2}))
    assert host_state_detection.detect(*profile) is None


def test_a_rounds_level_is_the_median_relative_rate_of_the_workloads_timed_in_it() -> None:
    profile = {
        "read": rates("read", [50.0, 50.0, 40.0]),
        "copy": rates("copy", [25.0, 25.0, 25.0]),
        "decode B=1": rates("decode B=1", [10.0, 10.0, 8.0]),
        "alone": rates("alone", [1.0], rounds=[3]),
    }
    levels = host_state_detection.round_levels(("read", "copy", "decode B=1", "alone"), profile)
    # Round 2: read and B=1 at 0.8 of their confirmed rates, copy at 1; round 3 has one workload.
    assert levels == pytest.approx({0: 1.0, 1: 1.0, 2: 0.8})


# --- Re-measuring what the current state lacks -------------------------------------------------


def test_after_a_switch_the_workloads_the_new_state_lacks_are_measured_again() -> None:
    profile = states_profile(slow_rounds=(3, 4, 5))
    profile["decode B=512"] = rates("decode B=512", jittered(300.0, 3))  # rounds 0-2 only
    states = detect(profile)
    assert states is not None
    again = host_state_detection.to_remeasure(
        profile, states, last_round=5, unsettled=lambda _: False
    )
    # B=512 has no round in the slow state; the witnesses keep the new rounds' state known.
    assert again == {"decode B=512", "read", "copy", "decode B=1"}


def test_once_the_current_state_covers_everything_nothing_is_measured_again() -> None:
    profile = states_profile(slow_rounds=(4, 5, 6, 7))
    states = detect(profile)
    assert states is not None
    assert host_state_detection.to_remeasure(profile, states, 7, unsettled=lambda _: False) == set()
