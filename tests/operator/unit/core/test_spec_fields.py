from __future__ import annotations

from typing import Any

import pytest

from roofline_operator.core.spec_fields import (
    INTEGER_FIELD_BOUNDS,
    SpecError,
    bounded_field,
    integer_field,
    optional_str,
)


def test_an_absent_integer_is_its_default_and_a_null_one_is_none() -> None:
    assert integer_field({}, "k", 7, 1, 10) == 7
    assert integer_field({"k": None}, "k", 7, 1, 10) is None


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        pytest.param(True, "must be an integer", id="boolean"),
        pytest.param("3", "must be an integer", id="string"),
        pytest.param(2.0, "must be an integer", id="float"),
        pytest.param(11, "must be between 1 and 10", id="above"),
        pytest.param(0, "must be between 1 and 10", id="below"),
    ],
)
def test_an_integer_field_out_of_type_or_bounds_names_the_field(value: Any, fragment: str) -> None:
    with pytest.raises(SpecError, match=rf"spec\.k {fragment}"):
        integer_field({"k": value}, "k", None, 1, 10)


def test_a_bounded_field_is_its_default_when_null_and_checked_against_the_crds_bounds() -> None:
    assert bounded_field({"maxAttempts": None}, "maxAttempts", 3) == 3
    low, high = INTEGER_FIELD_BOUNDS["maxAttempts"]
    assert bounded_field({"maxAttempts": high}, "maxAttempts", 3) == high
    with pytest.raises(SpecError, match="maxAttempts"):
        bounded_field({"maxAttempts": low - 1}, "maxAttempts", 3)


def test_an_empty_or_absent_string_is_none_and_a_non_string_is_an_error() -> None:
    assert optional_str({}, "image") is None
    assert optional_str({"image": ""}, "image") is None
    assert optional_str({"image": "x:1"}, "image") == "x:1"
    with pytest.raises(SpecError, match=r"spec\.image must be a string"):
        optional_str({"image": 3}, "image")
