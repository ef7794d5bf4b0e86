from __future__ import annotations

from dataclasses import replace

import pytest
from tests.profiler.headline_builders import (
    BANDWIDTH,
    headline_numbers,
    interval_of,
    with_number_intervals,
)

from roofline_operator.core.node_results import GpuResult, NodeResult, headline_of
from roofline_operator.decide.hysteresis import (
    MaterialChange,
    beyond_noise,
    describe_changes,
    publish,
    record_profile,
)
from roofline_operator.decide.records import NodeRecord, record_to_status


def intervals(
    bandwidth: float = 4.3e12,
    peak: float = 7.9e14,
    ridge: float = 183.7,
    min_batch: tuple[int, int] = (128, 128),
    relative: float = 0.01,
) -> tuple[tuple[float, float], ...]:
    """Symmetric intervals of ``relative`` half-width around the given numbers."""

    def around(value: float) -> tuple[float, float]:
        return (value * (1 - relative), value * (1 + relative))

    return (around(bandwidth), around(peak), around(ridge), min_batch)


def gpu(
    index: int = 0,
    *,
    bandwidth: float = 4.3e12,
    peak: float = 7.9e14,
    min_batch: int = 128,
    min_batch_interval: tuple[int, int] | None = None,
    relative: float | None = 0.01,
    steps: tuple[tuple[int, float], ...] = ((1, 3.0e-5),),
) -> GpuResult:
    ridge = peak / bandwidth
    return GpuResult(
        index=index,
        product="NVIDIA H200",
        numbers=headline_numbers(
            bandwidth,
            peak,
            ridge,
            min_batch,
            None
            if relative is None
            else intervals(
                bandwidth, peak, ridge, min_batch_interval or (min_batch, min_batch), relative
            ),
        ),
        step_seconds=steps,
    )


def node(*gpus: GpuResult, at: float = 1000.0, dtype: str = "bfloat16") -> NodeResult:
    return NodeResult(
        spec_hash="h",
        profiled_at=at,
        duration_seconds=20.0,
        dtype=dtype,
        shape_k=4096,
        shape_n=14336,
        gpus=gpus or (gpu(),),
    )


@pytest.mark.parametrize(
    ("old", "old_interval", "new", "new_interval", "expected"),
    [
        pytest.param(100.0, (99.0, 101.0), 101.0, (100.0, 102.0), False, id="within-both"),
        pytest.param(100.0, (99.0, 101.0), 101.5, (100.5, 102.5), True, id="beyond-rss"),
        pytest.param(100.0, (99.0, 101.0), 101.4, (100.4, 102.4), False, id="just-within-rss"),
        pytest.param(100.0, (99.9, 105.0), 102.0, (97.0, 102.1), False, id="facing-sides-wide"),
        pytest.param(100.0, (95.0, 100.1), 102.0, (101.9, 107.0), True, id="facing-sides-narrow"),
        pytest.param(100.0, None, 100.1, None, True, id="no-intervals-any-change"),
        pytest.param(100.0, None, 100.0, None, False, id="no-intervals-same-value"),
        pytest.param(100.0, (101.0, 102.0), 99.5, None, True, id="interval-beside-its-value"),
    ],
)
def test_a_number_moves_only_beyond_the_combined_uncertainty_of_both_sides(
    old: float,
    old_interval: tuple[float, float] | None,
    new: float,
    new_interval: tuple[float, float] | None,
    expected: bool,
) -> None:
    assert beyond_noise(old, old_interval, new, new_interval) is expected


def test_a_first_profile_publishes_its_numbers_as_measured_and_raises_nothing() -> None:
    measured = node()
    publication = publish(None, measured)
    assert publication.result == measured
    assert publication.moved
    assert publication.changes == ()


def test_a_profile_within_noise_keeps_every_published_number_with_the_latest_widths() -> None:
    published = node(gpu(bandwidth=4.30e12, peak=7.90e14))
    measured = node(gpu(bandwidth=4.27e12, peak=7.95e14, steps=((1, 3.1e-5),)), at=2000.0)
    publication = publish(published, measured)
    (kept,) = publication.result.gpus
    (old,) = published.gpus
    assert (kept.bandwidth_bytes_per_second, kept.peak_flops_per_second) == (4.30e12, 7.90e14)
    assert (kept.ridge_point, kept.recommended_min_batch) == (old.ridge_point, 128)
    # The held value, with the latest profile's half-widths (1% of 4.27 TB/s) around it.
    assert interval_of(kept, BANDWIDTH) == pytest.approx((4.30e12 - 4.27e10, 4.30e12 + 4.27e10))
    assert not publication.moved
    assert publication.changes == ()
    # What is not a published decision follows the latest profile.
    assert kept.step_seconds == ((1, 3.1e-5),)
    assert publication.result.profiled_at == 2000.0


