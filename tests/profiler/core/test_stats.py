import math

import pytest

from roofline_profiler.core.stats import (
    AGREEMENT,
    Bootstrap,
    Measurement,
    confirmed_minimum,
    percentile_interval,
    quantile,
)


def test_quantile_interpolates_like_numpy_default() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert quantile(values, 0.25) == pytest.approx(1.75)
    assert quantile(values, 0.5) == pytest.approx(2.5)
    assert quantile(values, 1.0) == 4.0


def test_quantile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        quantile([], 0.5)


def test_measurement_keeps_raw_samples_and_derives_statistics() -> None:
    m = Measurement("x", (0.004, 0.001, 0.002, 0.003), work=8.0)
    assert m.times == (0.004, 0.001, 0.002, 0.003)
    assert m.repeats == 4
    assert m.median == pytest.approx(0.0025)
    assert m.minimum == 0.001
    assert m.iqr == pytest.approx(0.0015)
    assert m.mean == pytest.approx(0.0025)
    assert m.cov == pytest.approx(math.sqrt(1.6666666e-6) / 0.0025, rel=1e-6)
    assert m.rate == pytest.approx(8.0 / 0.0025)


def test_one_sample_has_no_spread() -> None:
    m = Measurement("x", (1.0,))
    assert m.cov == 0.0


@pytest.mark.parametrize(
    "times",
    [
        pytest.param((), id="empty"),
        pytest.param((1.0, 0.0), id="zero"),
        pytest.param((math.nan,), id="nan"),
    ],
)
def test_measurement_rejects_impossible_samples(times: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match=r"measurement|positive"):
        Measurement("x", times)


def _rounds(bests: list[float]) -> Measurement:
    """Two runs per round; the round's best is ``bests[r]``."""
    times = [t for best in bests for t in (best * 1.02, best)]
    rounds = [r for r in range(len(bests)) for _ in range(2)]
    return Measurement("x", tuple(times), work=1.0, rounds=tuple(rounds))


def test_round_bests_are_the_fastest_run_of_each_round_in_round_order() -> None:
    m = Measurement("x", (3.0, 2.0, 5.0, 4.0), rounds=(1, 1, 0, 0))
    assert m.round_bests == (4.0, 2.0)


def test_a_measurement_without_rounds_is_one_round() -> None:
    assert Measurement("x", (3.0, 2.0)).round_bests == (2.0,)


def test_one_round_index_per_sample_is_required() -> None:
    with pytest.raises(ValueError, match="round"):
        Measurement("x", (1.0, 2.0), rounds=(0,))


def test_round_medians_are_the_median_run_of_each_round_in_round_order() -> None:
    m = Measurement("x", (3.0, 2.0, 9.0, 5.0, 4.0, 6.0), rounds=(1, 1, 1, 0, 0, 0))
    assert m.round_medians == (5.0, 3.0)
    assert Measurement("x", (3.0, 1.0, 2.0)).round_medians == (2.0,)


def test_the_quiet_median_of_five_rounds_is_the_second_fastest_rounds_median() -> None:
    medians = [1.30, 1.0, 1.45, 1.02, 1.60]  # three rounds slowed by a burst
    times = [t for m in medians for t in (m * 0.9, m, m * 1.5)]
    rounds = [r for r in range(5) for _ in range(3)]
    m = Measurement("x", tuple(times), rounds=tuple(rounds))
    assert m.quiet_median == 1.02
    assert m.median > 1.4  # what the slowed rounds make of the median of every sample


def test_a_single_lucky_round_does_not_set_the_quiet_median() -> None:
    times = (0.5, 1.0, 1.0, 1.0, 1.0)
    m = Measurement("x", times, rounds=(0, 1, 2, 3, 4))
    assert m.quiet_median == 1.0


