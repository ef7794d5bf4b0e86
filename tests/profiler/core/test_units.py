from __future__ import annotations

import math

import pytest

from roofline_profiler.core.units import (
    MAX_DURATION_CHARS,
    DurationError,
    format_bytes,
    format_rate,
    format_seconds,
    format_si,
    parse_duration,
    round_significant,
    significant,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(0.83481, "0.835", id="below-one"),
        pytest.param(9.9231, "9.92", id="one-digit"),
        pytest.param(13.62, "13.6", id="two-digits"),
        pytest.param(412.4, "412", id="three-digits"),
        pytest.param(5403.2, "5,403", id="thousands-keep-every-digit"),
        pytest.param(9.9996, "10.0", id="rounding-up-keeps-three-digits"),
        pytest.param(0.0, "0", id="zero"),
        pytest.param(-2.5, "-2.50", id="negative"),
    ],
)
def test_numbers_keep_three_significant_digits_in_fixed_notation(value: float, text: str) -> None:
    assert significant(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(1.2, "1.20 s", id="was-1.2e+03-ms"),
        pytest.param(13.6, "13.6 s", id="was-1.36e+04-ms"),
        pytest.param(0.0062, "6.20 ms", id="milliseconds"),
        pytest.param(4.1e-5, "41.0 µs", id="microseconds"),
        pytest.param(0.9999, "1.00 s", id="rounds-into-the-next-unit"),
        pytest.param(3e-10, "0.300 ns", id="below-a-nanosecond"),
    ],
)
def test_times_take_the_largest_unit_that_is_at_least_one(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


def test_axis_ticks_drop_trailing_zeros() -> None:
    assert format_seconds(0.01, trim=True) == "10 ms"
    assert format_si(4e14, "FLOP/s", trim=True) == "400 TFLOP/s"


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        pytest.param(4.3e12, "B/s", "4.30 TB/s", id="terabytes"),
        pytest.param(8.1e14, "FLOP/s", "810 TFLOP/s", id="teraflops"),
        pytest.param(2.4e10, "B/s", "24.0 GB/s", id="gigabytes"),
        pytest.param(812.0, "B/s", "812 B/s", id="no-prefix"),
    ],
)
def test_si_quantities_take_a_decimal_prefix(value: float, unit: str, text: str) -> None:
    assert format_si(value, unit) == text


def test_rates_and_sizes_read_like_engineering_units() -> None:
    assert format_rate(0.8348) == "0.835 tokens/s"
    assert format_rate(5400.4) == "5,400 tokens/s"
    assert format_bytes(16_060_522_496) == "15.0 GiB"
    assert format_bytes(131_072) == "128 KiB"


GO_UNITS = ("ns", "us", "µs", "ms", "s", "m", "h")


@pytest.mark.parametrize(
    ("text", "units", "free_form", "seconds"),
    [
        pytest.param("90s", GO_UNITS, False, 90.0, id="seconds"),
        pytest.param("168h", GO_UNITS, False, 604800.0, id="hours"),
        pytest.param("1h30m", GO_UNITS, False, 5400.0, id="compound"),
        pytest.param("1s500ms", GO_UNITS, False, 1.5, id="ms-is-not-m-then-s"),
        pytest.param("1.5h", GO_UNITS, False, 5400.0, id="decimal"),
        pytest.param("250us", GO_UNITS, False, 250e-6, id="micro-ascii"),
        pytest.param("250µs", GO_UNITS, False, 250e-6, id="micro-sign"),
        pytest.param("7ns", GO_UNITS, False, 7e-9, id="nanoseconds"),
        pytest.param("0s", GO_UNITS, False, 0.0, id="zero-is-a-duration"),
        pytest.param("50ms", ("ms", "s"), False, 0.05, id="a-units-subset"),
        pytest.param(" 20 ms ", ("ms",), True, 0.02, id="free-form-spaces"),
        pytest.param("1e2ms", ("ms",), True, 0.1, id="free-form-exponent"),
        pytest.param(".5s", ("s",), True, 0.5, id="free-form-leading-point"),
        pytest.param("1s 500ms", ("ms", "s"), True, 1.5, id="free-form-compound"),
    ],
)
def test_durations_are_terms_of_a_number_and_a_unit_that_add_up(
    text: str, units: tuple[str, ...], free_form: bool, seconds: float
) -> None:
    assert parse_duration(text, units, free_form=free_form) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "units", "free_form"),
    [
        pytest.param("", GO_UNITS, False, id="empty"),
        pytest.param("10", GO_UNITS, False, id="no-unit"),
        pytest.param("h", GO_UNITS, False, id="no-number"),
        pytest.param("7d", GO_UNITS, False, id="days-are-not-a-go-unit"),
        pytest.param("-1h", GO_UNITS, False, id="negative"),
        pytest.param("+1h", GO_UNITS, False, id="signed"),
        pytest.param("1h 30m", GO_UNITS, False, id="space-between-terms"),
        pytest.param(" 90s", GO_UNITS, False, id="leading-space"),
        pytest.param(".5s", GO_UNITS, False, id="leading-point"),
        pytest.param("1e2s", GO_UNITS, False, id="exponent"),
        pytest.param("\u0663s", GO_UNITS, False, id="non-ascii-digit"),
        pytest.param("5m", ("us", "ms", "s"), False, id="a-unit-the-field-does-not-take"),
        pytest.param("5 min", ("ms", "s"), True, id="free-form-words"),
        pytest.param("fast", ("s",), True, id="free-form-no-number"),
        pytest.param("1e400s", ("s",), True, id="free-form-overflow"),
        pytest.param("1" * MAX_DURATION_CHARS + "s", GO_UNITS, False, id="too-long"),
    ],
)
def test_anything_else_is_a_one_line_duration_error(
    text: str, units: tuple[str, ...], free_form: bool
) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text, units, free_form=free_form)
    assert "\n" not in str(info.value)


def test_a_duration_of_the_longest_length_read_still_parses() -> None:
    longest = "1" * (MAX_DURATION_CHARS - 1) + "s"
    assert parse_duration(longest) == float(longest[:-1])


@pytest.mark.parametrize(
    ("value", "digits", "rounded"),
    [
        pytest.param(3352.71, 4, 3353, id="integral-as-int"),
        pytest.param(3.35271, 4, 3.353, id="fraction"),
        pytest.param(0.000123456, 4, 0.0001235, id="small"),
        pytest.param(123456.0, 2, 120000, id="two-digits"),
        pytest.param(-2.71828, 3, -2.72, id="negative"),
        pytest.param(1.23456e20, 4, 1.235e20, id="past-exact-ints-stays-float"),
        pytest.param(0.0, 4, 0.0, id="zero-unchanged"),
    ],
)
def test_the_rounder_keeps_the_named_number_of_significant_digits(
    value: float, digits: int, rounded: float
) -> None:
    result = round_significant(value, digits=digits)
    assert result == rounded
    assert type(result) is type(rounded)


def test_the_rounder_leaves_infinities_and_nan_alone() -> None:
    assert round_significant(math.inf, digits=4) == math.inf
    assert math.isnan(round_significant(math.nan, digits=4))
