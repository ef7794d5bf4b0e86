"""Relations between a compact result's fields: intervals hold their values, the ridge point is
peak over bandwidth within the numbers' own intervals, a result is no older than its pod."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline_profiler.wire.compact import CompactDevice, CompactProfile, encode_compact
from roofline_profiler.wire.compact_decode import decode_compact
from roofline_profiler.wire.compact_fields import CompactDecodeError
from roofline_profiler.wire.compact_relations import WIRE_ROUNDING, check_relations
from tests.profiler.headline_builders import (
    BANDWIDTH,
    MIN_BATCH,
    RIDGE,
    headline_numbers,
    with_number_intervals,
    with_values,
)

CREATED = 1_800_000_000.0


def h200(
    bandwidth: float = 4.3e12, peak: float = 7.9e14, half_width: float = 0.01
) -> CompactDevice:
    """A device as the profiler measures one: ridge = peak / bandwidth, intervals around each
    number, the ridge point's from the ratios the other two intervals allow."""
    ridge = peak / bandwidth
    low, high = 1 - half_width, 1 + half_width
    intervals = [
        (bandwidth * low, bandwidth * high),
        (peak * low, peak * high),
        (peak * low / (bandwidth * high), peak * high / (bandwidth * low)),
        (64, 256),
    ]
    return CompactDevice(
        0, "NVIDIA H200", headline_numbers(bandwidth, peak, ridge, 128, intervals), ()
    )


def with_ridge(device: CompactDevice, ridge: float) -> CompactDevice:
    """``device`` claiming ``ridge``, with an interval of its own around it."""
    moved = with_values(device, **{RIDGE: ridge})
    return with_number_intervals(moved, **{RIDGE: (ridge * 0.99, ridge * 1.01)})


def profile_of(*devices: CompactDevice) -> CompactProfile:
    return CompactProfile("bfloat16", 8192, 8192, CREATED, 12.5, (1, 256), devices, backend="cuda")


def as_read(device: CompactDevice) -> CompactProfile:
    """The device as the operator reads it: encoded (rounded) and decoded."""
    return decode_compact(encode_compact(profile_of(device)))


def test_a_measured_device_holds_together_after_the_wire_rounds_it() -> None:
    check_relations(as_read(h200()))


@pytest.mark.parametrize(
    ("device", "message"),
    [
        pytest.param(
            with_number_intervals(h200(), **{BANDWIDTH: (0.0, 2.15e12)}),
            "the bandwidth interval [0, 2.15e+12] excludes its value 4.3e+12",
            id="bandwidth-interval-below-its-value",
        ),
        pytest.param(
            with_number_intervals(h200(), **{MIN_BATCH: (1, 2)}),
            "the min batch interval [1, 2] excludes its value 128",
            id="min-batch-interval-below-its-value",
        ),
        pytest.param(
            with_ridge(h200(), 1.0),
            "the ridge point 1 is not peak over bandwidth",
            id="ridge-far-from-peak-over-bandwidth",
        ),
        pytest.param(
            with_ridge(h200(), 183.7 * 1.03),
            "the ridge point 189.2 is not peak over bandwidth (between 180.1 and 187.4",
            id="ridge-just-beyond-the-intervals",
        ),
    ],
)
def test_a_result_that_contradicts_itself_is_refused_naming_the_fields(
    device: CompactDevice, message: str
) -> None:
    with pytest.raises(CompactDecodeError, match=r"^device #0: ") as info:
        check_relations(as_read(device))
    assert message in str(info.value)


def test_without_intervals_the_ridge_point_may_differ_by_the_wire_rounding_alone() -> None:
    bare = h200()
    bare = replace(bare, numbers={k: replace(e, interval=None) for k, e in bare.numbers.items()})
    check_relations(as_read(bare))
    off = with_values(bare, **{RIDGE: bare.ridge_point * (1 + 4 * WIRE_ROUNDING)})
    with pytest.raises(CompactDecodeError, match="not peak over bandwidth"):
        check_relations(as_read(off))


def test_a_result_measured_before_its_pod_existed_is_refused_beyond_the_clock_skew() -> None:
    """A result 47 h older than its pod passed: the window was only the operator's clock."""
    read = as_read(h200())
    check_relations(read, not_before=CREATED + 300)
    with pytest.raises(CompactDecodeError, match=r"^result: field 't' lies 169200 s before"):
        check_relations(read, not_before=CREATED + 47 * 3600)


@given(
    bandwidth=st.floats(min_value=1e9, max_value=9e13),
    peak=st.floats(min_value=1e10, max_value=9e16),
    half_width=st.floats(min_value=0.0, max_value=0.5),
)
def test_every_self_consistent_measurement_passes_after_the_wire_rounds_it(
    bandwidth: float, peak: float, half_width: float
) -> None:
    """The tolerances refuse no device the profiler can measure: whatever its numbers and
    intervals, rounded to the wire's digits and decoded, it holds together."""
    if not 1e-3 <= peak / bandwidth <= 1e6:
        return  # outside the plausibility table: refused before the relations
    check_relations(as_read(h200(bandwidth, peak, half_width)))


def test_each_device_is_checked() -> None:
    second = replace(with_ridge(h200(), 400.0), index=1)
    with pytest.raises(CompactDecodeError, match=r"^device #1: the ridge point"):
        check_relations(decode_compact(encode_compact(profile_of(h200(), second))))