def test_a_number_beyond_noise_moves_alone_and_the_others_stay() -> None:
    published = node(gpu(bandwidth=4.30e12, peak=7.90e14))
    measured = node(gpu(bandwidth=4.00e12, peak=7.92e14))
    publication = publish(published, measured)
    (kept,) = publication.result.gpus
    assert kept.bandwidth_bytes_per_second == 4.00e12
    assert kept.peak_flops_per_second == 7.90e14
    assert interval_of(kept, BANDWIDTH) == (3.96e12, 4.04e12)
    assert publication.moved
    # 7% lower: beyond noise, not material; the ridge point moved beyond noise by 7.5%.
    assert publication.changes == ()


def test_a_drop_beyond_the_threshold_and_the_noise_is_a_material_change() -> None:
    published = node(gpu(bandwidth=4.31e12, peak=7.9e14))
    measured = node(gpu(bandwidth=3.62e12, peak=7.9e14))
    publication = publish(published, measured)
    quantities = [c.quantity for c in publication.changes]
    assert quantities == ["bandwidth", "ridge point"]
    assert publication.describe().startswith("bandwidth 4.31\u21923.62 TB/s (\u221216%)")
    assert "ridge point 183\u2192218 FLOP/B (+19%)" in publication.describe()


def test_a_large_change_within_a_wide_uncertainty_is_noise_not_news() -> None:
    published = node(gpu(bandwidth=4.3e12, relative=0.15))
    measured = node(gpu(bandwidth=3.8e12, relative=0.15))
    publication = publish(published, measured)
    assert publication.result.gpus[0].bandwidth_bytes_per_second == 4.3e12
    assert publication.changes == ()


def test_the_change_threshold_is_the_profiles_own() -> None:
    published = node(gpu(peak=7.9e14))
    measured = node(gpu(peak=7.3e14))  # -7.6%, far beyond 1% noise
    assert [c.quantity for c in publish(published, measured, 5).changes] == ["peak", "ridge point"]
    assert publish(published, measured, 10).changes == ()


def test_a_min_batch_one_step_away_within_both_intervals_holds() -> None:
    published = node(gpu(min_batch=64, min_batch_interval=(64, 128)))
    measured = node(gpu(min_batch=128, min_batch_interval=(64, 128)))
    assert publish(published, measured).result.gpus[0].recommended_min_batch == 64


def test_a_min_batch_whose_intervals_do_not_reach_each_other_moves() -> None:
    published = node(gpu(min_batch=64, min_batch_interval=(64, 64)))
    measured = node(gpu(min_batch=256, min_batch_interval=(128, 256)))
    publication = publish(published, measured)
    assert publication.result.gpus[0].recommended_min_batch == 256
    # The min batch is not one of the numbers whose change is news on its own.
    assert publication.changes == ()


def test_results_without_intervals_publish_any_change_and_stay_exact() -> None:
    published = node(gpu(bandwidth=4.300e12, relative=None))
    measured = node(gpu(bandwidth=4.301e12, relative=None))
    publication = publish(published, measured)
    assert publication.result.gpus[0].bandwidth_bytes_per_second == 4.301e12
    assert interval_of(publication.result.gpus[0], BANDWIDTH) is None
    assert publication.moved


def test_a_held_number_without_a_published_interval_takes_the_latest_widths() -> None:
    published = node(gpu(relative=None))
    measured = node(gpu(relative=0.01))
    (kept,) = publish(published, measured).result.gpus
    assert interval_of(kept, BANDWIDTH) == pytest.approx((4.257e12, 4.343e12))


def test_a_held_number_keeps_its_value_when_the_latest_profile_has_no_interval() -> None:
    published = node(gpu(relative=0.01))
    measured = node(gpu(bandwidth=4.3e12, relative=None))
    publication = publish(published, measured)
    assert interval_of(publication.result.gpus[0], BANDWIDTH) is None
    assert not publication.moved


def converge(first: GpuResult, then: list[GpuResult]) -> list[float]:
    """The published bandwidth after each profile of a node."""
    record = NodeRecord(name="gpu-1", gpus=1)
    published = []
    for at, measured in enumerate([first, *then]):
        record, _ = record_profile(record, node(measured, at=1000.0 + at), 10)
        assert record.result is not None
        published.append(record.result.gpus[0].bandwidth_bytes_per_second)
    return published


