from roofline_profiler.core.stats import CPU_WAIT_SUSPECT, Measurement
from roofline_profiler.wire.measurement_rounds import (
    relative_rates,
    restrict,
    round_rates,
    rounds_in,
)


def test_a_rounds_rate_is_its_best_run_and_a_round_that_waited_for_a_cpu_has_none() -> None:
    m = Measurement(
        "read",
        (1.0, 1.1, 2.0, 2.1, 0.5),
        work=4.0,
        rounds=(0, 0, 1, 1, 2),
        cpu_waits=(0.0, CPU_WAIT_SUSPECT / 2, CPU_WAIT_SUSPECT),
    )
    assert round_rates(m) == {0: 4.0, 1: 2.0}


def test_rates_are_relative_to_the_confirmed_rate_so_one_lucky_round_does_not_set_it() -> None:
    m = Measurement("read", (0.5, 1.0, 1.0, 2.0), work=4.0, rounds=(0, 1, 2, 3))
    assert relative_rates(m) == {0: 2.0, 1: 1.0, 2: 1.0, 3: 0.5}


def test_a_measurement_without_rounds_or_work_has_no_round_rates() -> None:
    assert round_rates(Measurement("read", (1.0, 1.0), work=4.0)) == {}
    assert relative_rates(Measurement("read", (1.0,), rounds=(0,))) == {}


def test_rounds_in_counts_the_measurements_rounds_among_those_given() -> None:
    m = Measurement("read", (1.0, 1.0, 1.0), work=1.0, rounds=(0, 0, 3))
    assert rounds_in(m, (0, 1, 2, 3)) == 2
    assert rounds_in(m, (5,)) == 0


def test_restricting_a_measurement_keeps_its_samples_and_cpu_waits_of_those_rounds() -> None:
    m = Measurement(
        "read",
        (1.0, 1.1, 2.0, 2.1, 1.0),
        work=1.0,
        rounds=(0, 0, 1, 1, 2),
        cpu_waits=(0.1, 0.2, 0.3),
    )
    kept = restrict(m, (0, 2))
    assert kept.times == (1.0, 1.1, 1.0)
    assert kept.rounds == (0, 0, 2)
    assert kept.cpu_waits == (0.1, 0.3)
    assert restrict(m, (7,)) is m
