import pytest

from roofline_profiler.core import recommend, roofline

K, N = 4096, 14336
PEAK, BW = 790e12, 4.3e12


def _sweep(steps: dict[int, float]) -> tuple[recommend.SweepPoint, ...]:
    return recommend.analyse_sweep(sorted(steps.items()), K, N, 2, PEAK, BW)


def _at_fraction_of_peak(fractions: dict[int, float]) -> tuple[recommend.SweepPoint, ...]:
    """A sweep whose batch B achieves exactly fractions[B] of the peak."""
    return _sweep(
        {b: roofline.decode_gemm_flops(b, K, N) / (f * PEAK) for b, f in fractions.items()}
    )


def test_sweep_analysis_derives_rates_bounds_and_per_token_time() -> None:
    (point,) = _sweep({4: 1e-4})
    flops = 2 * 4 * K * N
    traffic = 2 * (K * N + 4 * K + 4 * N)
    assert point.flops_per_second == pytest.approx(flops / 1e-4)
    assert point.bytes_per_second == pytest.approx(traffic / 1e-4)
    assert point.arithmetic_intensity == pytest.approx(flops / traffic)
    assert point.roofline_flops_per_second == pytest.approx(flops / traffic * BW)
    assert point.roofline_fraction == pytest.approx((flops / 1e-4) / (flops / traffic * BW))
    assert point.peak_fraction == pytest.approx(flops / 1e-4 / PEAK)
    assert point.seconds_per_token == pytest.approx(2.5e-5)


def test_the_crossing_is_interpolated_in_log_batch_between_the_bracketing_batches() -> None:
    points = _at_fraction_of_peak({64: 0.3, 128: 0.45, 256: 0.6, 512: 0.7})
    # 0.5 lies a third of the way from 0.45 to 0.6: B* = 128 * 2 ** (1/3).
    assert recommend.efficiency_crossing(points, 0.5) == pytest.approx(128 * 2 ** (1 / 3))


def test_the_recommendation_is_the_swept_batch_nearest_the_crossing_on_a_log_scale() -> None:
    near_low = _at_fraction_of_peak({64: 0.3, 128: 0.45, 256: 0.6, 512: 0.7})  # B* = 161
    near_high = _at_fraction_of_peak({64: 0.3, 128: 0.35, 256: 0.6, 512: 0.7})  # B* = 223
    assert recommend.recommended_min_batch(near_low, K, N, 2, PEAK / BW, 0.5) == (
        recommend.Recommendation(128, "sweep", 0.5, pytest.approx(128 * 2 ** (1 / 3)))
    )
    assert recommend.recommended_min_batch(near_high, K, N, 2, PEAK / BW, 0.5).batch == 256


def test_a_point_moving_a_few_percent_at_the_threshold_does_not_move_the_recommendation() -> None:
    # The old rule ("first swept batch at the threshold") jumped from 64 to 128 here.
    for at_64 in (0.48, 0.49, 0.5, 0.51, 0.52):
        points = _at_fraction_of_peak({32: 0.3, 64: at_64, 128: 0.7, 256: 0.8})
        assert recommend.recommended_min_batch(points, K, N, 2, PEAK / BW, 0.5).batch == 64


def test_the_recommendation_changes_where_the_crossing_passes_the_geometric_midpoint() -> None:
    midpoint = 64 * 2**0.5
    below = _at_fraction_of_peak({64: 0.40, 128: 0.59})  # crossing just below the midpoint
    above = _at_fraction_of_peak({64: 0.40, 128: 0.61})
    assert recommend.efficiency_crossing(below, 0.5) > midpoint  # type: ignore[operator]
    assert recommend.recommended_min_batch(below, K, N, 2, PEAK / BW, 0.5).batch == 128
    assert recommend.efficiency_crossing(above, 0.5) < midpoint  # type: ignore[operator]
    assert recommend.recommended_min_batch(above, K, N, 2, PEAK / BW, 0.5).batch == 64


def test_a_lucky_small_batch_does_not_lower_the_recommendation() -> None:
    points = _at_fraction_of_peak({64: 0.6, 128: 0.45, 256: 0.55, 512: 0.7})
    assert recommend.efficiency_crossing(points, 0.5) == pytest.approx(128 * 2**0.5)
    assert recommend.recommended_min_batch(points, K, N, 2, PEAK / BW, 0.5).batch == 256


def test_when_every_swept_batch_reaches_the_fraction_the_smallest_is_recommended() -> None:
    points = _at_fraction_of_peak({8: 0.6, 16: 0.7})
    rec = recommend.recommended_min_batch(points, K, N, 2, PEAK / BW, 0.5)
    assert (rec.batch, rec.crossing) == (8, 8.0)


def test_the_efficiency_fraction_is_configurable() -> None:
    points = _at_fraction_of_peak({64: 0.3, 128: 0.45, 256: 0.55, 512: 0.7})
    assert recommend.recommended_min_batch(points, K, N, 2, PEAK / BW, 0.25).batch == 64
    assert recommend.recommended_min_batch(points, K, N, 2, PEAK / BW, 0.68).batch == 512


def test_ties_on_the_log_scale_go_to_the_larger_batch() -> None:
    assert recommend.nearest_swept_batch(64 * 2**0.5, [32, 64, 128]) == 128
    assert recommend.nearest_swept_batch(3.0, [1, 4, 16]) == 4


def test_the_roofline_model_answers_when_no_swept_batch_reaches_the_fraction() -> None:
    points = _at_fraction_of_peak({1: 0.01, 2: 0.02, 4: 0.04})
    ridge = PEAK / BW
    rec = recommend.recommended_min_batch(points, K, N, 2, ridge, 0.5)
    assert rec.source == "model"
    assert rec.batch == roofline.batch_for_intensity(0.5 * ridge, K, N, 2)
    assert rec.batch == 95  # half the ridge point (91.9), plus the input and output traffic


def test_an_unreachable_intensity_falls_back_to_the_largest_swept_batch() -> None:
    points = recommend.analyse_sweep([(1, 1.0), (8, 1.0)], 64, 64, 2, PEAK, BW)
    rec = recommend.recommended_min_batch(points, 64, 64, 2, PEAK / BW, 0.5)
    assert rec == recommend.Recommendation(batch=8, source="model", min_efficiency=0.5)


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_efficiency_outside_zero_to_one_is_rejected(fraction: float) -> None:
    with pytest.raises(ValueError, match="min_efficiency"):
        recommend.recommended_min_batch(_at_fraction_of_peak({1: 0.1}), K, N, 2, 100.0, fraction)


def test_knee_is_where_the_flat_line_meets_the_compute_line() -> None:
    # Flat at 1 ms up to B=32, then 1 ms per 32 tokens: the lines meet at B=32.
    steps = {b: max(1e-3, b / 32 * 1e-3) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)}
    assert recommend.knee_batch(_sweep(steps)) == 32


def test_a_sweep_that_stays_flat_has_no_knee() -> None:
    steps = {b: 1e-3 * (1 + b / 10_000) for b in (1, 16, 512)}
    assert recommend.knee_batch(_sweep(steps)) is None


def test_analysis_rejects_non_positive_input() -> None:
    with pytest.raises(ValueError, match="positive"):
        recommend.analyse_sweep([(0, 1.0)], K, N, 2, PEAK, BW)