def test_the_quiet_median_interpolates_between_fewer_rounds() -> None:
    m = Measurement("x", (1.0, 3.0, 2.0, 2.0), rounds=(0, 0, 1, 1))
    assert m.quiet_median == pytest.approx(2.0 * 0.75 + 2.0 * 0.25)
    two = Measurement("x", (1.0, 2.0), rounds=(0, 1))
    assert two.quiet_median == pytest.approx(1.25)
    assert Measurement("x", (4.0, 1.0, 2.0)).quiet_median == 2.0


def test_the_confirmed_best_ignores_a_single_lucky_round() -> None:
    m = _rounds([1.0, 1.01, 0.80, 1.02])
    assert m.confirmed_time == 1.0
    assert m.confirmed_rate == 1.0


def test_the_confirmed_minimum_is_the_second_smallest_or_the_only_value() -> None:
    assert confirmed_minimum([3.0, 1.0, 2.0]) == 2.0
    assert confirmed_minimum([3.0]) == 3.0


def test_a_best_run_reproduced_within_the_agreement_is_confirmed() -> None:
    assert _rounds([1.0, 1.0 + AGREEMENT / 2, 1.3]).is_confirmed
    assert not _rounds([1.0, 1.0 + 2 * AGREEMENT, 1.3]).is_confirmed
    assert not _rounds([1.0]).is_confirmed


def test_rounds_far_slower_than_the_confirmed_best_count_as_hit() -> None:
    assert _rounds([1.0, 1.0, 1.5, 1.05, 2.0]).hit_rounds == 2


def test_a_level_shift_between_the_halves_is_a_step_change() -> None:
    assert _rounds([1.0, 1.01, 1.0, 1.02, 1.4, 1.41, 1.39, 1.42]).step_change
    assert _rounds([1.4, 1.41, 1.39, 1.42, 1.0, 1.01, 1.0, 1.02]).step_change


def test_bursts_that_come_and_go_are_no_step_change() -> None:
    assert not _rounds([1.0, 1.4, 1.0, 1.01, 1.39, 1.0, 1.4, 1.02]).step_change


def test_a_shift_in_fewer_than_eight_rounds_cannot_be_told_from_chance() -> None:
    assert not _rounds([1.0, 1.01, 1.0, 1.4, 1.41, 1.39]).step_change


def test_the_bootstrap_is_repeatable_and_brackets_the_confirmed_rate() -> None:
    m = _rounds([1.0, 1.02, 1.05, 1.01, 1.2, 1.03])
    first = Bootstrap().confirmed_rates(m)
    assert first == Bootstrap().confirmed_rates(m)
    low, high = percentile_interval(first)
    assert low <= m.confirmed_rate <= high
    assert high <= 1.0  # no resample is faster than the fastest round
    assert low >= 1 / 1.2


def test_quiet_rounds_give_a_narrow_interval_and_interference_a_wide_one() -> None:
    quiet = percentile_interval(Bootstrap().confirmed_rates(_rounds([1.0, 1.004, 1.002, 1.001])))
    noisy = percentile_interval(Bootstrap().confirmed_rates(_rounds([1.0, 1.3, 1.6, 1.2])))
    assert quiet[1] - quiet[0] < 0.01
    assert noisy[1] - noisy[0] > 0.1


def test_the_confirmed_cpu_wait_is_the_quieter_of_the_two_fastest_rounds() -> None:
    # Round bests 3.0, 1.0, 2.0: rounds 1 and 2 set the confirmed best; round 0 does not count.
    times, rounds = (3.0, 1.0, 2.0), (0, 1, 2)
    assert (
        Measurement("k", times, rounds=rounds, cpu_waits=(0.5, 0.3, 0.2)).confirmed_cpu_wait == 0.2
    )
    assert (
        Measurement("k", times, rounds=rounds, cpu_waits=(0.5, 0.0, 0.4)).confirmed_cpu_wait == 0.0
    )
    assert Measurement("k", (1.0, 2.0), rounds=(0, 1)).confirmed_cpu_wait is None


def test_cpu_waits_come_one_per_round() -> None:
    with pytest.raises(ValueError, match="one CPU wait share per round"):
        Measurement("k", (1.0, 2.0), rounds=(0, 1), cpu_waits=(0.1,))