def wide_first() -> GpuResult:
    """3.0 TB/s with the interval [2.0, 4.6] TB/s: a first profile gone wrong (its ridge point,
    peak over bandwidth, as uncertain)."""
    first = gpu(bandwidth=3.0e12)
    ridge = (first.peak_flops_per_second / 4.6e12, first.peak_flops_per_second / 2.0e12)
    band = (2.0e12, 4.6e12)
    return with_number_intervals(first, bandwidth_bytes_per_second=band, ridge_point=ridge)


def tight(bandwidth: float) -> GpuResult:
    """``bandwidth`` ± 0.04 TB/s."""
    measured = gpu(bandwidth=bandwidth, peak=7.9e14)
    band = (bandwidth - 0.04e12, bandwidth + 0.04e12)
    return with_number_intervals(measured, bandwidth_bytes_per_second=band)


def test_a_wide_first_profile_is_provisional_and_the_first_tight_one_replaces_it() -> None:
    published = converge(wide_first(), [tight(4.30e12) for _ in range(6)])
    assert published == [3.0e12] + [4.30e12] * 6


def test_a_wide_first_profile_is_shown_as_provisional_in_status() -> None:
    record, _ = record_profile(NodeRecord(name="gpu-1", gpus=1), node(wide_first()), 10)
    assert record_to_status(record)["provisional"] == ["bandwidth", "ridge point"]
    record, publication = record_profile(record, node(tight(4.3e12), at=2000.0), 10)
    assert "provisional" not in record_to_status(record)
    assert publication.moved
    assert publication.changes == ()  # no DeviceChanged for it


def test_a_held_value_narrows_to_the_latest_widths_so_a_later_tight_profile_moves_it() -> None:
    """Without the provisional rule: 3.0 [2.0, 4.6] is not wide by 10% on the low side only."""
    published_gpu = gpu(bandwidth=3.0e12)
    # Within 10% below, far above: not provisional, yet wide toward the truth.
    interval = (2.8e12, 4.6e12)
    first = with_number_intervals(published_gpu, bandwidth_bytes_per_second=interval)
    record, _ = record_profile(NodeRecord(name="gpu-1", gpus=1), node(first), 10)
    record = replace(record, result=replace(record.result, gpus=(first,)))  # type: ignore[arg-type]
    published = [3.0e12]
    for at in range(6):
        record, _ = record_profile(record, node(tight(4.30e12), at=2000.0 + at), 10)
        assert record.result is not None
        published.append(record.result.gpus[0].bandwidth_bytes_per_second)
    assert published[-1] == 4.30e12
    assert published.index(4.30e12) <= 2  # held once with the wide interval, then it moves


def test_another_dtype_publishes_the_new_numbers_without_a_change() -> None:
    published = node(gpu(bandwidth=4.3e12))
    measured = node(gpu(bandwidth=2.0e12), dtype="float16")
    publication = publish(published, measured)
    assert publication.result == measured
    assert publication.changes == ()


def test_each_gpu_of_a_node_is_held_or_moved_on_its_own() -> None:
    published = node(gpu(0), gpu(1), gpu(2))
    measured = node(gpu(0, bandwidth=4.29e12), gpu(1, bandwidth=3.5e12), gpu(2, peak=7.91e14))
    publication = publish(published, measured)
    bandwidths = [g.bandwidth_bytes_per_second for g in publication.result.gpus]
    assert bandwidths == [4.3e12, 3.5e12, 4.3e12]
    assert {c.gpu for c in publication.changes} == {1}
    assert publication.describe().startswith("GPU 1 bandwidth 4.3\u21923.5 TB/s")


def test_a_gpu_not_published_before_is_published_as_measured() -> None:
    published = node(gpu(0))
    measured = node(gpu(0), gpu(1, bandwidth=3.0e12))
    publication = publish(published, measured)
    assert publication.result.gpus[1] == measured.gpus[1]
    assert publication.moved
    assert publication.changes == ()


@pytest.mark.parametrize(
    ("change", "text"),
    [
        pytest.param(
            MaterialChange(0, "peak", 7.9e14, 9.1e14), "peak 790\u2192910 TFLOP/s (+15%)", id="peak"
        ),
        pytest.param(
            MaterialChange(0, "bandwidth", 5.3e10, 4.1e10),
            "bandwidth 53\u219241 GB/s (\u221223%)",
            id="cpu-bandwidth",
        ),
        pytest.param(
            MaterialChange(0, "ridge point", 4.1, 5.0),
            "ridge point 4.1\u21925 FLOP/B (+22%)",
            id="ridge",
        ),
    ],
)
def test_a_change_reads_with_its_unit_and_signed_percentage(
    change: MaterialChange, text: str
) -> None:
    assert change.describe() == text


