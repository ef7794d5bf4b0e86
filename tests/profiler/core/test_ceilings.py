import pytest

from roofline_profiler.core import ceilings, roofline
from roofline_profiler.core.stats import AGREEMENT
from tests.profiler.synthetic import H200_LIKE, synthetic_measurements

K, N = 4096, 14336
BW, PEAK = H200_LIKE["bandwidth"], H200_LIKE["peak"]


def derive(**kwargs: object) -> ceilings.DeviceRoofline:
    bandwidth_kind = str(kwargs.pop("bandwidth_kind", "read"))
    bw, mm, sweep = synthetic_measurements(**kwargs)  # type: ignore[arg-type]
    peak = {m.label: m for _, m in mm}
    return ceilings.derive(bw, peak, sweep, K, N, 2, bandwidth_kind, 0.5)


def test_a_quiet_device_gets_its_ceilings_from_the_dedicated_kernels() -> None:
    d = derive()
    assert d.slope.kernel == "read"
    assert d.slope.value == pytest.approx(BW, rel=0.005)
    assert d.peak.kernel == "mm 8192x8192x8192"
    assert d.peak.value == pytest.approx(PEAK, rel=0.005)
    assert d.ridge_point == pytest.approx(d.peak.value / d.slope.value)
    assert d.copy.value == pytest.approx(0.95 * BW, rel=0.005)


def test_every_headline_interval_contains_its_value_and_is_narrow_when_quiet() -> None:
    d = derive()
    for value, (low, high) in [
        (d.read.value, d.read.interval),
        (d.copy.value, d.copy.interval),
        (d.slope.value, d.slope.interval),
        (d.peak.value, d.peak.interval),
        (d.ridge_point, d.ridge_point_interval),
    ]:
        assert low <= value <= high
        assert (high - low) / value < 0.02
    low_batch, high_batch = d.recommended_min_batch_interval
    assert low_batch <= d.recommendation.batch <= high_batch


def test_a_decode_step_faster_than_every_read_kernel_sets_the_slope() -> None:
    fast = roofline.decode_gemm_bytes(1, K, N, 2) / (1.3 * BW)
    d = derive(steps={1: fast})
    assert d.slope.kernel == "decode B=1"
    assert d.slope.value == pytest.approx(1.3 * BW, rel=0.01)


def test_no_sweep_point_lies_above_the_roof_by_construction() -> None:
    # A sweep whose B=1 streams faster than the read kernels and whose B=512 beats the matmuls.
    steps = {
        1: roofline.decode_gemm_bytes(1, K, N, 2) / (1.2 * BW),
        512: roofline.decode_gemm_flops(512, K, N) / (1.1 * PEAK),
    }
    d = derive(steps=steps)
    for p in d.points:
        assert p.flops_per_second <= p.roofline_flops_per_second * (1 + 1e-9)
    assert d.peak.kernel == "decode B=512"


def test_the_copy_slope_uses_the_copy_kernel() -> None:
    d = derive(bandwidth_kind="copy")
    assert d.slope.kernel == "copy"
    assert d.slope.value == pytest.approx(d.copy.value)


def test_a_burst_during_the_bandwidth_rounds_only_moves_neither_slope_nor_ridge() -> None:
    quiet = derive()
    burst = {0: 1.6, 1: 1.5, 2: 1.4}
    hit = derive(slowdown={"read": burst, "readMatvec": burst, "copy": burst})
    assert hit.slope.value == pytest.approx(quiet.slope.value, rel=0.005)
    assert hit.ridge_point == pytest.approx(quiet.ridge_point, rel=0.005)
    assert hit.recommendation == quiet.recommendation


def test_a_burst_in_most_rounds_widens_the_interval_instead_of_moving_the_ceiling_far() -> None:
    quiet = derive()
    hit = derive(slowdown={"read": {0: 1.5, 1: 1.3, 2: 1.4, 3: 1.2}})
    assert hit.slope.value == pytest.approx(quiet.slope.value, rel=AGREEMENT)
    width = (hit.slope.interval[1] - hit.slope.interval[0]) / hit.slope.value
    quiet_width = (quiet.slope.interval[1] - quiet.slope.interval[0]) / quiet.slope.value
    assert width > 5 * quiet_width


def test_a_single_outlier_at_the_threshold_does_not_move_the_minimum_batch() -> None:
    # B=64 reaches 45% of peak; one round of it ran 25% faster (56%, above the threshold).
    at_45 = roofline.decode_gemm_flops(64, K, N) / (0.45 * PEAK)
    quiet = derive(steps={64: at_45})
    lucky = derive(steps={64: at_45}, slowdown={"decode B=64": {3: 1 / 1.25}})
    assert lucky.recommendation.batch == quiet.recommendation.batch
    assert lucky.recommendation.crossing == pytest.approx(quiet.recommendation.crossing, rel=0.01)
    # The bootstrap sometimes draws the lucky round twice: the interval admits 64, the
    # published value does not move.
    assert quiet.recommended_min_batch_interval == (128, 128)
    assert lucky.recommended_min_batch_interval[1] == 128


def test_the_crossing_interval_brackets_the_crossing() -> None:
    at_45 = roofline.decode_gemm_flops(64, K, N) / (0.45 * PEAK)
    d = derive(steps={64: at_45})
    assert d.recommendation.crossing is not None
    assert d.crossing_interval is not None
    assert d.crossing_interval[0] <= d.recommendation.crossing <= d.crossing_interval[1]
    assert 64 < d.recommendation.crossing < 128


def test_unknown_bandwidth_kinds_are_refused() -> None:
    bw, mm, sweep = synthetic_measurements()
    with pytest.raises(ValueError, match="bandwidth kind"):
        ceilings.derive(bw, {m.label: m for _, m in mm}, sweep, K, N, 2, "write", 0.5)
