import math

import pytest

from roofline_profiler.stats import Measurement, precise_enough, quantile


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


def test_one_sample_has_no_spread_and_unknown_precision() -> None:
    m = Measurement("x", (1.0,))
    assert m.cov == 0.0
    assert m.relative_standard_error == math.inf


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


def test_noise_threshold_flags_a_spread_above_five_percent() -> None:
    assert not Measurement("calm", (1.0, 1.01, 0.99)).is_noisy
    assert Measurement("noisy", (1.0, 1.2, 0.8)).is_noisy


def test_adaptive_repetition_stops_only_with_enough_runs_and_precision() -> None:
    steady = [1.0] * 10
    assert precise_enough(steady, minimum_runs=10, target=0.01)
    assert not precise_enough(steady[:9], minimum_runs=10, target=0.01)
    assert not precise_enough([1.0, 2.0] * 5, minimum_runs=3, target=0.01)