def test_changes_name_their_gpu_only_on_a_node_with_several() -> None:
    change = MaterialChange(3, "bandwidth", 4.3e12, 3.6e12)
    assert describe_changes((change,), 1).startswith("bandwidth")
    assert describe_changes((change,), 8).startswith("GPU 3 bandwidth")


def test_recording_a_profile_keeps_the_previous_and_latest_numbers_and_when_they_moved() -> None:
    first = node(gpu(bandwidth=4.3e12), at=1000.0)
    record, _ = record_profile(NodeRecord(name="gpu-1", gpus=1), first, 10)
    assert (record.result, record.published_at, record.previous, record.change) == (
        first,
        1000.0,
        None,
        None,
    )
    noisy = node(gpu(bandwidth=4.28e12), at=2000.0)
    record, publication = record_profile(record, noisy, 10)
    assert record.result is not None
    assert record.result.gpus[0].bandwidth_bytes_per_second == 4.3e12
    assert record.published_at == 1000.0  # the published numbers are still the first profile's
    assert record.measured == headline_of(noisy)
    assert record.previous == headline_of(first)
    assert record.change is None
    degraded = node(gpu(bandwidth=3.6e12), at=3000.0)
    record, publication = record_profile(record, degraded, 10)
    assert record.result is not None
    assert record.result.gpus[0].bandwidth_bytes_per_second == 3.6e12
    assert record.published_at == 3000.0
    assert record.previous == headline_of(noisy)
    assert record.change is not None
    assert record.change.startswith("bandwidth 4.3\u21923.6 TB/s")
    assert publication.changes
    # The next profile within noise of the new value clears the change.
    record, _ = record_profile(record, replace(degraded, profiled_at=4000.0), 10)
    assert record.change is None


def warned(result: NodeResult, *codes: str) -> NodeResult:
    return replace(result, gpus=tuple(replace(g, warnings=codes) for g in result.gpus))


def test_a_profile_that_warns_of_interference_moves_nothing_and_says_why() -> None:
    record, _ = record_profile(NodeRecord(name="gpu-1", gpus=1), node(at=1000.0), 10)
    hit = warned(node(gpu(bandwidth=3.0e12), at=2000.0), "CpuContention", "MinBatchFromModel")
    record, publication = record_profile(record, hit, 10)
    assert publication.held == ("CpuContention",)
    assert not publication.moved
    assert publication.changes == ()
    assert record.result is not None
    assert record.result.gpus[0].bandwidth_bytes_per_second == 4.3e12
    assert record.result.gpus[0].numbers == gpu().numbers
    assert record.result.profiled_at == 2000.0  # the profile itself is the latest one
    assert (record.published_at, record.change, record.held) == (1000.0, None, True)
    assert record.warnings == ("CpuContention", "MinBatchFromModel")
    assert record.measured == headline_of(hit)  # shown beside the published numbers


def test_interference_still_there_at_the_next_profile_is_the_nodes_condition() -> None:
    record, _ = record_profile(NodeRecord(name="gpu-1", gpus=1), node(at=1000.0), 10)
    for at in (2000.0, 3000.0):
        hit = warned(node(gpu(bandwidth=3.0e12), at=at), "InterferenceUnresolved")
        record, publication = record_profile(record, hit, 10)
    assert publication.held == ()
    assert record.held is False
    assert record.result is not None
    assert record.result.gpus[0].bandwidth_bytes_per_second == 3.0e12
    assert [c.quantity for c in publication.changes] == ["bandwidth", "ridge point"]


def test_a_first_profile_that_warns_of_interference_is_published_having_nothing_to_keep() -> None:
    hit = warned(node(at=1000.0), "CpuContention")
    record, publication = record_profile(NodeRecord(name="gpu-1", gpus=1), hit, 10)
    assert publication.held == ()
    assert record.result == hit
    assert record.warnings == ("CpuContention",)


@pytest.mark.parametrize(
    "code",
    ["SlopeFromDecode", "PeakFromDecode", "BandwidthMismatch", "MinBatchFromModel"],
)
def test_a_warning_every_run_of_the_device_repeats_holds_nothing_back(code: str) -> None:
    record, _ = record_profile(NodeRecord(name="gpu-1", gpus=1), node(at=1000.0), 10)
    record, publication = record_profile(
        record, warned(node(gpu(bandwidth=3.0e12), at=2000.0), code), 10
    )
    assert publication.held == ()
    assert publication.changes
    assert record.warnings == (code,)
