from __future__ import annotations

import pytest

from roofline_profiler.units import (
    format_bytes,
    format_rate,
    format_seconds,
    format_si,
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
