"""The table of physical plausibility and the bounded JSON reader every untrusted input goes
through."""

from __future__ import annotations

import math

import pytest

from roofline_profiler.core import limits, plausibility
from roofline_profiler.core.plausibility import ImplausibleValue, load_json, nesting_depth


def test_every_model_a_request_may_ask_for_reads_back_as_plausible() -> None:
    context = plausibility.RANGES["context"]
    tensor_parallel = plausibility.RANGES["tensor parallel"]
    assert (context.low, context.high) == (1, limits.MAX_CONTEXT_TOKENS)
    assert (tensor_parallel.low, tensor_parallel.high) == (1, limits.MAX_TENSOR_PARALLEL)
    assert plausibility.integer(limits.MAX_CONTEXT_TOKENS, "context", "c") == (
        limits.MAX_CONTEXT_TOKENS
    )
    with pytest.raises(ImplausibleValue):
        plausibility.integer(limits.MAX_CONTEXT_TOKENS + 1, "context", "c")


def test_the_ranges_hold_todays_fastest_gpu_with_room_to_spare() -> None:
    h200 = {"bandwidth": 4.8e12, "peak": 989e12, "ridge point": 206.0}
    for quantity, value in h200.items():
        assert plausibility.number(value * 10, quantity, quantity) == value * 10


def test_nesting_depth_ignores_brackets_inside_strings() -> None:
    assert nesting_depth('{"a": "[[[[[[[[[[[[", "b": [1, [2]]}') == 3
    assert nesting_depth('["\\"[[[[[[[[[[["]') == 1


def test_deep_nesting_is_refused_before_the_recursive_parser_sees_it() -> None:
    with pytest.raises(ImplausibleValue, match="nests deeper"):
        load_json("[" * 100_000, 1_000_000, "result")


def test_nan_infinity_and_huge_numbers_parse_so_that_fields_can_be_named() -> None:
    nan, inf, huge = load_json(f"[NaN, 1e400, {10**400}]", 10_000, "result")
    assert math.isnan(nan)
    assert inf == math.inf
    with pytest.raises(ImplausibleValue, match="'bandwidth' is not a finite number"):
        plausibility.number(nan, "bandwidth", "bandwidth")
    with pytest.raises(ImplausibleValue, match="'bandwidth' is not a finite number"):
        plausibility.number(huge, "bandwidth", "bandwidth")
    with pytest.raises(ImplausibleValue, match="integer of 401 digits"):
        plausibility.integer(huge, "min batch", "min batch")


def test_an_integer_longer_than_python_parses_is_refused_with_a_reason() -> None:
    with pytest.raises(ImplausibleValue, match="digits is too long"):
        load_json(f"[{'9' * 5000}]", 10_000, "result")


def test_a_time_may_lie_a_little_ahead_of_now_but_not_far() -> None:
    now = 1.8e9
    assert plausibility.timestamp(now + 60, "t", now) == now + 60
    with pytest.raises(ImplausibleValue, match="in the future"):
        plausibility.timestamp(now + 3600, "t", now)
    with pytest.raises(ImplausibleValue, match="old"):
        plausibility.timestamp(now - 30 * 86400, "t", now, plausibility.MAX_RESULT_AGE_SECONDS)


@pytest.mark.parametrize("value", [True, "1", None, [1]])
def test_booleans_strings_and_containers_are_no_numbers(value: object) -> None:
    with pytest.raises(ImplausibleValue, match="not a number"):
        plausibility.number(value, "peak", "peak")
